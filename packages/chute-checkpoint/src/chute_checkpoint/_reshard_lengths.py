"""A `MapDataset.repeat` after the shard: each shard repeated on its own, by epochs.

`.shard(i, n)....repeat(E)` before `to_iter_dataset()` repeats each shard by itself:
position `p` of shard `i` is element `p % L_i` of the shard in pass `p // L_i`, where
`L_i` is the shard's length. That is the stride of each epoch that an `IndexSampler`
takes (see `chute_samplers.internal.shard_globals`): global position `g` is record
`g % N` of epoch `g // N`, `N` being the length of what the shard stage reads. So such
a pipeline reshards as a `chute.DataLoader` does, epoch by epoch, once `N` is known.

`N` is read from the stages before the shard: the source's length (its description
says it), kept by each stage that keeps positions or length (maps, filters, shuffles),
divided into whole batches by a batch, cut by a slice, times the epochs of a finite
repeat. Refused: a stage whose output length the description does not give (a
mixture, a source described without its length), a remainder dropped by the shard
(its shards then repeat `N // n` elements each, which another count divides
otherwise), and an endless input.

Example:
    >>> stages = [
    ...     {"op": "source", "params": {"source": {"class": "S", "len": 10}}},
    ...     {"op": "shard", "params": {"shard_index": 0, "shard_count": 3}},
    ...     {"op": "repeat", "params": {"num_epochs": None}},
    ...     {"op": "to_iter_dataset", "params": {}},
    ... ]
    >>> from chute_checkpoint._reshard_stages import reading_traits
    >>> with reading_traits():
    ...     map_repeat_epoch(stages, 1)
    10
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from typing import Any

from ._document_shape import integer_parameter
from ._errors import ReshardError
from ._reshard_stages import traits_of

__all__ = ["map_repeat", "map_repeat_epoch", "repeats_stream"]


def map_repeat(stages: list[dict[str, Any]], at: int) -> int | None:
    """The number of the `MapDataset.repeat` after shard stage `at`, if one comes.

    One before the stream begins; None if the stream begins first (or never repeats).
    """
    for number, item in enumerate(stages[at + 1 :], start=at + 1):
        traits = traits_of(item)
        if traits.begins_stream:
            return None
        if traits.repeats:
            return number
    return None


def repeats_stream(stages: list[dict[str, Any]]) -> bool:
    """Whether a stream repeat is among `stages` (one after the stream began).

    Example:
        >>> from chute_checkpoint._reshard_stages import reading_traits
        >>> stages = [{"op": "repeat", "params": {}}, {"op": "to_iter_dataset", "params": {}}]
        >>> with reading_traits():
        ...     repeats_stream(stages), repeats_stream(stages[::-1])
        (False, True)
    """
    streaming = False
    for item in stages:
        traits = traits_of(item)
        if traits.repeats and streaming:
            return True
        streaming = streaming or traits.begins_stream
    return False


def map_repeat_epoch(stages: list[dict[str, Any]], at: int) -> int:
    """Records per epoch of shard stage `at`'s per-epoch stride; 0 without a map repeat.

    Raises:
        ReshardError: a `MapDataset.repeat` follows the shard, but the length of the
            shard's input cannot be read from the description, or the shard drops a
            remainder.
    """
    repeated = map_repeat(stages, at)
    if repeated is None:
        return 0
    if stages[at]["params"].get("drop_remainder") is True:
        raise ReshardError(
            f"the shard of stage {at} drops a remainder (drop_remainder=True) and stage "
            f"{repeated} (repeat) repeats each shard by itself: another process count "
            "leaves another remainder out of each pass, so the passes cannot be re-cut; "
            "repeat before the shard, or shard without drop_remainder, or restore with "
            "the same process count."
        )
    return _input_length(stages, at, repeated)


def _input_length(stages: list[dict[str, Any]], at: int, repeated: int) -> int:
    """The length of what shard stage `at` reads, from the stages before it."""
    length: int | None = None
    for number, item in enumerate(stages[:at]):
        traits = traits_of(item)
        if number == 0:
            length = _source_length(item)
        elif length is None:
            pass
        elif traits.groups is not None:  # A batch: whole groups.
            size = integer_parameter(item, number, traits.groups, 1, "state 0")
            dropped = item["params"].get("drop_remainder") is True
            length = length // size if dropped else -(-length // size)
        elif traits.keeps_positions or traits.keeps_length:
            pass
        elif traits.repeats and item["params"].get("num_epochs") is not None:
            length *= integer_parameter(item, number, "num_epochs", 0, "state 0")
        elif traits.stride is not None:  # A slice: its text says which positions.
            length = _sliced_length(item["params"].get(traits.stride), length)
        else:
            length = None
        if length is not None and length > sys.maxsize:
            raise ReshardError(
                f"the input of the shard of stage {at} is longer than sys.maxsize at stage "
                f"{number} ({item['op']}): {length:,} elements; a pipeline this long "
                "cannot be built, so the state is not of one."
            )
        if length is None:
            raise ReshardError(
                f"stage {repeated} (repeat) repeats each shard of stage {at} by itself, "
                f"which reshards epoch by epoch once the length of the shard's input is "
                f"known, but stage {number} ({item['op']}) does not say its length in the "
                "pipeline's description (a source says it; maps, filters and shuffles keep "
                "it; batches, slices and finite repeats change it as they say); repeat "
                "before the shard, or restore with the same process count."
            )
    if length is None:  # No stage before the shard at all.
        raise ReshardError(f"the shard of stage {at} reads no source.")
    return length


def _source_length(item: Mapping[str, Any]) -> int | None:
    """The length a source stage's description says (None: it says none).

    A short list is described by its elements, a range by its bounds, an array by its
    shape, other sources by their `len`.
    """
    params = item.get("params")
    source = params.get("source") if item.get("op") == "source" and params else None
    if isinstance(source, list):
        return len(source)
    if not isinstance(source, Mapping):
        return None
    bounds, shape = source.get("range"), source.get("shape")
    if isinstance(bounds, list) and len(bounds) == 3 and all(type(b) is int for b in bounds):
        return len(range(*bounds)) if bounds[2] else None
    if isinstance(shape, list) and shape and type(shape[0]) is int and shape[0] >= 0:
        return int(shape[0])
    if type(source.get("len")) is int and source["len"] >= 0:
        return int(source["len"])
    return None


_SLICE = re.compile(r"\[(-?\d*):(-?\d*)(?::(-?\d*))?\]")


def _sliced_length(text: Any, length: int) -> int | None:
    """How many of `length` positions the slice shown as `text` (`[start:stop:step]`) keeps."""
    found = _SLICE.fullmatch(text) if isinstance(text, str) and len(text) < 128 else None
    if found is None:
        return None
    start, stop, step = (int(part) if part else None for part in found.groups())
    if step == 0:
        return None
    return len(range(length)[slice(start, stop, step)])
