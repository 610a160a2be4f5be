"""Fault injection through the public API: killed and stuck workers, bad data, bad files.

Promises 4 and 5 (DESIGN.md): a dead or stuck worker surfaces as an exception within
seconds, bad input gets a clear error naming the stage and the position, and nothing is
left in `/dev/shm`. Each scenario runs over several seeds (the seed chooses where the
fault hits) and bounds the time from the fault to the error (generous bounds for a
loaded 2-core machine: they catch hangs, not slowness). `measure_faults.py` runs the
same scenarios (from `fault_scenarios.py`) and prints the measured figures.

Covered elsewhere, not repeated here: Ctrl-C, a long run and `close()` of a stuck
pipeline (`tests/execution/test_mp_faults.py`), a killed parent
(`test_mp_killed_parent.py` there), a nearly full `/dev/shm` (`test_shm_full_faults.py`),
truncated and corrupt files opened afresh (`packages/chute-sources/tests/`,
`test_fuzz_readers.py`), and the soak run (`tests/soak/soak.py`).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
from pathlib import Path

import numpy as np
import pytest

import chute
import chute_checkpoint

_spec = importlib.util.spec_from_file_location(
    "fault_scenarios", Path(__file__).with_name("fault_scenarios.py")
)
assert _spec is not None and _spec.loader is not None
fs = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("fault_scenarios", fs)
_spec.loader.exec_module(fs)

SEEDS = [0, 1, 2]
DIED_BOUND = 5.0  # Seconds from a worker's death to WorkerDiedError.
TIMEOUT = 2.0  # worker_timeout of the hang scenario.
HANG_BOUND = TIMEOUT + 3.0  # Seconds from the consumer starting to wait to the error.
DATA_BOUND = 10.0  # Seconds from a data fault (truncation, bad record) to the error.
CTRL_C_BOUND = 10.0  # Seconds from SIGINT to KeyboardInterrupt in next(): a bound for hangs.

_STAGE_NOTE = re.compile(r"chute: raised by (.+?) on the element at (?:position|index) (\d+)")


def _stage_and_position(error: BaseException) -> tuple[str, int] | None:
    found = _STAGE_NOTE.search(fs.notes(error))
    return (found.group(1), int(found.group(2))) if found else None


def _resume_without_fault(dataset: chute.IterDataset, state: object) -> list[object]:
    it = iter(dataset)
    it.set_state(state)
    return list(it)


# --- 1. a worker killed by SIGKILL mid-batch ------------------------------------------


def _expected_batches(length: int = 400) -> list[list[int]]:
    return [list(range(i, i + fs.BATCH)) for i in range(0, length, fs.BATCH)]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("batch", ["before", "after"])
def test_a_killed_worker_raises_worker_died_error_naming_it_and_the_signal(batch, seed):
    outcome = fs.run_worker_killed(seed, batch)
    error = outcome.error
    assert isinstance(error, chute.WorkerDiedError), f"ended with {error!r}"
    assert not isinstance(error, chute.WorkerTimeoutError)
    named = re.search(r"worker (\d) \(pid (\d+)\)", str(error))
    assert named, str(error)
    assert int(named.group(2)) in outcome.workers
    assert int(named.group(2)) == outcome.workers[int(named.group(1))]
    assert "SIGKILL" in str(error)
    assert outcome.seconds <= DIED_BOUND, f"{outcome.seconds:.2f} s from the death to the error"
    assert outcome.extra["stopped_by_itself"], "the other worker still runs"
    assert outcome.leftovers == []
    # What came before the error is the start of the stream, in order.
    got = [np.asarray(b).tolist() for b in outcome.got]
    assert got == _expected_batches()[: len(got)]
    assert len(got) <= (outcome.fault_at if batch == "before" else outcome.fault_at // fs.BATCH)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("batch", ["before", "after"])
def test_after_a_killed_worker_the_stream_resumes_from_get_state_with_nothing_lost(batch, seed):
    outcome = fs.run_worker_killed(seed, batch)
    assert isinstance(outcome.error, chute.WorkerDiedError)
    state = outcome.extra["state"]
    rest = _resume_without_fault(fs.killed_pipeline(batch, -1), state)
    got = [np.asarray(b).tolist() for b in [*outcome.got, *rest]]
    assert got == _expected_batches()


# --- 2. a worker that hangs ---------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_a_hanging_worker_raises_worker_timeout_error_within_the_timeout(seed):
    outcome = fs.run_worker_hangs(seed, TIMEOUT)
    error = outcome.error
    assert isinstance(error, chute.WorkerTimeoutError), f"ended with {error!r}"
    named = re.search(r"worker (\d) \(pid (\d+)\)", str(error))
    assert named and int(named.group(2)) in outcome.workers, str(error)
    assert f"{TIMEOUT} s" in str(error)
    assert outcome.seconds <= HANG_BOUND, f"{outcome.seconds:.2f} s waiting before the error"
    assert outcome.extra["stopped_by_itself"], "the stuck worker still runs"
    assert outcome.leftovers == []
    assert outcome.got == list(range(len(outcome.got)))
    assert len(outcome.got) <= outcome.fault_at
    rest = _resume_without_fault(
        chute.MapDataset.range(400).to_iter_dataset().mp_prefetch(fs.options(), chunk_size=8),
        outcome.extra["state"],
    )
    assert outcome.got + rest == list(range(400))


# --- 3. a data file truncated mid-epoch -------------------------------------------


def _file_error(error: BaseException | None) -> BaseException | None:
    """The chute file or record error, itself or as the cause of a `WorkerError`."""
    if isinstance(error, chute.WorkerError) and error.__cause__ is not None:
        error = error.__cause__
    return error if isinstance(error, chute.SourceFileError | chute.CorruptRecordError) else None


@pytest.mark.parametrize("seed", SEEDS)
def test_a_file_truncated_mid_epoch_raises_a_chute_error_after_correct_elements(seed, tmp_path):
    # decode=True: every record must decode, so a bad read cannot pass as raw bytes.
    outcome = fs.run_truncated_file(seed, str(tmp_path), decode=True)
    assert _file_error(outcome.error) is not None, f"ended with {outcome.error!r}"
    assert outcome.seconds <= DATA_BOUND
    assert outcome.extra["bad"] == [], "wrong elements were yielded before the error"
    assert len(outcome.got) < fs.NUM_RECORDS
    assert outcome.extra["workers_stopped"]
    assert outcome.leftovers == []


@pytest.mark.parametrize("seed", SEEDS)
def test_the_error_for_a_file_truncated_mid_epoch_names_the_file(seed, tmp_path):
    outcome = fs.run_truncated_file(seed, str(tmp_path), decode=True)
    error = _file_error(outcome.error)
    assert error is not None, f"ended with {outcome.error!r}"
    assert os.path.basename(outcome.extra["path"]) in str(error)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_file_truncated_mid_epoch_never_yields_wrong_elements_with_default_decode(seed, tmp_path):
    outcome = fs.run_truncated_file(seed, str(tmp_path), decode="auto")
    assert outcome.extra["bad"] == [], f"{len(outcome.extra['bad'])} wrong elements yielded"
    assert _file_error(outcome.error) is not None, f"ended with {outcome.error!r}"


# --- 4. a record that fails to decode -----------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_a_corrupt_record_raises_corrupt_record_error_naming_the_stage(seed, tmp_path):
    outcome = fs.run_corrupt_record(seed, str(tmp_path))
    error = outcome.error
    assert isinstance(error, chute.CorruptRecordError), f"ended with {error!r}"
    found = _stage_and_position(error)
    assert found is not None, fs.notes(error)
    assert found[0] == "map(decode_record)"
    assert outcome.seconds <= DATA_BOUND
    assert all(fs.is_record(element, k) for k, element in enumerate(outcome.got))
    assert len(outcome.got) <= outcome.fault_at
    assert outcome.leftovers == []


@pytest.mark.parametrize("seed", SEEDS)
def test_a_corrupt_record_error_names_the_records_position(seed, tmp_path):
    outcome = fs.run_corrupt_record(seed, str(tmp_path))
    found = _stage_and_position(outcome.error)
    assert found is not None and found[1] == outcome.fault_at, fs.notes(outcome.error)


# --- 5. a transform raising on one element in a million ---------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_one_bad_element_in_a_million_raises_after_an_exact_prefix(seed):
    outcome = fs.run_one_in_a_million(seed)
    error = outcome.error
    assert isinstance(error, ValueError) and str(error) == f"bad element {outcome.fault_at}"
    found = _stage_and_position(error)
    assert found is not None and found[0] == "map(FailAt)", fs.notes(error)
    assert outcome.seconds <= DATA_BOUND
    # Nothing reordered, nothing repeated: the yield is the start of the stream.
    got = outcome.got
    assert got[-1] == len(got) - 1 and np.array_equal(got, np.arange(len(got)))
    assert len(got) <= outcome.fault_at
    assert outcome.leftovers == []


@pytest.mark.parametrize("seed", SEEDS)
def test_one_bad_element_in_a_million_is_named_by_its_position(seed):
    outcome = fs.run_one_in_a_million(seed)
    found = _stage_and_position(outcome.error)
    assert found is not None and found[1] == outcome.fault_at, fs.notes(outcome.error)


@pytest.mark.parametrize("seed", SEEDS)
def test_one_bad_element_in_a_million_comes_after_every_element_before_it(seed):
    outcome = fs.run_one_in_a_million(seed)
    assert isinstance(outcome.error, ValueError)
    assert len(outcome.got) == outcome.fault_at


@pytest.mark.parametrize("seed", SEEDS)
def test_after_one_bad_element_the_stream_resumes_from_get_state_with_nothing_lost(seed):
    outcome = fs.run_one_in_a_million(seed)
    assert isinstance(outcome.error, ValueError)
    it = iter(fs.million_pipeline(-1))
    it.set_state(outcome.extra["state"])
    resumed = [next(it) for _ in range(outcome.fault_at + 10 - len(outcome.got))]
    it.close()
    assert outcome.got + resumed == list(range(outcome.fault_at + 10))


# --- 6. Ctrl-C at a seeded place (the rest: test_mp_faults.py) ------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_a_caught_ctrl_c_at_a_seeded_place_leaves_the_stream_unchanged(seed):
    # Ctrl-C interrupts next() while worker (stuck // 10) % 2 sleeps on element `stuck`;
    # the user catches it and goes on: nothing lost, nothing repeated, nothing left.
    result = fs.run_caught_ctrl_c(seed)
    assert result["returncode"] == 0, result["stderr"]
    assert len(result["workers"]) == 2
    assert result["interrupted_s"] is not None, "Ctrl-C came too late to interrupt next()"
    assert result["interrupted_s"] <= CTRL_C_BOUND
    assert result["same_state"]
    assert result["got"] == list(range(100))
    assert result["workers_gone"], "workers still run after the program exited"
    assert result["leftovers"] == []


# --- 7. security ---------------------------------------------------------------------


class _Evil:
    """Unpickling this creates `marker`: proof that code ran."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (open, (self.marker, "w"))


def _read_all(source_type: type, path: str) -> list[object]:
    source = source_type(path)
    return [source[i] for i in range(len(source))]


@pytest.mark.parametrize("kind", ["npy", "npz"])
def test_a_numpy_file_with_a_pickled_object_array_is_refused_and_runs_nothing(kind, tmp_path):
    marker = tmp_path / "code-ran"
    payload = np.array([_Evil(str(marker)), 1], dtype=object)
    if kind == "npy":
        path = tmp_path / "evil.npy"
        np.save(path, payload, allow_pickle=True)
    else:
        path = tmp_path / "evil.npz"
        np.savez(path, x=payload)
    assert not marker.exists()
    with pytest.raises(chute.ChuteError) as caught:
        _read_all(chute.NumpySource, str(path))
    assert isinstance(caught.value, chute.SourceFileError), repr(caught.value)
    assert "pickle" in str(caught.value) or "object" in str(caught.value)
    assert not marker.exists(), "reading the file ran code"


def _record_claiming_a_pickle(marker: str, how: str) -> bytes:
    """A chute record whose header asks for an object array (pickled) or a pickle tag."""
    import pickle
    import struct

    from chute_sources.internal import MAGIC

    data = pickle.dumps(np.array([_Evil(marker)], dtype=object))
    tree = ["a", "|O", [1], 0] if how == "object dtype" else ["p", 0, len(data)]
    header = json.dumps(tree).encode()
    head = struct.pack("<8sI", MAGIC, len(header)) + header
    return head + b"\0" * (-len(head) % 16) + data


@pytest.mark.parametrize("how", ["object dtype", "pickle tag"])
def test_a_record_claiming_a_pickle_is_refused_and_runs_nothing(how, tmp_path):
    marker = tmp_path / "code-ran"
    data = _record_claiming_a_pickle(str(marker), how)
    with pytest.raises(chute.CorruptRecordError):
        chute.decode_record(data)
    (path,) = chute.write_array_record([data], str(tmp_path / "evil"), encode=False)
    with pytest.raises(chute.CorruptRecordError):
        chute.ArrayRecordSource(path)[0]  # decode="auto": the magic bytes say chute's codec.
    ds = chute.MapDataset.source(chute.ArrayRecordSource(path, decode=True)).to_iter_dataset()
    with pytest.raises(chute.CorruptRecordError):
        list(ds.mp_prefetch(fs.options()))
    assert not marker.exists(), "decoding the record ran code"


def test_shared_memory_segments_are_owner_only():
    me = os.getpid()
    source = chute.SharedMemorySource([np.arange(100) for _ in range(8)])
    ds = (
        chute.MapDataset.range(64)
        .to_iter_dataset()
        .map(np.arange)
        .mp_prefetch(fs.options(), chunk_size=4)
    )
    chute.stop_idle_workers()  # Parked workers of an earlier test would serve it unseen.
    before = fs.children()
    it = iter(ds)
    next(it)
    workers = sorted(fs.children() - before)
    try:
        assert len(workers) == 2, workers
        assert fs.wait_until(lambda: fs.segments(workers) != [])
        mine = fs.segments([me])
        assert mine, "SharedMemorySource made no segment"
        modes = {}
        for name in [*mine, *fs.segments(workers)]:
            try:
                modes[name] = os.stat(fs.shm_dir() / name).st_mode & 0o777
            except FileNotFoundError:
                pass  # Unlinked meanwhile.
        assert modes and set(modes.values()) == {0o600}, {n: oct(m) for n, m in modes.items()}
    finally:
        it.close()
        del source


def _saved_checkpoint(folder: Path) -> tuple[chute.IterDataset, Path, dict[str, object]]:
    ds = chute.MapDataset.range(100).seed(3).shuffle().to_iter_dataset().batch(4)
    it = iter(ds)
    next(it), next(it)
    path = Path(chute.checkpoint.save(it, folder))
    return ds, path, json.loads(path.read_text())


def _assert_refused_and_untouched(ds: chute.IterDataset, folder: Path, error_type: type) -> None:
    fresh = iter(ds)
    first = np.asarray(next(iter(ds))).tolist()
    with pytest.raises(error_type):
        chute.checkpoint.restore(fresh, folder)
    # Refused before use: the iterator was not moved (nor half moved).
    assert np.asarray(next(fresh)).tolist() == first


@pytest.mark.parametrize(
    "damage", ["truncated", "not json", "empty", "a list", "version as text", "state as text"]
)
def test_a_damaged_checkpoint_is_refused_before_use(damage, tmp_path):
    ds, path, document = _saved_checkpoint(tmp_path)
    text = json.dumps(document)
    if damage == "truncated":
        text = text[: len(text) // 2]
    elif damage == "not json":
        text = "process_0-of-1: \x00\x01 garbage"
    elif damage == "empty":
        text = ""
    elif damage == "a list":
        text = json.dumps([document])
    elif damage == "version as text":
        text = json.dumps({**document, "version": str(document["version"])})
    else:
        text = json.dumps({**document, "state": "position 8"})
    path.write_text(text)
    _assert_refused_and_untouched(ds, tmp_path, chute_checkpoint.CheckpointFormatError)


@pytest.mark.parametrize("position", ["8", 2.5, None, True])
def test_a_checkpoint_with_a_wrongly_typed_position_is_refused_as_a_format_error(
    position, tmp_path
):
    ds, path, document = _saved_checkpoint(tmp_path)
    document["state"] = {"parent": {"position": position}}
    path.write_text(json.dumps(document))
    _assert_refused_and_untouched(ds, tmp_path, chute_checkpoint.CheckpointFormatError)


@pytest.mark.parametrize("position", ["8", 2.5, None, True, -3])
def test_a_checkpoint_with_a_wrongly_typed_position_is_refused_before_use(position, tmp_path):
    ds, path, document = _saved_checkpoint(tmp_path)
    document["state"] = {"parent": {"position": position}}
    path.write_text(json.dumps(document))
    _assert_refused_and_untouched(ds, tmp_path, chute.ChuteError)
