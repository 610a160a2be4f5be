"""A packer's state as resharding reads it: where its open rows began, what it gave.

Both packers keep their parent's state before the oldest element they hold
(`"parent"`) and re-read the elements from there when restored:

- the fit packers (`FirstFitPackIter`, `BestFitPackIter`): `{"parent", "read", "bins",
  "span"}`: of the `read` elements read since, those in open rows (`bins`, by offset)
  are held; the others were emitted (or had no tokens). `span` gives their positions,
  with `order` when they were read in another order (after a window shuffle), or
  `reads` their streams and positions in them (over an interleave).
- `ConcatSplitIter`: `{"parent", "skip", "read", "at", "drop"}`: every element read
  since is held, the first with `skip` tokens emitted already (`at`: its position);
  `drop` lists `[position, tokens]` of elements a resharded state assigned it whose
  first tokens another process emitted.

Resharded, the process counts as stopped at the first element held, so the held
elements go back to be read; the emitted ones are skipped by position (`taken`, for a
`Frontier`), and the tokens emitted of an element in part are dropped by its new owner
(`delivered`, then `with_skips`, as a flat map's outputs are).

Example:
    >>> fit = {"parent": {"position": 4}, "read": 3, "bins": [[0, 2]], "span": [4, 3]}
    >>> PACK_STATES.inner(fit), PACK_STATES.taken(fit, {})  # Element 1 (position 5) emitted.
    ({'position': 4}, [5])
    >>> split = {"parent": {"position": 4}, "skip": 2, "read": 1, "at": 4}
    >>> PACK_STATES.delivered(split)
    {4: 2}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chute_core import InvalidStateError
from chute_samplers.internal import MAX_SPAN_BITS, ordered_positions, reads_pairs

from ._element_keys import key_from_json

__all__ = ["PACK_STATES", "PackStates"]

_FIT = {"parent", "read", "bins", "span", "order", "reads"}
_SPLIT = {"parent", "skip", "read", "at", "drop"}


class PackStates:
    """`chute_core.WrapperLayout` of the packers' states, and what they emitted ahead.

    Example:
        >>> PACK_STATES.rebuild({"parent": {}, "skip": 3, "read": 2, "at": 9},
        ...                     {"position": 1}, (2, 3))
        {'parent': {'position': 1}, 'skip': 0, 'read': 0}
    """

    def _kind(self, state: Mapping[str, Any]) -> str | None:
        keys = set(state)
        if "parent" not in keys or "read" not in keys:
            return None
        if "bins" in keys and keys <= _FIT:
            return "fit"
        if "skip" in keys and keys <= _SPLIT and type(state["skip"]) is int:
            return "split"
        return None

    def inner(self, state: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The parent's state before the oldest element held; None: no packer's state."""
        if self._kind(state) is None:
            return None
        inner: Mapping[str, Any] = state["parent"]
        return inner

    def rebuild(
        self, state: Mapping[str, Any], inner: dict[str, Any], scale: tuple[int, int]
    ) -> dict[str, Any]:
        """No row open from `inner` on (the elements held go back to be read)."""
        del scale  # The packers count no elements beyond the ones they hold.
        if self._kind(state) == "fit":
            return {"parent": inner, "read": 0, "bins": []}
        return {"parent": inner, "skip": 0, "read": 0}

    def taken(self, state: Mapping[str, Any], params: Mapping[str, Any]) -> list[int]:
        """The positions of the elements read since the state's position, not held.

        `params` are the stage's (a window shuffle's `taken` needs them; this does not).

        Raises:
            InvalidStateError: a damaged state, or elements emitted from a state that
                does not name their positions.
        """
        del params
        read, held = self._held(state)
        if read == len(held):
            return []  # Concat-then-split holds every element it read since.
        if "span" not in state:
            raise InvalidStateError(
                f"the packer emitted rows holding {read - len(held)} of the elements read "
                "since its state's position, whose positions its state does not name "
                "('span'): it was saved by a chute too old to reshard it, or its elements "
                "have no one-int origins; save again when no row is open."
            )
        limit = min(read, MAX_SPAN_BITS)
        positions = ordered_positions(state["span"], state.get("order"), "a packer", limit)
        if len(positions) != read:
            raise InvalidStateError(
                f"a packer's state names {len(positions)} positions for {read} elements read."
            )
        return [p for offset, p in enumerate(positions.tolist()) if offset not in held]

    def yielded(self, state: Mapping[str, Any], params: Mapping[str, Any]) -> dict[int, list[int]]:
        """Of a packer over an interleave: the positions emitted, by the stream's input.

        `params` are the stage's (a window shuffle's `yielded` needs them; this does not).

        Raises:
            InvalidStateError: a damaged state, or elements emitted from a state that
                does not name their streams and positions.
        """
        del params
        read, held = self._held(state)
        if read == len(held):
            return {}
        if "reads" not in state:
            raise InvalidStateError(
                f"the packer emitted rows holding {read - len(held)} of the elements read "
                "since its state's position over an interleave, whose streams and positions "
                "its state does not name ('reads'): it was saved by a chute too old to "
                "reshard it, or one of its streams does not number its records (every "
                "stream must); save again when no row is open."
            )
        pairs = reads_pairs(state["reads"], "a packer", min(read, MAX_SPAN_BITS))
        if len(pairs) != read:
            raise InvalidStateError(f"a packer's state names {len(pairs)} elements, read {read}.")
        found: dict[int, list[int]] = {}
        for offset, (number, position) in enumerate(pairs):
            if offset not in held:
                found.setdefault(number, []).append(position)
        return {number: sorted(found[number]) for number in sorted(found)}

    def _held(self, state: Mapping[str, Any]) -> tuple[int, set[int]]:
        """A fit packer's elements read since its position, and the offsets of those held.

        (0, empty) for a concat-then-split packer's: it holds every element it read since.
        """
        if self._kind(state) != "fit":
            return 0, set()
        read, bins = state["read"], state["bins"]
        if (
            type(read) is not int
            or read < 0
            or not isinstance(bins, list)
            or not all(isinstance(row, list) and all(type(i) is int for i in row) for row in bins)
        ):
            raise InvalidStateError(f"a packer's state is damaged: {dict(state)!r:.200}.")
        return read, {i for row in bins for i in row}

    def is_split(self, state: Mapping[str, Any]) -> bool:
        """Whether `state` is a concat-then-split packer's (it emits elements in part)."""
        return self._kind(state) == "split"

    def delivered(self, state: Mapping[str, Any]) -> dict[Any, int]:
        """A concat-then-split state's tokens emitted of elements ahead of its parent.

        The element it holds first (`at`, its `skip` tokens emitted), and the `drop`
        entries of the elements it holds or has not reached: {position: tokens}, a
        position being `(input, position)` over an interleave.

        Raises:
            ValueError: a damaged entry, or tokens emitted of an element whose position
                the state does not name.
        """
        entries: dict[Any, int] = {}
        for entry in state.get("drop", []):
            if not (isinstance(entry, list) and len(entry) == 2 and type(entry[1]) is int):
                raise ValueError(f"a drop entry is [position, tokens], got {entry!r:.80}.")
            position = key_from_json(entry[0])
            if position is None:
                raise ValueError(f"a drop entry is [position, tokens], got {entry!r:.80}.")
            entries[position] = entry[1]
        skip = state["skip"]
        if skip < 0:
            raise ValueError(f"a packer's skip is an int >= 0, got {skip!r:.80}.")
        if skip:
            at = key_from_json(state.get("at"))
            if at is None:
                raise ValueError(
                    f"the packer emitted {skip} tokens of an element whose position its state "
                    "does not name ('at'): it was saved by a chute too old to reshard it, or "
                    "its elements have no position (over an interleave, a stream that does "
                    "not number its records, which every stream must); save again at a row "
                    "boundary."
                )
            entries[at] = skip
        return entries

    def with_skips(self, state: dict[str, Any], entries: list[list[int]]) -> dict[str, Any]:
        """A rebuilt concat-then-split state that drops `entries` ([position, tokens])."""
        state.pop("at", None)
        if entries:
            state["drop"] = entries
        else:
            state.pop("drop", None)
        return state


PACK_STATES = PackStates()
"""The layout of the packers' states (see `PackStates`)."""
