"""The report's tables, and `main`."""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import sys
import tempfile
import time
from collections.abc import Sequence

from ._features import conditional_reads, environment_credentials, retries_and_timeouts
from ._fork_gcs import FORK_MODES, fork_safety, gcs_emulator
from ._libraries import LIBRARIES, REFERENCES
from ._measure import (
    Case,
    first_byte_fresh_process,
    first_byte_in_process,
    gil_probe,
    run_cases,
    server_cost,
)
from ._setup import (
    FIRST,
    GIB,
    KIB,
    MIB,
    Endpoint,
    Reads,
    coalesced,
    free_port,
    random_reads,
    serve,
    slots,
    upload,
)

# --------------------------------------------------------------------------- tables


def fmt(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    if value >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def throughput_tables(cases: list[Case], names: list[str]) -> str:
    header = ["workload", *(LIBRARIES[n].label for n in names)]
    speed, best, base, cpu, server = [], [], [], [], []
    for case in cases:
        rate = {n: case.mb_per_s(n) for n in case.libraries}
        top = max(v for n, v in rate.items() if n not in (*REFERENCES, "obstore-c"))
        speed.append([case.label, *(fmt(rate[n]) if n in rate else "" for n in names)])
        best.append([case.label, *(f"{rate[n] / top:.2f}" if n in rate else "" for n in names)])
        base.append(
            [case.label, *(f"{rate[n] / rate['pread']:.4f}" if n in rate else "" for n in names)]
        )
        cpu.append([case.label, *(fmt(case.cpu_per_gib(n)) if n in rate else "" for n in names)])
        server.append(
            [
                case.label,
                *(fmt(case.cpu_per_gib(n, "server_cpu")) if n in rate else "" for n in names),
            ]
        )
    return "\n\n".join(
        [
            "Throughput, MB/s (bytes delivered / wall time; median):\n\n" + table(header, speed),
            "Throughput as a ratio to the best library in this run (1.00 = best of those "
            "making one request per read; the references and coalescing obstore may exceed "
            "1):\n\n" + table(header, best),
            "Throughput as a ratio to os.pread of a local copy in this run:\n\n"
            + table(header, base),
            "Client CPU seconds per GiB delivered (process CPU time, all threads):\n\n"
            + table(header, cpu),
            "Server (moto) CPU seconds per GiB delivered:\n\n" + table(header, server),
        ]
    )


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> None:
    package_doc = sys.modules[__package__ or __name__].__doc__ or ""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.compare.object_storage",
        description=package_doc.splitlines()[0],
    )
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--reads", type=int, default=512, help="range reads per workload")
    parser.add_argument("--range-mib", type=int, default=16, help="size of the range objects")
    parser.add_argument("--objects", type=int, default=16, help="objects in the multi-object case")
    parser.add_argument("--threads", type=int, default=16, help="thread pools' size")
    parser.add_argument("--markdown", default=None, help="also write the report here")
    parser.add_argument("--no-features", action="store_true", help="skip the feature checks")
    args = parser.parse_args(argv)

    began = time.perf_counter()
    report: list[str] = []

    def say(text: str) -> None:
        print(text + "\n", flush=True)
        report.append(text)

    def progress(what: str) -> None:
        print(f"[{time.perf_counter() - began:4.0f} s] {what}", file=sys.stderr, flush=True)

    with (
        open("/proc/loadavg") if os.path.exists("/proc/loadavg") else contextlib.nullcontext() as f
    ):
        load = f.read().split()[:3] if f else ["?"] * 3
    versions = {}
    for module in ("obstore", "s3fs", "fsspec", "gcsfs", "pyarrow", "moto"):
        versions[module] = __import__(module).__version__
    say(
        f"Python {platform.python_version()}, {os.cpu_count()} CPUs, load average at start "
        f"{' '.join(load)}; " + ", ".join(f"{m} {v}" for m, v in versions.items())
    )

    port = free_port()
    moto = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    with (
        tempfile.TemporaryDirectory(prefix="chute-object-storage-") as folder,
        serve(moto, f"http://127.0.0.1:{port}/") as pid,
    ):
        endpoint = Endpoint(port, folder, pid)
        size = args.range_mib * MIB
        range_keys = [f"range/{i:02d}" for i in range(args.objects)]
        whole_sizes = [1, 16, 64]
        objects = {key: size for key in range_keys}
        objects |= {f"whole/{m}/{i}": m * MIB for m in whole_sizes for i in range(8)}
        objects |= {f"sizes/{m}": m * MIB for m in (1, 4, 16, 64)}
        started = time.perf_counter()
        upload(endpoint, objects)
        print(
            f"uploaded {sum(objects.values()) / GIB:.2f} GiB in "
            f"{time.perf_counter() - started:.0f} s",
            file=sys.stderr,
        )

        progress("server cost")
        cost = server_cost(endpoint, {m * MIB: f"sizes/{m}" for m in (1, 4, 16, 64)})
        say(
            "Server cost: one unsigned 16 KiB range GET with http.client (no library), "
            "median of 15, by object size:\n\n"
            + table(
                ["object size", "ms per request"],
                [[f"{s // MIB} MiB", f"{t * 1000:.1f}"] for s, t in cost.items()],
            )
        )

        range_names = ["pread", "http", "obstore", "obstore-c", "obstore-m", "s3fs", "pyarrow"]
        whole_names = ["pread", "http", "obstore", "s3fs", "pyarrow"]
        cases: list[Case] = []
        notes = []
        for length in (16 * KIB, 256 * KIB):
            for keys in (range_keys[:1], range_keys):
                count = min(args.reads, slots(size, length) * len(keys))
                reads = random_reads(keys, size, count, length, seed=length + len(keys))
                where = "1 object" if len(keys) == 1 else f"{len(keys)} objects"
                label = f"{count} x {length // KIB} KiB, {where} of {args.range_mib} MiB"
                cases.append(
                    Case(
                        "ranges",
                        label,
                        range_names,
                        lambda lib, r=reads: lib.ranges(r),
                        lambda local, r=reads: local.ranges(r),
                        reads.nbytes,
                    )
                )
                merged = [coalesced(reads, gap) for gap in (0, MIB)]
                notes.append(
                    f"{label}: {reads.nbytes / MIB:.0f} MiB asked; obstore makes "
                    f"{merged[0][0]} requests with coalesce=0, {merged[1][0]} requests "
                    f"for {merged[1][1] / MIB:.0f} MiB with its default coalesce=1 MiB"
                )
        for mib in whole_sizes:
            keys = [f"whole/{mib}/{i}" for i in range(8)]
            for at_once in (False, True):
                how = "8 at once" if at_once else "8 one after another"
                cases.append(
                    Case(
                        "whole",
                        f"whole {mib} MiB objects, {how}",
                        whole_names,
                        lambda lib, k=keys, a=at_once: lib.whole(k, a),
                        lambda local, k=keys: local.whole(k, False),
                        8 * mib * MIB,
                    )
                )
        libs = {name: LIBRARIES[name](endpoint, args.threads) for name in range_names}
        for lib in libs.values():  # warm up: clients, credentials, pools
            lib.ranges(Reads([(range_keys[0], 0, FIRST)]))
        progress("range and whole-object reads")
        run_cases(cases, libs, endpoint, args.repeats)
        say(throughput_tables(cases, range_names))
        say(
            "Requests that obstore's get_ranges makes (every other reader: one per read):\n\n"
            + "\n".join(f"- {n}" for n in notes)
        )

        progress("time to first byte")
        in_process = first_byte_in_process(endpoint, whole_names, "whole/1/0", args.repeats)
        fresh = first_byte_fresh_process(endpoint, whole_names, "whole/1/0", args.repeats)
        say(
            "Time to first byte: HEAD + first 16 KiB of a 1 MiB object, ms (median):\n\n"
            + table(
                ["", *(LIBRARIES[n].label for n in whole_names)],
                [
                    [
                        "new client, this process",
                        *(f"{in_process[n] * 1000:.1f}" for n in whole_names),
                    ],
                    [
                        "new process (imports + client)",
                        *(f"{fresh[n] * 1000:.0f}" for n in whole_names),
                    ],
                ],
            )
        )

        gil_names = ["http", "obstore", "s3fs", "pyarrow"]
        gil_count = max(1, args.reads // 2)  # half: the probe runs each library twice
        gil_reads = random_reads(range_keys, size, gil_count, 16 * KIB, seed=7)
        progress("GIL")
        gil = gil_probe(libs, gil_names, gil_reads, args.repeats)
        say(
            f"GIL: {gil_count} x 16 KiB reads from {len(range_keys)} objects with a CPU-bound "
            "Python thread running alongside (median):\n\n"
            + table(
                ["library", "read time with the thread / without", "thread's speed / alone"],
                [[LIBRARIES[n].label, f"{gil[n][0]:.2f}", f"{gil[n][1]:.2f}"] for n in gil_names],
            )
        )
        for lib in libs.values():
            lib.close()

        if not args.no_features:
            candidates = ["obstore", "s3fs", "pyarrow"]
            progress("feature checks")
            rows = [[k, v] for k, v in conditional_reads(endpoint).items()]
            say(
                "Conditional reads: read 16 KiB, replace the object (same size), read the "
                "next 16 KiB with the same handle:\n\n" + table(["library", "outcome"], rows)
            )
            rows = [[n, *v] for n, v in environment_credentials(endpoint, candidates).items()]
            say(
                "Credentials from the environment, reading a private object (an unsigned "
                "request gets 403):\n\n"
                + table(
                    [
                        "library",
                        "AWS_ACCESS_KEY_ID/SECRET set, endpoint in code",
                        "no keys anywhere",
                        "no arguments at all (AWS_ENDPOINT_URL too)",
                    ],
                    rows,
                )
            )
            rows = [[n, *v] for n, v in fork_safety(endpoint, candidates, "whole/1/0").items()]
            say(
                "Fork safety: a client made before os.fork() (16 KiB read in the child):\n\n"
                + table(["library", *FORK_MODES.values()], rows)
            )
    if not args.no_features:
        progress("retries, timeouts, GCS emulator")
        checks = retries_and_timeouts(candidates)
        say(
            "Retries and timeouts, against a local endpoint that answers 503 twice "
            "(retries configured: 3) or never answers (timeout configured: 1 s, 1 retry):\n\n"
            + table(
                ["library", "503, 503, then data", "no answer"],
                [[n, v["retry"], v["timeout"]] for n, v in checks.items()],
            )
        )
        rows = [[k, v] for k, v in gcs_emulator().items()]
        say(
            "GCS emulator (gcp-storage-emulator, in memory), 16 bytes at offset 100:\n\n"
            + table(["library and configuration", "outcome"], rows)
        )
    with (
        open("/proc/loadavg") if os.path.exists("/proc/loadavg") else contextlib.nullcontext() as f
    ):
        load = f.read().split()[:3] if f else ["?"] * 3
    say(f"Total {time.perf_counter() - began:.0f} s; load average at the end {' '.join(load)}.")
    if args.markdown:
        with open(args.markdown, "w") as file:
            file.write("\n\n".join(report) + "\n")
