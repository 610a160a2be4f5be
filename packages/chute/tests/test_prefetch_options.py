"""`mp_prefetch` and `ray_prefetch` take their options as an object or as keywords."""

import re

import pytest

import chute


def _ds():
    return chute.MapDataset.range(30).seed(1).shuffle().to_iter_dataset().map(abs)


def test_keyword_options_are_the_options_object():
    expected = list(_ds())
    by_keywords = _ds().mp_prefetch(num_workers=2, per_worker_buffer_size=1)
    by_object = _ds().mp_prefetch(chute.MultiprocessingOptions(2, per_worker_buffer_size=1))
    assert list(by_keywords) == list(by_object) == expected
    assert repr(by_keywords) == repr(by_object)
    assert repr(_ds().ray_prefetch(num_workers=3)) == repr(
        _ds().ray_prefetch(chute.RayOptions(num_workers=3))
    )


def test_wrong_options_say_what_to_write():
    with pytest.raises(
        TypeError,
        match=re.escape(
            "mp_prefetch: options must be a chute.MultiprocessingOptions, got int 2 (for a "
            "worker count, write mp_prefetch(num_workers=2))."
        ),
    ):
        _ds().mp_prefetch(2)
    with pytest.raises(
        TypeError,
        match=re.escape(
            "mp_prefetch: give options=MultiprocessingOptions(...) or its fields as keywords "
            "(num_workers), not both."
        ),
    ):
        _ds().mp_prefetch(chute.MultiprocessingOptions(0), num_workers=2)
    with pytest.raises(
        TypeError,
        match=r"^mp_prefetch: .*unexpected keyword argument 'workers'; the fields of "
        r"MultiprocessingOptions: num_workers, per_worker_buffer_size, start_method, "
        r"worker_timeout, idle_worker_seconds, autotune\.$",
    ):
        _ds().mp_prefetch(workers=2)
    with pytest.raises(TypeError, match=r"^ray_prefetch: options must be a chute\.RayOptions"):
        _ds().ray_prefetch(chute.MultiprocessingOptions(0))
    with pytest.raises(ValueError, match=r"^MultiprocessingOptions: num_workers must be >= 0"):
        _ds().mp_prefetch(num_workers=-1)
