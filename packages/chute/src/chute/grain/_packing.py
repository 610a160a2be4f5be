"""Grain's experimental packers and `BOSHandling`, as spellings of `IterDataset.pack`."""

from __future__ import annotations

import enum
from collections.abc import Collection, Mapping
from typing import Any

from chute_core import InvalidArgumentError

from .._pipeline import stage
from ._concat_then_split import GrainConcatThenSplitIter

__all__ = [
    "BOSHandling",
    "BestFitPackIterDataset",
    "ConcatThenSplitIterDataset",
    "FirstFitPackIterDataset",
]


class BOSHandling(enum.Enum):
    """What concat-then-split packing does about BOS tokens (Grain's enum).

    Example:
        >>> BOSHandling.REPLACE_FIRST_TOKEN_WITH_BOS.name
        'REPLACE_FIRST_TOKEN_WITH_BOS'
    """

    DO_NOTHING = enum.auto()
    REPLACE_FIRST_TOKEN_WITH_BOS = enum.auto()


_UNSUPPORTED = (
    "shuffle_bins_group_by_feature",
    "meta_features",
    "pack_alignment_struct",
    "padding_struct",
)


def _refuse(owner: str, **options: Any) -> None:
    """Raises for Grain options chute's packers do not have (given a non-default value)."""
    given = [name for name, value in options.items() if value not in (None, (), [], frozenset())]
    if given:
        raise InvalidArgumentError(
            f"{owner}: chute's packers do not support {', '.join(given)}; leave "
            f"{'it' if len(given) == 1 else 'them'} out (see chute.grain's differences)."
        )


def _fit(
    method: str,
    owner: str,
    parent: Any,
    length_struct: Mapping[str, int],
    num_packing_bins: int,
    max_sequences_per_bin: int | None,
    grain_options: dict[str, Any],
) -> Any:
    unknown = sorted(set(grain_options) - {"seed", "shuffle_bins", *_UNSUPPORTED})
    if unknown:
        raise TypeError(f"{owner}() got unexpected keyword arguments {unknown}.")
    _refuse(owner, **{name: grain_options.get(name) for name in _UNSUPPORTED})
    return parent.pack(
        dict(length_struct),
        method=method,
        num_packing_bins=num_packing_bins,
        max_sequences_per_bin=max_sequences_per_bin,
    )


def FirstFitPackIterDataset(
    parent: Any,
    *,
    length_struct: Mapping[str, int],
    num_packing_bins: int,
    max_sequences_per_bin: int | None = None,
    **grain_options: Any,
) -> Any:
    """`parent.pack(length_struct, method="first_fit", num_packing_bins=...)`.

    Rows come out one at a time, the oldest first, so Grain's `seed` and
    `shuffle_bins` have nothing to shuffle (accepted, without effect); its
    `shuffle_bins_group_by_feature`, `meta_features`, `pack_alignment_struct` and
    `padding_struct` raise.

    Example:
        >>> import chute, numpy as np
        >>> ds = chute.MapDataset.source([{"t": np.arange(3)}, {"t": np.arange(2)}])
        >>> packed = FirstFitPackIterDataset(
        ...     ds.to_iter_dataset(), length_struct={"t": 5}, num_packing_bins=2)
        >>> [row["t_segment_ids"].tolist() for row in packed]
        [[1, 1, 1, 2, 2]]
    """
    owner = "FirstFitPackIterDataset"
    args = (parent, length_struct, num_packing_bins, max_sequences_per_bin, grain_options)
    return _fit("first_fit", owner, *args)


def BestFitPackIterDataset(
    parent: Any,
    *,
    length_struct: Mapping[str, int],
    num_packing_bins: int,
    max_sequences_per_bin: int | None = None,
    **grain_options: Any,
) -> Any:
    """`parent.pack(length_struct, method="best_fit", num_packing_bins=...)`.

    As `FirstFitPackIterDataset`, with best fit.

    Example:
        >>> import chute, numpy as np
        >>> ds = chute.MapDataset.source([{"t": np.arange(n)} for n in (3, 4, 1)])
        >>> packed = BestFitPackIterDataset(
        ...     ds.to_iter_dataset(), length_struct={"t": 4}, num_packing_bins=2)
        >>> [row["t_segment_ids"].tolist() for row in packed]
        [[1, 1, 1, 1], [1, 1, 1, 2]]
    """
    owner = "BestFitPackIterDataset"
    args = (parent, length_struct, num_packing_bins, max_sequences_per_bin, grain_options)
    return _fit("best_fit", owner, *args)


def ConcatThenSplitIterDataset(
    parent: Any,
    *,
    length_struct: Mapping[str, int],
    meta_features: Collection[str] = (),
    split_full_length_features: bool = True,
    bos_handling: BOSHandling = BOSHandling.DO_NOTHING,
    bos_features: Collection[str] = (),
    bos_token_id: int | None = None,
) -> Any:
    """Grain's concat-then-split packing: `parent.pack(length, method="concat_split")`.

    Every sequence key is cut at the same places, so `length_struct` must give one
    length to the sequence keys; with `REPLACE_FIRST_TOKEN_WITH_BOS`, `bos_token_id`
    replaces the first token of every segment of the `bos_features`, as in Grain.
    `meta_features` (carried whole with every part of their element, into their own
    length) and `split_full_length_features=False` (an element that fills a row
    exactly gets a row of its own, after the row being filled) run Grain's algorithm
    (`GrainConcatThenSplitIter`); without them, chute's packer gives the same rows.

    Example:
        >>> import chute, numpy as np
        >>> ds = chute.MapDataset.source([{"t": np.arange(1, 4)}, {"t": np.arange(1, 4)}])
        >>> rows = ConcatThenSplitIterDataset(
        ...     ds.to_iter_dataset(), length_struct={"t": 4},
        ...     bos_handling=BOSHandling.REPLACE_FIRST_TOKEN_WITH_BOS, bos_features=["t"],
        ...     bos_token_id=9)
        >>> [row["t"].tolist() for row in rows]
        [[9, 2, 3, 9], [9, 3, 0, 0]]
    """
    owner = "ConcatThenSplitIterDataset"
    lengths_by_key = dict(length_struct)
    meta, bos_keys = tuple(meta_features), tuple(bos_features)
    if not isinstance(split_full_length_features, bool):
        raise TypeError(
            f"{owner}: split_full_length_features must be a bool, got "
            f"{split_full_length_features!r}."
        )
    unknown = sorted(set(meta) - set(lengths_by_key))
    if unknown:
        raise InvalidArgumentError(
            f"{owner}: meta_features {unknown} are not keys of length_struct "
            f"{sorted(lengths_by_key)}."
        )
    if set(meta) & set(bos_keys):
        raise InvalidArgumentError(
            f"{owner}: bos_features and meta_features overlap: {sorted(set(meta) & set(bos_keys))}."
        )
    lengths = {n for key, n in lengths_by_key.items() if key not in meta}
    if len(lengths) > 1:
        raise InvalidArgumentError(
            f"{owner}: chute cuts every sequence key at the same places, so length_struct "
            f"must give one length to the keys that are not meta_features, got "
            f"{lengths_by_key}."
        )
    if bos_handling is BOSHandling.DO_NOTHING:
        if bos_token_id is not None or bos_features:
            raise InvalidArgumentError(
                f"{owner}: bos_handling=DO_NOTHING, so leave out bos_token_id and bos_features."
            )
    elif bos_token_id is None:
        raise InvalidArgumentError(f"{owner}: bos_token_id must be set with {bos_handling}.")
    if meta or not split_full_length_features:
        return _grain_algorithm(
            parent, lengths_by_key, meta, split_full_length_features, bos_token_id, bos_keys
        )
    if bos_handling is BOSHandling.DO_NOTHING:
        return parent.pack(lengths.pop(), method="concat_split")
    keys = list(bos_features)  # As in Grain: only these keys get BOS.
    return parent.pack(lengths.pop(), method="concat_split", bos_id=bos_token_id, bos_keys=keys)


def _grain_algorithm(
    parent: Any,
    lengths: dict[str, int],
    meta: tuple[str, ...],
    split_full: bool,
    bos_id: int | None,
    bos_keys: tuple[str, ...],
) -> Any:
    """`parent` packed by `GrainConcatThenSplitIter`, described as a `pack` stage."""
    for key, length in lengths.items():
        if isinstance(length, bool) or not isinstance(length, int) or length < 1:
            raise InvalidArgumentError(
                f"ConcatThenSplitIterDataset: length_struct[{key!r}] must be an int >= 1, "
                f"got {length!r}."
            )
    item = stage(
        "pack",
        length=lengths,
        method="concat_split",
        meta_features=sorted(meta),
        split_full_length_features=split_full,
        bos_id=bos_id,
        bos_keys=list(bos_keys),
    )
    return parent._then(
        GrainConcatThenSplitIter,
        item,
        lengths,
        meta,
        split_full=split_full,
        bos_id=bos_id,
        bos_keys=bos_keys,
    )
