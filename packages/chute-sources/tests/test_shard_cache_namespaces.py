"""Shard-cache downloads of processes in other PID namespaces sharing the folder.

Containers sharing a cache folder (a host path mounted in several, or a network file
system on several hosts) each have their own PID namespace, where pids repeat and mean
nothing to the others. A download's temporary file must be removed when its downloader
has died, and only then, whichever namespaces the downloader and the cleaner are in.
Each scenario runs real processes in their own namespaces (`unshare --pid --fork
--mount-proc`, which needs root, as CI has) against a loopback S3 server whose answers a
proxy holds back, so that a download is under way while the other namespace cleans up.
"""

from __future__ import annotations

import os
import pickle
import shutil
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from chute_sources import ArrayRecordSource, StorageOptions, write_array_record
from chute_sources._remote._cache import ShardCache
from chute_testing import FaultProxy

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="PID namespaces need root and unshare(1) (CI runs as root)",
)

DOWNLOAD = textwrap.dedent(
    """
    import os, pickle
    with open(os.environ["CHUTE_TEST_SOURCE"], "rb") as file:
        source = pickle.load(file)
    print(source[7]["i"], flush=True)  # Downloads the shard into the cache.
    """
)

CLEAN = textwrap.dedent(
    """
    import os, time
    from chute_sources._remote._cache import ShardCache
    cache = ShardCache(os.environ["CHUTE_TEST_CACHE"], 1 << 40)
    tmp = os.path.join(cache.folder, "tmp")
    deadline = time.monotonic() + float(os.environ["CHUTE_TEST_WAIT"])
    while True:  # Until the temporary files are gone, or the time is up.
        cache.evict()
        if not os.listdir(tmp) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    print(sorted(os.listdir(tmp)), flush=True)
    """
)


def _in_namespace(script: str, *, after: int = 0) -> list[str]:
    """A command running `script` in a new PID namespace; `after` processes start first.

    So the script's pid there is `after + 2` (the shell is pid 1).
    """
    runs = "; ".join(["/bin/true"] * after + [f'"{sys.executable}" -c "$0"'])
    namespace = ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc"]
    return [*namespace, "sh", "-c", runs, script]


@pytest.fixture
def shard(loopback_s3: Any, tmp_path: Path) -> str:
    """The URL of a 100-record shard in a fresh bucket."""
    records = [{"i": i, "x": np.full(1000, i, np.uint8)} for i in range(100)]
    path = write_array_record(records, str(tmp_path / "shard"))[0]
    bucket = f"ns-{uuid.uuid4().hex[:16]}"
    loopback_s3.create_bucket(bucket)
    loopback_s3.put_file(bucket, "shard.array_record", path)
    return str(loopback_s3.url(bucket, "shard.array_record"))


def _stalled_download(
    loopback_s3: Any, proxy: FaultProxy, shard: str, tmp_path: Path
) -> tuple[subprocess.Popen[str], dict[str, str], str]:
    """A downloader in its own PID namespace (pid 5 there), held before the body comes.

    Returns it, the environment of the test's processes, and the cache's `tmp` folder
    once the download's temporary file is there.
    """
    env = loopback_s3.env
    options = StorageOptions(
        endpoint=proxy.endpoint,
        access_key_id=env["AWS_ACCESS_KEY_ID"],
        secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        region=env["AWS_REGION"],
        request_timeout=120.0,
        cache_dir=str(tmp_path / "cache"),
    )
    source_file = tmp_path / "source.pickle"
    source_file.write_bytes(pickle.dumps(ArrayRecordSource(shard, storage_options=options)))
    environment = {
        **os.environ,
        "CHUTE_TEST_SOURCE": str(source_file),
        "CHUTE_TEST_CACHE": str(tmp_path / "cache"),
    }
    proxy.stall_next(1, seconds=120)  # The download's GET: its body waits.
    downloader = subprocess.Popen(
        _in_namespace(DOWNLOAD, after=3), stdout=subprocess.PIPE, text=True, env=environment
    )
    tmp = os.path.join(ShardCache(str(tmp_path / "cache"), 1 << 40).folder, "tmp")
    deadline = time.monotonic() + 60
    while not any(name.endswith(".part") for name in os.listdir(tmp)):
        assert time.monotonic() < deadline, "the download never started"
        assert downloader.poll() is None
        time.sleep(0.02)
    return downloader, environment, tmp


def test_a_live_download_in_another_pid_namespace_is_not_removed(
    loopback_s3: Any, shard: str, tmp_path: Path
) -> None:
    with FaultProxy(loopback_s3.endpoint) as proxy:
        downloader, env, tmp = _stalled_download(loopback_s3, proxy, shard, tmp_path)
        try:
            under_way = sorted(os.listdir(tmp))
            # The cleaner's namespace has no process of the downloader's pid (5 there).
            cleaner = subprocess.run(
                _in_namespace(CLEAN),
                capture_output=True,
                text=True,
                env={**env, "CHUTE_TEST_WAIT": "0"},
                timeout=60,
            )
            assert cleaner.returncode == 0, cleaner.stderr
            assert cleaner.stdout.strip() == str(under_way)
            assert sorted(os.listdir(tmp)) == under_way
            proxy.clear()  # The download goes on, and completes.
            assert downloader.stdout is not None
            assert downloader.stdout.readline().strip() == "7"
            assert downloader.wait(timeout=60) == 0
        finally:
            downloader.kill()
            downloader.wait()
            if downloader.stdout is not None:
                downloader.stdout.close()
    assert os.listdir(tmp) == []
    assert len(ShardCache(str(tmp_path / "cache"), 1 << 40).entries()) == 1


def test_a_dead_download_is_removed_by_a_process_of_its_pid_in_another_namespace(
    loopback_s3: Any, shard: str, tmp_path: Path
) -> None:
    with FaultProxy(loopback_s3.endpoint) as proxy:
        downloader, env, tmp = _stalled_download(loopback_s3, proxy, shard, tmp_path)
        downloader.kill()  # unshare SIGKILLs its child, pid 1 there: every process there dies.
        downloader.wait(timeout=60)
        if downloader.stdout is not None:
            downloader.stdout.close()
        # The cleaner is pid 5 in its own namespace, as the downloader was in its.
        cleaner = subprocess.run(
            _in_namespace(CLEAN, after=3),
            capture_output=True,
            text=True,
            env={**env, "CHUTE_TEST_WAIT": "20"},
            timeout=60,
        )
    assert cleaner.returncode == 0, cleaner.stderr
    assert cleaner.stdout.strip() == "[]"
    assert os.listdir(tmp) == []
    assert ShardCache(str(tmp_path / "cache"), 1 << 40).entries() == []
