"""`device_put`: the one call that puts a dataset's or an iterator's batches on devices."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from chute_core import CheckpointableIterator

from ._device_put import DevicePutIter
from ._global_batch import Target

__all__ = ["DevicePutIterable", "device_put"]


class DevicePutIterable:
    """A re-iterable whose every iterator is a `DevicePutIter` over a fresh parent.

    Example:
        >>> import jax, numpy as np
        >>> batches = DevicePutIterable([np.zeros(2)], jax.devices()[0])
        >>> [b.shape for b in batches]
        [(2,)]
    """

    def __init__(self, parent: Iterable[Any], target: Target, **options: Any) -> None:
        self._parent, self._target, self._options = parent, target, options

    def __iter__(self) -> DevicePutIter:
        iterator = iter(self._parent)
        if not isinstance(iterator, CheckpointableIterator):
            from chute_samplers import SequentialIter

            iterator = SequentialIter(list(self._parent))
        return DevicePutIter(iterator, self._target, **self._options)


def device_put(
    ds: Iterable[Any],
    device: Target,
    cpu_buffer_size: int = 2,
    device_buffer_size: int = 2,
    *,
    lockstep: bool | None = None,
) -> Any:
    """Batches of `ds` on `device`, prepared on the host and transferred ahead of use.

    Args:
        ds: a checkpointable iterator (then a `DevicePutIter` is returned), or anything
            iterable again and again, e.g. a dataset (then a re-iterable whose iterators
            are `DevicePutIter`s).
        device: a `jax.Device`, a `jax.sharding.Sharding` (also one spanning several
            processes: each passes its local rows and gets global arrays), or a pytree of
            shardings matching the batch's structure.
        cpu_buffer_size: host batches prepared ahead on a thread.
        device_buffer_size: batches already dispatched to the devices.
        lockstep: agree across JAX processes every step (default: when there are
            several), so all stop at the same batch.

    Example:
        >>> import jax, numpy as np
        >>> from chute_samplers import SequentialIter
        >>> it = device_put(SequentialIter([np.ones(3), np.zeros(3)]), jax.devices()[0])
        >>> [float(b.sum()) for b in it]
        [3.0, 0.0]
    """
    options: dict[str, Any] = {
        "cpu_buffer_size": cpu_buffer_size,
        "device_buffer_size": device_buffer_size,
        "lockstep": lockstep,
    }
    if isinstance(ds, CheckpointableIterator):
        return DevicePutIter(ds, device, **options)
    if hasattr(ds, "__next__"):
        raise TypeError(
            f"device_put: {type(ds).__name__} is an iterator without get_state/set_state; "
            "pass a chute dataset or a checkpointable iterator, so the position can be saved."
        )
    return DevicePutIterable(ds, device, **options)
