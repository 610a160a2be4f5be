"""`chute demo` end to end: the preempted and resumed run matches the uninterrupted one."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

# One row of the final table: label, first step after (s), steps/s, input wait, accuracy.
_ROW = re.compile(
    r"^\| (uninterrupted|resumed) \| (\d+\.\d) s \| (\d+) \| (\d+\.\d)% \| (\d+\.\d)% \|$"
)


def _bar_states(stderr: str, label: str) -> list[str]:
    """The counts ("38/60") a tqdm bar labelled `label` drew, in order."""
    return re.findall(rf"{re.escape(label)}: +\d+%\|[^|]*\| (\d+/\d+) ", stderr)


def _run(tmp_path: Path, *command: str) -> subprocess.CompletedProcess[str]:
    """`python -m chute_cli demo ...` in `tmp_path`; fails the test if it fails."""
    done = subprocess.run(
        [sys.executable, "-m", "chute_cli", "demo", *command],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    return done


@pytest.mark.slow
def test_demo_resumes_exactly(tmp_path: Path) -> None:
    # A relative --dir (the runs link to shared files in it) from another folder.
    done = _run(tmp_path, "--steps", "60", "--save-every", "10", "--dir", "demo")
    work = tmp_path / "demo"
    lines = done.stdout.splitlines()
    assert lines[:4] == [
        f"chute demo, in {work}",
        "  data: scikit-learn's handwritten digits -> 4 ArrayRecord shards, 1437 training "
        "records, 360 held out",
        "  pipeline: global shuffle per epoch -> random shift + noise per record -> batch(64) "
        "-> 2 worker processes -> device prefetch",
        "  model: MLP 64-128-10, Adam; Orbax checkpoints (model + iterator) every 10 steps",
    ]
    # Killed at step 38 (between the checkpoints of 30 and 40). Orbax may not have
    # finished the save of step 30 when the kill came, so the restore is 20 or 30 (or 40,
    # in a run killed past it).
    # The kill lands a moment after the parent read step 38: the process may have
    # logged a step past it by then, which the demo reports as the step it was killed at.
    preempted = re.fullmatch(
        r"preempted at step (3[89]|4[01]); the new process restored the checkpoint of step "
        r"(20|30|40) and replayed (\d+) steps",
        lines[5],
    )
    assert preempted, lines[5]
    killed, restored = int(preempted.group(1)), int(preempted.group(2))
    assert restored <= killed and int(preempted.group(3)) == killed - restored
    assert lines[6] == (
        f"run 2 vs run 1, step by step over {killed + 60 - restored} logged steps: batches "
        "and losses identical"
    )

    # The final table: a header, then one row per run, with figures in range.
    table = lines.index(
        "| run | first step after | then steps/s | input wait | held-out accuracy |"
    )
    assert lines[table + 1] == "|---|---|---|---|---|"
    rows = [_ROW.fullmatch(line) for line in lines[table + 2 : table + 4]]
    assert all(rows), lines[table + 2 : table + 4]
    figures = {row[1]: row.groups()[1:] for row in rows if row}
    assert list(figures) == ["uninterrupted", "resumed"]
    for first_step, steps_per_s, wait, accuracy in figures.values():
        assert 0 < float(first_step) < 300
        assert int(steps_per_s) > 0
        assert 0 <= float(wait) < 100
        assert 30 < float(accuracy) <= 100  # 10% is chance; 60 steps reach ~75%.
    # The same model at the end of both runs: the same held-out accuracy.
    assert figures["uninterrupted"][3] == figures["resumed"][3]
    assert lines[table + 4].startswith("first step: starting jax, Orbax and the workers")
    assert lines[-1] == f"loss curves: {work / 'loss.png'}"
    assert (work / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # A progress bar for each training process, on stderr: run 1 and the resumed run to
    # the end, run 2 up to the kill; the resumed bar starts at the restored step.
    assert _bar_states(done.stderr, "run 1, uninterrupted")[-1] == "60/60"
    assert _bar_states(done.stderr, "run 2, until killed")[-1] == "38/60"
    resumed_bar = _bar_states(done.stderr, "run 2, resumed")
    assert resumed_bar[0] == "0/60"
    assert resumed_bar[1] == f"{restored}/60"
    assert resumed_bar[-1] == "60/60"

    # The resumed run logged every step from its checkpoint to the end.
    log = (work / "preempted" / "log.jsonl").read_text().splitlines()
    assert len(log) == killed + 60 - restored


# One row of the text demo's table: label, first step after, steps/s, tokens/s, input
# wait, held-out loss.
_TEXT_ROW = re.compile(
    r"^\| (uninterrupted|resumed) \| (\d+\.\d) s \| (\d+) \| ([\d,]+) \| (\d+\.\d)% \| "
    r"(\d+\.\d\d) \|$"
)


@pytest.mark.slow
def test_text_demo_resumes_exactly(tmp_path: Path) -> None:
    done = _run(tmp_path, "--text", "--steps", "40", "--save-every", "10", "--dir", "text")
    work = tmp_path / "text"
    lines = done.stdout.splitlines()
    assert lines[0] == f"chute demo --text, in {work}"
    assert re.fullmatch(
        r"  data: the standard library's docstrings -> \d+ training texts, \d+ tokens "
        r"\(median \d+ a text\), a byte-level BPE tokenizer of 1024 tokens trained on them",
        lines[1],
    ), lines[1]
    assert lines[2] == (
        "  pipeline: global shuffle per epoch -> tokenize (2 worker processes) -> best-fit "
        "packing into rows of 128 -> batch(16) -> device prefetch"
    )
    # Killed at step 27 (between the checkpoints of 20 and 30), or a step or so past it.
    preempted = re.fullmatch(
        r"preempted at step (2[789]|3[01]); the new process restored the checkpoint of step "
        r"(10|20|30) and replayed (\d+) steps",
        lines[5],
    )
    assert preempted, lines[5]
    killed, restored = int(preempted.group(1)), int(preempted.group(2))
    assert lines[6] == (
        f"run 2 vs run 1, step by step over {killed + 40 - restored} logged steps: batches "
        "and losses identical"
    )
    table = lines.index(
        "| run | first step after | then steps/s | tokens/s | input wait | held-out loss |"
    )
    rows = [_TEXT_ROW.fullmatch(line) for line in lines[table + 2 : table + 4]]
    assert all(rows), lines[table + 2 : table + 4]
    figures = {row[1]: row.groups()[1:] for row in rows if row}
    assert list(figures) == ["uninterrupted", "resumed"]
    for _, steps_per_s, tokens_per_s, wait, loss in figures.values():
        assert int(steps_per_s) > 0 and int(tokens_per_s.replace(",", "")) > 0
        assert 0 <= float(wait) < 100
        assert 0 < float(loss) < 6.93  # Below a uniform guess over 1024 tokens (ln 1024).
    assert figures["uninterrupted"][4] == figures["resumed"][4]  # The same model.
    padding = re.fullmatch(
        r"padding: (\d+\.\d)% of the packed rows' tokens \(one epoch\)", lines[table + 4]
    )
    assert padding and float(padding.group(1)) < 10, lines[table + 4]
    assert lines[-1] == f"loss curves: {work / 'loss.png'}"
    assert (work / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_elastic_demo_counts_every_record_once_across_4_3_6_hosts(tmp_path: Path) -> None:
    done = _run(tmp_path, "--elastic", "--dir", "elastic")
    lines = done.stdout.splitlines()
    assert lines[0] == f"chute demo --elastic, in {tmp_path / 'elastic'}"
    phase = re.compile(r"  (\d) hosts, (.*): batches (.*) \[(.*)\]")
    phases = [phase.fullmatch(line) for line in lines[2:5]]
    assert [(m[1], m[2], m[3]) for m in phases if m] == [
        ("4", "fresh", "until preempted"),
        ("3", "restored from 4 hosts", "until preempted"),
        ("6", "restored from 3 hosts", "to the end"),
    ]
    stops = [[int(x) for x in m[4].split(", ")] for m in phases if m]
    assert all(len(set(taken)) > 1 for taken in stops[:2])  # Preempted unevenly.
    # 3000 records, 2 epochs; the filter keeps those whose id is no multiple of 11.
    assert lines[6:10] == [
        "| epoch | records | seen | lost | repeated |",
        "|---|---|---|---|---|",
        "| 0 | 2727 | 2727 | 0 | 0 |",
        "| 1 | 2727 | 2727 | 0 | 0 |",
    ]
    assert re.fullmatch(r"largest iterator state saved: \d+ bytes", lines[10])
