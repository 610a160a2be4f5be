"""`chute.checkpoint`: saving and restoring iterators (the names of `grain.checkpoint`).

With Orbax, as in Grain's guides: `manager.save(step,
args=chute.checkpoint.CheckpointSave(it))` and `manager.restore(step,
args=chute.checkpoint.CheckpointRestore(it))` (Orbax is imported on first use of these
names). Without it: `chute.checkpoint.save(it, folder)` and `restore(it, folder)`. See
`chute_checkpoint` for the format, fingerprints and `reshard`.

Example:
    >>> import chute, tempfile
    >>> ds = chute.MapDataset.range(5).to_iter_dataset()
    >>> it = iter(ds)
    >>> _ = next(it)
    >>> folder = tempfile.mkdtemp()
    >>> _ = chute.checkpoint.save(it, folder)
    >>> list(chute.checkpoint.restore(iter(ds), folder))
    [1, 2, 3, 4]
"""

from typing import TYPE_CHECKING

from chute_checkpoint import CheckpointError as CheckpointError
from chute_checkpoint import CheckpointFormatError as CheckpointFormatError
from chute_checkpoint import CheckpointNotFoundError as CheckpointNotFoundError
from chute_checkpoint import PipelineMismatchError as PipelineMismatchError
from chute_checkpoint import ReshardError as ReshardError
from chute_checkpoint import check_reshardable as check_reshardable
from chute_checkpoint import reshard as reshard
from chute_checkpoint import reshard_directory as reshard_directory
from chute_checkpoint import reshard_for as reshard_for
from chute_checkpoint import restore as restore
from chute_checkpoint import save as save
from chute_core.internal import lazy_attributes

if TYPE_CHECKING:
    from chute_checkpoint import CheckpointHandler as CheckpointHandler
    from chute_checkpoint import CheckpointRestore as CheckpointRestore
    from chute_checkpoint import CheckpointSave as CheckpointSave

_ORBAX = ("CheckpointHandler", "CheckpointRestore", "CheckpointSave")
__getattr__ = lazy_attributes(__name__, dict.fromkeys(_ORBAX, "chute_checkpoint"))


__all__ = [
    "CheckpointError",
    "CheckpointFormatError",
    "CheckpointHandler",
    "CheckpointNotFoundError",
    "CheckpointRestore",
    "CheckpointSave",
    "PipelineMismatchError",
    "ReshardError",
    "check_reshardable",
    "reshard",
    "reshard_directory",
    "reshard_for",
    "restore",
    "save",
]
