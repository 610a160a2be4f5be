import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from chute_core import CorruptRecordError, RecordCodecError
from chute_sources import decode_record, encode_record, is_encoded_record
from chute_sources._codec import MAGIC
from chute_testing import assert_trees_equal

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
            record = decode_record(data)
        except CorruptRecordError:
            continue
        assert _payload_bytes(record) <= len(data)  # Never more than its bytes justify.


def _payload_bytes(tree) -> int:
    """The bytes of the arrays, scalars and bytes in a decoded tree."""
    if isinstance(tree, np.ndarray | np.generic):
        return tree.nbytes
    if isinstance(tree, bytes):
        return len(tree)
    if isinstance(tree, dict):
        return sum(_payload_bytes(k) + _payload_bytes(v) for k, v in tree.items())
    if isinstance(tree, list | tuple):
        return sum(_payload_bytes(item) for item in tree)
    return 0


def _crafted(header: bytes, data: bytes = b"") -> bytes:
    head = MAGIC + len(header).to_bytes(4, "little") + header
    return head + b"\0" * (-len(head) % 16) + data


@settings(max_examples=200, deadline=None)
@given(trees)
def test_a_record_decodes_to_at_most_its_own_bytes_of_payload(tree):
    data = encode_record(tree)
    assert _payload_bytes(decode_record(data)) <= len(data)


@pytest.mark.parametrize("dtype", ["|S0", "<U0", "|V0"])
def test_a_zero_size_dtype_in_a_crafted_header_is_refused(dtype):
    # 300 million elements of 0 bytes in a 64-byte record (a copy would take 300 MB).
    data = _crafted(f'["a","{dtype}",[300000000],0]'.encode())
    assert len(data) <= 64
    with pytest.raises(CorruptRecordError, match="has elements of 0 bytes"):
        decode_record(data)


def test_zero_size_arrays_are_not_encoded_and_empty_scalars_are():
    with pytest.raises(RecordCodecError, match=r"record\['x'\]: .* elements of 0 bytes"):
        encode_record({"x": np.empty(3, "V0")})
    empty = [np.bytes_(b""), np.str_("")]  # Scalars of 'S0' and 'U0': one value each.
    assert_trees_equal(decode_record(encode_record(empty)), empty)


def test_payloads_that_overlap_are_refused():
    # 1000 arrays viewing one 8 KiB block: 8 MB once stacked by a batch.
    views = ",".join('["a","<f8",[1024],0]' for _ in range(1000))
    data = _crafted(f'["l",{views}]'.encode(), bytes(8192))
    with pytest.raises(CorruptRecordError, match="overlaps an earlier one"):
        decode_record(data)
    one = _crafted(b'["l",["a","<f8",[1024],0]]', bytes(8192))
    assert decode_record(one)[0].shape == (1024,)


def test_a_header_over_the_limit_is_refused_and_the_limit_can_be_raised(monkeypatch):
    record = encode_record(["word"] * 1000)  # A header of about 8 KB.
    monkeypatch.setenv("CHUTE_MAX_RECORD_HEADER_BYTES", "4096")
    with pytest.raises(CorruptRecordError, match=r"more than the limit of 4096 \(CHUTE_MAX_"):
        decode_record(record)
    monkeypatch.setenv("CHUTE_MAX_RECORD_HEADER_BYTES", "65536")
    assert decode_record(record) == ["word"] * 1000
    monkeypatch.setenv("CHUTE_MAX_RECORD_HEADER_BYTES", "lots")
    with pytest.raises(RecordCodecError, match="must be a positive number of bytes"):
        decode_record(record)


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
