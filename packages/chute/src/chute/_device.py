"""The meta-package's bridge to `chute_device`, imported only when devices are used."""

from __future__ import annotations

from typing import Any

from chute_core import CheckpointableIterator
from chute_device import DevicePutIter

__all__ = ["device_put_op"]


def device_put_op(parent: CheckpointableIterator[Any], device: Any, **options: Any) -> Any:
    """The `to_device` stage over `parent` (see `chute_device.DevicePutIter`).

    Example:
        >>> import jax, numpy as np
        >>> from chute_samplers import SequentialIter
        >>> next(device_put_op(SequentialIter([np.ones(2)]), jax.devices()[0])).tolist()
        [1.0, 1.0]
    """
    return DevicePutIter(parent, device, **options)
