"""chute's checkpoint layer: versioned JSON iterator states, Orbax integration, resharding.

A checkpoint of an iterator is one small JSON document per process: its position
(`get_state()`), a structural description of its pipeline and that description's
fingerprint, checked on restore with an error naming the stage and parameter that
differ. `save` / `restore` write and read such files atomically without Orbax, in
local folders or in buckets (`s3://bucket/prefix`, `gs://...`);
`CheckpointSave` / `CheckpointRestore` do the same inside an Orbax
`CheckpointManager` (Orbax is imported on first use of those names). Both restore on
another number of processes for index-based pipelines (`reshard_for`), whatever
position each process stopped at; `reshard` redistributes all processes' states of
such a pipeline to another process count, `check_reshardable` says at startup whether
a pipeline can be, and `assert_reshards` checks that a pipeline continues exactly once.

Example:
    >>> import chute, tempfile
    >>> import chute_checkpoint
    >>> ds = chute.MapDataset.range(100).seed(1).shuffle().to_iter_dataset()
    >>> it = iter(ds)
    >>> _ = [next(it) for _ in range(10)]
    >>> folder = tempfile.mkdtemp()
    >>> _ = chute_checkpoint.save(it, folder)
    >>> expected = list(it)
    >>> list(chute_checkpoint.restore(iter(ds), folder)) == expected
    True
"""

from typing import TYPE_CHECKING

from chute_core.internal import lazy_attributes

from ._describe import PERFORMANCE_PARAMETERS as PERFORMANCE_PARAMETERS
from ._describe import PIPELINE_ATTRIBUTE as PIPELINE_ATTRIBUTE
from ._describe import describe_pipeline as describe_pipeline
from ._describe import describe_value as describe_value
from ._describe import fingerprint as fingerprint
from ._differences import pipeline_differences as pipeline_differences
from ._elastic import state_file_name as state_file_name
from ._errors import CheckpointError as CheckpointError
from ._errors import CheckpointFormatError as CheckpointFormatError
from ._errors import CheckpointNotFoundError as CheckpointNotFoundError
from ._errors import PipelineMismatchError as PipelineMismatchError
from ._errors import ReshardError as ReshardError
from ._files import read_document as read_document
from ._files import reshard_directory as reshard_directory
from ._files import restore as restore
from ._files import save as save
from ._files import write_atomic as write_atomic
from ._format import FORMAT as FORMAT
from ._format import FORMAT_VERSION as FORMAT_VERSION
from ._format import apply_document as apply_document
from ._format import dumps_document as dumps_document
from ._format import loads_document as loads_document
from ._format import make_document as make_document
from ._format import validate_document as validate_document
from ._reshard import reshard as reshard
from ._reshard import reshard_for as reshard_for
from ._reshard_check import ReshardRun as ReshardRun
from ._reshard_check import assert_reshards as assert_reshards
from ._reshard_check import rows as rows
from ._reshard_shards import check_reshardable as check_reshardable

if TYPE_CHECKING:
    from ._orbax import CheckpointHandler as CheckpointHandler
    from ._orbax import CheckpointRestore as CheckpointRestore
    from ._orbax import CheckpointSave as CheckpointSave

# Orbax imports JAX and takes seconds: load it when its names are first used.
_ORBAX = ("CheckpointHandler", "CheckpointRestore", "CheckpointSave")
__getattr__ = lazy_attributes(__name__, dict.fromkeys(_ORBAX, "._orbax"))


__all__ = [
    "CheckpointError",
    "CheckpointFormatError",
    "CheckpointHandler",
    "CheckpointNotFoundError",
    "CheckpointRestore",
    "CheckpointSave",
    "FORMAT",
    "FORMAT_VERSION",
    "PERFORMANCE_PARAMETERS",
    "PIPELINE_ATTRIBUTE",
    "PipelineMismatchError",
    "ReshardError",
    "ReshardRun",
    "apply_document",
    "assert_reshards",
    "check_reshardable",
    "describe_pipeline",
    "describe_value",
    "dumps_document",
    "fingerprint",
    "loads_document",
    "make_document",
    "pipeline_differences",
    "read_document",
    "reshard",
    "reshard_directory",
    "reshard_for",
    "restore",
    "rows",
    "save",
    "state_file_name",
    "validate_document",
    "write_atomic",
]
