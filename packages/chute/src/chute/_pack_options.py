"""The options of `IterDataset.pack`: which packer, its arguments, the stage's parameters."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from chute_core import ArgumentTypeError, InvalidArgumentError
from chute_transforms import BestFitPackIter, ConcatSplitIter, FirstFitPackIter

from ._args import check_int, check_optional_int

__all__ = ["PackMethod", "pack_arguments", "with_bos"]

PackMethod = Literal["first_fit", "best_fit", "concat_split"]

_OWNER = "IterDataset.pack"
_PACKERS: dict[str, type[Any]] = {
    "first_fit": FirstFitPackIter,
    "best_fit": BestFitPackIter,
    "concat_split": ConcatSplitIter,
}
_DEFAULT_BINS = 16


def pack_arguments(
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


def with_bos(
    method: str,
    bos_id: int | None,
    bos_keys: Sequence[str] | None,
    kwargs: dict[str, Any],
    params: dict[str, Any],
) -> None:
    """Adds `bos_id` and `bos_keys` to the packer's arguments and the stage's parameters."""
    if bos_id is None and bos_keys is None:
        return
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
