"""`/dev/shm` nearly full under a real pipeline: a clear error, never SIGBUS or a hang.

Two workers move 1-2 MiB arrays through `mp_prefetch` into a 64 MiB tmpfs (mounted in a
private mount namespace, chosen with `CHUTE_SHM_DIR`) that a filler leaves room for only
2 or 3 of their slabs; each worker wants up to 2 chunks ahead, so a slab cannot be made.
The seed chooses the array size, the chunk size, the consumer's pace and the space left
(`shm_full_run.plan`); which chunk fails depends on the timing (the first one, too).
Machines where no tmpfs can be mounted skip this, saying why; the shared-memory writer
alone is tested against a file-size limit in `test_transport.py`.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from typing import Any

import pytest

_spec = importlib.util.spec_from_file_location(
    "fault_scenarios", Path(__file__).with_name("fault_scenarios.py")
)
assert _spec is not None and _spec.loader is not None
fs = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("fault_scenarios", fs)
_spec.loader.exec_module(fs)

SEEDS = [0, 1, 2]
ERROR_BOUND = 10.0  # Seconds from the last element received to the error.
STOP_BOUND = 10.0  # Seconds close() may take to stop the workers.
_SPACE = re.compile(r"has ([\d.]+) MiB free and this needs ([\d.]+) MiB more")


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[int, dict[str, Any]]:
    """One subprocess runs every seed (about 1 s each after its start)."""
    found = fs.run_shm_full(SEEDS, str(tmp_path_factory.mktemp("tmpfs")))
    if isinstance(found, str):
        pytest.skip(found)
    return {outcome["seed"]: outcome for outcome in found}


@pytest.mark.parametrize("seed", SEEDS)
def test_a_full_shm_folder_raises_shared_memory_error_naming_free_and_needed_space(outcomes, seed):
    outcome = outcomes[seed]
    # The worker's SharedMemoryError itself, with the note naming worker and chunk.
    assert outcome["error_type"] == "SharedMemoryError", outcome
    message = outcome["message"]
    assert message.startswith("cannot write shared memory "), message
    assert "No space left on device" in message
    space = _SPACE.search(message)
    assert space, message
    free, needed = map(float, space.groups())
    # The slab for one chunk, and what was free when the worker looked (after its
    # fallocate failed; other slabs may have come and gone since, so it is not always
    # less than what the slab needs).
    assert needed == pytest.approx(outcome["slab_mib"], abs=0.1)
    assert 0 <= free <= outcome["free_before_mib"]
    assert outcome["error_s"] <= ERROR_BOUND


@pytest.mark.parametrize("seed", SEEDS)
def test_a_full_shm_folder_yields_every_element_before_the_failing_chunk(outcomes, seed):
    outcome = outcomes[seed]
    assert outcome["wrong"] == 0 and outcome["in_order"]
    # Every element of the chunks before it, and nothing of it or after it.
    assert outcome["failed_chunk_start"] == outcome["got"]
    assert outcome["got"] % outcome["chunk"] == 0


@pytest.mark.parametrize("seed", SEEDS)
def test_a_full_shm_folder_leaves_no_segment_and_no_worker(outcomes, seed):
    outcome = outcomes[seed]
    assert len(outcome["workers"]) == 2
    assert outcome["workers_alive"] == [] and outcome["workers_gone_s"] <= STOP_BOUND
    assert outcome["leftovers"] == []
    # All the space is back once close() returns (no slab still mapped, no file left).
    assert outcome["free_before_mib"] == pytest.approx(outcome["free_mib"], abs=0.1)
    assert outcome["free_after_close_mib"] == pytest.approx(outcome["free_before_mib"], abs=0.1)
