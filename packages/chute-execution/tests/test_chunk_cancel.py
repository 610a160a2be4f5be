"""`ChunkPlan.run(cancelled=...)`: a chunk stops between elements once nobody wants it.

What a Ray task does when its iterator is closed (see `_ray_task`); here without Ray.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chute_execution import ChunkPlan
from chute_execution._chunk_cancel import ChunkCancelled
from chute_transforms import FilterIter, MapIter


class Seen:
    """A map that records each element it sees."""

    def __init__(self) -> None:
        self.elements: list[int] = []

    def __call__(self, x: int) -> int:
        self.elements.append(x)
        return x * 10


def _plans(seen: Seen) -> dict[str, ChunkPlan]:
    return {
        "maps": ChunkPlan(range(100), [(MapIter, (seen,), {})], chunk_size=20),
        "stream": ChunkPlan(
            range(100), [(MapIter, (seen,), {}), (FilterIter, (bool,), {})], chunk_size=20
        ),
    }


@pytest.mark.parametrize("kind", ["maps", "stream"])
def test_a_chunk_stops_at_the_next_element_once_cancelled(kind: str) -> None:
    seen = Seen()
    plan = _plans(seen)[kind]
    answers = iter([False, False, True])  # Wanted for two checks, then not.
    with pytest.raises(ChunkCancelled, match="nobody wants this chunk"):
        plan.run(1, cancelled=lambda: next(answers))
    # Checked after each output, or (plain maps) after pieces of 1, then at most 2, 4.
    assert seen.elements[:3] == [20, 21, 22]
    assert seen.elements == list(range(20, 20 + len(seen.elements)))
    assert len(seen.elements) <= (3 if kind == "stream" else 7)  # Not the chunk's 20.


@given(kind=st.sampled_from(["maps", "stream"]), chunk=st.integers(0, 4))
def test_a_chunk_still_wanted_gives_what_it_gives_unchecked(kind: str, chunk: int) -> None:
    plan = _plans(Seen())[kind]
    checked, unchecked = plan.run(chunk, cancelled=lambda: False), plan.run(chunk)
    assert checked.outputs == unchecked.outputs
    assert (
        list(checked.origins)
        == list(unchecked.origins)
        == [(x,) for x in range(20 * chunk, 20 * chunk + 20) if kind == "maps" or x]
    )


def test_an_error_keeps_its_count_of_outputs_before_it_when_checked() -> None:
    def fail_at_25(x: int) -> int:
        if x == 25:
            raise KeyError(x)
        return x

    plan = ChunkPlan(range(100), [(MapIter, (fail_at_25,), {})], chunk_size=20)
    with pytest.raises(KeyError) as caught:
        plan.run(1, cancelled=lambda: False)
    assert caught.value.chute_outputs_before == 5  # type: ignore[attr-defined]
    assert any("position 25" in note for note in caught.value.__notes__)
