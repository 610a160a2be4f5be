"""Elastic restore for real: 2 JAX processes save mid-epoch, 1 continues; and 1 -> 2.

Each run starts `elastic_run.py` as processes joined by `jax.distributed.initialize`
over localhost (4 CPU devices each when there are two, 8 for one). Three runs, one
after the other: two processes save; one process runs the same pipelines uninterrupted,
saves, and continues the two-process checkpoint; two processes continue its checkpoint.
"""

from pathlib import Path

import pytest

from chute_testing.device import run_processes

SCRIPT = Path(__file__).with_name("elastic_run.py")
TIMEOUT = 180  # Seconds for a whole run; a hang fails the test instead of the suite.
SAVE_AT = 3


def run(out: Path, processes: int, *args: str) -> list[dict]:
    return run_processes(SCRIPT, processes, out, *args, timeout=TIMEOUT)


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("elastic")


@pytest.fixture(scope="module")
def two_save(folder) -> list[dict]:
    return run(folder / "two_save", 2, "--save", str(folder / "by_two"))


@pytest.fixture(scope="module")
def one(folder, two_save) -> dict:
    """One process: the uninterrupted run (saved), and the two processes' continuation."""
    args = ("--save", str(folder / "by_one"), "--restore", str(folder / "by_two"))
    (result,) = run(folder / "one", 1, *args)
    return result


@pytest.fixture(scope="module")
def two_restore(folder, one) -> list[dict]:
    return run(folder / "two_restore", 2, "--restore", str(folder / "by_one"))


def interleaved(order: list, start: int, count: int) -> list[list]:
    """Global batches of 2 processes x 8 stride-sharded elements, from global `start`.

    Process 0 reads the positions `start, start + 2, ...`, process 1 the odd ones after
    it; a global batch holds process 0's 8 rows, then process 1's.
    """
    return [
        [order[p] for p in range(start + 16 * j, start + 16 * j + 16, 2)]
        + [order[p] for p in range(start + 16 * j + 1, start + 16 * j + 16, 2)]
        for j in range(count)
    ]


@pytest.mark.slow
def test_two_processes_save_and_one_continues_the_global_batches(two_save, one):
    # The global pipeline: global batch b is the same on any number of processes.
    uninterrupted = one["save"]["global"]
    assert len(uninterrupted) == 203 // 16
    assert [r["save"]["global"] for r in two_save] == [uninterrupted, uninterrupted]
    restored = one["restore"]["global"]
    assert restored["step"] == SAVE_AT
    assert restored["files"] == restored["orbax"] == uninterrupted[SAVE_AT:]
    # The stride pipeline: the one-process run is the global order, 8 elements a batch.
    order = [x for batch in one["save"]["stride"] for x in batch]
    assert len(order) == 200
    two = interleaved(order, 0, 101 // 8)
    assert [r["save"]["stride"] for r in two_save] == [two, two]
    restored = one["restore"]["stride"]
    # Two processes consumed 3 x 16 positions; one process goes on from position 48.
    assert restored["files"] == restored["orbax"] == one["save"]["stride"][6:]


@pytest.mark.slow
def test_one_process_saves_and_two_continue_the_global_batches(one, two_restore):
    uninterrupted = one["save"]["global"]
    for result in two_restore:
        restored = result["restore"]["global"]
        assert restored["files"] == restored["orbax"] == uninterrupted[SAVE_AT:]
    # One process consumed 3 x 8 positions; each of two goes on from its position 12.
    order = [x for batch in one["save"]["stride"] for x in batch]
    expected = interleaved(order, 24, (101 - 12) // 8)
    for result in two_restore:
        restored = result["restore"]["stride"]
        assert restored["files"] == restored["orbax"] == expected
