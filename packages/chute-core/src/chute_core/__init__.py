"""chute's foundation: what every layer builds on, and nothing about any data format.

The protocols of random access and checkpointable iteration, record metadata, chute's
error types, the error budget, and the one typed description of a pipeline with the
traits each op declares. The checks, the error ledger and the helpers for forking and
shared memory that the layers share are in `chute_core.internal`. Sources (the formats)
are in `chute_sources`, which also exports every name here.

Example:
    >>> from chute_core import ChuteError, InvalidArgumentError, read_records
    >>> issubclass(InvalidArgumentError, (ChuteError, ValueError))
    True
    >>> read_records(range(10), [3, 1])
    [3, 1]
"""

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
from ._metadata import DROPPED as DROPPED
from ._metadata import RecordMetadata as RecordMetadata
from ._pipeline import PipelineDescription as PipelineDescription
from ._pipeline import PipelineStage as PipelineStage
from ._pipeline import PositionLayout as PositionLayout
from ._pipeline import StageTraits as StageTraits
from ._pipeline import WrapperLayout as WrapperLayout
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

__all__ = [
    "ArgumentTypeError",
    "CheckpointableIterator",
    "ChuteError",
    "CorruptRecordError",
    "DROPPED",
    "ErrorBudget",
    "ErrorBudgetExceededError",
    "InvalidArgumentError",
    "InvalidStateError",
    "IteratorState",
    "JsonValue",
    "LengthOverflowError",
    "ObjectChangedError",
    "ObjectStorageCredentialsError",
    "ObjectStorageError",
    "ObjectStoragePermissionError",
    "ObjectStorageReadError",
    "PipelineDescription",
    "PipelineStage",
    "PositionLayout",
    "RandomAccessDataSource",
    "RecordCodecError",
    "RecordIndexError",
    "RecordKeyTypeError",
    "RecordMetadata",
    "SharedMemoryError",
    "SkippedElement",
    "SourceClosedError",
    "SourceFileError",
    "SourceFileNotFoundError",
    "StageTraits",
    "SupportsGetItems",
    "WrapperLayout",
    "declare_stage",
    "declared_stages",
    "is_declared",
    "read_records",
    "stage_traits",
]
