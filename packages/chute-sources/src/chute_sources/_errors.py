"""The error types every chute layer raises.

Each message says what was expected, what was found, and how to fix it. Every type
derives from `ChuteError`, and, where a built-in exception means the same thing, from
that built-in too, so `except IndexError` or `except FileNotFoundError` keep working.
"""

from __future__ import annotations

__all__ = [
    "ChuteError",
    "CorruptRecordError",
    "InvalidStateError",
    "RecordCodecError",
    "RecordIndexError",
    "RecordKeyTypeError",
    "SharedMemoryError",
    "SourceClosedError",
    "SourceFileError",
    "SourceFileNotFoundError",
]


class ChuteError(Exception):
    """Base class of every error chute raises on purpose."""


class RecordIndexError(ChuteError, IndexError):
    """A record key outside `[-len(source), len(source))`."""


class RecordKeyTypeError(ChuteError, TypeError):
    """A record key that is not an integer (floats, strings, ...)."""


class SourceFileError(ChuteError, OSError):
    """A data file that exists but cannot be used: wrong format, corrupt or truncated."""


class SourceFileNotFoundError(SourceFileError, FileNotFoundError):
    """A path or glob that names no file."""


class CorruptRecordError(ChuteError, ValueError):
    """A record whose bytes do not decode (truncated, corrupt, or not chute's codec)."""


class RecordCodecError(ChuteError, TypeError):
    """A value the record codec cannot encode (object arrays, unsupported types, ...)."""


class InvalidStateError(ChuteError, ValueError):
    """An iterator state that does not belong to this iterator or is malformed."""


class SourceClosedError(ChuteError, ValueError):
    """A read from a source after `close()`."""


class SharedMemoryError(ChuteError, OSError):
    """Shared memory that cannot be created or attached (e.g. `/dev/shm` is full)."""
