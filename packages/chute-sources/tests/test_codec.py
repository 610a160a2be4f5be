import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from chute_sources import (
    CorruptRecordError,
    RecordCodecError,
    decode_record,
    encode_record,
    is_encoded_record,
)
from chute_sources._codec import MAGIC
from chute_sources.testing import assert_trees_equal

scalar_dtypes = st.one_of(
    hnp.boolean_dtypes(),
    hnp.integer_dtypes(endianness="="),
    hnp.unsigned_integer_dtypes(endianness="="),
    hnp.floating_dtypes(endianness="="),
    hnp.complex_number_dtypes(endianness="="),
    hnp.byte_string_dtypes(endianness="="),
    hnp.unicode_string_dtypes(endianness="="),
    hnp.datetime64_dtypes(endianness="="),
)
arrays = hnp.arrays(scalar_dtypes, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0))
leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(),
    st.binary(),
    arrays,
    arrays.filter(lambda a: a.ndim == 0).map(lambda a: a[()]),
)
trees = st.recursive(
    leaves,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.lists(children, max_size=4).map(tuple),
        st.dictionaries(st.text(max_size=5), children, max_size=4),
        st.dictionaries(st.integers(), children, max_size=3),
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(trees)
def test_round_trip_is_exact(tree):
    data = encode_record(tree)
    assert is_encoded_record(data)
    assert_trees_equal(decode_record(data), tree)


def test_float_specials_and_big_ints_round_trip():
    record = [math.inf, -math.inf, -0.0, 2**200, -(2**70), 1e-310]
    decoded = decode_record(encode_record(record))
    assert decoded[:2] == [math.inf, -math.inf]
    assert math.copysign(1, decoded[2]) == -1
    assert decoded[3:] == record[3:]
    assert math.isnan(decode_record(encode_record(math.nan)))


def test_arrays_are_read_only_views_without_copy():
    data = encode_record({"x": np.arange(1000, dtype=np.float64)})
    x = decode_record(data)["x"]
    assert not x.flags.writeable
    assert x.base is not None
    with pytest.raises(ValueError, match="read-only"):
        x[0] = 1.0


def test_arrays_are_16_byte_aligned_in_the_record():
    data = encode_record({"a": np.zeros(3, np.uint8), "b": np.ones(5, np.float64)})
    record = decode_record(data)
    base = np.frombuffer(data, np.uint8).ctypes.data
    for leaf in record.values():
        assert (leaf.ctypes.data - base) % 16 == 0


def test_non_contiguous_and_big_endian_arrays_keep_values_and_dtype():
    strided = np.arange(20, dtype=np.int32).reshape(4, 5)[:, ::2]
    big = np.arange(4, dtype=">u4")
    out = decode_record(encode_record([strided, big]))
    assert_trees_equal(out, [np.ascontiguousarray(strided), big])


@pytest.mark.parametrize(
    ("value", "where"),
    [
        ({"a": [1, object()]}, "record['a'][1]"),
        ({"a": np.array([1, None], dtype=object)}, "record['a']"),
        (np.zeros(2, dtype=[("x", "i4")]), "record"),
        ({1, 2}, "record"),
    ],
)
def test_unsupported_values_raise_naming_the_path(value, where):
    with pytest.raises(RecordCodecError) as info:
        encode_record(value)
    assert str(info.value).startswith(where + ":")


def test_foreign_bytes_are_rejected_with_a_hint():
    with pytest.raises(CorruptRecordError, match=r"not a chute record.*decode=False"):
        decode_record(b"\x0a\x05hello world, a protobuf")


def test_too_short_and_truncated_records_raise():
    data = encode_record({"x": np.arange(100)})
    with pytest.raises(CorruptRecordError, match=r"at least 12 bytes"):
        decode_record(data[:5])
    for cut in (len(MAGIC) + 4 + 3, len(data) - 1):
        with pytest.raises(CorruptRecordError, match=r"truncated|runs past"):
            decode_record(data[:cut])


def test_payload_offsets_outside_the_record_raise():
    good = encode_record({"x": np.arange(4, dtype=np.uint8)})
    assert decode_record(good)["x"].tolist() == [0, 1, 2, 3]
    body = b'["d",{"x":["a","|u1",[4],99]}]'  # The payload really sits at offset 0.
    head = MAGIC + len(body).to_bytes(4, "little") + body
    data = head + b"\0" * (-len(head) % 16) + bytes(range(4)) + b"\0" * 12
    with pytest.raises(CorruptRecordError, match="runs past"):
        decode_record(data)


def test_object_dtype_in_a_crafted_header_is_refused():
    body = b'["a","|O",[1],0]'
    data = MAGIC + len(body).to_bytes(4, "little") + body + b"\0" * 64
    with pytest.raises(CorruptRecordError, match="not allowed"):
        decode_record(data)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.integers(min_value=0, max_value=400))
def test_random_and_mutated_bytes_raise_chute_errors_only(noise, position):
    # Random bytes behind the magic, and one-byte mutations of a real record.
    for data in (MAGIC + noise, _mutate(position, noise)):
        try:
            decode_record(data)
        except CorruptRecordError:
            pass


def _mutate(position: int, noise: bytes) -> bytes:
    data = bytearray(encode_record({"image": np.arange(12, dtype=np.int16), "label": "cat"}))
    data[position % len(data)] = noise[0] if noise else 0
    return bytes(data)


def test_decoding_never_unpickles():
    import pickle

    class Boom:
        def __reduce__(self):
            return (print, ("pwned",))

    with pytest.raises(CorruptRecordError):
        decode_record(pickle.dumps(Boom()))
