"""Shared checks of the resharding tests."""

import pytest

import chute
from chute_checkpoint import ReshardError, make_document, reshard


def _refused_alike(make):
    """The `ReshardError` message of `make`'s pipeline, the same when built and at restore.

    `make(index, count)` builds the pipeline of process `index` of `count`; the restore
    reshards the states of 2 processes, one a step ahead, to 3.
    """
    with pytest.raises(ReshardError) as built:
        chute.checkpoint.check_reshardable(iter(make(0, 2)))
    olds = [iter(make(i, 2)) for i in range(2)]
    next(olds[0])
    with pytest.raises(ReshardError) as restored:
        reshard([make_document(it, i, 2) for i, it in enumerate(olds)], 3)
    assert str(restored.value) == str(built.value)
    return str(built.value)


@pytest.fixture
def refused_alike():
    """`_refused_alike`: what resharding refuses is refused alike when built."""
    return _refused_alike
