"""Which rows of a global batch this JAX process holds, and shard options from jax.

A `jax.sharding.Sharding` says which device holds which slice of an array. For the
loader, one question matters: of a global batch of `n` rows, which rows must *this*
process produce? Its devices' slices along the first axis answer it. Several processes
can hold the same rows (they share a data-parallel replica, e.g. a model axis spanning
hosts); they then load the same elements.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
from jax.sharding import Mesh, NamedSharding, PartitionSpec, Sharding

from chute_samplers import ShardOptions

__all__ = [
    "RowSplit",
    "ShardByJaxProcess",
    "host_rows",
    "row_split",
    "shard_options_for_mesh",
]


@dataclasses.dataclass(frozen=True)
class RowSplit:
    """How a sharding splits the first axis of an array among processes.

    Attributes:
        blocks: into how many equal row blocks the first axis is cut.
        first: the first block this process holds.
        count: how many consecutive blocks this process holds.
        group: this process's index among the distinct row ranges processes hold.
        groups: how many distinct row ranges there are (processes holding the same
            rows share one).

    Example:
        >>> RowSplit(blocks=8, first=4, count=4, group=1, groups=2).rows(16)
        (8, 16)
    """

    blocks: int
    first: int
    count: int
    group: int
    groups: int

    def rows(self, size: int) -> tuple[int, int]:
        """This process's rows `(start, stop)` of an axis of `size` rows.

        Raises:
            ValueError: `size` is not a multiple of `blocks`.
        """
        if size % self.blocks:
            raise ValueError(
                f"a batch of {size} rows cannot be split evenly over the sharding's "
                f"{self.blocks} row blocks: use a batch size divisible by {self.blocks}."
            )
        per_block = size // self.blocks
        return (self.first * per_block, (self.first + self.count) * per_block)


def _as_sharding(target: Any) -> Sharding:
    if isinstance(target, Sharding):
        return target
    if isinstance(target, jax.Device):
        return jax.sharding.SingleDeviceSharding(target)
    raise TypeError(
        f"expected a jax.sharding.Sharding or a jax.Device, got {type(target).__name__}."
    )


def row_split(target: Sharding | jax.Device, process_index: int | None = None) -> RowSplit:
    """How `target` splits the first axis of an array among JAX processes.

    Args:
        target: a sharding (or a device) of the arrays a batch becomes.
        process_index: the process to ask about; defaults to `jax.process_index()`.

    Raises:
        ValueError: the process holds rows that are not one contiguous range (use a
            mesh whose devices are ordered by process along the data axis), or holds no
            rows at all.

    Example:
        >>> import jax
        >>> mesh = jax.sharding.Mesh(jax.devices(), ("data",))
        >>> spec = jax.sharding.PartitionSpec("data")
        >>> row_split(jax.sharding.NamedSharding(mesh, spec)).first
        0
    """
    sharding = _as_sharding(target)
    process = jax.process_index() if process_index is None else process_index
    shape = _probe_shape(sharding)
    probe = shape[0]
    starts: dict[int, set[int]] = {}
    for device, index in sharding.devices_indices_map(shape).items():
        start, stop, _ = index[0].indices(probe)
        owner: int = device.process_index  # type: ignore[attr-defined]
        starts.setdefault(owner, set()).update(range(start, stop))
    ranges = sorted({(min(rows), max(rows) + 1) for rows in starts.values()})
    mine = starts.get(process)
    if not mine:
        raise ValueError(f"JAX process {process} holds no device of the sharding {sharding}.")
    first, stop = min(mine), max(mine) + 1
    if stop - first != len(mine):
        raise ValueError(
            f"JAX process {process} holds rows {sorted(mine)} of {probe} row blocks, not one "
            "contiguous range: build the mesh with each process's devices next to each "
            "other along the data axis (e.g. jax.make_mesh)."
        )
    return RowSplit(probe, first, stop - first, ranges.index((first, stop)), len(ranges))


def _probe_shape(sharding: Sharding) -> tuple[int, ...]:
    """An array shape with one row block per slice `sharding` cuts each axis into."""
    if isinstance(sharding, NamedSharding):
        shape = []
        for axes in tuple(sharding.spec) or (None,):
            names = () if axes is None else axes if isinstance(axes, tuple) else (axes,)
            blocks = 1
            for name in names:
                blocks *= sharding.mesh.shape[name]
            shape.append(blocks)
        return tuple(shape)
    return (max(1, len(sharding.device_set)),)


def host_rows(
    target: Sharding | jax.Device, global_batch_size: int, process_index: int | None = None
) -> tuple[int, int]:
    """The rows `(start, stop)` of every global batch that this process must produce.

    Example:
        >>> import jax
        >>> host_rows(jax.devices()[0], 32)
        (0, 32)
    """
    return row_split(target, process_index).rows(global_batch_size)


def ShardByJaxProcess(drop_remainder: bool = False) -> ShardOptions:
    """Shard options for this JAX process: shard `process_index()` of `process_count()`.

    Example:
        >>> ShardByJaxProcess(drop_remainder=True)
        ShardOptions(shard_index=0, shard_count=1, drop_remainder=True)
    """
    return ShardOptions(jax.process_index(), jax.process_count(), drop_remainder)


def shard_options_for_mesh(
    mesh: Mesh, data_axis_name: str | tuple[str, ...], drop_remainder: bool = False
) -> ShardOptions:
    """Shard options that give each distinct data-parallel part of `mesh` its own shard.

    Processes whose devices hold the same rows (they share a replica along
    `data_axis_name`) get the same shard, so they load the same elements.

    Example:
        >>> import jax
        >>> mesh = jax.sharding.Mesh(jax.devices(), ("data",))
        >>> shard_options_for_mesh(mesh, "data")
        ShardOptions(shard_index=0, shard_count=1, drop_remainder=False)
    """
    split = row_split(NamedSharding(mesh, PartitionSpec(data_axis_name)))  # type: ignore[no-untyped-call]
    return ShardOptions(split.group, split.groups, drop_remainder)
