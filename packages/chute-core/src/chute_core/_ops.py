"""Ops as the layers that implement them declare them: name, traits, node classes.

Each op is declared once, beside its implementation, by the package that owns it
(`declare_op`): its name, its `StageTraits` (what it does to the positions of the
stream, and which of its parameters only tune performance) and its node classes (the
random-access one for `MapDataset`, the stream one for `IterDataset`). The fluent API
builds stages from declarations, and the checkpoint layer writes the traits of each
stage into the state documents it saves (`StageTraits.as_json`), so resharding a saved
document needs no registry an upper layer fills.

Example:
    >>> fold = declare_op("docs_fold", StageTraits(keeps_positions=True))
    >>> fold.name, stage_traits("docs_fold").keeps_positions
    ('docs_fold', True)
    >>> StageTraits.from_json(fold.traits.as_json()) == fold.traits
    True
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

__all__ = [
    "OpDeclaration",
    "StageTraits",
    "declare_op",
    "declare_stage",
    "declared_op",
    "declared_stages",
    "is_declared",
    "stage_traits",
]


@dataclasses.dataclass(frozen=True)
class StageTraits:
    """What a stage does to the positions of the stream, declared by the op's owner.

    Attributes:
        elementwise: its output for an element depends on that element alone (and its
            origin), so it may run on any chunk of positions in any process.
        keeps_positions: element `i` of its output comes from position `i` of its
            input, so the stages before it can be re-cut across processes.
        drops: it may keep fewer elements than it reads (a filter).
        random: it draws from a seed (counted to derive the next random stage's).
        begins_stream: the stages after it are a stream (iterator) over the positions
            it reads in order; before it, the pipeline is random-access.
        shard: the names of its (shard index, shard count) parameters, if it takes one
            shard of its input by stride.
        groups: the parameter giving how many input positions make one output
            position, for a random-access stage (a batch before the stream begins).
        chunk: the parameter giving how many positions one chunk of its state holds
            (its state counts chunks and an offset, not positions).
        records_skips: its state lists skipped elements by their positions, which
            another cut of the data would number differently.
        consumer_only: it runs only in the process that consumes the stream (it puts
            batches on devices), so no stage may follow it in worker processes.
        performance: parameters that never change the elements (worker counts, buffer
            sizes): left out of fingerprints, so a checkpoint restores across them.
        changeable: parameters a restore may find changed when the caller allows it
            (`allow_changes`), because a stream stage continues exactly with the new
            value (a mixture's weights: each component goes on from its own state).
        chooses: over input streams, it yields each element whole from one input, which
            it picks by its own position alone (a mixture): the inputs' states are
            independent, so resharding continues each input on its own.
        splits: a stream stage that turns each element into zero or more outputs, in
            order (a flat map): its state is the parent's before the current element,
            the outputs of it already yielded (`offset`), and the outputs to skip of
            elements a resharded state assigned it (`skip`, by the element's position),
            so another process count continues an element where it stopped.
        holds: a stream stage that reads elements ahead and yields them in another
            order (a window shuffle): its state is its parent's at the first element it
            holds, plus which of the elements read since it yielded, by position, so
            another process count reads the others again and skips those.
        merges: a stream stage each of whose outputs gathers several elements (packing
            into rows): the stages after it see rows, not positions.
        names_splits: a chunked stage whose state, when it stops inside an element that
            the stages it runs split (a flat map before it), names that element and the
            outputs of it delivered, so such a split continues on another process count.
        numbered: whether its output depends on the number this process gives an
            element (its position in the shard, or a count), which another process count
            gives anew: None, never; "always" (an index, as `map_with_index`); or the
            name of the parameter that decides, numbered unless it is "record" (a random
            map's `key`). A stage that splits or packs elements after such a stage cannot
            continue elsewhere an element a process stopped inside.
        opens: it begins the stream by opening each position of its input as a stream
            of its own and reading several at a time (an interleave): its state says
            the next position to open and the state of each stream open (or, once
            resharded, to continue), so another process count continues each stream
            where it stopped and skips the positions other processes opened.
        repeats: a stream stage that reads its parent again from its start, epoch
            after epoch: its state is the epoch and the parent's state (and, once
            resharded, the parent's states for the later epochs other processes had
            reached), so another process count continues each epoch exactly.
        stride: a selection whose parameter of this name shows a Python slice as
            `[start:stop:step]`: a slice `[i::n]` with `0 <= i < n` takes shard `i` of
            `n` by stride, as a shard stage does (Grain shards a `MapDataset` so,
            `ds[i::n]`), and resharding treats it as one.
        keeps_length: a random-access stage whose output is as long as its input,
            though it may not keep positions (a shuffle): resharding reads the length
            of a shard's input through it (see `repeats` after a shard).

    Example:
        >>> StageTraits(elementwise=True).keeps_positions
        False
    """

    elementwise: bool = False
    keeps_positions: bool = False
    drops: bool = False
    random: bool = False
    begins_stream: bool = False
    shard: tuple[str, str] | None = None
    groups: str | None = None
    chunk: str | None = None
    records_skips: bool = False
    consumer_only: bool = False
    performance: frozenset[str] = frozenset()
    changeable: frozenset[str] = frozenset()
    chooses: bool = False
    splits: bool = False
    holds: bool = False
    merges: bool = False
    names_splits: bool = False
    numbered: str | None = None
    opens: bool = False
    repeats: bool = False
    keeps_length: bool = False
    stride: str | None = None

    def as_json(self) -> dict[str, Any]:
        """The traits that differ from the defaults, as JSON (sets as sorted lists).

        Example:
            >>> StageTraits(keeps_positions=True, performance=frozenset({"b", "a"})).as_json()
            {'keeps_positions': True, 'performance': ['a', 'b']}
        """
        shown: dict[str, Any] = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value != field.default:
                shown[field.name] = (
                    sorted(value)
                    if isinstance(value, frozenset)
                    else (list(value) if isinstance(value, tuple) else value)
                )
        return shown

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> StageTraits:
        """Traits from `as_json`'s form.

        Raises:
            ValueError: an unknown field, or a value of the wrong type (the message
                says which).

        Example:
            >>> StageTraits.from_json({"shard": ["shard_index", "shard_count"]}).shard
            ('shard_index', 'shard_count')
        """
        if not isinstance(value, Mapping):
            raise ValueError(f"traits must be a JSON object, got {value!r:.80}.")
        fields = {field.name: field for field in dataclasses.fields(cls)}
        kwargs: dict[str, Any] = {}
        for name, item in value.items():
            field = fields.get(name)
            if field is None:
                raise ValueError(f"unknown trait {name!r} (known: {sorted(fields)}).")
            kwargs[name] = _trait_value(name, field.default, item)
        return cls(**kwargs)


def _trait_value(name: str, default: Any, value: Any) -> Any:
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ValueError(f"trait {name!r} must be true or false, got {value!r:.80}.")
        return value
    if isinstance(default, frozenset):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError(f"trait {name!r} must be a list of names, got {value!r:.80}.")
        return frozenset(value)
    if name == "shard":
        if value is None:
            return None
        if not (
            isinstance(value, list) and len(value) == 2 and all(isinstance(v, str) for v in value)
        ):
            raise ValueError(f"trait 'shard' must be two parameter names, got {value!r:.80}.")
        return (value[0], value[1])
    if value is not None and not isinstance(value, str):
        raise ValueError(f"trait {name!r} must be a parameter name or null, got {value!r:.80}.")
    return value


@dataclasses.dataclass(frozen=True)
class OpDeclaration:
    """One op, as the layer that implements it declares it (see `declare_op`).

    Attributes:
        name: the op's name in pipeline descriptions (`print(ds)`, checkpoints).
        traits: what it does to positions, and its performance-only parameters.
        map_node: its random-access node class (for `MapDataset`), if it has one.
        iter_node: its stream node class (for `IterDataset`), if it has one.

    Example:
        >>> OpDeclaration("docs_noop").traits == StageTraits()
        True
    """

    name: str
    traits: StageTraits = StageTraits()
    map_node: type | None = None
    iter_node: type | None = None


_OPS: dict[str, OpDeclaration] = {}


def declare_op(
    name: str,
    traits: StageTraits | None = None,
    *,
    map_node: type | None = None,
    iter_node: type | None = None,
) -> OpDeclaration:
    """Declares the op `name`, beside its implementation; returns its declaration.

    Declaring an op again with other traits or classes is a mistake and raises.

    Example:
        >>> declare_op("docs_twice", StageTraits(drops=True)).traits.drops
        True
        >>> declared_op("docs_twice").name
        'docs_twice'
    """
    declaration = OpDeclaration(name, traits or StageTraits(), map_node, iter_node)
    known = _OPS.setdefault(name, declaration)
    if _shape(known) != _shape(declaration):
        raise ValueError(f"op {name!r} is already declared, otherwise: {known}.")
    declare_stage(name, declaration.traits)
    return declaration


def _shape(declaration: OpDeclaration) -> tuple[Any, ...]:
    """What must agree when an op is declared twice: its traits, its classes' names.

    By name, not identity: a module imported again under another name (a test runner
    importing a file by its path) declares the same op with copies of its classes.
    """
    names = [
        None if kind is None else kind.__qualname__
        for kind in (declaration.map_node, declaration.iter_node)
    ]
    return declaration.traits, *names


def declared_op(name: str) -> OpDeclaration | None:
    """The declaration of the op `name` (`declare_op`), or None.

    Example:
        >>> declared_op("no such op") is None
        True
    """
    return _OPS.get(name)


_UNDECLARED = StageTraits()
_TRAITS: dict[str, StageTraits] = {}


def declare_stage(op: str, traits: StageTraits) -> None:
    """Declares the traits of the op `op` (by the package that defines the op).

    Declaring the same op again with other traits is a mistake and raises.

    Example:
        >>> declare_stage("docs_example", StageTraits())
        >>> is_declared("docs_example"), stage_traits("docs_example").elementwise
        (True, False)
    """
    known = _TRAITS.setdefault(op, traits)
    if known != traits:
        raise ValueError(f"stage {op!r} is already declared, with other traits: {known}.")


def is_declared(op: str) -> bool:
    """Whether a package declared the op `op` (see `declare_stage`).

    Example:
        >>> is_declared("no such op")
        False
    """
    return op in _TRAITS


def declared_stages() -> dict[str, StageTraits]:
    """Every declared op and its traits (a copy), e.g. to list what a check allows.

    Example:
        >>> declare_stage("docs_example", StageTraits())
        >>> declared_stages()["docs_example"].keeps_positions
        False
    """
    return dict(_TRAITS)


def stage_traits(op: str) -> StageTraits:
    """The declared traits of `op`; an undeclared op has none (all False).

    Example:
        >>> stage_traits("no such op") == StageTraits()
        True
    """
    return _TRAITS.get(op, _UNDECLARED)
