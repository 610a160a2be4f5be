"""Crafted and damaged state documents: a chute error naming what is wrong, never a bare one.

A document may carry a valid fingerprint over a pipeline description nobody wrote (the
fingerprint is a checksum, not a signature), so every reader of a document checks the
shape of what it reads: the stages, their parameters and the positions in the state.
"""

import copy
import json
import operator
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import chute
from chute_checkpoint import (
    CheckpointFormatError,
    PipelineMismatchError,
    ReshardError,
    apply_document,
    fingerprint,
    loads_document,
    make_document,
    pipeline_differences,
    reshard,
    reshard_for,
    restore,
    validate_document,
)
from chute_core import InvalidStateError

_WORKERS = chute.MultiprocessingOptions(num_workers=0)
MAX_PROCESS_COUNT = 1_000_000  # The bound on process counts (chute_checkpoint._format).


def _streamed(index, count):
    ds = chute.MapDataset.range(40).seed(4).shuffle().shard(index, count).to_iter_dataset()
    return ds.map(abs).batch(2)


def _batched(index, count):
    ds = chute.MapDataset.range(40).seed(4).shuffle().shard(index, count).batch(2)
    return ds.to_iter_dataset().mp_prefetch(_WORKERS, chunk_size=4)


def _global(index, count):
    return chute.MapDataset.range(40).seed(4).shuffle().to_iter_dataset().filter(operator.truth)


def _mixed(index, count):
    parts = [chute.MapDataset.range(n).shard(index, count).to_iter_dataset() for n in (20, 30)]
    return chute.IterDataset.mix(parts, [0.5, 0.5])


PIPELINES = {"streamed": _streamed, "batched": _batched, "global": _global, "mixed": _mixed}


def _documents(pipeline, count=2, steps=2):
    iterators = [iter(pipeline(i, count)) for i in range(count)]
    for it in iterators:
        for _ in range(steps):
            next(it)
    return [json.loads(json.dumps(make_document(it, i, count))) for i, it in enumerate(iterators)]


_SAVED = {name: _documents(pipeline) for name, pipeline in PIPELINES.items()}


def _refingerprinted(document):
    document["fingerprint"] = fingerprint(document["pipeline"])
    return document


def _valid():
    return copy.deepcopy(_SAVED["streamed"][0])


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda stages: stages.__setitem__(0, 1),
            "f: pipeline stage 0 must be an object with 'op' and 'params', got 1.",
        ),
        (
            lambda stages: stages.__setitem__(2, "shuffle"),
            "f: pipeline stage 2 must be an object with 'op' and 'params', got 'shuffle'.",
        ),
        (
            lambda stages: stages[1].update(op=1),
            "f: pipeline stage 1: 'op' must be a string, got 1.",
        ),
        (
            lambda stages: stages[1].pop("op"),
            "f: pipeline stage 1: 'op' must be a string, got None.",
        ),
        (
            lambda stages: stages[1].update(params=[4]),
            "f: pipeline stage 1 (seed): 'params' must be an object, got [4].",
        ),
        (
            lambda stages: stages[1].pop("params"),
            "f: pipeline stage 1 (seed): 'params' must be an object, got None.",
        ),
        (
            lambda stages: stages[0].update(inputs=3),
            "f: pipeline stage 0 (source): 'inputs' must be a list of lists of stages, got 3.",
        ),
        (
            lambda stages: stages[0].update(inputs=[{"op": "x", "params": {}}]),
            "f: pipeline stage 0 (source): 'inputs' must be a list of lists of stages, got "
            "[{'op': 'x', 'params': {}}].",
        ),
        (
            lambda stages: stages[0].update(inputs=[[{"op": "x", "params": {}}, 5]]),
            "f: pipeline stage 0 (source) input [0] stage 1 must be an object with 'op' and "
            "'params', got 5.",
        ),
    ],
)
def test_a_crafted_pipeline_with_a_valid_fingerprint_is_refused_naming_the_stage(
    edit, message, tmp_path
):
    document = _valid()
    edit(document["pipeline"]["stages"])
    _refingerprinted(document)
    with pytest.raises(CheckpointFormatError) as caught:
        validate_document(document, "f")
    assert str(caught.value) == message
    path = tmp_path / "process_0-of-2.json"
    path.write_text(json.dumps(document))
    with pytest.raises(CheckpointFormatError) as caught:
        restore(iter(_streamed(0, 2)), tmp_path, process_index=0, process_count=2)
    assert str(caught.value) == f"{path}{message[1:]}"


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_numbers_that_are_not_finite_are_not_json(number):
    text = json.dumps(_valid()).replace('"position": 4', f'"position": {number}')
    assert number in text
    with pytest.raises(CheckpointFormatError) as caught:
        loads_document(text, "f")
    assert str(caught.value) == (
        f"f: not valid JSON: the number {number} is not finite (NaN and infinities are no "
        "JSON numbers); the file is damaged or was not written by chute."
    )


def test_a_document_given_directly_is_checked_before_use():
    it = iter(_streamed(0, 2))
    with pytest.raises(CheckpointFormatError) as caught:
        apply_document(it, {"state": {"position": 1}}, where="mine")
    assert str(caught.value) == (
        'mine: not a chute checkpoint: expected "format": "chute-iterator-state", found the '
        "keys ['state']."
    )
    with pytest.raises(CheckpointFormatError) as caught:
        pipeline_differences({"stages": [1]}, _valid()["pipeline"])
    assert str(caught.value) == (
        "the checkpoint: pipeline stage 0 must be an object with 'op' and 'params', got 1."
    )


def _edited(documents, number, edit):
    documents = copy.deepcopy(documents)
    edit(documents[number])
    _refingerprinted(documents[number])
    return documents


def _set_param(at, name, value):
    def edit(document):
        document["pipeline"]["stages"][at]["params"][name] = value

    return edit


def _drop_param(at, name):
    def edit(document):
        del document["pipeline"]["stages"][at]["params"][name]

    return edit


@pytest.mark.parametrize(
    ("pipeline", "edit", "message"),
    [
        (
            "streamed",
            _set_param(3, "shard_index", "0"),
            "state 0: stage 3 (shard): the parameter 'shard_index' must be an integer of at "
            "least 0, got '0'.",
        ),
        (
            "streamed",
            _drop_param(3, "shard_index"),
            "state 0: stage 3 (shard): the parameter 'shard_index' must be an integer of at "
            "least 0, got nothing (it is missing).",
        ),
        (
            "streamed",
            _set_param(3, "shard_count", 0),
            "state 0: stage 3 (shard): the parameter 'shard_count' must be an integer of at "
            "least 1, got 0.",
        ),
        (
            "streamed",
            _set_param(3, "shard_count", True),
            "state 0: stage 3 (shard): the parameter 'shard_count' must be an integer of at "
            "least 1, got True.",
        ),
        (
            "batched",
            _set_param(4, "batch_size", 0),
            "state 0: stage 4 (batch): the parameter 'batch_size' must be an integer of at "
            "least 1, got 0.",
        ),
        (
            "batched",
            _set_param(4, "batch_size", 2.5),
            "state 0: stage 4 (batch): the parameter 'batch_size' must be an integer of at "
            "least 1, got 2.5.",
        ),
        (
            "batched",
            _set_param(6, "chunk_size", "4"),
            "state 0: stage 6 (mp_prefetch): the parameter 'chunk_size' must be an integer of "
            "at least 1, got '4'.",
        ),
    ],
)
def test_reshard_refuses_malformed_parameters_naming_state_stage_and_parameter(
    pipeline, edit, message
):
    documents = _edited(_edited(_SAVED[pipeline], 0, edit), 1, edit)  # Crafted alike.
    with pytest.raises(CheckpointFormatError) as caught:
        reshard(documents, 1)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    "edit",
    [
        lambda document: document["pipeline"]["stages"].pop(3),  # No shard stage there.
        lambda document: document["pipeline"]["stages"].__delitem__(slice(3, None)),
    ],
)
def test_reshard_refuses_a_state_of_a_pipeline_without_the_shard_stage(edit):
    documents = _edited(_SAVED["streamed"], 1, edit)
    with pytest.raises(ReshardError) as caught:
        reshard(documents, 1)
    assert str(caught.value) == (
        "state 1 is of a different pipeline than state 0 (beyond the shard index); reshard "
        "only the states of one training run."
    )


@pytest.mark.parametrize("position", ["4", 4.0, True, -4, None, [4], 2**63, 10**30])
def test_reshard_refuses_positions_that_are_not_non_negative_integers(position):
    def edit(document):
        document["state"]["parent"]["parent"]["position"] = position

    documents = _edited(_SAVED["streamed"], 0, edit)
    documents[1]["state"]["parent"]["parent"]["position"] = position
    with pytest.raises(CheckpointFormatError) as caught:
        reshard(documents, 1)
    assert str(caught.value) == (
        f"state 0: the stream position {{'position': {position!r}}} must hold non-negative "
        f"integers (at most {sys.maxsize}), got 'position': "
        f"{position!r}; the file is damaged or was not written by chute."
    )


def test_reshard_refuses_an_element_count_that_is_no_integer():
    def edit(document):
        document["state"]["parent"]["index"] = "four"

    documents = _edited(_SAVED["streamed"], 0, edit)
    with pytest.raises(CheckpointFormatError) as caught:
        reshard(documents, 1)
    assert str(caught.value) == (
        "state 0: the state {'parent': {'position': 4}, 'index': 'four'} cannot be moved to "
        "another position (invalid literal for int() with base 10: 'four'); the file is "
        "damaged or was not written by chute."
    )


def test_reshard_refuses_a_process_count_over_the_bound():
    with pytest.raises(ReshardError) as caught:
        reshard(_SAVED["streamed"], MAX_PROCESS_COUNT + 1)
    assert str(caught.value) == (
        "process_count must be at most 1,000,000 (more processes than any JAX cluster runs), "
        f"got {MAX_PROCESS_COUNT + 1}."
    )


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for number, item in enumerate(value):
            yield from _paths(item, (*prefix, number))


_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=4),
    st.sampled_from(["shard", "batch", "mp_prefetch", "source", "to_iter_dataset", "parent"]),
)
_JSON = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)
_MUTATIONS = ("replace", "delete", "wrap in a list", "values as a list", "empty")
_ALLOWED = (CheckpointFormatError, InvalidStateError, PipelineMismatchError, ReshardError)


def _mutate(document, path, how, value):
    if not path:
        return value if how == "replace" else [document]
    parent = document
    for key in path[:-1]:
        parent = parent[key]
    key, item = path[-1], parent[path[-1]]
    if how == "delete":
        del parent[key]
    elif how == "replace":
        parent[key] = value
    elif how == "wrap in a list":
        parent[key] = [item]
    elif how == "values as a list":
        parent[key] = list(item.values()) if isinstance(item, dict) else {"0": item}
    else:
        parent[key] = type(item)() if isinstance(item, dict | list | str) else 0
    return document


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(sorted(PIPELINES)),
    st.integers(0, 1),
    st.data(),
    st.sampled_from(_MUTATIONS),
    _JSON,
    st.booleans(),
)
def test_any_damaged_document_gives_a_chute_error_never_a_bare_one(
    name, number, data, how, value, refingerprint
):
    documents = copy.deepcopy(_SAVED[name])
    paths = [path for path in _paths(documents[number]) if path[:1] != ("fingerprint",)]
    path = data.draw(st.sampled_from(paths))
    documents[number] = _mutate(documents[number], path, how, value)
    if refingerprint and isinstance(documents[number], dict):
        try:
            _refingerprinted(documents[number])
        except (AttributeError, KeyError, TypeError, ValueError):
            pass  # No pipeline to hash: the document stays as damaged.
    text = json.dumps(documents[number])
    pipeline = PIPELINES[name]
    attempts = [
        lambda: apply_document(iter(pipeline(number, 2)), loads_document(text, "f")),
        lambda: apply_document(iter(pipeline(number, 2)), documents[number]),
        lambda: reshard(documents, 1),
        lambda: reshard(documents, 4),
        lambda: reshard_for(documents, iter(pipeline(0, 1)), process_index=0, process_count=1),
    ]
    for attempt in attempts:
        try:
            attempt()
        except _ALLOWED:
            pass


def test_restore_names_the_folder_and_its_files_for_a_crafted_state_it_reshards(tmp_path):
    for document in _edited(
        _edited(_SAVED["streamed"], 0, _set_param(3, "shard_count", "2")),
        1,
        _set_param(3, "shard_count", "2"),
    ):
        name = f"process_{document['process_index']}-of-2.json"
        (tmp_path / name).write_text(json.dumps(document))
    with pytest.raises(CheckpointFormatError) as caught:
        restore(iter(_streamed(0, 1)), tmp_path, process_index=0, process_count=1)
    assert str(caught.value) == (
        f"{tmp_path} holds the states of 2 process(es) (state i is process_<i>-of-2.json): "
        "state 0: stage 3 (shard): the parameter 'shard_count' must be an integer of at least "
        "1, got '2'."
    )
