"""`chute convert` run again: after it finished, after a kill or Ctrl-C mid-shard, and into
an output folder that holds other files (see test_cli_convert.py for what it converts)."""

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import chute
from chute_testing.execution import ANSWER_CTRL_C

SHARDS = [f"train-0000{i}-of-00004.array_record" for i in range(4)]


def _error(result):
    return result.returncode, result.stderr


def test_rerun_of_a_finished_conversion_keeps_every_shard(run_chute, parquet_file, tmp_path):
    dst = tmp_path / "train"
    assert run_chute("convert", parquet_file, dst, "--shards", "4").returncode == 0
    before = {name: (tmp_path / name).stat().st_mtime_ns for name in SHARDS}
    result = run_chute("convert", parquet_file, dst, "--shards", "4")
    assert result.returncode == 0, result.stderr
    assert "  resumed: 4 finished shards kept, 0 written" in result.stdout.splitlines()
    assert {name: (tmp_path / name).stat().st_mtime_ns for name in SHARDS} == before


_BLOCKING = textwrap.dedent(
    """
    import os, sys, time
    import chute_cli._inputs as inputs
    from chute_cli import main

    original = inputs.Input.read

    def read(self, indices):
        indices = list(indices)
        if int(os.environ["BLOCK_AT"]) in indices and not os.path.exists(os.environ["MARKER"]):
            open(os.environ["MARKER"], "w").close()
            while True:  # Stuck mid-shard until the test kills or interrupts us.
                time.sleep(0.05)
        return original(self, indices)

    inputs.Input.read = read
    sys.exit(main(sys.argv[1:]))
    """
)


def _start_blocked(tmp_path, args, block_at):
    script = tmp_path / "blocking.py"
    script.write_text(ANSWER_CTRL_C + _BLOCKING)  # Also when the test run ignores SIGINT.
    marker = tmp_path / "blocked"
    env = {**os.environ, "BLOCK_AT": str(block_at), "MARKER": str(marker)}
    process = subprocess.Popen(
        [sys.executable, str(script), *map(str, args)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not marker.exists():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the conversion never reached the record"
        time.sleep(0.05)
    return process


def test_resume_after_sigkill_mid_shard_equals_an_uninterrupted_conversion(
    read_shards, assert_same_records, run_chute, parquet_file, tmp_path
):
    reference = tmp_path / "reference"
    assert run_chute("convert", parquet_file, reference / "train", "--shards", "4").returncode == 0
    out = tmp_path / "out"
    args = ["convert", parquet_file, out / "train", "--shards", "4"]
    process = _start_blocked(tmp_path, args, block_at=1300)  # Shard 2 (1000..1500), its 2nd chunk.
    manifest = json.loads((out / "train.chute-convert.json").read_text())
    assert sorted(manifest["shards"]) == ["0", "1"]
    assert manifest["complete"] is False
    process.send_signal(signal.SIGKILL)
    process.communicate()
    assert process.returncode == -signal.SIGKILL
    assert not (out / SHARDS[2]).exists()
    assert (out / f".{SHARDS[2]}.tmp").exists()  # The partial shard the kill left.

    result = run_chute(*args)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert [line.split()[-1] for line in lines[1:5]] == ["before)", "before)", "written", "written"]
    assert "  resumed: 2 finished shards kept, 2 written" in lines
    assert sorted(os.listdir(out)) == [*SHARDS, "train.chute-convert.json"]
    for name in SHARDS:
        assert (out / name).read_bytes() == (reference / name).read_bytes()
    assert_same_records(
        list(chute.ParquetSource(str(parquet_file))), read_shards(out / name for name in SHARDS)
    )


def test_the_shards_a_killed_conversion_left_are_refused_until_it_is_finished(
    run_chute, parquet_file, tmp_path
):
    out = tmp_path / "out"
    args = ["convert", parquet_file, out / "train", "--shards", "4"]
    process = _start_blocked(tmp_path, args, block_at=1300)  # Shards 0 and 1 are written.
    process.send_signal(signal.SIGKILL)
    process.communicate()
    manifest = str(out / "train.chute-convert.json")
    said = (
        f"its manifest {manifest!r} says the conversion is not complete: 2 of 4 shards "
        "written (1,000 of 2,000 records)"
    )
    pattern = str(out / "train-*")
    result = run_chute("inspect", pattern)
    assert _error(result) == (
        1,
        f"chute inspect: error: the shards of {pattern!r} are the output of an unfinished "
        f"chute convert: {said}. Finish it by running the same chute convert command again "
        f"(of {str(parquet_file)!r}; it resumes, keeping the finished shards), or pass "
        "--allow-incomplete to read the shards that are there.\n",
    )
    with pytest.raises(chute.SourceFileError, match="allow_incomplete=True"):
        chute.ArrayRecordSource(str(out))

    result = run_chute("inspect", pattern, "--allow-incomplete", "--records", "0")
    assert result.returncode == 0, result.stderr
    assert result.stderr == (
        "chute inspect: warning: these shards are the output of an unfinished chute convert "
        f"(--allow-incomplete): {said}\n"
    )
    assert result.stdout.splitlines()[1] == (
        "records: 1,000 in 2 files (incomplete: an unfinished chute convert)"
    )
    result = run_chute("inspect", out, "--allow-incomplete", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["incomplete"] == [
        {
            "manifest": manifest,
            "shards_written": 2,
            "shards_total": 4,
            "records_written": 1000,
            "records_total": 2000,
            "problem": None,
            "message": said,
        }
    ]

    assert run_chute(*args).returncode == 0  # Finishing the conversion lifts the refusal.
    result = run_chute("inspect", pattern, "--json")
    assert result.returncode == 0, result.stderr
    assert (result.stderr, json.loads(result.stdout)["num_records"]) == ("", 2000)
    assert "incomplete" not in json.loads(result.stdout)
    assert len(chute.ArrayRecordSource(str(out))) == 2000


def test_ctrl_c_exits_130_and_the_rerun_resumes(run_chute, parquet_file, tmp_path):
    args = ["convert", parquet_file, tmp_path / "train", "--shards", "4"]
    process = _start_blocked(tmp_path, args, block_at=800)  # Shard 1 (500..1000), its 2nd chunk.
    try:
        process.send_signal(signal.SIGINT)
        _stdout, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:  # Never leave it running, whatever failed.
            process.kill()
            process.communicate()
    assert process.returncode == 130
    assert stderr == (
        "chute convert: error: interrupted; 1 of 4 shards are complete, rerun the same "
        "command to resume\n"
    )
    assert not (tmp_path / f".{SHARDS[1]}.tmp").exists()
    result = run_chute(*args)
    assert result.returncode == 0, result.stderr
    assert "  resumed: 1 finished shard kept, 3 written" in result.stdout.splitlines()


def test_shard_changed_after_writing_fails_verification_and_overwrite_repairs_it(
    read_shards, assert_same_records, run_chute, tmp_path
):
    np.save(tmp_path / "x.npy", np.arange(40).reshape(40, 1))
    np.save(tmp_path / "y.npy", -np.arange(40).reshape(40, 1))
    for name in ("x", "y"):
        done = run_chute("convert", f"{name}.npy", f"{name}/{name}", "--shards", "4", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    # Another conversion's shard: the same size and record count, other records. The
    # rerun keeps it (a finished shard), then the comparison with SRC finds it out.
    shard = "x/x-00002-of-00004.array_record"
    shutil.copyfile(tmp_path / "y/y-00002-of-00004.array_record", tmp_path / shard)
    result = run_chute("convert", "x.npy", "x/x", "--shards", "4", cwd=tmp_path)
    assert _error(result) == (
        1,
        f"chute convert: error: verification failed: record 20 of SRC (record 0 of '{shard}') "
        "differs from what SRC holds now: record: values differ; the shard or SRC changed "
        "after the shard was written. Rerun with --overwrite to write every shard again\n",
    )
    assert result.stdout == ""
    repaired = run_chute("convert", "x.npy", "x/x", "--shards", "4", "--overwrite", cwd=tmp_path)
    assert repaired.returncode == 0, repaired.stderr
    paths = [tmp_path / f"x/x-0000{i}-of-00004.array_record" for i in range(4)]
    assert_same_records(list(np.arange(40).reshape(40, 1)), read_shards(paths))


def test_other_conversion_in_dst_needs_overwrite(run_chute, parquet_file, tmp_path):
    dst = tmp_path / "train"
    assert run_chute("convert", parquet_file, dst, "--shards", "4").returncode == 0
    result = run_chute("convert", parquet_file, dst, "--shards", "2")
    assert _error(result) == (
        2,
        f"chute convert: error: the output already holds another conversion (its manifest "
        f"'{dst}.chute-convert.json' has another layout); pass --overwrite to replace it, or "
        "choose another DST\n",
    )
    result = run_chute("convert", parquet_file, dst, "--shards", "2", "--overwrite")
    assert result.returncode == 0, result.stderr
    names = [f"train-0000{i}-of-00002.array_record" for i in range(2)]
    assert sorted(os.listdir(tmp_path)) == ["data.parquet", *names, "train.chute-convert.json"]


def test_existing_output_without_manifest_is_not_overwritten(run_chute, tmp_path):
    np.save(tmp_path / "x.npy", np.arange(5))
    (tmp_path / "x.array_record").write_bytes(b"precious")
    result = run_chute("convert", tmp_path / "x.npy", tmp_path)
    assert result.returncode == 2
    assert "already exists and no manifest" in result.stderr
    assert (tmp_path / "x.array_record").read_bytes() == b"precious"
