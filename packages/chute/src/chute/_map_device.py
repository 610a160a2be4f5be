"""Device helpers of `MapDataset`: a sharded batch's rows on this process, mesh shards."""

from __future__ import annotations

from typing import Any

from chute_samplers import ShardOptions

__all__ = ["host_rows", "mesh_shard"]


def host_rows(sharding: Any, batch_size: int, length: int, even: bool) -> tuple[int, int]:
    """This JAX process's rows of every batch; checks that all processes stay in step."""
    from chute_device import row_split  # jax loads only when a sharding is used.

    split = row_split(sharding)
    rows = split.rows(batch_size)
    if split.groups > 1 and length % batch_size and not even:
        raise ValueError(
            f"batch(sharding=...): {length} elements do not fill the last global batch of "
            f"{batch_size}, and the {split.groups} processes would yield different numbers "
            "of batches (a process whose rows are past the end has none): pass "
            "drop_remainder=True or pad=True."
        )
    return rows


def mesh_shard(mesh: Any, data_axis_name: Any, drop_remainder: bool) -> ShardOptions:
    """`shard(mesh, data_axis_name)`: this process's share of a mesh's data axis."""
    if not isinstance(data_axis_name, str | tuple):
        raise TypeError(
            "shard(mesh, data_axis_name) needs the name of the mesh's data axis, e.g. "
            f"ds.shard(mesh, 'data'); got {data_axis_name!r}."
        )
    from chute_device import shard_options_for_mesh  # jax loads only here.

    return shard_options_for_mesh(mesh, data_axis_name, drop_remainder)
