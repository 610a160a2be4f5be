"""The seeds' guides run in a real Jupyter kernel, with worker processes.

Code defined in a notebook cell lives in a `__main__` that no worker can import; it
must reach the workers by value. Each guide (`guides.py`) is built into a notebook,
executed by `nbclient` in an `ipykernel` kernel, and its printed output compared with
what the guide says, cell by cell. The same code then runs as a script without a main
guard, as `python -c` and from stdin, and prints the same. Shared memory goes to a
folder of the test's own (`CHUTE_SHM_DIR`), which must be empty at the end.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from chute_core.internal import reclaim_orphaned_segments

_spec = importlib.util.spec_from_file_location("guides", Path(__file__).with_name("guides.py"))
assert _spec is not None and _spec.loader is not None
guides = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(guides)

pytestmark = pytest.mark.slow
SETTLE_SECONDS = 10.0  # A bound for exiting workers to unlink their memory, not a speed check.


def _dataloader_records() -> list[tuple[bytes, int, int]]:
    """(file name, label, height) of the records the guide's first cell writes."""
    import numpy as np

    rng = np.random.default_rng(7)
    out = []
    for number in range(6):
        height = int(rng.integers(40, 90))
        rng.integers(0, 256, size=(height, 64, 3), dtype=np.uint8)
        out.append((f"{number:06d}_bee.jpg".encode(), int(rng.integers(1000)), height))
    return out


def _expected_dataloader_guide() -> list[str]:
    records = _dataloader_records()
    keys = [0, 2, 3, 1, 4, 0, 1, 4, 3, 2]  # chute's permutation of 5 records for seed 0.
    steps = [f"{i} {records[k][0]!r} {records[k][1]}" for i, k in enumerate(keys)]
    metadata = [
        f"RecordMetadata(index={i}, record_key={k}, rng=Generator(Philox))"
        for i, k in enumerate(keys)
    ]
    return [
        "# records: 6",
        "\n".join(metadata),
        "",
        "\n".join(f"(224, 224, 3) {records[k][1]}" for k in keys),
        "\n".join(steps[:5]),
        "\n".join(steps[5:]),
        "\n".join(steps[5:]),  # Restored to step 5: the same elements again.
        "[0, 2, 3, 1, 4, 0, 1, 4, 3, 2]",
        f"ValueError: label {records[3][1]} is not allowed after True",
    ]


def _expected_dataset_guide() -> list[str]:
    import numpy as np

    import chute

    rng = np.random.default_rng(3)
    mnist = [
        {"image": rng.integers(0, 256, size=(28, 28), dtype=np.uint8), "label": i % 10}
        for i in range(60)
    ]
    labels = [x["label"] for x in chute.MapDataset.source(mnist).seed(seed=45).shuffle()]
    steps = [f"{i} {labels[i]}" for i in range(8)]
    low = chute.MapDataset.source(mnist).filter(lambda f: f["label"] < 5).to_iter_dataset()
    high = chute.MapDataset.source(mnist).filter(lambda f: f["label"] >= 5).to_iter_dataset()
    mixed = list(chute.IterDataset.mix([low, high], weights=[0.7, 0.3]).map(lambda f: f["label"]))
    return [
        "",
        "\n".join(steps[:4] + steps[4:8] + steps[4:8]),
        str(mixed[:10]),
        "True 60",
    ]


GUIDES = {
    "dataloader": (guides.DATALOADER_GUIDE, _expected_dataloader_guide),
    "dataset": (guides.DATASET_GUIDE, _expected_dataset_guide),
}


@pytest.fixture
def shm_folder(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A shared-memory folder of this test's own: whatever is left in it leaked."""
    base = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path("/tmp")
    folder = base / f"chute-notebook-test-{uuid.uuid4().hex[:8]}"
    folder.mkdir()
    monkeypatch.setenv("CHUTE_SHM_DIR", str(folder))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _left_in(folder: Path) -> list[str]:
    """What is left in `folder` once the processes that used it have had time to exit.

    Workers whose consumer exited (the kernel, shut down) notice it and unlink their
    shared memory on their own: this waits for that, up to a bound against hangs. A
    kernel is shut down by a signal (ipykernel waits for the multiprocessing resource
    tracker, which ignores SIGTERM, until the kernel manager terminates the kernel), so
    its 0-byte owner file may stay, unlocked, until the next chute process: that one is
    left out here once it proves dead, removed as the next chute process would.
    """
    deadline = time.monotonic() + SETTLE_SECONDS
    while _segments(folder) and time.monotonic() < deadline:
        time.sleep(0.05)
    reclaim_orphaned_segments(folder)  # Removes owner files of dead processes only.
    return sorted(os.listdir(folder))


def _segments(folder: Path) -> list[str]:
    return [name for name in os.listdir(folder) if not name.startswith(".chute-owner-")]


def _printed(cell: nbformat.NotebookNode) -> str:
    errors = [o for o in cell.outputs if o.output_type == "error"]
    assert not errors, "\n".join(errors[0].traceback)
    return "".join(o.text for o in cell.outputs if o.output_type == "stream").strip()


@pytest.mark.parametrize("guide", sorted(GUIDES))
def test_the_guide_runs_in_a_jupyter_kernel_with_workers(guide, tmp_path, shm_folder):
    cells, expected = GUIDES[guide]
    assert _run_in_kernel(cells, tmp_path) == expected()
    assert _left_in(shm_folder) == []


def test_the_same_code_runs_as_a_script_with_python_c_and_from_stdin(tmp_path, shm_folder):
    code = "\n\n".join(guides.DATALOADER_GUIDE + guides.DATASET_GUIDE)
    expected = "\n".join(
        line for line in _expected_dataloader_guide() + _expected_dataset_guide() if line
    )
    script = tmp_path / "guide.py"
    script.write_text(code)
    for args, stdin in (
        ([sys.executable, str(script)], None),  # No `if __name__ == "__main__":` guard.
        ([sys.executable, "-c", code], None),
        ([sys.executable, "-"], code),
    ):
        folder = tmp_path / f"run-{len(os.listdir(tmp_path))}"
        folder.mkdir()
        done = subprocess.run(
            args, input=stdin, capture_output=True, text=True, timeout=300, cwd=folder
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == expected
        assert _left_in(shm_folder) == []


def _run_in_kernel(cells: list[str], folder: Path) -> list[str]:
    """Runs `cells` as a notebook in a new kernel (shut down after); what each printed."""
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    client = NotebookClient(
        notebook,
        kernel_name="python3",
        timeout=300,
        resources={"metadata": {"path": str(folder)}},
    )
    client.execute()
    return [_printed(cell) for cell in notebook.cells]


KERNEL_START_CELLS = [
    "import os, threading\nimport chute\n"
    "def parent(x):\n    return os.getppid()\n"
    "ds = chute.MapDataset.range(16).to_iter_dataset().map(parent).mp_prefetch(num_workers=2)",
    "parents = set(ds)\nprint(threading.active_count() > 1, len(parents), os.getpid() in parents)",
]


def test_a_kernel_runs_threads_so_its_workers_start_from_the_fork_server(tmp_path, shm_folder):
    # The kernel's own threads (heartbeat, iopub) rule out forking it: the workers'
    # parent is the fork server, not the kernel.
    assert _run_in_kernel(KERNEL_START_CELLS, tmp_path) == ["", "True 1 False"]
    assert _left_in(shm_folder) == []


REUSE_CELLS = [
    "import os\nimport chute\n"
    "def pid(x):\n    return os.getpid()\n"
    "ds = chute.MapDataset.range(16).to_iter_dataset().map(pid).mp_prefetch(num_workers=2)",
    "first = set(ds)",  # Run to its end: the workers wait, idle, for the next iterator.
    "second = set(ds)\nprint(len(first), second == first)\nprint(sorted(first))",
]


def _exited(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in "ZX"
    except OSError:
        return True


def test_running_a_cell_again_reuses_the_workers_which_end_with_the_kernel(tmp_path, shm_folder):
    printed = _run_in_kernel(REUSE_CELLS, tmp_path)  # The kernel is shut down after.
    assert printed[:2] == ["", ""]
    summary, pids_line = printed[2].splitlines()
    assert summary == "2 True"
    pids = [int(pid) for pid in pids_line.strip("[]").split(", ")]
    deadline = time.monotonic() + SETTLE_SECONDS
    while not all(_exited(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [pid for pid in pids if not _exited(pid)] == []
    assert _left_in(shm_folder) == []
