"""A `MapDataset.repeat` after the shard: each shard repeated on its own, by epochs.

`.shard(i, n)....repeat(E)` before `to_iter_dataset()` repeats each shard by itself:
position `p` of shard `i` is element `p % L_i` of the shard in pass `p // L_i`, where
`L_i` is the shard's length. That is the stride of each epoch that an `IndexSampler`
takes (see `chute_samplers.internal.shard_globals`): global position `g` is record
`g % N` of epoch `g // N`, `N` being the length of what the shard stage reads. So such
a pipeline reshards as a `chute.DataLoader` does, epoch by epoch, once `N` is known.

`N` is read from the stages before the shard: the source's length (its description
says it), kept by each stage that keeps positions or length (maps, filters, shuffles),
divided into whole batches by a batch, times the epochs of a finite repeat. A stage
whose output length the description does not give (a slice, a mixture) is refused,
and so are a remainder dropped by the shard (its shards then repeat `N // n` elements
each, which another count divides otherwise) and an endless input.

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
        elif traits.groups is not None and length is not None:  # A batch: whole groups.
            size = integer_parameter(item, number, traits.groups, 1, "state 0")
            dropped = item["params"].get("drop_remainder") is True
            length = length // size if dropped else -(-length // size)
        elif traits.keeps_positions or traits.keeps_length:
            pass
        elif traits.repeats and type(item["params"].get("num_epochs")) is int:
            length = None if length is None else length * item["params"]["num_epochs"]
        else:
            length = None
        if length is None:
            raise ReshardError(
                f"stage {repeated} (repeat) repeats each shard of stage {at} by itself, "
                f"which reshards epoch by epoch once the length of the shard's input is "
                f"known, but stage {number} ({item['op']}) does not say its length in the "
                "pipeline's description (a source says it; maps, filters and shuffles keep "
                "it; batches and finite repeats change it as they say); repeat before the "
                "shard, or restore "
                "with the same process count."
            )
    if length is None:  # No stage before the shard at all.
        raise ReshardError(f"the shard of stage {at} reads no source.")
    return length


def _source_length(item: Mapping[str, Any]) -> int | None:
    """The length a source stage's description says (None: it says none)."""
    if item.get("op") != "source":
        return None
    source = item.get("params", {}).get("source")
    if isinstance(source, list):  # A short list is described by its elements.
        return len(source)
    if isinstance(source, Mapping) and type(source.get("len")) is int and source["len"] >= 0:
        return int(source["len"])
    return None
