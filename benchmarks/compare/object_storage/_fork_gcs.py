"""Feature checks: fork safety, and each library against the GCS emulator."""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.request
from typing import Any

from ._features import _child, make_client, read_first
from ._setup import FIRST, Endpoint, free_port, serve


def _fork_worker(name: str, client: Any, key: str, conn: Any) -> None:
    try:
        conn.send("works" if len(read_first(name, client, key)) == FIRST else "short read")
    except Exception as error:
        conn.send(f"fails: {type(error).__name__}: {str(error).splitlines()[0][:80]}")


def fork_check(name: str, port: int, key: str, mode: str) -> None:
    """Prints what a child process gets from a client made before it (in a child)."""
    import multiprocessing
    import signal

    endpoint = Endpoint(port, "")
    if mode == "forkserver":
        # chute's way: the parent used the client; a worker forked from a fresh fork
        # server (which imported the library) gets it pickled.
        context = multiprocessing.get_context("forkserver")
        module = {"obstore": "obstore", "s3fs": "s3fs", "pyarrow": "pyarrow.fs"}[name]
        context.set_forkserver_preload([module, __name__])
        client = make_client(name, endpoint)
        read_first(name, client, key)
        mine, theirs = context.Pipe()
        worker = context.Process(target=_fork_worker, args=(name, client, key, theirs))
        worker.start()
        print(mine.recv() if mine.poll(15) else "hangs (no answer in 15 s)", flush=True)
        worker.kill()
        worker.join()
        return
    client = make_client(name, endpoint)
    if mode != "unused":
        read_first(name, client, key)
    pid = os.fork()
    if pid == 0:
        signal.alarm(10)
        try:
            if mode == "rebuilt":
                client = make_client(name, endpoint)
            os._exit(0 if len(read_first(name, client, key)) == FIRST else 3)
        except BaseException as error:
            print(f"fails: {type(error).__name__}: {str(error).splitlines()[0][:80]}", flush=True)
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        killed = os.WTERMSIG(status) == signal.SIGALRM
        print("hangs (killed after 10 s)" if killed else f"dies: signal {os.WTERMSIG(status)}")
    elif os.WEXITSTATUS(status) == 0:
        print("works")
    elif os.WEXITSTATUS(status) == 3:
        print("short read")


FORK_MODES = {
    "used": "made and used before fork; same client in the child",
    "rebuilt": "made and used before fork; a new client in the child",
    "unused": "made (no request) before fork; used in the child",
    "forkserver": "used in the parent, pickled to a forkserver worker (chute's way)",
}


def fork_safety(endpoint: Endpoint, names: list[str], key: str) -> dict[str, list[str]]:
    return {
        name: [
            _child(f"m.fork_check({name!r}, {endpoint.port}, {key!r}, {mode!r})", timeout=40)
            for mode in FORK_MODES
        ]
        for name in names
    }


GCS_BUCKET = "gcsbench"


def gcs_check(port: int, which: str) -> None:
    """Prints whether one library/configuration reads 16 bytes from the emulator."""
    base = f"http://127.0.0.1:{port}"
    start = time.perf_counter()
    try:
        if which == "obstore":
            import obstore
            from obstore.store import GCSStore

            store = GCSStore(
                GCS_BUCKET,
                base_url=base,
                skip_signature=True,
                client_options={"allow_http": True},
                retry_config={"max_retries": 1},
            )
            data = bytes(obstore.get_range(store, "obj", start=100, length=16))
        elif which in ("gcsfs", "gcsfs-core"):
            if which == "gcsfs":
                from gcsfs import GCSFileSystem
            else:
                from gcsfs.core import GCSFileSystem
            fs = GCSFileSystem(token="anon", endpoint_url=base)
            data = fs.cat_ranges([f"{GCS_BUCKET}/obj"], [100], [116], on_error="raise")[0]
        elif which == "gcsfs-env":
            import gcsfs

            data = gcsfs.GCSFileSystem().cat_file(f"{GCS_BUCKET}/obj", start=100, end=116)
        else:
            import pyarrow.fs

            if which == "pyarrow":
                fs = pyarrow.fs.GcsFileSystem(
                    anonymous=True, scheme="http", endpoint_override=f"127.0.0.1:{port}"
                )
            else:
                fs = pyarrow.fs.GcsFileSystem(anonymous=which == "pyarrow-env-anon")
            data = fs.open_input_file(f"{GCS_BUCKET}/obj").read_at(16, 100)
        assert data == bytes(range(100, 116)), data
        print(f"works ({time.perf_counter() - start:.1f} s)")
    except Exception as error:
        message = str(error).splitlines()[0][:110] if str(error) else ""
        print(f"fails after {time.perf_counter() - start:.1f} s: {type(error).__name__}: {message}")


def gcs_emulator() -> dict[str, str]:
    """Which libraries read a range from gcp-storage-emulator, configured or from env."""
    port = free_port()
    argv = [sys.executable, "-c", "from gcp_storage_emulator.__main__ import main; main()"]
    argv += ["start", "--host", "127.0.0.1", "--port", str(port), "--in-memory"]
    base = f"http://127.0.0.1:{port}"
    with serve(argv, base + "/storage/v1/b?project=x"):
        bucket = json.dumps({"name": GCS_BUCKET}).encode()
        for url, data, kind in (
            (f"{base}/storage/v1/b?project=test", bucket, "application/json"),
            (
                f"{base}/upload/storage/v1/b/{GCS_BUCKET}/o?uploadType=media&name=obj",
                bytes(range(256)) * 4096,
                "application/octet-stream",
            ),
        ):
            request = urllib.request.Request(
                url, data=data, method="POST", headers={"Content-Type": kind}
            )
            urllib.request.urlopen(request).close()
        host = {"STORAGE_EMULATOR_HOST": base}
        off = {**host, "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"}
        cpp = {"CLOUD_STORAGE_EMULATOR_ENDPOINT": base}
        runs = {
            "obstore: GCSStore(base_url=..., skip_signature=True)": ("obstore", {}),
            "gcsfs: GCSFileSystem(token='anon', endpoint_url=...), as installed": ("gcsfs", {}),
            "gcsfs: the same, GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT=false": ("gcsfs", off),
            "gcsfs: gcsfs.core.GCSFileSystem(token='anon', endpoint_url=...)": ("gcsfs-core", {}),
            "gcsfs: GCSFileSystem(), STORAGE_EMULATOR_HOST (+ the switch above)": (
                "gcsfs-env",
                off,
            ),
            "pyarrow: GcsFileSystem(anonymous=True, scheme='http', endpoint_override=...)": (
                "pyarrow",
                {},
            ),
            "pyarrow: GcsFileSystem(), STORAGE_EMULATOR_HOST": ("pyarrow-env", host),
            "pyarrow: GcsFileSystem(anonymous=True), STORAGE_EMULATOR_HOST": (
                "pyarrow-env-anon",
                host,
            ),
            "pyarrow: GcsFileSystem(anonymous=True), CLOUD_STORAGE_EMULATOR_ENDPOINT": (
                "pyarrow-env-anon",
                cpp,
            ),
        }
        out = {}
        # No metadata server to ask for credentials: fail fast instead of waiting.
        quiet = {"GCE_METADATA_HOST": "127.0.0.1:9", "GCE_METADATA_IP": "127.0.0.1:9"}
        for label, (which, env) in runs.items():
            out[label] = _child(f"m.gcs_check({port}, {which!r})", {**quiet, **env}, timeout=15)
    return out
