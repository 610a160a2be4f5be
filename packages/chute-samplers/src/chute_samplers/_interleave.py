"""`InterleaveIter`: round robin over a moving window of `cycle_length` streams."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeAlias, TypeVar, cast

from chute_core import (
    CheckpointableIterator,
    InvalidStateError,
    IteratorState,
    JsonValue,
    StageTraits,
    declare_op,
)
from chute_core.internal import check_int, check_sequence, state_dict, state_int

from ._frontier import FRONTIER, Frontier
from ._interleave_states import PENDING, SKIPS
from ._iter_base import IterNode
from ._mix_iter import check_iterator
from ._window_states import positions_span, spans_pairs

__all__ = ["INTERLEAVE", "InterleaveIter"]

T = TypeVar("T")

Input: TypeAlias = "CheckpointableIterator[T] | Callable[[], CheckpointableIterator[T]] | None"


class InterleaveIter(IterNode[T]):
    """Interleaves many streams, `cycle_length` of them open at a time.

    Opens inputs 0, 1, ... into `cycle_length` slots and takes one element from each
    slot in turn; when a stream ends, its slot is left empty for this turn, and the
    next unopened input takes it when the turn comes back (Grain's order). Typical use:
    one stream per file, so a few files are read at a time.

    Inputs are zero-argument factories (called when the input is opened or restored,
    so only open streams exist) or iterators (rewound to the state they had when
    passed in when they are opened). The state lists the open inputs with their states,
    the next slot and the next input to open: its size is O(cycle_length) (resharded,
    see below, O(cycle_length * the largest process count)). The `origin`
    of an element is `(input number,) + <its origin in that input>` (None if the input
    gives none).

    Resharded to another process count (`chute_checkpoint.reshard`), a state may also
    list streams other processes left open (`pending`: opened, each at its saved state,
    before any new input) and the inputs from `next_input` on that they opened
    (`frontier`, a `Frontier` over the inputs' positions in the shard), which are skipped,
    and, by input, the positions of its elements another process delivered (`skips`:
    what a window shuffle after the interleave had yielded), which are left out. All stay
    bounded: a pending stream goes once it is opened, the frontier once `next_input`
    passes it, and an input's skips once they are passed or the input ends.

    Args:
        inputs: factories of checkpointable iterators, or the iterators themselves;
            None at a position with no stream (a file a filter dropped), which is
            skipped without taking a turn, so positions keep their numbers. A list or
            tuple is checked at once; another sequence (a lazy view of many files) is
            read lazily, each item when its input is opened, and holds factories.
        cycle_length: the number of streams open at once (>= 1).
        stream_positions: whether each stream's elements have their position in it as
            origin (a `MapDataset` read in order), as the caller knows (None: unknown),
            or a function that finds out when first asked; a window shuffle after the
            interleave reshards only then (`chute_checkpoint.check_reshardable` reads
            it).

    Example:
        >>> from chute_samplers import SequentialIter
        >>> files = [["a0", "a1", "a2"], ["b0"], ["c0", "c1"]]
        >>> it = InterleaveIter([lambda f=f: SequentialIter(f) for f in files], cycle_length=2)
        >>> list(it)
        ['a0', 'b0', 'a1', 'a2', 'c0', 'c1']
        >>> it.origin  # Input 2, position 1.
        (2, 1)
    """

    def __init__(
        self,
        inputs: Sequence[Input[T]],
        cycle_length: int,
        stream_positions: bool | Callable[[], bool | None] | None = None,
    ) -> None:
        check_sequence(inputs, "inputs", "InterleaveIter")
        self._cycle_length = check_int(cycle_length, "cycle_length", "InterleaveIter", minimum=1)
        self._stream_positions = stream_positions
        # A list or tuple is checked now; another sequence is read lazily (see Args).
        self._inputs = tuple(inputs) if isinstance(inputs, list | tuple) else inputs
        self._initial: dict[int, IteratorState] = {}
        for number, item in enumerate(self._inputs if isinstance(self._inputs, tuple) else ()):
            if item is None:
                continue  # A position with no stream (a filter dropped it): skipped.
            if hasattr(item, "__next__"):
                check_iterator(item, "InterleaveIter", f"inputs[{number}]")
                self._initial[number] = item.get_state()
            elif not callable(item):
                raise TypeError(
                    f"InterleaveIter: inputs[{number}] must be a checkpointable iterator or a "
                    f"zero-argument callable returning one, got {type(item).__name__}."
                )
        self._slots: list[tuple[int, CheckpointableIterator[T]] | None] = [
            None
        ] * self._cycle_length
        self._cursor = 0
        self._next_input = 0
        # Streams left open by other processes, opened at their states (kept to save).
        self._pending: list[tuple[int, CheckpointableIterator[T], IteratorState]] = []
        self._frontier: Frontier | None = None  # Inputs other processes opened.
        self._skips: dict[int, set[int]] = {}  # By input: positions others delivered.
        self._last: tuple[int, CheckpointableIterator[T]] | None = None  # Slot last read.

    @property
    def stream_positions(self) -> bool | None:
        """Whether each stream's elements have their position in it as origin (see Args)."""
        found = self._stream_positions
        if callable(found):
            found = self._stream_positions = found()
        return found

    @property
    def origin(self) -> tuple[int, ...] | None:
        """`(input number,) + input.origin` of the element last returned."""
        last = self._last
        if last is None:
            return None
        inner: tuple[int, ...] | None = getattr(last[1], "origin", None)
        return None if inner is None else (last[0], *inner)

    def _open(
        self, number: int, state: IteratorState | None, item: Input[T] | None = None
    ) -> CheckpointableIterator[T]:
        """Input `number` (`item`, if the caller has it) at `state` (None: its start)."""
        if item is None:
            item = self._inputs[number]
        if number in self._initial:
            iterator: CheckpointableIterator[T] = item  # type: ignore[assignment]
            iterator.set_state(self._initial[number] if state is None else state)
            return iterator
        if not callable(item) or hasattr(item, "__next__"):  # Read lazily: checked now.
            raise TypeError(
                f"InterleaveIter: inputs[{number}] of a lazy sequence must be a zero-argument "
                f"callable returning a checkpointable iterator, got {type(item).__name__}."
            )
        made = item()
        check_iterator(made, "InterleaveIter", f"inputs[{number}]()")
        if state is not None:
            made.set_state(state)
        return made

    def input_start_state(self, number: int) -> IteratorState:
        """The state input `number` starts from (a factory input is made to ask it).

        With it, a caller can write a state that opens an input at a chosen point.

        Example:
            >>> from chute_samplers import SequentialIter
            >>> InterleaveIter([lambda: SequentialIter(["a", "b"])], 1).input_start_state(0)
            {'position': 0}
        """
        check_int(number, "number", "InterleaveIter.input_start_state", minimum=0)
        if number >= len(self._inputs):
            raise IndexError(
                f"InterleaveIter.input_start_state: input {number} is past the last of "
                f"the {len(self._inputs)} inputs."
            )
        if number in self._initial:
            return self._initial[number]
        item = self._inputs[number]
        if item is None:
            raise ValueError(
                f"InterleaveIter.input_start_state: input {number} has no stream (None)."
            )
        made = self._open(number, None, item)
        state: IteratorState = made.get_state()
        close = getattr(made, "close", None)
        if close is not None:
            close()
        return state

    def __next__(self) -> T:
        while True:
            if self._next_input >= len(self._inputs) and not self._pending and not any(self._slots):
                raise StopIteration
            slot = self._slots[self._cursor]
            if slot is None:
                if self._pending:
                    number, stream, _ = self._pending.pop(0)
                    self._slots[self._cursor] = (number, self._past_skips(number, stream))
                elif self._next_input < len(self._inputs):
                    number = self._next_input
                    self._next_input += 1
                    self._skip_opened()
                    item = self._inputs[number]
                    if item is not None:  # Else no stream: the next one.
                        stream = self._open(number, None, item)
                        self._slots[self._cursor] = (number, self._past_skips(number, stream))
                else:
                    self._cursor = (self._cursor + 1) % self._cycle_length
                continue
            try:
                element = next(slot[1])
            except StopIteration:  # The slot is refilled when the turn comes back to it.
                self._slots[self._cursor] = None
                self._skips.pop(slot[0], None)
                self._cursor = (self._cursor + 1) % self._cycle_length
                continue
            if self._skips and slot[0] in self._skips and self._skipped(slot):
                continue  # Delivered by another process before a reshard: the next one.
            self._cursor = (self._cursor + 1) % self._cycle_length
            self._last = slot
            return element

    def _past_skips(
        self, number: int, stream: CheckpointableIterator[T]
    ) -> CheckpointableIterator[T]:
        """`stream` moved past the positions to skip that start where it stands.

        Only a reader's `{"position": p}` state: the records at `p`, `p + 1`, ... that
        another process delivered are then left out without being read.
        """
        skips = self._skips.get(number)
        if not skips:
            return stream
        state = stream.get_state()
        if set(state) != {"position"} or type(state["position"]) is not int:
            return stream
        at = state["position"]
        while at in skips:
            skips.discard(at)
            at += 1
        if at != state["position"]:
            stream.set_state({"position": at})
        if not skips:
            del self._skips[number]
        return stream

    def _skipped(self, slot: tuple[int, CheckpointableIterator[T]]) -> bool:
        """Whether the element just read from `slot` is one to skip (and forgets it)."""
        number, stream = slot
        origin = getattr(stream, "origin", None)
        if origin is None or len(origin) != 1:
            raise InvalidStateError(
                f"{self!r}: the state says which positions of input {number} to skip, but "
                f"its elements have no one-int origin (got {origin!r}); the state belongs to "
                "another pipeline."
            )
        skips = self._skips[number]
        if origin[0] not in skips:
            return False
        skips.discard(origin[0])
        if not skips:
            del self._skips[number]
        return True

    def _skip_opened(self) -> None:
        """Moves `next_input` past the inputs the frontier says other processes opened."""
        frontier = self._frontier
        if frontier is None:
            return
        end = len(self._inputs)
        while self._next_input < end and not frontier.keeps(
            frontier.global_position(self._next_input)
        ):
            self._next_input += 1
        self._frontier = frontier.after(self._next_input)

    def get_state(self) -> IteratorState:
        slots: list[JsonValue] = [
            None if slot is None else {"input": slot[0], "state": slot[1].get_state()}
            for slot in self._slots
        ]
        state: IteratorState = {
            "cursor": self._cursor,
            "next_input": self._next_input,
            "slots": slots,
        }
        if self._pending:
            state[PENDING] = [[number, inner] for number, _, inner in self._pending]
        if self._frontier is not None:
            state[FRONTIER] = self._frontier.to_json()
        if self._skips:
            state[SKIPS] = [[n, positions_span(sorted(p))] for n, p in sorted(self._skips.items())]
        return state

    def set_state(self, state: IteratorState, /) -> None:
        checked = state_dict(
            self, state, ("cursor", "next_input", "slots"), (PENDING, FRONTIER, SKIPS)
        )
        cursor = state_int(self, checked, "cursor", maximum=self._cycle_length - 1)
        frontier = self._read_frontier(checked)
        if frontier is not None and isinstance(checked["next_input"], int):
            # A resharded state starts where the new shard begins, which may be past its end.
            checked = {**checked, "next_input": min(checked["next_input"], len(self._inputs))}
        next_input = state_int(self, checked, "next_input", maximum=len(self._inputs))
        slots = checked["slots"]
        if not isinstance(slots, list) or len(slots) != self._cycle_length:
            raise InvalidStateError(
                f"{self!r}: state['slots'] must list {self._cycle_length} slots (the "
                f"cycle_length), got {slots!r}."
            )
        # Streams continued from a reshard may lie past `next_input`: the frontier skips them.
        last = len(self._inputs) - 1 if frontier is not None else next_input - 1
        wanted: list[tuple[int, IteratorState] | None] = []
        for slot in slots:
            if slot is None:
                wanted.append(None)
                continue
            if not isinstance(slot, dict) or not isinstance(slot.get("state"), dict):
                raise InvalidStateError(f"{self!r}: malformed slot {slot!r} in the state.")
            state_dict(self, slot, ("input", "state"))
            number = state_int(self, slot, "input", maximum=last)
            wanted.append((number, cast(IteratorState, slot["state"])))
        pending = self._read_pending(checked)
        numbers = [w[0] for w in wanted if w is not None] + [p[0] for p in pending]
        if len(set(numbers)) != len(numbers):
            raise InvalidStateError(
                f"{self!r}: state['slots'] and state['pending'] open input(s) "
                f"{sorted({n for n in numbers if numbers.count(n) > 1})} more than once; each "
                "input is read in one slot at most."
            )
        skips = spans_pairs(checked.get(SKIPS, []), repr(self))
        if any(n >= len(self._inputs) for n in skips):
            raise InvalidStateError(
                f"{self!r}: state['skips'] names input(s) {sorted(skips)}, past the last of "
                f"the {len(self._inputs)} inputs."
            )
        absent = sorted(n for n in {*numbers, *skips} if self._inputs[n] is None)
        if absent:
            raise InvalidStateError(
                f"{self!r}: the state opens input(s) {absent}, which have no stream (None)."
            )
        stale = sorted(
            n for n in skips if n not in numbers and self._was_opened(n, next_input, frontier)
        )
        if stale:
            raise InvalidStateError(
                f"{self!r}: state['skips'] names input(s) {stale}, which were read to the end "
                "(opened, and open no more); the state is damaged."
            )
        ahead = sorted(n for n in numbers if not self._was_opened(n, next_input, frontier))
        if ahead:
            raise InvalidStateError(
                f"{self!r}: the state has input(s) {ahead} open, which it would also open "
                f"anew (they are not below next_input {next_input}, nor opened elsewhere "
                "by its frontier); the state is damaged."
            )
        # Inputs given as iterators are shared with the caller: set back if one refuses.
        shared = {n: self._inputs[n].get_state() for n in numbers if n in self._initial}  # type: ignore[union-attr]
        restored: list[tuple[int, CheckpointableIterator[T]] | None] = []
        opened: list[tuple[int, CheckpointableIterator[T], IteratorState]] = []
        try:
            for item in wanted:
                restored.append(None if item is None else (item[0], self._open(*item)))
            for number, inner in pending:  # Opened now: a damaged state moves nothing.
                opened.append((number, self._open(number, inner), inner))
        except BaseException:
            for number, previous in shared.items():
                self._inputs[number].set_state(previous)  # type: ignore[union-attr]
            raise
        self._slots, self._cursor, self._next_input = restored, cursor, next_input
        self._pending, self._frontier = opened, frontier
        self._skips = {n: set(p.tolist()) for n, p in skips.items()}
        self._skip_opened()
        self._last = None

    @staticmethod
    def _was_opened(number: int, next_input: int, frontier: Frontier | None) -> bool:
        """Whether input `number` was opened: below `next_input`, or elsewhere."""
        if number < next_input:
            return True
        return frontier is not None and not frontier.keeps(frontier.global_position(number))

    def _read_frontier(self, state: IteratorState) -> Frontier | None:
        if FRONTIER not in state:
            return None
        return Frontier.from_json(state[FRONTIER], repr(self))

    def _read_pending(self, state: IteratorState) -> list[tuple[int, IteratorState]]:
        entries = state.get(PENDING, [])
        if not isinstance(entries, list):
            raise InvalidStateError(
                f"{self!r}: state['pending'] must list [input, state] pairs, got {entries!r:.200}."
            )
        pending: list[tuple[int, IteratorState]] = []
        for entry in entries:
            if not isinstance(entry, list) or len(entry) != 2 or not isinstance(entry[1], dict):
                raise InvalidStateError(
                    f"{self!r}: a pending stream is [input, state], got {entry!r:.200}."
                )
            number = state_int(self, {"input": entry[0]}, "input", maximum=len(self._inputs) - 1)
            pending.append((number, entry[1]))
        return pending

    def __repr__(self) -> str:
        return f"InterleaveIter({len(self._inputs)} inputs, cycle_length={self._cycle_length})"


INTERLEAVE = declare_op(
    "interleave", StageTraits(begins_stream=True, opens=True), iter_node=InterleaveIter
)
"""The op's declaration (see `chute_core.declare_op`)."""
