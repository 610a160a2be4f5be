"""Resume anywhere, for real: 4 JAX processes stop at their own steps, 3 go on, then 6.

Each run starts `uneven_run.py` as processes joined by `jax.distributed.initialize` over
localhost. The processes of a run stop after different numbers of batches (as preempted
hosts do, and as a filter leaves them: their shards keep different shares), save with
`chute_checkpoint.save` and with Orbax, and the next run continues on another count.
A mixture of two sharded domains goes through the same runs.
"""

from pathlib import Path

import pytest

from chute_checkpoint import reshard_directory
from chute_testing.device import run_processes

SCRIPT = Path(__file__).with_name("uneven_run.py")
TIMEOUT = 240  # Seconds for a whole run; a hang fails the test instead of the suite.
RECORDS = [x for x in range(300) if x % 5 != 0]


def run(out: Path, processes: int, *args: str) -> list[dict]:
    return run_processes(SCRIPT, processes, out, *args, timeout=TIMEOUT)


@pytest.mark.slow
def test_four_processes_stopped_unevenly_continue_on_three_then_six(tmp_path):
    four = run(tmp_path / "four", 4, "--stops", "3,9,0,5", "--save", str(tmp_path / "a"))
    # For users without Orbax: the folder of 4 states, resharded for 3 by a tool.
    written = reshard_directory(tmp_path / "a" / "files", tmp_path / "a3", 3)
    assert [path.name for path in written] == [f"process_{k}-of-3.json" for k in range(3)]
    three = run(
        tmp_path / "three",
        3,
        *("--restore", str(tmp_path / "a"), "--resharded", str(tmp_path / "a3")),
        *("--stops", "7,1,4", "--save", str(tmp_path / "b")),
    )
    six = run(tmp_path / "six", 6, "--restore", str(tmp_path / "b"))
    assert [len(result["files"]) for result in four] == [12, 36, 0, 20]
    assert [len(result["files"]) for result in three] == [28, 4, 16]
    for chain in ("files", "orbax"):
        seen = [x for result in four + three + six for x in result[chain]]
        assert sorted(seen) == RECORDS, chain  # Every record once: none lost or repeated.
    # Each process of a run delivers the same records whichever way it saved.
    for result in four + three + six:
        assert result["files"] == result["orbax"]
    # The tool's folder continues exactly as restoring the 4 states in place does.
    assert [result["resharded"] for result in three] == [result["files"] for result in three]
    # The mixture of two sharded domains: no record of either comes twice, and it goes on
    # after each change (it stops where a domain's turn finds it exhausted).
    mixed = [x for result in four + three + six for x in result["mix"]]
    assert len(mixed) == len(set(mixed)) and all(result["mix"] for result in six)
