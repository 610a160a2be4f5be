"""Soak run: an endless pipeline through 2 workers for N minutes; RSS and /dev/shm stay flat.

Not part of the default test run (it takes minutes). Run it as

    uv run python tests/soak/soak.py --minutes 10

Every `--every` seconds it samples the resident memory of this process and of every
process below it (the fork server and the workers) and the bytes their chute segments
hold in `/dev/shm`, then prints one line. After a warm-up of a fifth of the run, it
checks that neither grew by more than the bound (`--rss-bound-mib`, `--shm-bound-mib`)
and exits 1 if one did, 0 otherwise.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np


def make_element(i: int) -> dict:
    """A mixed element: a 16 KiB array, a small one, a string and an int."""
    return {
        "image": np.full((64, 64), i % 251, np.float32),
        "small": np.arange(16, dtype=np.int64) + i % 17,
        "name": f"element-{i}",
        "label": i % 10,
    }


def keep_even(element: dict) -> bool:
    return element["label"] % 2 == 0


def descendants(pid: int) -> list[int]:
    """`pid` and every process below it (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as file:
                parent = int(file.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry))
    found, stack = [], [pid]
    while stack:
        current = stack.pop()
        found.append(current)
        stack.extend(children.get(current, []))
    return found


def rss_mib(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as file:
                for line in file:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


def shm_mib(pids: list[int]) -> float:
    """MiB of the chute segments in the shared-memory folder that `pids` made.

    Only theirs: other chute programs on the machine (tests of other checkouts) have
    their own segments there, which come and go.
    """
    from chute_core.internal import SHM_PREFIX, shm_dir

    owners = {str(pid) for pid in pids}
    folder = shm_dir()
    total = 0
    for name in os.listdir(folder):
        if name.startswith(SHM_PREFIX) and name[len(SHM_PREFIX) :].split("-")[0] in owners:
            try:
                total += os.stat(folder / name).st_blocks * 512
            except OSError:
                continue
    return total / 2**20


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--every", type=float, default=10.0)
    parser.add_argument("--rss-bound-mib", type=float, default=64.0)
    parser.add_argument("--shm-bound-mib", type=float, default=1.0)
    args = parser.parse_args(argv)
    import chute

    ds = (
        chute.MapDataset.range(100_000)
        .seed(0)
        .shuffle()
        .repeat()
        .map(make_element)
        .to_iter_dataset()
        .filter(keep_even)
        .mp_prefetch(chute.MultiprocessingOptions(num_workers=2))
        .batch(64)
    )
    end = time.monotonic() + args.minutes * 60
    warm_up_until = time.monotonic() + args.minutes * 12
    samples: list[tuple[float, float, float]] = []
    elements = 0
    next_sample = time.monotonic()
    started = time.monotonic()
    print("seconds  elements    rss_MiB  shm_MiB", flush=True)
    for batch in ds:
        elements += len(batch["label"])
        now = time.monotonic()
        if now >= next_sample:
            pids = descendants(os.getpid())
            sample = (now - started, rss_mib(pids), shm_mib(pids))
            samples.append(sample)
            print(f"{sample[0]:7.0f} {elements:9d} {sample[1]:10.1f} {sample[2]:8.1f}", flush=True)
            next_sample = now + args.every
        if now >= end:
            break
    steady = [s for s in samples if s[0] >= warm_up_until - started] or samples
    rss_drift = max(s[1] for s in steady) - steady[0][1]
    shm_drift = max(s[2] for s in steady) - steady[0][2]
    print(
        f"after warm-up: RSS drift {rss_drift:+.1f} MiB (bound {args.rss_bound_mib}), "
        f"/dev/shm drift {shm_drift:+.1f} MiB (bound {args.shm_bound_mib}), "
        f"{elements / (time.monotonic() - started):,.0f} elements/s"
    )
    ok = rss_drift <= args.rss_bound_mib and shm_drift <= args.shm_bound_mib
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
