"""chute's bottom layer: what a dataset is, and where records come from.

The protocols every later layer builds on (random access, checkpointable iterators,
record metadata), chute's error types, the record codec, and the sources: range,
in-memory sequence, shared memory, ArrayRecord, Parquet, NumPy, JSON Lines, image
folders and data sets saved by Hugging Face `datasets`.

Example:
    >>> from chute_sources import RangeSource, read_records
    >>> read_records(RangeSource(1, 10, 2), [4, 0])
    [9, 1]
"""

import importlib
from typing import TYPE_CHECKING, Any

from ._base import Source as Source
from ._codec import decode_record as decode_record
from ._codec import encode_record as encode_record
from ._codec import is_encoded_record as is_encoded_record
from ._conversion_manifest import IncompleteShardsWarning as IncompleteShardsWarning
from ._error_budget import ErrorBudget as ErrorBudget
from ._error_budget import SkippedElement as SkippedElement
from ._errors import ArgumentTypeError as ArgumentTypeError
from ._errors import ChuteError as ChuteError
from ._errors import CorruptRecordError as CorruptRecordError
from ._errors import ErrorBudgetExceededError as ErrorBudgetExceededError
from ._errors import InvalidArgumentError as InvalidArgumentError
from ._errors import InvalidStateError as InvalidStateError
from ._errors import LengthOverflowError as LengthOverflowError
from ._errors import ObjectChangedError as ObjectChangedError
from ._errors import ObjectStorageCredentialsError as ObjectStorageCredentialsError
from ._errors import ObjectStorageError as ObjectStorageError
from ._errors import ObjectStoragePermissionError as ObjectStoragePermissionError
from ._errors import ObjectStorageReadError as ObjectStorageReadError
from ._errors import RecordCodecError as RecordCodecError
from ._errors import RecordIndexError as RecordIndexError
from ._errors import RecordKeyTypeError as RecordKeyTypeError
from ._errors import SharedMemoryError as SharedMemoryError
from ._errors import SourceClosedError as SourceClosedError
from ._errors import SourceFileError as SourceFileError
from ._errors import SourceFileNotFoundError as SourceFileNotFoundError
from ._image_folder import ImageFolderSource as ImageFolderSource
from ._json_lines import JsonLinesSource as JsonLinesSource
from ._metadata import DROPPED as DROPPED
from ._metadata import RecordMetadata as RecordMetadata
from ._numpy import NumpySource as NumpySource
from ._pipeline import PipelineDescription as PipelineDescription
from ._pipeline import PipelineStage as PipelineStage
from ._pipeline import StageTraits as StageTraits
from ._pipeline import declare_stage as declare_stage
from ._pipeline import declared_stages as declared_stages
from ._pipeline import is_declared as is_declared
from ._pipeline import stage_traits as stage_traits
from ._protocols import CheckpointableIterator as CheckpointableIterator
from ._protocols import IteratorState as IteratorState
from ._protocols import JsonValue as JsonValue
from ._protocols import RandomAccessDataSource as RandomAccessDataSource
from ._protocols import SupportsGetItems as SupportsGetItems
from ._protocols import read_records as read_records
from ._range import RangeSource as RangeSource
from ._remote._api import delete_object as delete_object
from ._remote._api import list_objects as list_objects
from ._remote._api import object_info as object_info
from ._remote._api import read_object as read_object
from ._remote._api import write_object as write_object
from ._remote._client import ObjectInfo as ObjectInfo
from ._remote._options import StorageOptions as StorageOptions
from ._remote._urls import is_object_url as is_object_url
from ._sequence import SequenceSource as SequenceSource
from ._shared_memory import SharedMemorySource as SharedMemorySource

if TYPE_CHECKING:
    from ._array_record import ArrayRecordSource as ArrayRecordSource
    from ._array_record import Decoder as Decoder
    from ._array_record import FileInstruction as FileInstruction
    from ._array_record_writer import shard_paths as shard_paths
    from ._array_record_writer import write_array_record as write_array_record
    from ._hf_disk import HuggingFaceDiskSource as HuggingFaceDiskSource
    from ._parquet import ParquetSource as ParquetSource
    from ._parquet import ParquetStream as ParquetStream

# Sources whose libraries take long to import (pyarrow, array_record) load on first use,
# so that processes that never read those formats (e.g. most workers) start faster.
_LAZY = {
    "ArrayRecordSource": "._array_record",
    "Decoder": "._array_record",
    "FileInstruction": "._array_record",
    "shard_paths": "._array_record_writer",
    "write_array_record": "._array_record_writer",
    "HuggingFaceDiskSource": "._hf_disk",
    "ParquetSource": "._parquet",
    "ParquetStream": "._parquet",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'chute_sources' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "ArgumentTypeError",
    "ArrayRecordSource",
    "CheckpointableIterator",
    "ChuteError",
    "CorruptRecordError",
    "DROPPED",
    "Decoder",
    "ErrorBudget",
    "ErrorBudgetExceededError",
    "FileInstruction",
    "HuggingFaceDiskSource",
    "ImageFolderSource",
    "IncompleteShardsWarning",
    "InvalidArgumentError",
    "InvalidStateError",
    "IteratorState",
    "JsonLinesSource",
    "JsonValue",
    "LengthOverflowError",
    "NumpySource",
    "ObjectChangedError",
    "ObjectInfo",
    "ObjectStorageCredentialsError",
    "ObjectStorageError",
    "ObjectStoragePermissionError",
    "ObjectStorageReadError",
    "ParquetSource",
    "ParquetStream",
    "PipelineDescription",
    "PipelineStage",
    "RandomAccessDataSource",
    "RangeSource",
    "RecordCodecError",
    "RecordIndexError",
    "RecordKeyTypeError",
    "RecordMetadata",
    "SequenceSource",
    "SharedMemoryError",
    "SharedMemorySource",
    "SkippedElement",
    "Source",
    "SourceClosedError",
    "SourceFileError",
    "SourceFileNotFoundError",
    "StageTraits",
    "StorageOptions",
    "SupportsGetItems",
    "declare_stage",
    "declared_stages",
    "decode_record",
    "delete_object",
    "encode_record",
    "is_declared",
    "is_encoded_record",
    "is_object_url",
    "list_objects",
    "object_info",
    "read_object",
    "read_records",
    "shard_paths",
    "stage_traits",
    "write_array_record",
    "write_object",
]
