"""Two JAX processes (4 CPU devices each) load as one: global batches equal one process's.

Each scenario starts `multihost_run.py` (or `multihost_scenarios.py`, several scenarios
in one run) as two processes joined by `jax.distributed.initialize` over localhost, and
compares what they yield with the same script run as one process with 8 devices.
"""

import json
from pathlib import Path

import numpy as np
import pytest

from chute_testing.device import run_processes

SCRIPT = Path(__file__).with_name("multihost_run.py")
SCENARIOS = Path(__file__).with_name("multihost_scenarios.py")
TIMEOUT = 180  # Seconds for a whole run; a hang fails the test instead of the suite.


def run(tmp_path: Path, processes: int, *args: str, script: Path = SCRIPT) -> list[dict]:
    return run_processes(script, processes, tmp_path / f"run{processes}", *args, timeout=TIMEOUT)


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict:
    (result,) = run(tmp_path_factory.mktemp("reference"), 1)
    return result


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mesh", "workers", "rows", "shards"),
    [
        ("1d", 0, [[0, 8], [8, 16]], [[0, 2, False], [1, 2, False]]),
        ("1d", 2, [[0, 8], [8, 16]], [[0, 2, False], [1, 2, False]]),
        ("2d", 0, [[0, 8], [8, 16]], [[0, 2, False], [1, 2, False]]),
        # Both hosts hold every replica: the same rows, the same (only) shard.
        ("2d-shared", 0, [[0, 16], [0, 16]], [[0, 1, False], [0, 1, False]]),
    ],
)
def test_two_processes_yield_the_global_batches_of_one(
    tmp_path, reference, mesh, workers, rows, shards
):
    results = run(tmp_path, 2, "--mesh", mesh, "--workers", str(workers))
    assert len(reference["batches"]) == 203 // 16
    assert [r["rows"] for r in results] == rows
    assert [r["shard"] for r in results] == shards
    for result in results:
        assert result["batches"] == reference["batches"]
        # Resumed after five batches on two processes: the same continuation. The
        # state is the one process's state, so it restores on either process count.
        assert result["continuation"] == reference["batches"][5:]
        if not workers:  # (With workers the state is mp_prefetch's {chunk, offset}.)
            assert result["state"] == reference["state"]
    assert reference["continuation"] == reference["batches"][5:]


@pytest.mark.slow
def test_uneven_shards_stop_together(tmp_path):
    first, second = run(tmp_path, 2, "--pipeline", "uneven-drop")
    # Process 0 could make 5 batches, process 1 only 2: both yield exactly 2.
    assert len(first["batches"]) == len(second["batches"]) == 2
    assert first["batches"] == second["batches"]
    assert "error" not in first


@pytest.mark.slow
def test_mismatched_local_batches_raise_on_every_process(tmp_path):
    results = run(tmp_path, 2, "--pipeline", "uneven-mismatch")
    for result in results:
        assert len(result["batches"]) == 2
        assert "different sizes ({0: 4, 1: 2} rows by process)" in result["error"]


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> str:
    """Real data: 203 small images with ids, in two ArrayRecord files."""
    from chute_sources import write_array_record

    rng = np.random.default_rng(0)
    records = [
        {"image": rng.integers(0, 256, (4, 4, 3), dtype=np.uint8), "id": i} for i in range(203)
    ]
    folder = tmp_path_factory.mktemp("images")
    return json.dumps(write_array_record(records, folder / "images", num_shards=2))


@pytest.fixture(scope="module")
def scenarios(tmp_path_factory, images) -> list[dict]:
    return run(tmp_path_factory.mktemp("scenarios"), 2, "--data", images, script=SCENARIOS)


@pytest.fixture(scope="module")
def scenarios_reference(tmp_path_factory, images) -> dict:
    folder = tmp_path_factory.mktemp("scenarios_reference")
    (result,) = run(folder, 1, "--data", images, script=SCENARIOS)
    return result


@pytest.mark.slow
@pytest.mark.parametrize(
    ("setup", "shards", "same_rows"),
    [
        ("1d/mesh", [[0, 2], [1, 2]], False),
        ("1d/process", [[0, 2], [1, 2]], False),
        ("2d/mesh", [[0, 2], [1, 2]], False),
        ("2d/process", [[0, 2], [1, 2]], False),
        # The model axis spans the hosts: both hold every row, so both read everything.
        ("2d-shared/mesh", [[0, 1], [0, 1]], True),
    ],
)
def test_real_data_sharded_per_host_matches_one_process(
    scenarios, scenarios_reference, setup, shards, same_rows
):
    reference = scenarios_reference["real"][setup]
    assert reference["shard"] == [0, 1]
    assert len(reference["batches"]) == 203 // 16
    ids = sorted(row[0] for batch in reference["batches"] for row in batch)
    assert ids == sorted(set(ids)) and len(ids) == 192  # Distinct records, 11 dropped.
    assert [r["real"][setup]["shard"] for r in scenarios] == shards
    if same_rows:
        expected = reference["batches"]
    else:  # Host 0 holds rows 0-7 (its shard: even positions), host 1 rows 8-15 (odd).
        expected = [batch[0::2] + batch[1::2] for batch in reference["batches"]]
    for result in scenarios:
        assert result["real"][setup]["batches"] == expected


@pytest.mark.slow
def test_uneven_shards_are_padded_with_a_mask_and_stop_together(scenarios):
    # 203 elements: shard 0 holds 102 (the even ones), shard 1 holds 101; batches of 8.
    full = [
        [[*range(16 * j, 16 * j + 16, 2), *range(16 * j + 1, 16 * j + 16, 2)], [True] * 16]
        for j in range(12)
    ]
    last = [
        [*range(192, 203, 2), 0, 0, *range(193, 203, 2), 0, 0, 0],
        [True] * 6 + [False] * 2 + [True] * 5 + [False] * 3,
    ]
    for result in scenarios:
        assert result["padded"] == [*full, last]
        # The same after the failure scenario: the processes were still in step.
        assert result["after_failing"] == result["padded"]


@pytest.mark.slow
def test_a_global_batch_is_padded_in_the_rows_of_the_host_past_the_end(
    scenarios, scenarios_reference
):
    full = [[list(range(16 * j, 16 * j + 16)), [True] * 16] for j in range(12)]
    last = [[*range(192, 203), 0, 0, 0, 0, 0], [True] * 11 + [False] * 5]
    assert scenarios_reference["global_padded"] == [*full, last]
    for result in scenarios:
        assert result["global_padded"] == [*full, last]


@pytest.mark.slow
def test_a_local_batch_that_does_not_fit_the_sharding_is_named_on_each_host(scenarios):
    for process, result in enumerate(scenarios):
        assert result["no_fit"]["error"] == [
            "ValueError",
            f"the local batch leaf batch['id'] of shape (6,) does not fit the sharding: JAX "
            f"process {process} holds 4 of its 8 row blocks, so its local rows must be a "
            "multiple of 4.",
        ]


@pytest.mark.slow
def test_a_transform_failing_on_one_host_stops_both_at_the_same_step(scenarios):
    first, second = scenarios
    batches = [[0, 2, 4, 6, 1, 3, 5, 7], [8, 10, 12, 14, 9, 11, 13, 15]]
    assert first["failing"]["batches"] == second["failing"]["batches"] == batches
    assert second["failing"]["error"] == [
        "RuntimeError",
        "transform failed on element 21",
        "chute: raised by map(fail_on_process_one) on the element at position 10",
    ]
    assert first["failing"]["error"] == [
        "LockstepError",
        "JAX process(es) [1] raised an error making or placing their batch of this step (their "
        "own error is raised there; see their logs): every process stops at this step, so none "
        "waits for them in a collective.",
    ]
    # Process 0 learns it at once, instead of waiting in the next all-gather.
    assert first["failing"]["seconds"] < 10
