"""How an `IterDataset` packs variable-length sequences into rows: `pack`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from chute_core import ArgumentTypeError, InvalidArgumentError
from chute_transforms import BestFitPackIter, ConcatSplitIter, FirstFitPackIter, PackedRow

from ._args import check_int, check_optional_int
from ._factories import EmptyIterator, Factory, OpFactory
from ._pipeline import stage

if TYPE_CHECKING:
    from ._iter_dataset import IterDataset

__all__ = ["PackMixin"]

PackMethod = Literal["first_fit", "best_fit", "concat_split"]

_OWNER = "IterDataset.pack"
_PACKERS: dict[str, type[Any]] = {
    "first_fit": FirstFitPackIter,
    "best_fit": BestFitPackIter,
    "concat_split": ConcatSplitIter,
}
_DEFAULT_BINS = 16


class PackMixin:
    """`pack`: one stream stage that builds a packer of `chute_transforms`."""

    __slots__ = ()
    _factory: Factory
    _seed: int | None

    def pack(
        self,
        length: int | Mapping[str, int],
        *,
        method: PackMethod = "first_fit",
        num_packing_bins: int | None = None,
        max_sequences_per_bin: int | None = None,
        drop_remainder: bool = False,
        bos_id: int | None = None,
        bos_keys: Sequence[str] | None = None,
    ) -> IterDataset[PackedRow]:
        """Packs dicts of 1-D arrays (token sequences) into rows of `length` tokens.

        Each output row holds, for every key `k`, `k` (padded with 0), `k_segment_ids`
        (1, 2, ... per sequence in the row, 0 for padding) and `k_positions` (0, 1, ...
        within each sequence). The checkpoint state holds no tokens: a restore re-reads
        the few elements still in open rows. The iterator's `padding_fraction` (with
        `tokens_emitted` and `slots_emitted`) says how much of the rows returned so
        far is padding. Packing reads the whole stream, so after `mp_prefetch` it runs
        in this process on the merged stream: the rows are the same for any number of
        workers.

        Args:
            length: the row length; for "first_fit" and "best_fit", a dict may give one
                length per key (and names the keys packed).
            method: "first_fit" (`chute_transforms.FirstFitPackIter`: each sequence in
                the first open row it fits), "best_fit" (`BestFitPackIter`: in the open
                row it fills best; less padding, about the same cost) or "concat_split"
                (`ConcatSplitIter`: concatenates everything and cuts rows of exactly
                `length`, no padding but the last row; sequences may span rows, and
                every key of an element must have the same length). The fit methods
                truncate a sequence longer than the row.
            num_packing_bins: rows open at once, for the fit methods (default 16).
            max_sequences_per_bin: at most this many sequences in a row, for the fit
                methods (None: no limit).
            drop_remainder: for "concat_split", drop the last, partial row.
            bos_id: for "concat_split", a token written over the first token of every
                segment of a row, so that a sequence continued from the row before
                starts with it too (Grain's `REPLACE_FIRST_TOKEN_WITH_BOS`).
            bos_keys: the keys that get `bos_id` (None: every key).

        Raises:
            InvalidArgumentError: an unknown `method`, a value out of range, or an
                option of another method (e.g. `num_packing_bins` with "concat_split").
            ArgumentTypeError: an option of the wrong type.

        Example:
            >>> import chute, numpy as np
            >>> docs = [{"t": np.arange(1, n + 1)} for n in (2, 3, 1, 2)]
            >>> ds = chute.MapDataset.source(docs).to_iter_dataset()
            >>> [row["t"].tolist() for row in ds.pack(4, method="best_fit", num_packing_bins=2)]
            [[1, 2, 3, 1], [1, 2, 1, 2]]
            >>> it = iter(ds.pack(3, method="concat_split"))
            >>> [row["t_segment_ids"].tolist() for row in it], round(it.padding_fraction, 3)
            ([[1, 1, 2], [1, 1, 2], [1, 1, 0]], 0.111)
            >>> ds.pack(4, max_sequences_per_bin=2)
            IterDataset
              source(SequenceSource(type='list', len=4))
              .to_iter_dataset()
              .pack(length=4, method='first_fit', num_packing_bins=16, max_sequences_per_bin=2)
        """
        from ._iter_dataset import IterDataset

        op, args, kwargs, params = _pack_arguments(
            length, method, num_packing_bins, max_sequences_per_bin, drop_remainder
        )
        if bos_id is not None or bos_keys is not None:
            if method != "concat_split":
                raise InvalidArgumentError(
                    f"{_OWNER}: bos_id and bos_keys apply to method='concat_split', not "
                    f"{method!r}, which never splits a sequence; leave them out."
                )
            if bos_id is not None:
                kwargs["bos_id"] = params["bos_id"] = check_int(bos_id, "bos_id", _OWNER)
            if bos_keys is not None:
                kwargs["bos_keys"] = bos_keys
                params["bos_keys"] = list(bos_keys) if not isinstance(bos_keys, str) else bos_keys
        op(EmptyIterator(), *args, **kwargs)  # The packer's own checks, now.
        item = stage("pack", **params)
        return IterDataset(OpFactory(self._factory, item, op, *args, **kwargs), seed=self._seed)


def _pack_arguments(
    length: object,
    method: object,
    num_packing_bins: object,
    max_sequences_per_bin: object,
    drop_remainder: object,
) -> tuple[type[Any], tuple[Any, ...], dict[str, Any], dict[str, Any]]:
    """The packer, its arguments, and the stage's parameters; raises on a bad option."""
    if not isinstance(method, str) or method not in _PACKERS:
        raise InvalidArgumentError(
            f"{_OWNER}: method must be one of {sorted(_PACKERS)}, got {method!r}."
        )
    if not isinstance(drop_remainder, bool):
        raise ArgumentTypeError(
            f"{_OWNER}: drop_remainder must be a bool, got {type(drop_remainder).__name__} "
            f"{drop_remainder!r}."
        )
    fits = method != "concat_split"
    if isinstance(length, Mapping) and fits:
        if not length:
            raise InvalidArgumentError(f"{_OWNER}: length must name at least one key.")
        checked: int | dict[str, int] = {
            key: check_int(value, f"length[{key!r}]", _OWNER, minimum=1)
            for key, value in length.items()
        }
    elif isinstance(length, Mapping):
        raise ArgumentTypeError(
            f"{_OWNER}: method='concat_split' cuts every key at the same place, so length "
            f"must be one int, got {type(length).__name__} {length!r}."
        )
    else:
        checked = check_int(length, "length", _OWNER, minimum=1)
    params: dict[str, Any] = {"length": checked, "method": method}
    if not fits:
        given = {
            "num_packing_bins": num_packing_bins,
            "max_sequences_per_bin": max_sequences_per_bin,
        }
        wrong = [name for name, value in given.items() if value is not None]
        if wrong:
            raise InvalidArgumentError(
                f"{_OWNER}: {' and '.join(wrong)} apply to method='first_fit' or 'best_fit', "
                f"not 'concat_split', which keeps no open rows; leave them out."
            )
        params["drop_remainder"] = drop_remainder
        return ConcatSplitIter, (checked,), {"drop_remainder": drop_remainder}, params
    if drop_remainder:
        raise InvalidArgumentError(
            f"{_OWNER}: drop_remainder applies to method='concat_split'; the fit methods "
            f"emit every open row at the end."
        )
    bins = _DEFAULT_BINS
    if num_packing_bins is not None:
        bins = check_int(num_packing_bins, "num_packing_bins", _OWNER, minimum=1)
    most = check_optional_int(max_sequences_per_bin, "max_sequences_per_bin", _OWNER, minimum=1)
    params["num_packing_bins"] = bins
    if most is not None:
        params["max_sequences_per_bin"] = most
    return _PACKERS[method], (checked, bins), {"max_sequences_per_bin": most}, params
