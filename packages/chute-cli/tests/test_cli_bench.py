import json
import re
import subprocess
import sys
import textwrap
import time

import pytest

PIPELINE = textwrap.dedent(
    """
    import time
    import numpy as np
    import chute

    def slow_square(x):
        return np.full((4,), x * x, np.int64)

    def make():
        return chute.MapDataset.range(10_000).to_iter_dataset().map(slow_square).batch(8)

    def make_map():
        return chute.MapDataset.range(50).map(slow_square)

    def not_a_dataset():
        return [1, 2, 3]

    def raises():
        raise RuntimeError("no data today")

    def bad_element(x):
        if x == 3:
            raise ValueError("record 3 is bad")
        return x

    def fails_later():
        return chute.MapDataset.range(10).to_iter_dataset().map(bad_element)

    def sleeps(x):
        time.sleep(100)
        return x

    def fourth_sleeps(x):
        if x == 3:
            time.sleep(100)
        return x

    def all_slow():
        return chute.MapDataset.range(10).to_iter_dataset().map(sleeps)

    def all_slow_in_workers():
        options = chute.MultiprocessingOptions(num_workers=1)
        return chute.MapDataset.range(10).to_iter_dataset().map(sleeps).mp_prefetch(options)

    def all_slow_in_read_threads():
        options = chute.ReadOptions(num_threads=4, prefetch_buffer_size=16)
        return chute.MapDataset.range(100).map(sleeps).to_iter_dataset(options)

    def fourth_slow():
        return chute.MapDataset.range(100).to_iter_dataset().map(fourth_sleeps).batch(1)

    number = 3
    """
)


@pytest.fixture
def workdir(tmp_path):
    (tmp_path / "pipe.py").write_text(PIPELINE)
    (tmp_path / "broken.py").write_text("import no_such_dependency_xyz\n")
    return tmp_path


def test_bench_reports_rate_stages_bottleneck_and_a_suggestion(run_chute, workdir):
    result = run_chute("bench", "pipe:make", "--batches", "20", "--seconds", "60", cwd=workdir)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("chute bench: pipe:make (IterDataset), 20 batches in ")
    assert "stopped by: --batches 20" in lines
    assert any(line.startswith("throughput: ") and "batches/s = " in line for line in lines)
    assert any("(8 elements per batch)" in line for line in lines)
    stage_names = [line.split()[0] for line in lines if line.startswith("  ") and "  " in line]
    assert {"to_iter_dataset()", "map(fn=slow_square)", "batch(batch_size=8,"} <= set(stage_names)
    assert any(line.startswith("bottleneck: ") for line in lines)
    assert any(line.startswith("  read_options = chute.ReadOptions(") for line in lines)
    assert any(
        line.startswith("  multiprocessing_options = chute.MultiprocessingOptions(num_workers=")
        for line in lines
    )


def test_bench_json_of_a_map_dataset_that_ends(run_chute, workdir):
    result = run_chute("bench", "pipe:make_map", "--json", cwd=workdir)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["elements"] == 50
    assert report["ended"] is True
    assert report["stopped_by"] == "the end of the data set"
    assert report["batched"] is False
    assert [stage["name"] for stage in report["stages"]] == ["to_iter_dataset()"]
    assert report["stages"][0]["elements"] == 50
    assert report["bottleneck"] == "to_iter_dataset()"
    assert "num_workers=" in report["suggested"]["multiprocessing_options"]


@pytest.mark.parametrize(
    ("target", "code", "message"),
    [
        ("pipe", 2, "expected MODULE:FUNCTION (e.g. my_pipeline:make_dataset), got 'pipe'"),
        (
            "nope:make",
            2,
            "cannot import 'nope': no module 'nope' (looked in the working directory "
            "'{cwd}' and the installed packages)",
        ),
        ("pipe:missing", 2, "module 'pipe' ({cwd}/pipe.py) has no attribute 'missing'"),
        ("pipe:number", 2, "pipe:number is not a function (found a value of type int)"),
        (
            "pipe:not_a_dataset",
            2,
            "pipe:not_a_dataset() returned a list; it must return a chute dataset "
            "(chute.MapDataset or chute.IterDataset)",
        ),
        ("pipe:raises", 1, "pipe:raises() raised RuntimeError: no data today"),
        (
            "broken:make",
            1,
            "importing 'broken' raised ModuleNotFoundError: No module named "
            "'no_such_dependency_xyz'",
        ),
    ],
)
def test_bad_targets_give_one_line_and_an_exit_code(run_chute, workdir, target, code, message):
    result = run_chute("bench", target, cwd=workdir)
    assert (result.returncode, result.stderr) == (
        code,
        "chute bench: error: " + message.format(cwd=workdir) + "\n",
    )
    assert result.stdout == ""


def test_pipeline_error_while_iterating_is_a_data_error(run_chute, workdir):
    result = run_chute("bench", "pipe:fails_later", cwd=workdir)
    assert result.returncode == 1
    assert result.stderr.startswith(
        "chute bench: error: the pipeline raised ValueError after 3 elements: "
    )
    assert "record 3 is bad" in result.stderr
    assert result.stderr.count("\n") == 1


def test_bench_trace_writes_a_trace_of_the_run(run_chute, workdir):
    result = run_chute("bench", "pipe:make", "--batches", "5", "--trace", "t.json", cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert "trace: t.json (open it in https://ui.perfetto.dev or chrome://tracing)" in (
        result.stdout.splitlines()
    )
    events = json.loads((workdir / "t.json").read_text())["traceEvents"]
    calls = [event for event in events if event["name"] == "next()"]
    assert len(calls) == 5
    assert {"to_iter_dataset()", "map(fn=slow_square)"} <= set(calls[0]["args"]["elements"])


def test_bench_trace_in_a_missing_folder_is_a_usage_error(run_chute, workdir):
    result = run_chute("bench", "pipe:make", "--trace", "nowhere/t.json", cwd=workdir)
    assert result.returncode == 2
    assert result.stderr.startswith("chute bench: error: --trace: the folder ")
    assert "nowhere' of the trace file does not exist" in result.stderr


def _bench_timed(workdir, *args):
    """Runs `python -m chute_cli bench` in a process; returns its result and wall time."""
    start = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "chute_cli", "bench", *args],
        capture_output=True,
        text=True,
        timeout=90,  # The elements sleep 100 s: waiting for one would fail here.
        cwd=workdir,
    )
    return result, time.monotonic() - start


@pytest.mark.parametrize("target", ["all_slow", "all_slow_in_workers", "all_slow_in_read_threads"])
def test_bench_keeps_its_deadline_when_an_element_takes_longer(workdir, target):
    result, wall = _bench_timed(workdir, f"pipe:{target}", "--seconds", "2")
    assert result.returncode == 0, result.stderr
    assert wall < 30  # Not the 100 s of the element (nor 100 s more for the suggestion).
    lines = result.stdout.splitlines()
    assert re.fullmatch(
        rf"chute bench: pipe:{target} \(IterDataset\), 0 elements in 2\.\d\d s", lines[0]
    )
    assert re.fullmatch(
        r"stopped by: --seconds 2, in the middle of element 1 \(still being produced after "
        r"\d+\.\d\d s; abandoned\)",
        lines[-3],
    )
    assert lines[-2:] == [
        "no element was produced within --seconds: nothing to measure",
        "suggested configuration: none (the run was cut short by --seconds 2 in the middle of "
        "an element; measure with a larger --seconds for one)",
    ]
    assert result.stderr == ""


def test_bench_cut_short_reports_what_it_measured_until_the_deadline(workdir):
    result, wall = _bench_timed(workdir, "pipe:fourth_slow", "--seconds", "2", "--json")
    assert result.returncode == 0, result.stderr
    assert wall < 30
    report = json.loads(result.stdout)
    assert (report["elements"], report["examples"], report["ended"]) == (3, 3, False)
    assert (report["cut_short"], report["stopped_by"]) == (True, "--seconds 2")
    assert report["seconds"] >= 2.0
    assert 0 < report["in_flight_seconds"] <= report["seconds"]
    assert report["suggested"] is None
    assert report["not_suggested"].startswith("the run was cut short by --seconds 2")
    assert [(stage["name"], stage["elements"]) for stage in report["stages"]][1:] == [
        ("map(fn=fourth_sleeps)", 3),
        ("batch(batch_size=1, drop_remainder=False)", 3),
    ]
    result, _ = _bench_timed(workdir, "pipe:fourth_slow", "--seconds", "2")
    lines = result.stdout.splitlines()
    assert any(
        line.startswith("stopped by: --seconds 2, in the middle of batch 4 (still being ")
        and line.endswith("abandoned: the figures below are what was measured until then)")
        for line in lines
    )
    assert "  (the abandoned batch's time is in no stage: they count finished elements)" in lines


def test_a_suggestion_that_cannot_finish_in_time_is_left_out(workdir):
    # The run stops at --batches 3, before element 3; the suggestion's own run reaches it.
    result, wall = _bench_timed(workdir, "pipe:fourth_slow", "--batches", "3", "--json")
    assert result.returncode == 0, result.stderr
    assert wall < 30
    report = json.loads(result.stdout)
    assert (report["elements"], report["cut_short"], report["suggested"]) == (3, False, None)
    assert report["not_suggested"] == (
        "chute.pick_performance_config did not finish within 2 s (an element took longer); "
        "measure with a larger --seconds for one"
    )
