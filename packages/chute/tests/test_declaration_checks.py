"""Every argument of the fluent API is checked when the pipeline is declared.

One rule for integers (Python and NumPy integers accepted, bools and floats refused,
values index-sized) and for mix weights (positive finite numbers); the errors are
`chute.ArgumentTypeError` / `chute.InvalidArgumentError` (a `TypeError` / `ValueError`)
and name the method and the argument. Nothing here is iterated.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chute
from chute import IterDataset, MapDataset

_M = MapDataset.range(10)
_I = _M.to_iter_dataset()


def _to_device(**options: Any) -> Any:
    return _I.batch(2).to_device(jax.devices()[0], **options)


# (owner in the message, argument, smallest accepted value, largest, declare with value)
INTEGER_ARGUMENTS: list[tuple[str, str, int, int, Callable[[Any], Any]]] = [
    ("seed", "seed", 0, 2**64 - 1, lambda v: _M.seed(v)),
    ("seed", "seed", 0, 2**64 - 1, lambda v: _I.seed(v)),
    ("shuffle", "seed", 0, 2**64 - 1, lambda v: _M.shuffle(seed=v)),
    ("random_map", "seed", 0, 2**64 - 1, lambda v: _M.random_map(lambda x, r: x, seed=v)),
    ("random_map", "seed", 0, 2**64 - 1, lambda v: _I.random_map(lambda x, r: x, seed=v)),
    ("window_shuffle", "seed", 0, 2**64 - 1, lambda v: _I.window_shuffle(2, seed=v)),
    ("MapDataset.repeat", "num_epochs", 0, 2**40, lambda v: _M.repeat(v)),
    ("IterDataset.repeat", "num_epochs", 0, 2**62, lambda v: _I.repeat(v)),
    ("IterDataset.limit", "count", 0, 2**62, lambda v: _I.limit(v)),
    ("MapDataset.limit", "count", 0, 2**62, lambda v: _M.limit(v)),
    ("MapDataset.shard", "shard_index", 0, 0, lambda v: _M.shard(v, 2**62)),
    ("MapDataset.shard", "shard_count", 1, 2**62, lambda v: _M.shard(0, v)),
    ("MapDataset.batch", "batch_size", 1, 2**62, lambda v: _M.batch(v)),
    ("flat_map", "max_fan_out", 1, 2**40, lambda v: _M.flat_map(lambda x: [x], max_fan_out=v)),
    ("IterDataset.batch", "batch_size", 1, 2**62, lambda v: _I.batch(v)),
    ("IterDataset.rebatch", "batch_size", 1, 2**62, lambda v: _I.batch(2).rebatch(v)),
    ("IterDataset.window_shuffle", "window_size", 1, 2**62, lambda v: _I.window_shuffle(v, 0)),
    ("IterDataset.pack", "length", 1, 2**62, lambda v: _I.pack(v)),
    ("IterDataset.pack", "length", 1, 2**62, lambda v: _I.pack(v, method="concat_split")),
    ("IterDataset.pack", "length['t']", 1, 2**62, lambda v: _I.pack({"t": v})),
    ("IterDataset.pack", "num_packing_bins", 1, 2**62, lambda v: _I.pack(8, num_packing_bins=v)),
    (
        "IterDataset.pack",
        "max_sequences_per_bin",
        1,
        2**62,
        lambda v: _I.pack(8, method="best_fit", max_sequences_per_bin=v),
    ),
    ("IterDataset.interleave", "cycle_length", 1, 2**62, lambda v: IterDataset.interleave([_I], v)),
    ("IterDataset.prefetch", "buffer_size", 0, 2**62, lambda v: _I.prefetch(v)),
    ("IterDataset.mp_prefetch", "chunk_size", 1, 2**62, lambda v: _I.mp_prefetch(chunk_size=v)),
    ("IterDataset.to_device", "cpu_buffer_size", 0, 2**62, lambda v: _to_device(cpu_buffer_size=v)),
    (
        "IterDataset.to_device",
        "device_buffer_size",
        1,
        2**62,
        lambda v: _to_device(device_buffer_size=v),
    ),
    ("ReadOptions", "num_threads", 0, 2**62, lambda v: chute.ReadOptions(num_threads=v)),
    (
        "ReadOptions",
        "prefetch_buffer_size",
        0,
        2**62,
        lambda v: _M.to_iter_dataset(chute.ReadOptions(prefetch_buffer_size=v)),
    ),
    ("ErrorBudget", "max_failures", 0, 2**62, lambda v: _I.skip_errors(v, max_failure_rate=0.5)),
    (
        "MultiprocessingOptions",
        "num_workers",
        0,
        2**62,
        lambda v: chute.MultiprocessingOptions(num_workers=v),
    ),
]
IDS = [f"{owner}-{name}-{number}" for number, (owner, name, *_) in enumerate(INTEGER_ARGUMENTS)]


def _refused(declare: Callable[[Any], Any], value: object, kind: type[Exception]) -> str:
    with pytest.raises(kind) as caught:
        declare(value)
    assert type(caught.value) is kind
    return str(caught.value)


@pytest.mark.parametrize(("owner", "name", "low", "high", "declare"), INTEGER_ARGUMENTS, ids=IDS)
@pytest.mark.parametrize("value", [True, False, np.bool_(True), 2.0, math.nan, "2", None])
def test_a_non_integer_argument_is_refused_naming_the_method_and_argument(
    owner, name, low, high, declare, value
):
    if value is None and name in {
        "seed",
        "num_epochs",
        "chunk_size",
        "shard_count",
        "max_fan_out",
        "num_packing_bins",
        "max_sequences_per_bin",
    }:
        return  # None means something there (no seed, endless, default, ShardOptions).
    if value is None and (owner, name) == ("MultiprocessingOptions", "num_workers"):
        assert declare(value) == chute.MultiprocessingOptions()  # Not given: autotuned.
        return
    message = _refused(declare, value, chute.ArgumentTypeError)
    assert message == f"{owner}: {name} must be an int, got {type(value).__name__} {value!r}."


@pytest.mark.parametrize(("owner", "name", "low", "high", "declare"), INTEGER_ARGUMENTS, ids=IDS)
def test_an_integer_out_of_range_is_refused_naming_the_method_and_argument(
    owner, name, low, high, declare
):
    message = _refused(declare, low - 1, chute.InvalidArgumentError)
    assert message.startswith(f"{owner}: {name} must be ")
    assert message.endswith(f", got {low - 1}.")
    message = _refused(declare, 10**30, chute.InvalidArgumentError)
    assert message.startswith(f"{owner}: {name} must be ")
    assert message.endswith(f", got {10**30}.")


@pytest.mark.parametrize(("owner", "name", "low", "high", "declare"), INTEGER_ARGUMENTS, ids=IDS)
@settings(deadline=None, max_examples=30)  # The first to_device starts jax's backend.
@given(data=st.data())
def test_python_and_numpy_integers_in_range_are_accepted(owner, name, low, high, declare, data):
    value = data.draw(st.integers(low, high))
    declare(value)
    small = data.draw(st.integers(low, min(high, 2**31 - 1)))
    kind = data.draw(st.sampled_from([np.int64, np.int32, np.uint32]))
    declare(kind(small))


@pytest.mark.parametrize("value", [10**30, -(10**30), True, 1.5])
def test_slice_bounds_are_checked_when_the_slice_is_taken(value):
    kind = (
        chute.ArgumentTypeError if isinstance(value, bool | float) else chute.InvalidArgumentError
    )
    for selection in (slice(value, None), slice(None, value), slice(None, None, value)):
        with pytest.raises(kind, match=r"^SliceMap: slice (start|stop|step) must be "):
            _M[selection]


def test_a_repeat_longer_than_len_can_count_is_refused_not_saturated():
    with pytest.raises(chute.LengthOverflowError) as caught:
        _M.repeat(2**62)
    assert isinstance(caught.value, OverflowError)
    assert str(caught.value).startswith(
        "RepeatMap (repeat): 10 elements x 4611686018427387904 epochs is more than len() can count"
    )
    assert len(_M.repeat(2**62 // 10)) == 2**62 // 10 * 10
    expected = r"^RangeSource: range\(0, 10{30}\) has more than sys.maxsize elements"
    with pytest.raises(chute.LengthOverflowError, match=expected):
        MapDataset.range(10**30)


@pytest.mark.parametrize("mix", [MapDataset.mix, IterDataset.mix])
@pytest.mark.parametrize(
    ("weights", "kind", "text"),
    [
        ([math.nan, 1], chute.InvalidArgumentError, "weights[0] must be positive and finite"),
        ([1, -1], chute.InvalidArgumentError, "weights[1] must be positive and finite"),
        ([math.inf, 1], chute.InvalidArgumentError, "weights[0] must be positive and finite"),
        ([0, 1], chute.InvalidArgumentError, "weights[0] must be positive and finite"),
        ([True, 1], chute.ArgumentTypeError, "weights[0] must be a real number"),
        (["1", 1], chute.ArgumentTypeError, "weights[0] must be a real number"),
        ([1], chute.InvalidArgumentError, "got 1 weights for 2 components"),
    ],
)
def test_bad_mix_weights_are_refused_when_declared(mix, weights, kind, text):
    parts = [_M, _M] if mix == MapDataset.mix else [_I, _I]
    owner = "MapDataset.mix" if mix == MapDataset.mix else "IterDataset.mix"
    with pytest.raises(kind) as caught:
        mix(parts, weights)
    assert type(caught.value) is kind
    assert str(caught.value).startswith(f"{owner}: {text}")


def test_numpy_integers_are_stored_as_python_ints():
    assert repr(_M.batch(np.int64(4))).endswith(".batch(batch_size=4, drop_remainder=False)")
    assert repr(_I.window_shuffle(np.int64(3), seed=np.uint64(5))).endswith(
        ".window_shuffle(window_size=3, seed=5)"
    )
