"""Naming the file and the index in it of a record that cannot be read or decoded."""

from __future__ import annotations

from chute_core import CorruptRecordError

__all__ = ["located"]


def located(error: Exception, kind: str, filename: str, index: int, key: int) -> Exception:
    """`error`, saying which record failed: its file, its index there, its record key.

    A `CorruptRecordError` becomes one whose message says where (the caller chains it
    to the original); any other exception (e.g. from a user's decoder) keeps its type
    and gets a note. The pipeline adds the stage and the global position as a note.

    Example:
        >>> error = located(CorruptRecordError("bad"), "ArrayRecord", "/d/a-1", 2, 10)
        >>> print(error)
        bad; in record 2 of the ArrayRecord file '/d/a-1' (record key 10 of the source)
    """
    where = f"in record {index} of the {kind} file {filename!r} (record key {key} of the source)"
    if type(error) is CorruptRecordError:
        return CorruptRecordError(f"{error}; {where}")
    error.add_note(f"chute: {where}")
    return error
