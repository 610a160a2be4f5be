"""The error types every chute layer raises.

Each message says what was expected, what was found, and how to fix it. Every type
derives from `ChuteError`, and, where a built-in exception means the same thing, from
that built-in too, so `except IndexError` or `except FileNotFoundError` keep working.
"""

from __future__ import annotations

__all__ = [
    "ArgumentTypeError",
    "ChuteError",
    "CorruptRecordError",
    "ErrorBudgetExceededError",
    "InvalidArgumentError",
    "InvalidStateError",
    "LengthOverflowError",
    "ObjectChangedError",
    "ObjectStorageCredentialsError",
    "ObjectStorageError",
    "ObjectStoragePermissionError",
    "ObjectStorageReadError",
    "RecordCodecError",
    "RecordIndexError",
    "RecordKeyTypeError",
    "SharedMemoryError",
    "SourceClosedError",
    "SourceFileError",
    "SourceFileNotFoundError",
]


class ChuteError(Exception):
    """Base class of every error chute raises on purpose.

    Example:
        >>> issubclass(RecordIndexError, ChuteError)
        True
    """


class RecordIndexError(ChuteError, IndexError):
    """A record key outside `[-len(source), len(source))`.

    Raised by `chute_sources`' sources (e.g. `RangeSource(3)[5]`); an `IndexError` too.

    Example:
        >>> try:
        ...     raise RecordIndexError("RangeSource(3): key 5 is out of range [-3, 3).")
        ... except IndexError as error:
        ...     print(type(error).__name__)
        RecordIndexError
    """


class RecordKeyTypeError(ChuteError, TypeError):
    """A record key that is not an integer (floats, strings, ...).

    Example:
        >>> issubclass(RecordKeyTypeError, TypeError)
        True
    """


class SourceFileError(ChuteError, OSError):
    """A data file that exists but cannot be used: wrong format, corrupt or truncated.

    Example:
        >>> issubclass(SourceFileError, OSError)
        True
    """


class SourceFileNotFoundError(SourceFileError, FileNotFoundError):
    """A path or glob that names no file.

    Raised by `chute_sources`' file sources; a `FileNotFoundError` too.

    Example:
        >>> issubclass(SourceFileNotFoundError, (SourceFileError, FileNotFoundError))
        True
    """


class CorruptRecordError(ChuteError, ValueError):
    """A record whose bytes do not decode (truncated, corrupt, or not chute's codec).

    Raised by `chute_sources.decode_record` and the sources that decode; a `ValueError`.

    Example:
        >>> issubclass(CorruptRecordError, ValueError)
        True
    """


class RecordCodecError(ChuteError, TypeError):
    """A value the record codec cannot encode (object arrays, unsupported types, ...).

    Raised by `chute_sources.encode_record`; a `TypeError` too.

    Example:
        >>> issubclass(RecordCodecError, TypeError)
        True
    """


class InvalidArgumentError(ChuteError, ValueError):
    """An argument of the right type but a refused value (e.g. a batch size of 0).

    Raised when the pipeline is declared, naming the method and the argument.

    Example:
        >>> from chute_core.internal import check_int
        >>> try:
        ...     check_int(0, "batch_size", "MapDataset.batch", minimum=1)
        ... except InvalidArgumentError as error:
        ...     print(error)
        MapDataset.batch: batch_size must be >= 1, got 0.
    """


class ArgumentTypeError(ChuteError, TypeError):
    """An argument of the wrong type (e.g. a bool or a float where an int is expected).

    Integer arguments accept Python and NumPy integers, never bools.

    Example:
        >>> issubclass(ArgumentTypeError, TypeError)
        True
    """


class LengthOverflowError(ChuteError, OverflowError):
    """A dataset longer than `len()` can report (`sys.maxsize` elements).

    Example:
        >>> issubclass(LengthOverflowError, OverflowError)
        True
    """


class InvalidStateError(ChuteError, ValueError):
    """An iterator state that does not belong to this iterator or is malformed.

    Example:
        >>> issubclass(InvalidStateError, ValueError)
        True
    """


class SourceClosedError(ChuteError, ValueError):
    """A read from a source after `close()`.

    Example:
        >>> issubclass(SourceClosedError, ValueError)
        True
    """


class SharedMemoryError(ChuteError, OSError):
    """Shared memory that cannot be created or attached (e.g. `/dev/shm` is full).

    Example:
        >>> issubclass(SharedMemoryError, OSError)
        True
    """


class ErrorBudgetExceededError(ChuteError, RuntimeError):
    """More elements failed than the pipeline's `ErrorBudget` allows.

    Raised by the `next()` that reached the failure, chained to its exception (when it
    was raised in this process); the iterator stays at the failing element.

    Example:
        >>> issubclass(ErrorBudgetExceededError, RuntimeError)
        True
    """


class ObjectStorageError(SourceFileError):
    """A bucket or object that cannot be used: missing credentials, unknown bucket, ...

    The message names the URL and what to check. Missing objects raise
    `SourceFileNotFoundError` instead (also a `FileNotFoundError`).

    Example:
        >>> issubclass(ObjectStorageError, OSError)
        True
    """


class ObjectStoragePermissionError(ObjectStorageError, PermissionError):
    """The credentials in use may not read (or write) an object or a bucket.

    Example:
        >>> issubclass(ObjectStoragePermissionError, PermissionError)
        True
    """


class ObjectStorageReadError(ObjectStorageError):
    """A read that kept failing (HTTP 5xx, timeouts, resets) after every allowed attempt.

    Attributes:
        url: the object's URL.
        byte_range: the bytes asked for, `(start, end)` (end exclusive), or None for
            the whole object.
        attempts: how many times the request was made.

    Example:
        >>> error = ObjectStorageReadError("s3://b/k: failed", "s3://b/k", (0, 10), 6)
        >>> error.url, error.byte_range, error.attempts
        ('s3://b/k', (0, 10), 6)
    """

    def __init__(
        self, message: str, url: str, byte_range: tuple[int, int] | None, attempts: int
    ) -> None:
        super().__init__(message)
        self.url = url
        self.byte_range = byte_range
        self.attempts = attempts

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (str(self), self.url, self.byte_range, self.attempts))


class ObjectChangedError(ObjectStorageError):
    """An object that was replaced after its source was created (another ETag/generation).

    chute never mixes bytes of two versions of an object: create the source again to
    read the new version.

    Example:
        >>> issubclass(ObjectChangedError, ObjectStorageError)
        True
    """


class ObjectStorageCredentialsError(ObjectStoragePermissionError):
    """No credentials were found for a bucket (environment, files and metadata service).

    Example:
        >>> issubclass(ObjectStorageCredentialsError, PermissionError)
        True
    """
