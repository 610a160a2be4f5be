"""What the other chute packages build on from the sources layer: seams, not the user's API.

Names here are stable between chute's own packages of one release, and may change
between releases; a user's code should use the names of `chute_sources` itself. Every
other chute package imports from the sources layer only through `chute_sources` and
this module (an import-linter contract forbids reaching into `chute_sources._x`). What
all layers share (checks, the error ledger, forking and shared memory) is in
`chute_core.internal`.

- `read_one_by_one`, `reading_one_by_one`: local ArrayRecord files read one record at a
  time (by worker processes that take every core).
- The record codec's `MAGIC`.
- The manifest of `chute convert`: its name and version, and `unfinished_conversions`,
  which `ArrayRecordSource` and `chute inspect` ask before reading shards.

Example:
    >>> from chute_sources.internal import MAGIC
    >>> len(MAGIC)  # The first bytes of every encoded record.
    8
"""

from ._array_record import read_one_by_one, reading_one_by_one
from ._codec import MAGIC
from ._conversion_manifest import (
    MANIFEST_SUFFIX,
    MANIFEST_VERSION,
    UnfinishedConversion,
    unfinished_conversions,
)

__all__ = [
    "MAGIC",
    "MANIFEST_SUFFIX",
    "MANIFEST_VERSION",
    "UnfinishedConversion",
    "read_one_by_one",
    "reading_one_by_one",
    "unfinished_conversions",
]
