"""`chute top`: the live view of a running pipeline, read off a real terminal (tmux)."""

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).parent
TMUX = shutil.which("tmux")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _chute(*args):
    return subprocess.run(
        [sys.executable, "-m", "chute_cli", *args], capture_output=True, text=True, timeout=120
    )


def test_once_against_nothing_listening_is_a_data_error_naming_the_url():
    port = _free_port()
    done = _chute("top", str(port), "--once", "--interval", "0.1")
    assert done.returncode == 1
    assert f"cannot read metrics from http://127.0.0.1:{port}/metrics" in done.stderr


def test_a_bad_endpoint_or_interval_is_a_usage_error():
    done = _chute("top", "ftp://host:1", "--once")
    assert done.returncode == 2
    assert "expected a port, HOST:PORT or an http(s) URL, got 'ftp://host:1'" in done.stderr
    done = _chute("top", "--interval", "0", "--once")
    assert done.returncode == 2
    assert "--interval must be positive, got 0.0" in done.stderr


class Tmux:
    """A tmux server of its own (its own socket), one session of a given size."""

    def __init__(self, folder: Path) -> None:
        assert TMUX is not None, "tmux is required here (CHUTE_REQUIRE_TMUX) but not installed"
        self.socket = str(folder / "tmux.sock")

    def run(self, *args: str) -> str:
        # The pane's size is the terminal's: no COLUMNS / LINES inherited from here.
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        done = subprocess.run(
            [TMUX, "-S", self.socket, *args], capture_output=True, text=True, timeout=30, env=env
        )
        return done.stdout

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", "top")

    def wait_for(self, text: str, seconds: float = 60) -> str:
        deadline = time.monotonic() + seconds
        while True:
            screen = self.screen()
            if text in screen or time.monotonic() > deadline:
                return screen
            time.sleep(0.25)


@pytest.mark.slow
@pytest.mark.skipif(
    TMUX is None and not os.environ.get("CHUTE_REQUIRE_TMUX"),
    reason="tmux is not installed (.ci/run installs it and sets CHUTE_REQUIRE_TMUX=1)",
)
def test_chute_top_in_a_terminal_shows_the_pipeline_live(tmp_path):
    port = _free_port()
    with (tmp_path / "training.err").open("w") as errors:
        training = subprocess.Popen(
            [sys.executable, str(HERE / "serve_pipeline.py"), str(port), "--pace", "0.02"],
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
        )
    tmux = Tmux(tmp_path)
    try:
        assert training.stdout.readline().strip() == "ready"
        command = (
            f"{sys.executable} -m chute_cli top {port} --interval 0.5; "
            "echo chute-top-exited-$?; sleep 60"
        )
        tmux.run("new-session", "-d", "-s", "top", "-x", "132", "-y", "40", command)
        screen = tmux.wait_for("bottleneck: map(fn=features)")
        assert "bottleneck: map(fn=features)" in screen, screen
        assert "pipeline train" in screen and "workers 2/2 alive" in screen, screen
        (row,) = [
            line for line in screen.splitlines() if "map(fn=features)" in line and "│" in line
        ]
        assert "2 workers" in row, screen
        first = [line for line in screen.splitlines() if "input wait" in line]
        # It refreshes in place: later, one view still, with other figures.
        time.sleep(2)
        later = tmux.screen()
        assert later.count("pipeline train") == 1, later
        rows = [line for line in later.splitlines() if "map(fn=features)" in line and "│" in line]
        assert rows and rows != [row], later
        assert first
        # The training process goes away: the view says it is waiting, and keeps going.
        training.kill()
        training.wait()
        # (a scrape cut off by the kill may first show "Connection reset"; the next
        # refresh finds the port closed)
        waiting = tmux.wait_for("Connection refused", seconds=30)
        assert "waiting:" in waiting and "Connection refused" in waiting, waiting
        tmux.run("send-keys", "-t", "top", "C-c")
        ended = tmux.wait_for("chute-top-exited-", seconds=30)
        assert "chute-top-exited-0" in ended, ended
    finally:
        training.kill()
        training.wait()
        training.stdout.close()
        tmux.run("kill-server")


BENCHED = """
import time

import numpy as np

import chute


def decode(x):
    time.sleep(0.001)
    return np.full(16, x)


def make_dataset():
    ds = chute.MapDataset.range(100_000).to_iter_dataset().map(decode)
    return ds.mp_prefetch(chute.MultiprocessingOptions(num_workers=2)).batch(16)
"""


@pytest.mark.slow
@pytest.mark.skipif(
    TMUX is None and not os.environ.get("CHUTE_REQUIRE_TMUX"),
    reason="tmux is not installed (.ci/run installs it and sets CHUTE_REQUIRE_TMUX=1)",
)
def test_chute_bench_live_shows_the_view_while_it_measures(tmp_path):
    (tmp_path / "benched.py").write_text(BENCHED)
    tmux = Tmux(tmp_path)
    command = (
        f"cd {tmp_path} && {sys.executable} -m chute_cli bench benched:make_dataset "
        "--seconds 6 --live; echo chute-bench-exited-$?; sleep 60"
    )
    try:
        tmux.run("new-session", "-d", "-s", "top", "-x", "132", "-y", "50", command)
        during = tmux.wait_for("bottleneck: map(fn=decode)")
        assert "chute top  chute bench --live" in during, during
        assert "chute-bench-exited" not in during, during  # Seen while it still runs.
        (row,) = [line for line in during.splitlines() if "map(fn=decode)" in line and "│" in line]
        assert "2 workers" in row, during
        ended = tmux.wait_for("chute-bench-exited-", seconds=120)
        assert "chute-bench-exited-0" in ended, ended
        assert "chute bench: benched:make_dataset (IterDataset)" in ended, ended
        assert ended.count("chute top  chute bench --live") == 1, ended  # One view, in place.
    finally:
        tmux.run("kill-server")
