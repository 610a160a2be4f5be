"""The device layer's op, declared without importing jax.

`to_device` puts batches on devices (`DevicePutIter`, which imports jax when devices
are first used). Its declaration lives apart, so that importing `chute_device` declares
the op in processes that never touch a device.

Example:
    >>> TO_DEVICE.traits.keeps_positions, sorted(TO_DEVICE.traits.performance)[0]
    (True, 'cpu_buffer_size')
"""

from __future__ import annotations

from chute_core import StageTraits, declare_op

__all__ = ["TO_DEVICE"]

TO_DEVICE = declare_op(
    "to_device",
    StageTraits(
        keeps_positions=True,
        consumer_only=True,
        performance=frozenset({"device", "cpu_buffer_size", "device_buffer_size", "lockstep"}),
    ),
)
"""The op's declaration (see `chute_core.declare_op`); its node is `DevicePutIter`."""
