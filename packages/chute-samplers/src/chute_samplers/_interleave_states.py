"""The layout of an interleave's state, as resharding reads and writes it.

An `InterleaveIter` reads the streams its input positions open. Its state is
`{"cursor": c, "next_input": k, "slots": [...]}`: the positions below `k` were opened,
and the ones still open are in the slots, each with its stream's state. Once resharded,
the state may also hold `"pending"`, `[[position, stream state], ...]`: streams another
process left open, which this one continues (it opens them before any new position),
and a `chute_samplers.Frontier` (`"frontier"`) naming the positions from `k` on that
other processes opened, which it skips, and (`"skips"`: `[[position, span], ...]`) the
elements of some streams that other processes delivered (a window shuffle after the
interleave had yielded them), which it leaves out. `OPEN_STREAMS` reads the positions
opened in part and the elements to skip, and writes the state of a process that
starts at another position.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from chute_core import InvalidStateError

from ._frontier import FRONTIER
from ._window_states import positions_span, spans_pairs

__all__ = ["OPEN_STREAMS", "PENDING", "SKIPS", "OpenStreams"]

PENDING = "pending"
"""The key of the streams a resharded interleave continues before opening new ones."""

SKIPS = "skips"
"""The key of the positions, by input, of elements other processes delivered."""

_KEYS = frozenset({"cursor", "next_input", "slots"})
_OPTIONAL = frozenset({PENDING, FRONTIER, SKIPS})


class OpenStreams:
    """How an interleave's state holds its position and the streams it opened in part.

    Example:
        >>> state = {"cursor": 1, "next_input": 3, "slots": [{"input": 2, "state": {"p": 4}}, None]}
        >>> OPEN_STREAMS.is_state(state), OPEN_STREAMS.position(state)
        (True, 3)
        >>> OPEN_STREAMS.opened(state)
        {2: {'p': 4}}
        >>> OPEN_STREAMS.write(state, 5, [(0, {"p": 1})])
        {'cursor': 0, 'next_input': 5, 'slots': [None, None], 'pending': [[0, {'p': 1}]]}
    """

    def is_state(self, state: Mapping[str, Any]) -> bool:
        """Whether `state` is an interleave's."""
        keys = set(state)
        return keys >= _KEYS and keys <= _KEYS | _OPTIONAL

    def position(self, state: Mapping[str, Any]) -> int:
        """The next position the interleave opens (the ones before it were opened).

        Raises:
            ValueError: the position is not a non-negative int.
        """
        value = state["next_input"]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"an interleave's next_input must be an int >= 0, got {value!r:.80}.")
        return value

    def opened(self, state: Mapping[str, Any]) -> dict[int, Any]:
        """The positions opened and not yet read to the end, each with its stream's state.

        Both the open slots and the streams still pending from an earlier reshard.

        Raises:
            ValueError: a slot or pending entry of the wrong shape.
        """
        found: dict[int, Any] = {}
        slots = state["slots"]
        if not isinstance(slots, list):
            raise ValueError(f"an interleave's slots must be a list, got {slots!r:.80}.")
        entries = [
            (slot.get("input"), slot.get("state")) if isinstance(slot, dict) else (slot, None)
            for slot in slots
            if slot is not None
        ]
        pending = state.get(PENDING, [])
        if not isinstance(pending, list):
            raise ValueError(
                f"an interleave's pending streams must be a list, got {pending!r:.80}."
            )
        for entry in pending:
            if not isinstance(entry, list) or len(entry) != 2:
                raise ValueError(f"a pending stream must be [position, state], got {entry!r:.80}.")
            entries.append((entry[0], entry[1]))
        for number, inner in entries:
            if isinstance(number, bool) or not isinstance(number, int) or number < 0:
                raise ValueError(
                    f"an open stream's position must be an int >= 0, got {number!r:.80}."
                )
            if not isinstance(inner, dict):
                raise ValueError(
                    f"the state of open stream {number} must be a dict, got {inner!r:.80}."
                )
            if number in found:
                raise ValueError(f"stream {number} is open twice in the interleave's state.")
            found[number] = inner
        return found

    def skipped(self, state: Mapping[str, Any]) -> dict[int, list[int]]:
        """The positions to skip by input (`skips`), as the state lists them.

        Raises:
            ValueError: they are damaged.
        """
        try:
            found = spans_pairs(state.get(SKIPS, []), "an interleave")
        except InvalidStateError as error:
            raise ValueError(str(error)) from None
        return {number: positions.tolist() for number, positions in found.items()}

    def write(
        self,
        state: Mapping[str, Any],
        position: int,
        pending: Sequence[tuple[int, Any]],
        skips: Mapping[int, Sequence[int]] | None = None,
    ) -> dict[str, Any]:
        """`state`'s interleave at `position` with no stream open, continuing `pending` first.

        `skips`: by input, the positions of its elements to leave out.
        """
        written: dict[str, Any] = {
            "cursor": 0,
            "next_input": position,
            "slots": [None] * len(state["slots"]),
        }
        if pending:
            written[PENDING] = [[number, inner] for number, inner in sorted(pending, key=_first)]
        if skips:
            written[SKIPS] = [
                [number, positions_span(sorted(skips[number]))] for number in sorted(skips)
            ]
        return written


def _first(entry: tuple[int, Any]) -> int:
    return entry[0]


OPEN_STREAMS = OpenStreams()
"""The layout of `InterleaveIter`'s state."""
