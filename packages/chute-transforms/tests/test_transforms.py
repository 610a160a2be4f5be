"""The transform base classes and the adapters that accept plain callables."""

import pickle

import numpy as np
import pytest

from chute_transforms import (
    BatchTransform,
    FilterTransform,
    FlatMapTransform,
    MapTransform,
    MapWithIndexTransform,
    RandomMapTransform,
    TransformTypeError,
    as_filter_fn,
    as_flat_map_fn,
    as_map_fn,
    as_map_with_index_fn,
    as_random_map_fn,
)


class AddOne(MapTransform):
    def map(self, element):
        return element + 1


class Indexed(MapWithIndexTransform):
    def map_with_index(self, index, element):
        return index * 10 + element


class Jitter(RandomMapTransform):
    def random_map(self, element, rng):
        return element + rng.integers(0, 100)


class Odd(FilterTransform):
    def filter(self, element):
        return element % 2 == 1


class Twice(FlatMapTransform):
    max_fan_out = 2

    def flat_map(self, element):
        return [element, element]


class NoFanOut(FlatMapTransform):
    def flat_map(self, element):
        return [element]


def _double(x):
    return 2 * x


@pytest.mark.parametrize(
    "cls", [MapTransform, MapWithIndexTransform, RandomMapTransform, FilterTransform]
)
def test_base_classes_are_abstract_with_one_method(cls):
    with pytest.raises(TypeError, match="abstract"):
        cls()
    assert len(cls.__abstractmethods__) == 1


def test_adapters_return_the_bound_method_of_a_transform():
    assert as_map_fn(AddOne())(1) == 2
    assert as_map_with_index_fn(Indexed())(3, 1) == 31
    assert as_filter_fn(Odd())(3) is True
    fn, fan_out = as_flat_map_fn(Twice())
    assert (list(fn(5)), fan_out) == ([5, 5], 2)
    rng_fn = as_random_map_fn(Jitter())
    assert rng_fn(0, np.random.default_rng(1)) == rng_fn(0, np.random.default_rng(1))


def test_adapters_accept_plain_callables_unchanged():
    assert as_map_fn(_double) is _double
    assert as_filter_fn(bool) is bool
    assert as_flat_map_fn(_double)[1] is None
    function = as_random_map_fn(lambda x, rng: x)
    assert function(7, np.random.default_rng(0)) == 7


@pytest.mark.parametrize(
    ("adapter", "obj", "message"),
    [
        (as_map_fn, Odd(), r"map needs a MapTransform .* got Odd .* belongs to filter"),
        (as_filter_fn, AddOne(), r"filter needs a FilterTransform .* belongs to map"),
        (as_map_fn, Jitter(), r"belongs to random_map"),
        (as_random_map_fn, AddOne(), r"random_map needs a RandomMapTransform"),
        (as_flat_map_fn, BatchTransform(2), r"belongs to batch"),
        (as_map_fn, 42, r"got int 42, which is not callable"),
        (as_random_map_fn, _double, r"cannot be called with 2 positional arguments"),
        (as_map_with_index_fn, _double, r"taking \(index, element\)"),
        (as_filter_fn, lambda: True, r"cannot be called with 1 positional argument"),
        (as_flat_map_fn, NoFanOut(), r"needs max_fan_out, an int >= 1"),
    ],
)
def test_adapters_reject_the_wrong_kind_of_object_naming_it(adapter, obj, message):
    with pytest.raises(TransformTypeError, match=message):
        adapter(obj)


def test_transform_type_error_is_a_type_error():
    with pytest.raises(TypeError):
        as_map_fn(None)


def test_flat_map_fan_out_from_constructor_and_validated():
    assert NoFanOut(max_fan_out=3).max_fan_out == 3
    assert as_flat_map_fn(NoFanOut(max_fan_out=3))[1] == 3
    with pytest.raises(ValueError, match=">= 1"):
        NoFanOut(max_fan_out=0)
    with pytest.raises(TypeError, match="must be an int"):
        NoFanOut(max_fan_out=2.0)


def test_transforms_and_batch_transform_pickle():
    for transform in (AddOne(), Odd(), Twice(), Jitter(), BatchTransform(4, pad=True)):
        clone = pickle.loads(pickle.dumps(transform))
        assert type(clone) is type(transform)
    assert pickle.loads(pickle.dumps(as_map_fn(AddOne())))(1) == 2


def test_batch_transform_is_a_frozen_validated_config():
    config = BatchTransform(8, drop_remainder=True)
    with pytest.raises(AttributeError):
        config.batch_size = 3
    for bad, error in [
        ({"batch_size": 0}, ValueError),
        ({"batch_size": True}, TypeError),
        ({"batch_size": 2, "drop_remainder": 1}, TypeError),
        ({"batch_size": 2, "drop_remainder": True, "pad": True}, ValueError),
        ({"batch_size": 2, "batch_fn": 3}, TypeError),
    ]:
        with pytest.raises(error):
            BatchTransform(**bad)
