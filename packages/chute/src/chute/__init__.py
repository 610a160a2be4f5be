"""chute: a fast, exactly resumable data loader for JAX.

This meta-package gathers the layers (`chute_sources`, `chute_samplers`, ...) behind
one import. Names from Grain's guides that mean the same thing are kept as aliases
(`RangeDataSource`, `InMemoryDataSource`, `ArrayRecordDataSource`), so their examples
run with the import changed.

Example:
    >>> import chute
    >>> list(chute.RangeDataSource(start=1, stop=10, step=2))
    [1, 3, 5, 7, 9]
"""

from typing import TYPE_CHECKING, Any

from chute_core import DROPPED as DROPPED
from chute_core import ArgumentTypeError as ArgumentTypeError
from chute_core import CheckpointableIterator as CheckpointableIterator
from chute_core import ChuteError as ChuteError
from chute_core import CorruptRecordError as CorruptRecordError
from chute_core import ErrorBudget as ErrorBudget
from chute_core import ErrorBudgetExceededError as ErrorBudgetExceededError
from chute_core import InvalidArgumentError as InvalidArgumentError
from chute_core import InvalidStateError as InvalidStateError
from chute_core import LengthOverflowError as LengthOverflowError
from chute_core import ObjectChangedError as ObjectChangedError
from chute_core import ObjectStorageCredentialsError as ObjectStorageCredentialsError
from chute_core import ObjectStorageError as ObjectStorageError
from chute_core import ObjectStoragePermissionError as ObjectStoragePermissionError
from chute_core import ObjectStorageReadError as ObjectStorageReadError
from chute_core import RandomAccessDataSource as RandomAccessDataSource
from chute_core import RecordCodecError as RecordCodecError
from chute_core import RecordIndexError as RecordIndexError
from chute_core import RecordMetadata as RecordMetadata
from chute_core import SharedMemoryError as SharedMemoryError
from chute_core import SkippedElement as SkippedElement
from chute_core import SourceFileError as SourceFileError
from chute_core import SourceFileNotFoundError as SourceFileNotFoundError
from chute_execution import AutotuneOptions as AutotuneOptions
from chute_execution import MultiprocessingOptions as MultiprocessingOptions
from chute_execution import PerformanceConfig as PerformanceConfig
from chute_execution import RayOptions as RayOptions
from chute_execution import ReadAheadWarning as ReadAheadWarning
from chute_execution import ReadOptions as ReadOptions
from chute_execution import ShippingError as ShippingError
from chute_execution import TraceOptions as TraceOptions
from chute_execution import WorkerDiedError as WorkerDiedError
from chute_execution import WorkerError as WorkerError
from chute_execution import WorkerTimeoutError as WorkerTimeoutError
from chute_execution import free_idle_slabs as free_idle_slabs
from chute_execution import pick_performance_config as pick_performance_config
from chute_execution import stop_idle_workers as stop_idle_workers
from chute_samplers import IndexSampler as IndexSampler
from chute_samplers import NoSharding as NoSharding
from chute_samplers import ShardOptions as ShardOptions
from chute_samplers import WeightSchedule as WeightSchedule
from chute_sources import ImageFolderSource as ImageFolderSource
from chute_sources import JsonLinesSource as JsonLinesSource
from chute_sources import NumpySource as NumpySource
from chute_sources import RangeSource as RangeSource
from chute_sources import SequenceSource as SequenceSource
from chute_sources import SharedMemorySource as SharedMemorySource
from chute_sources import StorageOptions as StorageOptions
from chute_sources import TFRecordSource as TFRecordSource
from chute_sources import WebDatasetSource as WebDatasetSource
from chute_sources import WebDatasetStream as WebDatasetStream
from chute_sources import decode_record as decode_record
from chute_sources import encode_record as encode_record
from chute_transforms import BatchError as BatchError
from chute_transforms import BatchTransform as BatchTransform
from chute_transforms import FilterRatioError as FilterRatioError
from chute_transforms import FilterTransform as FilterTransform
from chute_transforms import FilterWarning as FilterWarning
from chute_transforms import FlatMapTransform as FlatMapTransform
from chute_transforms import MapTransform as MapTransform
from chute_transforms import MapWithIndexTransform as MapWithIndexTransform
from chute_transforms import PackingError as PackingError
from chute_transforms import RandomMapTransform as RandomMapTransform
from chute_transforms import Tokenize as Tokenize
from chute_transforms import batch_elements as batch_elements

from . import checkpoint as checkpoint
from . import experimental as experimental
from . import metrics as metrics
from . import testing as testing
from ._data_loader import DataLoader as DataLoader
from ._element_spec import ShapeDtypeStruct as ShapeDtypeStruct
from ._iter_dataset import IterDataset as IterDataset
from ._map_dataset import MapDataset as MapDataset
from ._version import __version__ as __version__

RangeDataSource = RangeSource
"""Grain's name for `RangeSource`."""
InMemoryDataSource = SharedMemorySource
"""Grain's name for `SharedMemorySource`."""

if TYPE_CHECKING:
    from chute_sources import ArrayRecordSource as ArrayRecordSource
    from chute_sources import FileInstruction as FileInstruction
    from chute_sources import HuggingFaceDiskSource as HuggingFaceDiskSource
    from chute_sources import HuggingFaceStreamSource as HuggingFaceStreamSource
    from chute_sources import ParquetSource as ParquetSource
    from chute_sources import ParquetStream as ParquetStream
    from chute_sources import write_array_record as write_array_record

    ArrayRecordDataSource = ArrayRecordSource
    from chute_checkpoint import CheckpointHandler as PyGrainCheckpointHandler
    from chute_checkpoint import CheckpointRestore as PyGrainCheckpointRestore
    from chute_checkpoint import CheckpointSave as PyGrainCheckpointSave

# Names whose libraries take long to import (pyarrow, array_record) load on first use.
_LAZY = {
    "ArrayRecordSource",
    "FileInstruction",
    "HuggingFaceDiskSource",
    "HuggingFaceStreamSource",
    "ParquetSource",
    "ParquetStream",
    "PerformanceConfig",
    "write_array_record",
    "ArrayRecordDataSource",
}


# Grain's names of the Orbax args; Orbax (and JAX) load on first use.
_CHECKPOINT = {
    "PyGrainCheckpointHandler": "CheckpointHandler",
    "PyGrainCheckpointRestore": "CheckpointRestore",
    "PyGrainCheckpointSave": "CheckpointSave",
}


def __getattr__(name: str) -> Any:
    if name == "device":  # Imports jax, so only on first use.
        import importlib

        return importlib.import_module("chute.device")
    if name in _CHECKPOINT:
        found = getattr(checkpoint, _CHECKPOINT[name])
        globals()[name] = found
        return found
    if name not in _LAZY:
        raise AttributeError(f"module 'chute' has no attribute {name!r}")
    import chute_sources

    value = getattr(chute_sources, "ArrayRecordSource" if name == "ArrayRecordDataSource" else name)
    globals()[name] = value
    return value


__all__ = [
    "ArgumentTypeError",
    "ArrayRecordDataSource",
    "ArrayRecordSource",
    "AutotuneOptions",
    "BatchError",
    "BatchTransform",
    "CheckpointableIterator",
    "ChuteError",
    "CorruptRecordError",
    "DROPPED",
    "DataLoader",
    "ErrorBudget",
    "ErrorBudgetExceededError",
    "FileInstruction",
    "FilterRatioError",
    "FilterTransform",
    "FilterWarning",
    "FlatMapTransform",
    "ImageFolderSource",
    "InMemoryDataSource",
    "IndexSampler",
    "InvalidArgumentError",
    "InvalidStateError",
    "IterDataset",
    "JsonLinesSource",
    "LengthOverflowError",
    "MapDataset",
    "MapTransform",
    "MapWithIndexTransform",
    "MultiprocessingOptions",
    "NoSharding",
    "NumpySource",
    "ObjectChangedError",
    "ObjectStorageCredentialsError",
    "ObjectStorageError",
    "ObjectStoragePermissionError",
    "ObjectStorageReadError",
    "PackingError",
    "ParquetSource",
    "ParquetStream",
    "PerformanceConfig",
    "PyGrainCheckpointHandler",
    "PyGrainCheckpointRestore",
    "PyGrainCheckpointSave",
    "RandomAccessDataSource",
    "RandomMapTransform",
    "RangeDataSource",
    "RangeSource",
    "RayOptions",
    "ReadAheadWarning",
    "ReadOptions",
    "RecordCodecError",
    "RecordIndexError",
    "RecordMetadata",
    "SequenceSource",
    "ShapeDtypeStruct",
    "ShardOptions",
    "SharedMemoryError",
    "SharedMemorySource",
    "ShippingError",
    "SkippedElement",
    "SourceFileError",
    "SourceFileNotFoundError",
    "StorageOptions",
    "TFRecordSource",
    "Tokenize",
    "TraceOptions",
    "WebDatasetSource",
    "WebDatasetStream",
    "WeightSchedule",
    "WorkerDiedError",
    "WorkerError",
    "WorkerTimeoutError",
    "__version__",
    "batch_elements",
    "checkpoint",
    "decode_record",
    "device",
    "encode_record",
    "experimental",
    "free_idle_slabs",
    "metrics",
    "pick_performance_config",
    "stop_idle_workers",
    "testing",
    "write_array_record",
]
