"""Orbax integration: `CheckpointSave` / `CheckpointRestore` args and their handler.

Importing this module imports Orbax (and so JAX); `chute_checkpoint` loads it on first
use of one of these names. The args are registered with Orbax, so a
`CheckpointManager` finds the handler by itself, also inside `ocp.args.Composite`.

Paths here are Orbax's (`etils.epath`): a manager in `gs://...` or `s3://...` reads
and writes through epath's own file systems (and commits each step as Orbax does),
not through chute's object client; `chute_checkpoint.save` / `restore` are the ones
that use `chute_sources`' client and `StorageOptions`.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import orbax.checkpoint as ocp
from etils import epath
from orbax.checkpoint import future

from ._elastic import find_document, state_file_name
from ._files import write_atomic
from ._format import apply_document, dumps_document, make_document, process_position

__all__ = ["CheckpointHandler", "CheckpointRestore", "CheckpointSave"]


class CheckpointHandler(ocp.handlers.AsyncCheckpointHandler):  # type: ignore[misc]
    """Saves and restores chute iterators in Orbax checkpoints (one JSON file per process).

    The iterator's state is taken when the save is requested (`manager.save(...)`), and
    written in the background by asynchronous managers; moving the iterator on before
    `wait_until_finished()` does not change what is saved. Files are named like Grain's,
    `process_<i>-of-<n>.json`, and hold chute's versioned state document.

    Example:
        >>> import chute, tempfile
        >>> import orbax.checkpoint as ocp
        >>> it = iter(chute.MapDataset.range(6).to_iter_dataset())
        >>> _ = next(it)
        >>> with ocp.CheckpointManager(tempfile.mkdtemp()) as manager:
        ...     manager.save(1, args=CheckpointSave(it))
        ...     manager.wait_until_finished()
        ...     _ = next(it)
        ...     _ = manager.restore(1, args=CheckpointRestore(it))
        True
        >>> next(it)
        1
    """

    def __init__(self, process_index: int | None = None, process_count: int | None = None):
        self._process = (process_index, process_count)

    async def async_save(
        self, directory: epath.Path, args: CheckpointSave
    ) -> list[future.Future] | None:
        """Takes the state now; returns the future that writes it."""
        index, count = process_position(*self._process)
        text = dumps_document(make_document(args.item, index, count))
        path = epath.Path(directory) / state_file_name(index, count)
        return [
            future.CommitFutureAwaitingContractedSignals(
                _write(path, text), name="chute_checkpoint_save"
            )
        ]

    def save(self, directory: epath.Path, args: CheckpointSave) -> None:
        """Saves synchronously."""
        index, count = process_position(*self._process)
        text = dumps_document(make_document(args.item, index, count))
        _write_now(epath.Path(directory) / state_file_name(index, count), text)

    def restore(self, directory: epath.Path, args: CheckpointRestore) -> Any:
        """Moves `args.item` to the saved position and returns it.

        A checkpoint of another number of processes continues here when the pipeline
        allows it (as in `chute_checkpoint.restore`).
        """
        index, count = process_position(*self._process)
        document, where = find_document(epath.Path(directory), args.item, index, count)
        apply_document(
            args.item,
            document,
            check_pipeline=args.check_pipeline,
            where=where,
            allow_changes=args.allow_changes,
        )
        return args.item

    def metadata(self, directory: epath.Path) -> None:
        """Nothing: the files are the metadata."""
        return None

    def finalize(self, directory: epath.Path) -> None:
        """Nothing to do."""

    def close(self) -> None:
        """Nothing to do."""


async def _write(path: epath.Path, text: str) -> None:
    _write_now(path, text)


def _write_now(path: epath.Path, text: str) -> None:
    if "://" in os.fspath(path):  # Cloud storage: the object store makes writes atomic.
        path.write_text(text)
    else:
        write_atomic(os.fspath(path), text)


@ocp.args.register_with_handler(CheckpointHandler, for_save=True)
@dataclasses.dataclass
class CheckpointSave(ocp.args.CheckpointArgs):  # type: ignore[misc]
    """Orbax args that save a chute iterator: `manager.save(step, args=CheckpointSave(it))`.

    Example:
        >>> import chute
        >>> args = CheckpointSave(iter(chute.MapDataset.range(3).to_iter_dataset()))
        >>> type(args.item).__name__
        'SequentialIter'
    """

    item: Any


@ocp.args.register_with_handler(CheckpointHandler, for_restore=True)
@dataclasses.dataclass
class CheckpointRestore(ocp.args.CheckpointArgs):  # type: ignore[misc]
    """Orbax args that restore a chute iterator in place (and return it).

    `check_pipeline=False` skips the check that the iterator's pipeline is the one the
    checkpoint was saved from; `allow_changes=("weights",)` accepts an `IterDataset.mix`
    whose weights changed since (see `chute_checkpoint.apply_document`).

    Example:
        >>> import chute
        >>> args = CheckpointRestore(iter(chute.MapDataset.range(3).to_iter_dataset()))
        >>> args.check_pipeline
        True
    """

    item: Any
    check_pipeline: bool = True
    allow_changes: tuple[str, ...] = ()
