"""`chute.DataLoader`: the execution layer's `DataLoader`, optionally putting batches on devices."""

from __future__ import annotations

from typing import Any

from chute_execution import DataLoader as _ExecutionDataLoader
from chute_samplers import IterNode

from ._metrics_meter import metered, metrics_label
from ._stats import Recorder

__all__ = ["DataLoader"]


class DataLoader(_ExecutionDataLoader):
    """`chute_execution.DataLoader`, plus `device=`: batches arrive as `jax.Array`s.

    With `device` (a `jax.Device`, a `jax.sharding.Sharding` or a pytree of shardings),
    iterators are `chute_device.DevicePutIter`s: `cpu_buffer_size` batches prepared on
    the host and `device_buffer_size` already transferred, and checkpoints that count
    only the batches handed out. Without it, batches are NumPy, as in Grain's guide.

    Args:
        device: where batches go; None keeps them on the host.
        cpu_buffer_size: host batches prepared ahead (with `device`).
        device_buffer_size: batches transferred ahead (with `device`).
        **kwargs: the arguments of `chute_execution.DataLoader`.

    Example:
        >>> import chute, jax
        >>> sampler = chute.IndexSampler(4, shard_options=chute.NoSharding(), num_epochs=1)
        >>> loader = chute.DataLoader(
        ...     data_source=chute.RangeSource(4),
        ...     sampler=sampler,
        ...     operations=[chute.BatchTransform(batch_size=2)],
        ...     device=jax.devices()[0],
        ... )
        >>> [batch.tolist() for batch in loader]
        [[0, 1], [2, 3]]
    """

    def __init__(
        self,
        *,
        device: Any = None,
        cpu_buffer_size: int = 2,
        device_buffer_size: int = 2,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.device = device
        self.cpu_buffer_size, self.device_buffer_size = cpu_buffer_size, device_buffer_size

    def __iter__(self) -> IterNode[Any]:
        iterator = super().__iter__()
        if self.device is not None:
            from ._device import device_put_op  # jax loads only here.

            iterator = device_put_op(
                iterator,
                self.device,
                cpu_buffer_size=self.cpu_buffer_size,
                device_buffer_size=self.device_buffer_size,
            )
        return _metered(iterator)


def _metered(iterator: IterNode[Any]) -> IterNode[Any]:
    """`iterator`, metered as stage `DataLoader` of pipeline `data_loader` if metrics are on.

    Its batches, their time and the consumer's input wait (`chute.metrics`); the
    loader's operations are not told apart.
    """
    if metrics_label(None, lambda: "DataLoader") is None:
        return iterator
    recorder = metered(Recorder(), "data_loader")
    clock = recorder.clock(iterator, "DataLoader", recorder)
    recorder.add_stage(clock)
    return clock  # type: ignore[return-value]
