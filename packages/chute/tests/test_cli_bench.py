import json
import textwrap

import pytest

PIPELINE = textwrap.dedent(
    """
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
