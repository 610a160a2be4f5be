"""chute's sources layer: where records come from.

The record codec and the sources: range, in-memory sequence, shared memory, ArrayRecord,
Parquet, NumPy, JSON Lines, TFRecord, WebDataset, image folders, data sets saved by
Hugging Face `datasets` and its streams of Parquet and JSON Lines files, on local disk or
in `s3://` / `gs://` buckets. The protocols, error types and pipeline description every
layer builds on are `chute_core`'s; this package exports them too, so
`chute_sources.ChuteError` and the like keep working.

Example:
    >>> from chute_sources import RangeSource, read_records
    >>> read_records(RangeSource(1, 10, 2), [4, 0])
    [9, 1]
"""

from typing import TYPE_CHECKING

from chute_core import DROPPED as DROPPED
from chute_core import ArgumentTypeError as ArgumentTypeError
from chute_core import CheckpointableIterator as CheckpointableIterator
from chute_core import ChuteError as ChuteError
from chute_core import CorruptRecordError as CorruptRecordError
from chute_core import ErrorBudget as ErrorBudget
from chute_core import ErrorBudgetExceededError as ErrorBudgetExceededError
from chute_core import InvalidArgumentError as InvalidArgumentError
from chute_core import InvalidStateError as InvalidStateError
from chute_core import IteratorState as IteratorState
from chute_core import JsonValue as JsonValue
from chute_core import LengthOverflowError as LengthOverflowError
from chute_core import ObjectChangedError as ObjectChangedError
from chute_core import ObjectStorageCredentialsError as ObjectStorageCredentialsError
from chute_core import ObjectStorageError as ObjectStorageError
from chute_core import ObjectStoragePermissionError as ObjectStoragePermissionError
from chute_core import ObjectStorageReadError as ObjectStorageReadError
from chute_core import PipelineDescription as PipelineDescription
from chute_core import PipelineStage as PipelineStage
from chute_core import RandomAccessDataSource as RandomAccessDataSource
from chute_core import RecordCodecError as RecordCodecError
from chute_core import RecordIndexError as RecordIndexError
from chute_core import RecordKeyTypeError as RecordKeyTypeError
from chute_core import RecordMetadata as RecordMetadata
from chute_core import SharedMemoryError as SharedMemoryError
from chute_core import SkippedElement as SkippedElement
from chute_core import SourceClosedError as SourceClosedError
from chute_core import SourceFileError as SourceFileError
from chute_core import SourceFileNotFoundError as SourceFileNotFoundError
from chute_core import StageTraits as StageTraits
from chute_core import SupportsGetItems as SupportsGetItems
from chute_core import declare_stage as declare_stage
from chute_core import declared_stages as declared_stages
from chute_core import is_declared as is_declared
from chute_core import read_records as read_records
from chute_core import stage_traits as stage_traits
from chute_core.internal import lazy_attributes

from ._base import Source as Source
from ._codec import decode_record as decode_record
from ._codec import encode_record as encode_record
from ._codec import is_encoded_record as is_encoded_record
from ._conversion_manifest import IncompleteShardsWarning as IncompleteShardsWarning
from ._image_folder import ImageFolderSource as ImageFolderSource
from ._json_lines import JsonLinesSource as JsonLinesSource
from ._numpy import NumpySource as NumpySource
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
from ._tfrecord import TFRecordSource as TFRecordSource
from ._tfrecord_example import encode_example as encode_example
from ._tfrecord_example import parse_example as parse_example
from ._tfrecord_writer import write_tfrecord as write_tfrecord
from ._webdataset import WebDatasetSource as WebDatasetSource
from ._webdataset_decode import webdataset_decoders as webdataset_decoders
from ._webdataset_stream import WebDatasetStream as WebDatasetStream
from ._webdataset_writer import WebDatasetWriter as WebDatasetWriter
from ._webdataset_writer import write_webdataset as write_webdataset

if TYPE_CHECKING:
    from ._array_record import ArrayRecordSource as ArrayRecordSource
    from ._array_record import Decoder as Decoder
    from ._array_record import FileInstruction as FileInstruction
    from ._array_record_writer import shard_paths as shard_paths
    from ._array_record_writer import write_array_record as write_array_record
    from ._hf_disk import HuggingFaceDiskSource as HuggingFaceDiskSource
    from ._hf_stream import HuggingFaceStreamSource as HuggingFaceStreamSource
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
    "HuggingFaceStreamSource": "._hf_stream",
    "ParquetSource": "._parquet",
    "ParquetStream": "._parquet",
}


__getattr__ = lazy_attributes(__name__, _LAZY)


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
    "HuggingFaceStreamSource",
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
    "TFRecordSource",
    "WebDatasetSource",
    "WebDatasetStream",
    "WebDatasetWriter",
    "declare_stage",
    "declared_stages",
    "decode_record",
    "delete_object",
    "encode_example",
    "encode_record",
    "is_declared",
    "is_encoded_record",
    "is_object_url",
    "list_objects",
    "object_info",
    "parse_example",
    "read_object",
    "read_records",
    "shard_paths",
    "stage_traits",
    "webdataset_decoders",
    "write_array_record",
    "write_object",
    "write_tfrecord",
    "write_webdataset",
]
