"""The state document: structural fingerprints, validation errors, old files loading."""

import json
import operator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chute
import chute_checkpoint
from chute_checkpoint import (
    CheckpointFormatError,
    PipelineMismatchError,
    apply_document,
    describe_pipeline,
    describe_value,
    fingerprint,
    loads_document,
    make_document,
    validate_document,
)

V1 = Path(__file__).parent / "data_v1"  # Written on 2026-11-22 by format version 1.
V2 = Path(__file__).parent / "data_v2"  # Written on 2026-11-27 by format version 2.


def _fixture_pipeline():
    # The pipeline that wrote data/state_v1_2026-11-22.json (format version 1).
    return (
        chute.MapDataset.range(1000)
        .seed(7)
        .shuffle()
        .map(operator.neg)
        .to_iter_dataset()
        .filter(operator.truth)
        .batch(4)
    )


def test_a_state_file_written_in_format_version_1_keeps_loading():
    it = chute_checkpoint.restore(iter(_fixture_pipeline()), V1)
    assert next(it).tolist() == [-841, -462, -743, -893]


def test_the_pinned_file_is_what_todays_chute_writes_for_that_pipeline():
    pinned = json.loads((V2 / "process_0-of-1.json").read_text())
    it = iter(_fixture_pipeline())
    for _ in range(5):
        next(it)
    assert make_document(it) == pinned


def test_documents_leave_out_the_traits_that_read_descriptions():
    # A chute of format version 2 from before 2026-11-29 reads today's documents: the
    # traits it does not know (how to read a shuffle's length, a slice's stride) are
    # not written, and resharding takes them from this release's declarations.
    it = iter(chute.MapDataset.range(9).seed(0).shuffle()[1::3].to_iter_dataset())
    next(it)
    traits = make_document(it)["traits"]
    assert traits["shuffle"] == {"random": True} and traits["slice"] == {}


def test_a_version_1_file_upgrades_to_what_today_writes():
    # Version 2 added each op's traits; the fingerprint covers the pipeline alone.
    old = json.loads((V1 / "process_0-of-1.json").read_text())
    today = json.loads((V2 / "process_0-of-1.json").read_text())
    assert validate_document(old, "v1") == today


def test_the_fingerprint_hashes_structure_not_reprs():
    ds = chute.MapDataset.range(10).seed(1).shuffle().to_iter_dataset()
    a, b = iter(ds), iter(ds)
    next(a)
    assert make_document(a)["fingerprint"] == make_document(b)["fingerprint"]
    other = chute.MapDataset.range(11).seed(1).shuffle().to_iter_dataset()
    assert describe_pipeline(iter(other)) != describe_pipeline(a)


def test_worker_counts_and_buffer_sizes_are_not_part_of_the_fingerprint():
    def pipeline(workers, buffer):
        options = chute.MultiprocessingOptions(num_workers=workers)
        base = chute.MapDataset.range(10).to_iter_dataset(chute.ReadOptions(num_threads=workers))
        return base.map(abs).mp_prefetch(options, chunk_size=4).prefetch(buffer)

    prints = {fingerprint(describe_pipeline(pipeline(w, b).iter())) for w, b in [(0, 1), (0, 5)]}
    assert len(prints) == 1
    chunked = pipeline(0, 1)
    other = chunked.map(abs)  # A stage more does change it.
    assert fingerprint(describe_pipeline(iter(other))) not in prints


def test_the_chunk_size_of_mp_prefetch_is_part_of_the_fingerprint():
    ds = chute.MapDataset.range(10).to_iter_dataset()
    options = chute.MultiprocessingOptions(num_workers=0)
    a = describe_pipeline(iter(ds.mp_prefetch(options, chunk_size=4)))
    b = describe_pipeline(iter(ds.mp_prefetch(options, chunk_size=8)))
    assert a["stages"][-1] == {"op": "mp_prefetch", "params": {"chunk_size": 4}}
    assert fingerprint(a) != fingerprint(b)


def test_a_different_seed_names_the_stage_the_parameter_and_both_values():
    saved = iter(chute.MapDataset.range(10).shuffle(seed=3).to_iter_dataset())
    document = make_document(saved)
    fresh = iter(chute.MapDataset.range(10).shuffle(seed=4).to_iter_dataset())
    with pytest.raises(PipelineMismatchError) as caught:
        apply_document(fresh, document, where="ckpt")
    assert str(caught.value) == (
        "ckpt: the checkpoint was saved from a different pipeline than this iterator's:\n"
        "  - stage 1 (shuffle): parameter 'seed' differs: the checkpoint has 3, this "
        "pipeline has 4\n"
        "Restore into an iterator of the same pipeline, or pass check_pipeline=False to "
        "restore the position anyway."
    )
    apply_document(fresh, document, check_pipeline=False)  # Allowed when asked for.


def _neg(x):
    return -x


def test_a_different_function_is_named_by_module_and_qualname():
    document = make_document(iter(chute.MapDataset.range(3).to_iter_dataset().map(abs)))
    fresh = iter(chute.MapDataset.range(3).to_iter_dataset().map(_neg))
    with pytest.raises(PipelineMismatchError, match="parameter 'fn' differs") as caught:
        apply_document(fresh, document)
    message = str(caught.value)
    assert 'differs at .function: the checkpoint has "builtins.abs"' in message
    assert "test_format._neg" in message


def test_missing_and_extra_stages_and_other_sources_are_named():
    base = chute.MapDataset.range(5)
    document = make_document(iter(base.to_iter_dataset().map(abs)))
    with pytest.raises(PipelineMismatchError, match="this pipeline lacks: map"):
        apply_document(iter(base.to_iter_dataset()), document)
    with pytest.raises(PipelineMismatchError, match="stages the checkpoint lacks: filter"):
        apply_document(iter(base.to_iter_dataset().map(abs).filter(bool)), document)
    with pytest.raises(PipelineMismatchError, match=r"stage 0 \(source\): parameter 'source'"):
        apply_document(iter(chute.MapDataset.range(6).to_iter_dataset().map(abs)), document)
    with pytest.raises(PipelineMismatchError, match="stage 2: the checkpoint has 'map', this"):
        apply_document(iter(base.to_iter_dataset().filter(abs)), document)


def test_differences_inside_a_mix_name_the_input():
    def mixed(n):
        parts = [chute.MapDataset.range(4), chute.MapDataset.range(4).shuffle(seed=n)]
        return chute.MapDataset.mix(parts).to_iter_dataset()

    with pytest.raises(PipelineMismatchError, match=r"input \[1\]: stage 1 \(shuffle\)"):
        apply_document(iter(mixed(2)), make_document(iter(mixed(1))))


def test_a_data_loader_describes_its_source_sampler_and_operations():
    def loader(batch, workers):
        sampler = chute.IndexSampler(
            10, num_epochs=1, shard_options=chute.NoSharding(), shuffle=True, seed=0
        )
        ops = [chute.BatchTransform(batch)]
        return chute.DataLoader(
            data_source=chute.RangeSource(10),
            sampler=sampler,
            operations=ops,
            worker_count=workers,
        )

    document = make_document(iter(loader(2, 0)))
    assert [s["op"] for s in document["pipeline"]["stages"]] == [
        "data_source",
        "sampler",
        "operation",
        "chunks",
    ]
    apply_document(iter(loader(2, 0)), document)
    with pytest.raises(PipelineMismatchError, match=r"batch_size: the checkpoint has 2, this .* 3"):
        apply_document(iter(loader(3, 0)), document)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1))
def test_any_two_seeds_give_the_same_fingerprint_exactly_when_equal(a, b):
    def doc(seed):
        return make_document(iter(chute.MapDataset.range(3).shuffle(seed=seed).to_iter_dataset()))

    assert (doc(a)["fingerprint"] == doc(b)["fingerprint"]) == (a == b)


# --- validation: every bad input gets its own exact message ---------------------------


def _valid():
    return make_document(iter(chute.MapDataset.range(3).to_iter_dataset()))


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda d: d.pop("format"),
            'f: not a chute checkpoint: expected "format": '
            '"chute-iterator-state", found the keys '
            "['fingerprint', 'pipeline', 'process_count', 'process_index', 'state', 'traits', "
            "'version'].",
        ),
        (lambda d: d.update(version="1"), "f: 'version' must be an integer, got '1'."),
        (lambda d: d.pop("version"), "f: 'version' must be an integer, got None."),
        (
            lambda d: d.update(version=3),
            "f: written in checkpoint format version 3 by a newer "
            "chute; this chute reads versions 1 to 2. Upgrade chute to restore it.",
        ),
        (lambda d: d.update(version=0), "f: unknown checkpoint format version 0."),
        (lambda d: d.pop("state"), "f: the key 'state' is missing."),
        (lambda d: d.update(state=[1]), "f: 'state' must be of type dict, got [1]."),
        (
            lambda d: d.update(process_index=True),
            "f: 'process_index' must be of type int, got True.",
        ),
        (lambda d: d.update(fingerprint=5), "f: 'fingerprint' must be of type str, got 5."),
        (
            lambda d: d.update(process_index=1),
            "f: process_index must be in [0, process_count), got 1 of 1.",
        ),
        (lambda d: d.update(pipeline={"kind": "x"}), "f: 'pipeline' must have a list of 'stages'."),
        (lambda d: d.update(traits=[]), "f: 'traits' must be of type dict, got []."),
        (
            lambda d: d["traits"].update(map={"sorts": True}),
            "f: 'traits' must map each op to its traits: unknown trait 'sorts' (known: "
            "['begins_stream', 'changeable', 'chooses', 'chunk', 'consumer_only', 'drops', "
            "'elementwise', 'groups', 'holds', 'keeps_length', 'keeps_positions', 'merges', "
            "'names_splits', "
            "'numbered', 'opens', 'performance', 'random', 'records_skips', 'repeats', "
            "'shard', 'splits', 'stride']).",
        ),
        (lambda d: d["pipeline"]["stages"][0]["params"].update(source=1), None),
    ],
)
def test_invalid_documents_are_refused_with_a_clear_message(edit, message):
    document = _valid()
    edit(document)
    with pytest.raises(CheckpointFormatError) as caught:
        validate_document(document, "f")
    if message is None:  # An edited pipeline no longer matches its fingerprint.
        expected = fingerprint(document["pipeline"])
        message = (
            f"f: the fingerprint {document['fingerprint']!r} does not match the pipeline "
            f"description (hash {expected!r}): the file was edited or is corrupt."
        )
    assert str(caught.value) == message


def test_not_json_truncated_and_not_an_object_are_refused():
    text = json.dumps(_valid())
    with pytest.raises(CheckpointFormatError, match=r"^f: not valid JSON \(truncated or corrupt"):
        loads_document(text[: len(text) // 2], "f")
    with pytest.raises(CheckpointFormatError, match=r"^f: not valid JSON"):
        loads_document(b"\xff\xfe", "f")
    with pytest.raises(
        CheckpointFormatError, match=r"^f: a chute checkpoint is a JSON object, got a str\.$"
    ):
        loads_document('"hello"', "f")
    assert loads_document(text, "f") == json.loads(text)


def test_process_positions_are_checked():
    with pytest.raises(ValueError, match=r"process_index must be in \[0, process_count\), got "):
        make_document(iter(chute.MapDataset.range(3).to_iter_dataset()), 2, 2)


class _Wrapper:
    """A user's iterator around a chute one, with no description of its own."""

    def __init__(self, parent):
        self._parent = parent

    def __next__(self):
        return next(self._parent) * 2

    def get_state(self):
        return self._parent.get_state()

    def set_state(self, state):
        self._parent.set_state(state)


def test_wrappers_are_described_as_their_parent_plus_their_class():
    inner = iter(chute.MapDataset.range(5).shuffle(seed=1).to_iter_dataset())
    described = describe_pipeline(_Wrapper(inner))
    assert described["stages"][:-1] == describe_pipeline(inner)["stages"]
    assert described["stages"][-1] == {"op": "wrapper", "params": {"class": f"{__name__}._Wrapper"}}
    other = iter(chute.MapDataset.range(5).shuffle(seed=2).to_iter_dataset())
    with pytest.raises(PipelineMismatchError, match="parameter 'seed' differs"):
        apply_document(_Wrapper(other), make_document(_Wrapper(inner)))


def test_long_sequences_are_described_by_length_and_hash_of_scalars():
    records = [{"x": i} for i in range(100)]
    assert describe_value(records) == {"sequence": "list", "len": 100}
    numbers = describe_value(list(range(100)))
    assert numbers["len"] == 100
    assert numbers["blake2b"] != describe_value([*range(99), 100])["blake2b"]
    ds = chute.MapDataset.source(records).to_iter_dataset()
    assert describe_pipeline(iter(ds))["stages"][0]["params"]["source"] == {
        "sequence": "list",
        "len": 100,
    }
