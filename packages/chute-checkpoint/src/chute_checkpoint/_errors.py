"""The errors of the checkpoint layer: all `chute_core.ChuteError`s."""

from __future__ import annotations

from chute_core import ChuteError

__all__ = [
    "CheckpointError",
    "CheckpointFormatError",
    "CheckpointNotFoundError",
    "PipelineMismatchError",
    "ReshardError",
]


class CheckpointError(ChuteError):
    """Base class of the errors of saving, restoring and resharding checkpoints.

    Example:
        >>> issubclass(PipelineMismatchError, CheckpointError)
        True
    """


class CheckpointFormatError(CheckpointError, ValueError):
    """A state file that is not a valid chute checkpoint: corrupt, truncated or foreign.

    Example:
        >>> from chute_checkpoint import validate_document
        >>> try:
        ...     validate_document([], "x.json")
        ... except CheckpointFormatError as error:
        ...     print(error)
        x.json: a chute checkpoint is a JSON object, got a list.
    """


class CheckpointNotFoundError(CheckpointError, FileNotFoundError):
    """No state file for this process where a checkpoint should be.

    Example:
        >>> issubclass(CheckpointNotFoundError, FileNotFoundError)
        True
    """


class PipelineMismatchError(CheckpointError, ValueError):
    """A checkpoint restored into an iterator of a different pipeline.

    The message names the stage and the parameter that differ, with both values.

    Example:
        >>> issubclass(PipelineMismatchError, ValueError)
        True
    """


class ReshardError(CheckpointError, ValueError):
    """States that cannot be redistributed to another number of processes.

    Example:
        >>> issubclass(ReshardError, CheckpointError)
        True
    """
