"""One typed description of a pipeline, owned by the lowest layer and read by all.

A pipeline is described as a tuple of `PipelineStage`s: each names its op, holds its
parameters (as objects, and as the short text `print` shows), the stages of its inputs
(a mix has several), and points to its `StageTraits`: what the stage does to positions
and which of its parameters are performance knobs. Traits are declared once per op, by
the package that owns the op, beside it (`declare_op`, in `chute_core._ops`), so every
layer that reasons about a pipeline (the checkpoint's fingerprint and resharding, the
worker planner, `repr`) dispatches on declared properties, never on op names it would
have to know.

Example:
    >>> shuffle = PipelineStage("shuffle", (("seed", "3"),), raw=(("seed", 3),))
    >>> description = PipelineDescription("MapDataset", (PipelineStage("range"), shuffle))
    >>> print(description.render())
    MapDataset
      range()
      .shuffle(seed=3)
    >>> description()["stages"][1]
    {'op': 'shuffle', 'params': {'seed': 3}}
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Protocol

from ._ops import StageTraits, stage_traits

__all__ = ["PipelineDescription", "PipelineStage", "PositionLayout", "WrapperLayout"]


@dataclasses.dataclass(frozen=True)
class PipelineStage:
    """One stage of a pipeline: an op, its parameters, and the stages of its inputs.

    Attributes:
        op: the op's name, e.g. `shuffle`; its traits are `stage_traits(op)`.
        params: the parameters as `print` shows them: `(name, text)` pairs (a name
            of "" shows the text alone).
        inputs: for ops over several pipelines (mix, interleave), each input's stages.
        raw: the parameters as objects, which a checkpoint's fingerprint describes by
            structure; empty: the shown ones.
        shown_as: the name `print` shows, when it is not the op's (two spellings of
            one op, e.g. `ray_prefetch` of `mp_prefetch`: one state, one fingerprint).

    Example:
        >>> stage = PipelineStage("batch", (("batch_size", "32"),), raw=(("batch_size", 32),))
        >>> stage.line(), stage.as_dict()
        ('batch(batch_size=32)', {'op': 'batch', 'params': {'batch_size': 32}})
    """

    op: str
    params: tuple[tuple[str, str], ...] = ()
    inputs: tuple[tuple[PipelineStage, ...], ...] = ()
    raw: tuple[tuple[str, Any], ...] = dataclasses.field(default=(), compare=False, repr=False)
    shown_as: str | None = dataclasses.field(default=None, compare=False, repr=False)

    @property
    def traits(self) -> StageTraits:
        """The traits declared for this stage's op."""
        return stage_traits(self.op)

    def line(self) -> str:
        """The stage on one line, e.g. `shuffle(seed=3)`."""
        params = ", ".join(f"{key}={value}" if key else value for key, value in self.params)
        return f"{self.shown_as or self.op}({params})"

    def as_dict(self) -> dict[str, Any]:
        """`{"op", "params", "inputs"}` with the parameters as objects (performance too)."""
        described: dict[str, Any] = {"op": self.op, "params": dict(self.raw or self.params)}
        if self.inputs:
            described["inputs"] = [[stage.as_dict() for stage in part] for part in self.inputs]
        return described


@dataclasses.dataclass(frozen=True)
class PipelineDescription:
    """A whole pipeline: its kind (`MapDataset`, `DataLoader`, ...) and its stages.

    Calling it gives the dict a checkpoint's fingerprint is computed from (see
    `chute_checkpoint.describe_pipeline`), which is why iterators carry one as their
    `chute_pipeline` attribute.

    Example:
        >>> pipeline = PipelineDescription("Loader", (PipelineStage("read"),))
        >>> pipeline(), pipeline.find(lambda stage: stage.op == "read")
        ({'kind': 'Loader', 'stages': [{'op': 'read', 'params': {}}]}, True)
    """

    kind: str
    stages: tuple[PipelineStage, ...]

    def __call__(self) -> dict[str, Any]:
        return {"kind": self.kind, "stages": [stage.as_dict() for stage in self.stages]}

    def render(self) -> str:
        """The pipeline as a readable chain: one stage a line, each input indented."""
        return "\n".join([self.kind, *_lines(self.stages, "  ")])

    def find(self, predicate: Any) -> bool:
        """Whether a stage (or a stage of an input) satisfies `predicate(stage)`."""
        return _find(self.stages, predicate)


def _find(stages: tuple[PipelineStage, ...], predicate: Any) -> bool:
    return any(
        predicate(stage) or any(_find(part, predicate) for part in stage.inputs) for stage in stages
    )


def _lines(stages: tuple[PipelineStage, ...], indent: str) -> list[str]:
    lines = []
    for number, item in enumerate(stages):
        lines.append(f"{indent}{'.' if number else ''}{item.line()}")
        for branch_number, branch in enumerate(item.inputs):
            label = f"[{branch_number}] "
            branch_lines = _lines(branch, indent + "  " + " " * len(label))
            if not branch_lines:
                lines.append(f"{indent}  {label}<a stream>")
                continue
            lines.append(f"{indent}  {label}{branch_lines[0].lstrip()}")
            lines.extend(branch_lines[1:])
    return lines


class PositionLayout(Protocol):
    """How an iterator's state holds the position of the stream in its base positions.

    Implemented by the layer that owns the state's layout (a reader's
    `{"position": p}`, the workers' `{"position": p, "offset": k}`), so that resharding
    moves a stream to another position without knowing any layout itself.

    Example:
        >>> class Reader:  # The layout {"position": p}.
        ...     def read(self, state, chunk_size, drops):
        ...         return state.get("position")
        ...     def write(self, position, chunk_size):
        ...         return {"position": position}
        >>> layout: PositionLayout = Reader()
        >>> layout.read(layout.write(7, None), None, False)
        7
    """

    def read(self, state: Mapping[str, Any], chunk_size: int | None, drops: bool) -> int | None:
        """The base position `state` is at; None if `state` is not of this layout.

        `chunk_size` is the declared chunk size of the pipeline (`StageTraits.chunk`),
        `drops` whether a stage may have dropped elements (`StageTraits.drops`).

        Raises:
            ValueError: the state is of this layout but its position cannot be told
                (the message says why).
        """
        ...

    def write(self, position: int, chunk_size: int | None) -> dict[str, Any]:
        """The state of this layout at base position `position`."""
        ...


class WrapperLayout(Protocol):
    """How the state of an iterator over a parent iterator holds the parent's state.

    Example:
        >>> class Around:  # The layout {"parent": <the parent's state>}.
        ...     def inner(self, state):
        ...         return state.get("parent")
        ...     def rebuild(self, state, inner, scale):
        ...         return {**state, "parent": inner}
        >>> layout: WrapperLayout = Around()
        >>> layout.rebuild({"parent": {"position": 3}}, {"position": 9}, (1, 1))
        {'parent': {'position': 9}}
    """

    def inner(self, state: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The parent's state inside `state`; None if `state` is not of this layout.

        Raises:
            ValueError: a state of this layout that cannot move to another position
                (the message says why).
        """
        ...

    def rebuild(
        self, state: Mapping[str, Any], inner: dict[str, Any], scale: tuple[int, int]
    ) -> dict[str, Any]:
        """`state` around the moved parent state `inner`, counts scaled by `scale[0] / scale[1]`."""
        ...
