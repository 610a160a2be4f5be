"""An error raised in a worker arrives after every element before it, whatever its type.

With 0 workers the elements before a failure come out, then the error with a note
naming the stage and the position. Workers must give the same, also for an exception
that cannot be rebuilt after pickling (a `WorkerError` then stands in for it, with the
original type name, message, notes and traceback), and also when workers batch.
"""

import threading

import pytest

import chute
from chute_execution import WorkerError


class TwoArgumentError(Exception):
    """Pickles, but cannot be rebuilt: `__init__` takes two arguments."""

    def __init__(self, value, why):
        super().__init__(f"{value} is {why}")


class LockedError(Exception):
    """Cannot be pickled at all: it holds a lock."""

    def __init__(self, value):
        super().__init__(f"{value} is locked")
        self.lock = threading.Lock()


def fail_two_arguments(x):
    if x == 37:
        raise TwoArgumentError(x, "odd")
    return x


def fail_locked(x):
    if x == 37:
        raise LockedError(x)
    return x


def fail_plain(x):
    if x == 37:
        raise ValueError(f"{x} is bad")
    return x


CASES = [
    (fail_two_arguments, "TwoArgumentError", "37 is odd"),
    (fail_locked, "LockedError", "37 is locked"),
    (fail_plain, "ValueError", "37 is bad"),
]
STAGE_NOTE = "chute: raised by map({}) on the element at position 37"


def _run(fn, workers, batch):
    ds = chute.MapDataset.range(64).to_iter_dataset().map(fn)
    if workers is not None:
        ds = ds.mp_prefetch(chute.MultiprocessingOptions(num_workers=workers), chunk_size=16)
    if batch:
        ds = ds.batch(4)
    got = []
    try:
        for element in ds:
            got.append(element.tolist() if batch else element)
    except Exception as error:
        return got, error
    raise AssertionError(f"no error after {got}")


@pytest.mark.parametrize("batch", [False, True], ids=["stream", "batched"])
@pytest.mark.parametrize(("fn", "type_name", "message"), CASES, ids=[c[1] for c in CASES])
def test_elements_before_a_worker_error_come_out_whatever_its_type(fn, type_name, message, batch):
    expected, reference = _run(fn, None, batch)
    assert expected == (
        [[i, i + 1, i + 2, i + 3] for i in range(0, 36, 4)] if batch else list(range(37))
    )
    assert type(reference).__name__ == type_name
    assert reference.__notes__[0] == STAGE_NOTE.format(fn.__name__)
    for workers in (0, 1, 2, 3):
        got, error = _run(fn, workers, batch)
        assert got == expected, workers
        assert error.__notes__[0] == STAGE_NOTE.format(fn.__name__)
        if fn is fail_plain or workers == 0:
            assert type(error) is type(reference)
            assert str(error) == message
            continue
        assert type(error) is WorkerError
        assert str(error).endswith(f"{type_name}: {message}")
        assert str(error).split(":")[0].endswith(type_name)
        worker_note = error.__notes__[1]
        assert worker_note.startswith(
            f"chute: raised in worker {2 % workers} while running chunk 2 (base positions 32..47)"
        )
        assert f"{type_name}: {message}" in worker_note  # The worker's traceback.
