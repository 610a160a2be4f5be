"""The state document: versioned JSON with a pipeline fingerprint, validated on load.

Format version 2 (today's), one document per process:

    {"format": "chute-iterator-state", "version": 2,
     "fingerprint": "<BLAKE2b of the pipeline description>",
     "pipeline": {"kind": ..., "stages": [...]},   # see chute_checkpoint._describe
     "traits": {op: {...}},                        # each op's StageTraits.as_json()
     "state": {...},                               # iterator.get_state()
     "process_index": 0, "process_count": 1}

Version 1 had no "traits" (resharding read them from the ops this process declared);
it upgrades to version 2 with the traits its ops had then (`_stage_traits`). The
fingerprint covers the pipeline only, so it is the same in both.

A newer format gets a higher version and an entry in `_UPGRADES` that turns a document
of the version before into it, so files written today keep loading.
"""

from __future__ import annotations

import json
import math
import operator
import sys
from collections.abc import Callable, Collection, Mapping
from typing import Any

from chute_core import (
    ArgumentTypeError,
    CheckpointableIterator,
    InvalidArgumentError,
    InvalidStateError,
    StageTraits,
    is_declared,
    stage_traits,
)

from ._changes import refused_changes
from ._chunk_sizes import counts_chunks, only_chunk_sizes_differ
from ._describe import describe_pipeline, fingerprint, stage_traits_of
from ._differences import pipeline_differences
from ._document_shape import check_pipeline
from ._errors import CheckpointError, CheckpointFormatError, PipelineMismatchError
from ._stage_traits import saved_json, saved_traits, traits_of_ops, upgrade_version_1

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "MAX_PROCESS_COUNT",
    "apply_document",
    "dumps_document",
    "loads_document",
    "make_document",
    "process_position",
    "validate_document",
]

FORMAT = "chute-iterator-state"
"""The value of the `format` key that marks a chute checkpoint."""
FORMAT_VERSION = 2
"""The version written today; every version from 1 up to it loads."""
MAX_PROCESS_COUNT = 1_000_000
"""The most processes a checkpoint may have: far more than any JAX cluster runs.

Counts come from file names and documents others may have written; the bound keeps a
stray or crafted one from costing work or memory (and refuses what cannot be real).
"""
_TOO_MANY = f"at most {MAX_PROCESS_COUNT:,} (more processes than any JAX cluster runs)"

_UPGRADES: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: upgrade_version_1}
"""`version -> function` turning a document of that version into one of the next."""

_REQUIRED: dict[str, tuple[type, ...]] = {
    "fingerprint": (str,),
    "pipeline": (dict,),
    "traits": (dict,),
    "state": (dict,),
    "process_index": (int,),
    "process_count": (int,),
}


def process_position(index: int | None = None, count: int | None = None) -> tuple[int, int]:
    """`(process_index, process_count)`: the arguments, else JAX's, else `(0, 1)`.

    JAX is asked only when it is already imported (this never imports it).

    Raises:
        ArgumentTypeError: the index or the count is not an integer (or is a bool).
        InvalidArgumentError: the index is not in `[0, count)`, or the count is over
            `MAX_PROCESS_COUNT`.

    Example:
        >>> process_position(1, 4)
        (1, 4)
    """
    if index is None or count is None:
        jax = sys.modules.get("jax")
        found = (jax.process_index(), jax.process_count()) if jax is not None else (0, 1)
        index = found[0] if index is None else index
        count = found[1] if count is None else count
    if isinstance(index, bool) or isinstance(count, bool):
        raise ArgumentTypeError(
            f"process_index and process_count must be integers, got {index!r} and {count!r}."
        )
    try:
        index, count = operator.index(index), operator.index(count)
    except TypeError:
        raise ArgumentTypeError(
            f"process_index and process_count must be integers, got {index!r:.50} and "
            f"{count!r:.50}."
        ) from None
    if count > MAX_PROCESS_COUNT:
        raise InvalidArgumentError(f"process_count must be {_TOO_MANY}, got {count}.")
    if not 0 <= index < count:
        raise InvalidArgumentError(
            f"process_index must be in [0, process_count), got process_index={index}, "
            f"process_count={count}."
        )
    return index, count


def make_document(
    iterator: CheckpointableIterator[Any],
    process_index: int | None = None,
    process_count: int | None = None,
) -> dict[str, Any]:
    """The state document of `iterator` now (its state, pipeline and fingerprint).

    Example:
        >>> import chute
        >>> it = iter(chute.MapDataset.range(5).to_iter_dataset())
        >>> _ = next(it)
        >>> document = make_document(it)
        >>> document["version"], document["state"], document["process_count"]
        (2, {'position': 1}, 1)
    """
    index, count = process_position(process_index, process_count)
    pipeline = describe_pipeline(iterator)
    document = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "fingerprint": fingerprint(pipeline),
        "pipeline": pipeline,
        "traits": {**traits_of_ops(pipeline), **_own_traits(iterator)},
        "state": iterator.get_state(),
        "process_index": index,
        "process_count": count,
    }
    try:
        json.dumps(document, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise CheckpointError(
            f"the state of {type(iterator).__name__} is not plain JSON ({error}); "
            f"get_state() must return dicts, lists, strings, finite numbers, bools and None."
        ) from error
    return document


def _own_traits(iterator: object) -> dict[str, Any]:
    """What the iterator's pipeline says its own ops do, as JSON (`stage_traits_of`)."""
    return {op: saved_json(traits) for op, traits in stage_traits_of(iterator).items()}


def dumps_document(document: Mapping[str, Any]) -> str:
    """The document as JSON text (indented, one trailing newline).

    Example:
        >>> print(dumps_document({"version": 1}), end="")
        {
          "version": 1
        }
    """
    return json.dumps(document, indent=2, allow_nan=False) + "\n"


def loads_document(text: str | bytes, where: str = "checkpoint") -> dict[str, Any]:
    """Parses and validates a state document (see `validate_document`).

    Raises:
        CheckpointFormatError: the text is not JSON (e.g. truncated) or not a valid
            document.

    Example:
        >>> try:
        ...     loads_document('{"version": 1', "state.json")
        ... except CheckpointFormatError as error:
        ...     print(error)  # doctest: +ELLIPSIS
        state.json: not valid JSON (truncated or corrupt?): Expecting ',' delimiter: ...
    """
    try:
        document = json.loads(text, parse_constant=_not_finite, parse_float=_finite_float)
    except _NotFinite as error:
        raise CheckpointFormatError(
            f"{where}: not valid JSON: the number {error} is not finite (NaN and infinities "
            "are no JSON numbers); the file is damaged or was not written by chute."
        ) from None
    except (ValueError, UnicodeDecodeError) as error:
        raise CheckpointFormatError(
            f"{where}: not valid JSON (truncated or corrupt?): {error}"
        ) from error
    except RecursionError as error:  # e.g. 100,000 nested lists: corrupt or hostile.
        raise CheckpointFormatError(
            f"{where}: the JSON is nested too deeply to be a chute checkpoint (corrupt or "
            "not a checkpoint); restore from another checkpoint."
        ) from error
    return validate_document(document, where)


class _NotFinite(Exception):
    """A number in the JSON text that is not finite (its text is the message)."""


def _not_finite(text: str) -> float:
    raise _NotFinite(text)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # e.g. 1e999: too large for a float.
        raise _NotFinite(text)
    return value


def validate_document(document: Any, where: str = "checkpoint") -> dict[str, Any]:
    """Checks a parsed document's keys, types, version and fingerprint; upgrades old ones.

    Returns:
        The document in today's format version.

    Raises:
        CheckpointFormatError: what is wrong, e.g. a foreign file, a missing key, a
            version newer than this chute reads, or a fingerprint that does not match
            the pipeline description (an edited or corrupt file).

    Example:
        >>> try:
        ...     validate_document({"version": 2, "last_seen_indices": {}}, "grain.json")
        ... except CheckpointFormatError as error:
        ...     print(error)  # doctest: +ELLIPSIS
        grain.json: not a chute checkpoint: expected "format": "chute-iterator-state", ...
    """
    if not isinstance(document, dict):
        raise CheckpointFormatError(
            f"{where}: a chute checkpoint is a JSON object, got a {type(document).__name__}."
        )
    if document.get("format") != FORMAT:
        raise CheckpointFormatError(
            f'{where}: not a chute checkpoint: expected "format": "{FORMAT}", found the keys '
            f"{sorted(map(str, document))}."
        )
    version = document.get("version")
    if type(version) is not int:
        raise CheckpointFormatError(f"{where}: 'version' must be an integer, got {version!r}.")
    if version > FORMAT_VERSION:
        raise CheckpointFormatError(
            f"{where}: written in checkpoint format version {version} by a newer chute; this "
            f"chute reads versions 1 to {FORMAT_VERSION}. Upgrade chute to restore it."
        )
    if version < 1:
        raise CheckpointFormatError(f"{where}: unknown checkpoint format version {version}.")
    while version < FORMAT_VERSION:
        document = _UPGRADES[version](document)
        version = document["version"]
    for key, types in _REQUIRED.items():
        if key not in document:
            raise CheckpointFormatError(f"{where}: the key {key!r} is missing.")
        value = document[key]
        if not isinstance(value, types) or isinstance(value, bool):
            raise CheckpointFormatError(
                f"{where}: {key!r} must be of type {types[0].__name__}, got {value!r:.100}."
            )
    index, count = document["process_index"], document["process_count"]
    if not 0 <= index < count:
        raise CheckpointFormatError(
            f"{where}: process_index must be in [0, process_count), got {index} of {count}."
        )
    if count > MAX_PROCESS_COUNT:
        raise CheckpointFormatError(f"{where}: process_count must be {_TOO_MANY}, got {count}.")
    check_pipeline(document["pipeline"], where)
    try:
        expected = fingerprint(document["pipeline"])
    except (TypeError, ValueError) as error:
        raise CheckpointFormatError(f"{where}: 'pipeline' is not plain JSON: {error}") from error
    except RecursionError as error:
        raise CheckpointFormatError(
            f"{where}: 'pipeline' is nested too deeply to be a chute pipeline description."
        ) from error
    if expected != document["fingerprint"]:
        raise CheckpointFormatError(
            f"{where}: the fingerprint {document['fingerprint']!r} does not match the "
            f"pipeline description (hash {expected!r}): the file was edited or is corrupt."
        )
    try:
        saved_traits(document)
    except ValueError as error:
        raise CheckpointFormatError(
            f"{where}: 'traits' must map each op to its traits: {error}"
        ) from error
    result: dict[str, Any] = document
    return result


def apply_document(
    iterator: CheckpointableIterator[Any],
    document: Mapping[str, Any],
    *,
    check_pipeline: bool = True,
    where: str = "checkpoint",
    allow_changes: Collection[str] = (),
) -> None:
    """Moves `iterator` to the document's state, after checking the pipeline is the same.

    The document is checked first (`validate_document`), as one read from a file is.
    `allow_changes` names parameters that may differ where continuing with the new value
    is exact: `("weights",)` lets an `IterDataset.mix` restore with new weights, each
    component going on from its own position (see `_changes`); any other difference is
    still a `PipelineMismatchError`.

    Raises:
        CheckpointFormatError: the document is not a valid chute state document, or its
            state does not fit the iterator (the iterator refused it).
        PipelineMismatchError: the iterator's pipeline differs from the checkpoint's (the
            message names the stage and parameter); `check_pipeline=False` skips this.

    Example:
        >>> import chute
        >>> ds = chute.MapDataset.range(5).to_iter_dataset()
        >>> it = iter(ds)
        >>> _ = next(it), next(it)
        >>> fresh = iter(ds)
        >>> apply_document(fresh, make_document(it))
        >>> next(fresh)
        2
    """
    if isinstance(allow_changes, str) or not all(isinstance(n, str) for n in allow_changes):
        raise TypeError(
            f"allow_changes is a collection of parameter names, e.g. ('weights',); got "
            f"{allow_changes!r:.80}."
        )
    document = validate_document(
        dict(document) if isinstance(document, Mapping) else document, where
    )
    if check_pipeline:
        current = describe_pipeline(iterator)
        if (
            fingerprint(current) != document["fingerprint"]
            and not _allowed(document, current, allow_changes)
            and not _cut_only(document, current)
        ):
            differences = pipeline_differences(document["pipeline"], current) or [
                f"the fingerprints differ: {document['fingerprint']} != {fingerprint(current)}"
            ]
            if allow_changes:
                differences += refused_changes(
                    document["pipeline"], current, allow_changes, _traits_for(document)
                )
            differences += _hint(document, current, allow_changes)
            listed = "\n".join(f"  - {line}" for line in differences)
            raise PipelineMismatchError(
                f"{where}: the checkpoint was saved from a different pipeline than this "
                f"iterator's:\n{listed}\nRestore into an iterator of the same pipeline, or pass "
                "check_pipeline=False to restore the position anyway."
            )
    try:
        iterator.set_state(document["state"])
    except InvalidStateError as error:
        # The iterator checked the state before moving: a damaged or foreign file.
        raise CheckpointFormatError(
            f"{where}: the iterator's state in the checkpoint is not valid for this "
            f"pipeline ({error}); the file is damaged or was not written by chute."
        ) from error


def _traits_for(document: Mapping[str, Any]) -> Callable[[str], StageTraits]:
    """The traits of an op: as the document carries them, else as declared here."""
    saved = saved_traits(document)

    def traits(op: str) -> StageTraits:
        if op in saved:
            return saved[op]
        return stage_traits(op) if is_declared(op) else StageTraits()

    return traits


def _cut_only(document: Mapping[str, Any], current: Mapping[str, Any]) -> bool:
    """Whether only chunk sizes differ, and the state is by position (see `_chunk_sizes`)."""
    if counts_chunks(document["state"]):
        return False
    return only_chunk_sizes_differ(
        document["pipeline"], current, _traits_for(document), fingerprint
    )


def _allowed(
    document: Mapping[str, Any], current: Mapping[str, Any], allow: Collection[str]
) -> bool:
    """Whether every difference is an allowed change (see `_changes`)."""
    return bool(allow) and not refused_changes(
        document["pipeline"], current, allow, _traits_for(document)
    )


def _hint(
    document: Mapping[str, Any], current: Mapping[str, Any], allow: Collection[str]
) -> list[str]:
    """A line saying which `allow_changes` would restore exactly, when some would.

    Or that the checkpoint describes an interleave over a `MapDataset` as chute did
    before the interleave's description began with that dataset's stages.
    """
    if _older_interleave(document["pipeline"], current):
        return [
            "the checkpoint lists the interleave's inputs one by one, as chute did before "
            "an interleave over a sharded MapDataset was described by that dataset's "
            "stages; if this iterator reads the same streams in the same order (and no "
            "filter drops any of them), its state is the same: pass check_pipeline=False "
            "to restore it"
        ]
    changeable = {
        name for traits in _declared_traits(document) for name in traits.changeable
    } - set(allow)
    for name in sorted(changeable):
        names = (*allow, name)
        if not refused_changes(document["pipeline"], current, names, _traits_for(document)):
            return [f"these changes can continue exactly: pass allow_changes={names!r}"]
    return []


def _older_interleave(saved: Mapping[str, Any], current: Mapping[str, Any]) -> bool:
    """Whether `saved` begins with an interleave that lists the inputs `current` describes."""
    old, new = list(saved.get("stages", [])), list(current.get("stages", []))
    at = next((n for n, stage in enumerate(new) if stage.get("op") == "interleave"), None)
    return (
        bool(at)
        and bool(old)
        and old[0].get("op") == "interleave"
        and bool(old[0].get("inputs"))
        and not new[at].get("inputs")  # type: ignore[index]
        and old[0].get("params") == new[at].get("params")  # type: ignore[index]
    )


def _declared_traits(document: Mapping[str, Any]) -> list[StageTraits]:
    traits = _traits_for(document)
    return [traits(op) for op in traits_of_ops(document["pipeline"])]
