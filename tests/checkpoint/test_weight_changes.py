"""Mixture weights changed at a restore: each component goes on exactly, when allowed.

`allow_changes=("weights",)` (apply_document, restore, Orbax's CheckpointRestore) accepts
an `IterDataset.mix` whose weights differ from the checkpoint's; every other difference,
and weights that decide which record a position reads (`MapDataset.mix`), stay a
`PipelineMismatchError` naming the reason.
"""

import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chute
import chute.grain as grain
from chute_checkpoint import PipelineMismatchError, apply_document, make_document
from chute_testing import assert_resumes

SIZES = (60, 80, 40)


def _keep(x):
    return x % 4 != 1


def _components():
    """Three streams: shuffled, filtered, plain; their elements never collide."""
    return [
        chute.MapDataset.range(1000, 1000 + SIZES[0]).seed(1).shuffle().to_iter_dataset(),
        chute.MapDataset.range(2000, 2000 + SIZES[1]).to_iter_dataset().filter(_keep),
        chute.MapDataset.range(3000, 3000 + SIZES[2]).to_iter_dataset(),
    ]


def _mixture(weights):
    return chute.IterDataset.mix(_components(), weights)


def _by_component(elements):
    return [[x for x in elements if x // 1000 == c] for c in (1, 2, 3)]


WEIGHTS = st.lists(st.integers(1, 9), min_size=3, max_size=3)


@settings(max_examples=60, deadline=None)
@given(WEIGHTS, WEIGHTS, st.integers(0, 60))
def test_each_component_goes_on_from_its_own_position_under_new_weights(old, new, stop):
    it = iter(_mixture(old))
    head = list(itertools.islice(it, stop))  # Fewer if a component ran out first.
    document = json.loads(json.dumps(make_document(it)))
    restored = iter(_mixture(new))
    apply_document(restored, document, allow_changes=("weights",))
    rest = list(restored)
    streams = [list(component) for component in _components()]
    for before, after, stream in zip(
        _by_component(head), _by_component(rest), streams, strict=True
    ):
        assert before + after == stream[: len(before) + len(after)]  # None lost or repeated.
    # Deterministic: the same state and new weights give the same stream again.
    again = iter(_mixture(new))
    apply_document(again, document, allow_changes=("weights",))
    assert list(again) == rest


def test_after_the_change_the_mixture_follows_the_new_weights():
    it = iter(_mixture([1, 1, 1]))
    for _ in range(30):
        next(it)
    restored = iter(_mixture([6, 1, 1]))
    apply_document(restored, make_document(it), allow_changes=("weights",))
    following = [next(restored) for _ in range(24)]
    # Every prefix after the change is within one element of 6:1:1 of its length.
    assert [len(c) for c in _by_component(following)] == [18, 3, 3]


def test_new_weights_without_allowing_them_are_refused_naming_the_way():
    it = iter(_mixture([1, 1, 1]))
    next(it)
    with pytest.raises(PipelineMismatchError) as caught:
        apply_document(iter(_mixture([2, 1, 1])), make_document(it))
    assert str(caught.value).splitlines()[1:3] == [
        "  - stage 0 (mix): parameter 'weights' differs: the checkpoint has \"[1, 1, 1]\", "
        'this pipeline has "[2, 1, 1]"',
        "  - these changes can continue exactly: pass allow_changes=('weights',)",
    ]


def test_other_changes_are_refused_even_with_weights_allowed():
    it = iter(_mixture([1, 1, 1]))
    next(it)
    document = make_document(it)
    changed = _components()
    changed[0] = chute.MapDataset.range(1000, 1060).seed(2).shuffle().to_iter_dataset()
    other = iter(chute.IterDataset.mix(changed, [2, 1, 1]))
    with pytest.raises(PipelineMismatchError) as caught:
        apply_document(other, document, allow_changes=("weights",))
    lines = str(caught.value).splitlines()
    assert (
        "  - stage 0 (mix) input 0: stage 1 (seed): seed changed from 1 to 2, which was not "
        "allowed" in lines
    )


def test_weights_of_a_map_mixture_decide_the_records_and_are_refused_with_the_reason():
    def mixture(weights):
        parts = [chute.MapDataset.range(0, 50), chute.MapDataset.range(100, 150)]
        return chute.MapDataset.mix(parts, weights).to_iter_dataset()

    it = iter(mixture([1, 1]))
    next(it)
    with pytest.raises(PipelineMismatchError) as caught:
        apply_document(iter(mixture([3, 1])), make_document(it), allow_changes=("weights",))
    assert (
        "  - stage 0 (mix): weights decides which record each position reads before the stream "
        "begins, so changing it would lose or repeat records; mix streams (IterDataset.mix) to "
        "change it on restore"
    ) in str(caught.value).splitlines()


def test_allow_changes_is_a_collection_of_names():
    it = iter(_mixture([1, 1, 1]))
    with pytest.raises(TypeError, match=r"allow_changes is a collection of parameter names"):
        apply_document(iter(_mixture([1, 1, 1])), make_document(it), allow_changes="weights")


def test_restore_from_files_and_from_orbax_accept_new_weights(tmp_path):
    ocp = pytest.importorskip("orbax.checkpoint")
    it = iter(_mixture([1, 1, 1]))
    head = [next(it) for _ in range(12)]
    chute.checkpoint.save(it, tmp_path / "files")
    with ocp.CheckpointManager(tmp_path / "orbax") as manager:
        manager.save(12, args=chute.checkpoint.CheckpointSave(it))
        manager.wait_until_finished()
    from_files = chute.checkpoint.restore(
        iter(_mixture([1, 5, 1])), tmp_path / "files", allow_changes=("weights",)
    )
    with ocp.CheckpointManager(tmp_path / "orbax") as manager:
        args = chute.checkpoint.CheckpointRestore(
            iter(_mixture([1, 5, 1])), allow_changes=("weights",)
        )
        from_orbax = manager.restore(12, args=args)
    rest = list(from_files)
    assert list(from_orbax) == rest
    streams = [list(component) for component in _components()]
    for part, stream in zip(_by_component(head + rest), streams, strict=True):
        assert part == stream[: len(part)]  # Each component: a prefix, every record once.
    assert len(_by_component(rest)[1]) > 2 * len(_by_component(rest)[0])  # 1:5:1 now.


def test_grain_mixtures_recover_with_changed_weights_as_in_grain():
    def mixed(weights):
        a = grain.MapDataset.range(0, 40).to_iter_dataset()
        b = grain.MapDataset.range(100, 140).to_iter_dataset()
        return grain.IterDataset.mix([a, b], weights)

    it = iter(mixed([0.5, 0.5]))
    head = [next(it) for _ in range(10)]
    restored = iter(mixed([0.9, 0.1]))
    restored.set_state(it.get_state())
    rest = list(restored)
    evens, odds = [x for x in head + rest if x < 100], [x for x in head + rest if x >= 100]
    assert evens == list(range(40))  # Component 0 ran out: the mixture ends there.
    assert odds == list(range(100, 100 + len(odds)))  # Component 1: a prefix, once each.
    assert len([x for x in rest if x < 100]) > 8 * len([x for x in rest if x >= 100]) - 2


SCHEDULE = chute.WeightSchedule([(0, [1, 1, 1]), (12, [6, 1, 1]), (36, [1, 1, 4])])


def test_a_weight_schedule_changes_the_proportions_at_its_steps():
    out = list(_mixture(SCHEDULE))
    counts = [[len(c) for c in _by_component(out[a:b])] for a, b in ((0, 12), (12, 36), (36, 48))]
    assert counts == [[4, 4, 4], [18, 3, 3], [2, 2, 8]]
    streams = [list(component) for component in _components()]
    for part, stream in zip(_by_component(out), streams, strict=True):
        assert part == stream[: len(part)]  # No record of any component lost or repeated.


def test_a_mixture_with_a_weight_schedule_resumes_exactly_anywhere():
    assert_resumes(lambda: iter(_mixture(SCHEDULE)), every=5)


def test_a_schedule_extended_at_a_restore_goes_on_exactly():
    it = iter(_mixture(SCHEDULE))
    head = [next(it) for _ in range(40)]
    longer = chute.WeightSchedule([*SCHEDULE.steps, (44, [1, 8, 1])])
    restored = iter(_mixture(longer))
    apply_document(restored, make_document(it), allow_changes=("weights",))
    rest = list(restored)
    assert [len(c) for c in _by_component(rest[4:24])] == [2, 16, 2]  # 1:8:1 from step 44.
    streams = [list(component) for component in _components()]
    for part, stream in zip(_by_component(head + rest), streams, strict=True):
        assert part == stream[: len(part)]


@pytest.mark.parametrize(
    ("steps", "error", "message"),
    [
        ([], ValueError, "steps is empty"),
        ([(1, [1, 1])], chute.InvalidArgumentError, "step 0 starts at 1; the first starts at 0"),
        ([(0, [1, 1]), (0, [2, 1])], chute.InvalidArgumentError, "step 1 starts at 0"),
        ([(0, [1, 1]), (5, [2, 1, 1])], chute.InvalidArgumentError, "got 3 weights for 2"),
        ([(0, [1, -1])], chute.InvalidArgumentError, r"weights\[1\] must be positive"),
        ([(0, [1, "a"])], chute.ArgumentTypeError, r"weights\[1\] must be a real number"),
    ],
)
def test_a_bad_weight_schedule_is_refused_naming_the_step(steps, error, message):
    with pytest.raises(error, match=message):
        chute.WeightSchedule(steps)


def test_a_schedule_of_another_component_count_is_refused():
    with pytest.raises(chute.InvalidArgumentError, match="weighs 2 components, but 3 are mixed"):
        _mixture(chute.WeightSchedule([(0, [1, 1])]))
    with pytest.raises(chute.ArgumentTypeError, match="mix streams instead"):
        chute.MapDataset.mix([chute.MapDataset.range(3)] * 2, chute.WeightSchedule([(0, [1, 1])]))
