import gc
import json
import os
import time

import pytest

import chute


def _triple(x):
    return 3 * x


def _keep(x):
    return x % 4 != 1


def _pipeline(workers):
    return (
        chute.MapDataset.range(400)
        .shuffle(seed=0)
        .to_iter_dataset()
        .map(_triple)
        .filter(_keep)
        .mp_prefetch(num_workers=workers, chunk_size=32)
        .batch(16)
    )


def _load(path):
    with open(path, encoding="utf-8") as file:
        return json.load(file)


def _events(trace, ph="X"):
    return [event for event in trace["traceEvents"] if event["ph"] == ph]


def _inside(inner, outer, slack=0.002):
    """Whether `inner` lies within `outer` (microseconds, printed to the nanosecond)."""
    start, end = outer["ts"] - slack, outer["ts"] + outer["dur"] + slack
    return start <= inner["ts"] and inner["ts"] + inner["dur"] <= end


@pytest.mark.parametrize("workers", [0, 2])
def test_trace_has_a_track_per_process_with_chunks_their_stages_and_the_waits(tmp_path, workers):
    path = tmp_path / "trace.json"
    expected = [batch.tolist() for batch in _pipeline(workers)]
    began = time.perf_counter_ns() / 1000
    batches = [batch.tolist() for batch in _pipeline(workers).iter(trace=path)]
    ended = time.perf_counter_ns() / 1000
    assert batches == expected

    trace = _load(path)
    for event in trace["traceEvents"]:
        assert {"ph", "name", "pid", "tid"} <= event.keys()
        if event["ph"] == "X":
            assert {"ts", "dur", "cat"} <= event.keys() and event["dur"] >= 0
        if event["ph"] == "M":
            assert event["args"]
    names = {
        (event["pid"], event["args"]["name"])
        for event in _events(trace, "M")
        if event["name"] == "process_name"
    }
    consumer = os.getpid()
    assert (consumer, "consumer") in names
    chunks = [event for event in _events(trace) if event["name"] == "chunk"]
    elements = sum(len(batch) for batch in batches)
    assert sum(chunk["args"]["elements"] for chunk in chunks) == elements
    assert sorted(chunk["args"]["chunk"] for chunk in chunks) == list(range(len(chunks)))
    worker_pids = {chunk["pid"] for chunk in chunks} - {consumer}
    if workers:
        assert {name for pid, name in names if pid in worker_pids} == {"worker 0", "worker 1"}
        assert len(worker_pids) == 2
    else:
        assert worker_pids == set()
    for chunk in chunks:
        assert began <= chunk["ts"] and chunk["ts"] + chunk["dur"] <= ended
        nested = [
            event
            for event in _events(trace)
            if event["pid"] == chunk["pid"]
            and event["cat"] in ("stage", "transport", "wait")
            and _inside(event, chunk)
        ]
        stages = {
            event["name"]: event["args"]["elements"] for event in nested if event["cat"] == "stage"
        }
        assert (
            stages["to_iter_dataset()"]
            == chunk["args"]["positions"][1] - chunk["args"]["positions"][0]
        )
        assert stages["map(fn=_triple)"] == stages["to_iter_dataset()"]
        assert stages["filter(fn=_keep)"] == chunk["args"]["elements"]
        assert stages["stack batch"] == chunk["args"]["elements"]
        assert ("write to slab" in {event["name"] for event in nested}) == bool(workers)
    calls = [event for event in _events(trace) if event["name"].startswith("next()")]
    assert len(calls) == len(batches) + 1  # The last one ends the stream.
    assert all(call["pid"] == consumer for call in calls)
    waits = [event for event in _events(trace) if event["name"] == "wait for worker"]
    reads = [event for event in _events(trace) if event["name"] == "read chunk"]
    if workers:
        assert len(waits) == len(reads) == len(chunks)
        assert {wait["args"]["worker"] for wait in waits} == {0, 1}
        assert all(any(_inside(wait, call) for call in calls) for wait in waits)
        assert sum(read["args"]["elements"] for read in reads) == elements
    else:
        assert waits == reads == []
        assert all(any(_inside(chunk, call) for call in calls) for chunk in chunks)
    assert trace["otherData"]["dropped_events"] == 0


def test_trace_keeps_at_most_max_events_and_says_how_many_it_left_out(tmp_path):
    path = tmp_path / "trace.json"
    options = chute.TraceOptions(path, max_events=25)
    batches = list(_pipeline(2).iter(trace=options))
    trace = _load(path)
    kept = len(_events(trace)) + len(_events(trace, "C"))
    assert kept <= 25 and kept == trace["otherData"]["kept_events"]
    assert trace["otherData"]["max_events"] == 25
    assert trace["otherData"]["dropped_events"] > 0
    assert len(batches) == len(list(_pipeline(2)))


def test_trace_is_written_on_demand_at_close_and_at_garbage_collection(tmp_path):
    ds = chute.MapDataset.range(100).to_iter_dataset().map(_triple).batch(10)
    it = ds.iter(trace=tmp_path / "a.json")
    next(it)
    assert not (tmp_path / "a.json").exists()
    written = it.write_trace(tmp_path / "now.json")
    assert written == tmp_path / "now.json"
    assert [e["args"]["call"] for e in _events(_load(written)) if e["name"] == "next()"] == [0]
    next(it)
    it.close()
    assert len([e for e in _events(_load(tmp_path / "a.json")) if e["name"] == "next()"]) == 2
    it = ds.iter(trace=tmp_path / "b.json")
    next(it)
    del it
    gc.collect()
    assert [e["name"] for e in _events(_load(tmp_path / "b.json")) if e["cat"] == "next"] == [
        "next()"
    ]
    assert sorted(os.listdir(tmp_path)) == ["a.json", "b.json", "now.json"]  # No temporary left.


def test_a_traced_iterator_resumes_like_an_untraced_one(tmp_path):
    ds = _pipeline(0)
    it = ds.iter(trace=tmp_path / "t.json", stats=True)
    first = next(it).tolist()
    state = it.get_state()
    fresh = iter(ds)
    fresh.set_state(state)
    assert [b.tolist() for b in it] == [b.tolist() for b in fresh]
    assert first == next(iter(ds)).tolist()
    timed = ds.iter(stats=True)
    list(timed)
    assert [s.name for s in it.stats().stages] == [s.name for s in timed.stats().stages]


def test_bad_trace_arguments_raise_clear_errors(tmp_path):
    ds = chute.MapDataset.range(3).to_iter_dataset()
    with pytest.raises(TypeError, match=r"trace: expected the path of a JSON file .* got int 3"):
        ds.iter(trace=3)
    with pytest.raises(FileNotFoundError, match=r"the folder '.*missing' of the trace file"):
        ds.iter(trace=tmp_path / "missing" / "t.json")
    with pytest.raises(IsADirectoryError, match="is a folder; give the path of a file in it"):
        ds.iter(trace=tmp_path)
    with pytest.raises(ValueError, match="the path is empty"):
        ds.iter(trace="")
    with pytest.raises(ValueError, match="max_events"):
        chute.TraceOptions(tmp_path / "t.json", max_events=0)
    assert os.listdir(tmp_path) == []
