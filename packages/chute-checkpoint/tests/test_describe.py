"""Structural descriptions of values, and iterators that describe themselves (or not).

From test_format.py, which moved to tests/checkpoint (its other tests
describe pipelines built with `chute.MapDataset`); these need only the layers below.
"""

import copy
import dataclasses
import functools
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chute_checkpoint
from chute_checkpoint import describe_pipeline, describe_value, fingerprint, make_document
from chute_sources import NumpySource
from chute_transforms import MapTransform


@dataclasses.dataclass(frozen=True)
class _Scale:
    factor: float

    def __call__(self, x):
        return x * self.factor


class _Offset(MapTransform):
    def __init__(self, offset):
        self.offset = offset
        self._calls = 0  # Private state that changes while running is not structure.

    def map(self, element):
        self._calls += 1
        return element + self.offset


def test_values_are_described_by_structure():
    assert describe_value(_Scale(2.0)) == {"class": f"{__name__}._Scale", "fields": {"factor": 2.0}}
    offset = _Offset(3)
    before = describe_value(offset)
    offset.map(1)
    assert (
        describe_value(offset)
        == before
        == {"class": f"{__name__}._Offset", "attributes": {"offset": 3}}
    )
    small = np.arange(4)
    assert describe_value(small)["blake2b"] != describe_value(small + 1)["blake2b"]
    big = np.zeros(2**18, np.int64)  # 2 MiB: dtype and shape only.
    assert describe_value(big) == {"array": "int64", "shape": [2**18]}
    assert describe_value(float("nan")) == "nan"
    assert describe_value(functools.partial(max, key=abs)) == {
        "partial": {"function": "builtins.max"},
        "args": [],
        "keywords": {"key": {"function": "builtins.abs"}},
    }
    assert describe_value(list(range(2000)))["len"] == 2000


def test_data_files_are_described_by_name_and_size(tmp_path):
    path = tmp_path / "part-0.bin"
    path.write_bytes(b"x" * 10)
    assert describe_value(str(path)) == {"file": "part-0.bin", "size": 10}
    assert describe_value(path) == {"file": "part-0.bin", "size": 10}
    source = NumpySource(_save_npy(tmp_path))
    described = describe_value(source)
    assert described["len"] == 3
    assert {"file": "data.npy", "size": (tmp_path / "data.npy").stat().st_size} in (
        described["attributes"].values()
    )


def _save_npy(folder):
    np.save(folder / "data.npy", np.arange(3))
    return folder / "data.npy"


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=4), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=100, deadline=None)
@given(_JSON)
def test_descriptions_of_json_values_are_themselves_and_fingerprints_are_stable(value):
    described = describe_value(value)
    assert described == json.loads(json.dumps(described))
    pipeline = {"kind": "x", "stages": [{"op": "op", "params": {"p": described}}]}
    assert fingerprint(pipeline) == fingerprint(copy.deepcopy(pipeline))


def test_a_state_that_is_not_json_is_refused_when_saving():
    class Odd:
        def __next__(self):
            return 1

        def get_state(self):
            return {"position": np.int64(3)}

        def set_state(self, state):
            pass

    with pytest.raises(chute_checkpoint.CheckpointError, match="the state of Odd is not plain"):
        make_document(Odd())
    assert describe_pipeline(Odd())["kind"] == "iterator"


def test_a_malformed_description_is_refused():
    class Odd:
        chute_pipeline = staticmethod(lambda: ["not", "a", "dict"])

    with pytest.raises(TypeError) as caught:
        describe_pipeline(Odd())
    assert str(caught.value) == (
        "Odd.chute_pipeline must describe the pipeline as {'kind': ..., 'stages': [...]}, got "
        "['not', 'a', 'dict']."
    )
