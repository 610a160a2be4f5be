"""chute's foundation: what every layer builds on, and nothing about any data format.

The protocols of random access and checkpointable iteration, record metadata, chute's
error types, the error budget, and the one typed description of a pipeline with what
each op declares beside its implementation (`declare_op`). The checks, the error
ledger and the helpers for forking and shared memory that the layers share are in
`chute_core.internal`. Sources (the formats) are in `chute_sources`, which also
exports the names here that it had before this package existed.

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
from ._ops import OpDeclaration as OpDeclaration
from ._ops import StageTraits as StageTraits
from ._ops import declare_op as declare_op
from ._ops import declare_stage as declare_stage
from ._ops import declared_op as declared_op
from ._ops import declared_stages as declared_stages
from ._ops import is_declared as is_declared
from ._ops import stage_traits as stage_traits
from ._pipeline import PipelineDescription as PipelineDescription
from ._pipeline import PipelineStage as PipelineStage
from ._pipeline import PositionLayout as PositionLayout
from ._pipeline import WrapperLayout as WrapperLayout
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
    "OpDeclaration",
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
    "declare_op",
    "declare_stage",
    "declared_op",
    "declared_stages",
    "is_declared",
    "read_records",
    "stage_traits",
]
