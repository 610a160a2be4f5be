"""`ReadOptions`: how many threads read a random-access dataset, and how far ahead."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from chute_core.internal import check_count

__all__ = ["DEFAULT_PREFETCH_BUFFER_BYTES", "ReadAheadWarning", "ReadOptions", "element_nbytes"]

DEFAULT_PREFETCH_BUFFER_BYTES = 256 * 2**20
"""The default bound of the read-ahead buffer: 256 MiB (per process)."""


class ReadAheadWarning(UserWarning):
    """`prefetch_buffer_size` elements would hold more than `prefetch_buffer_bytes`.

    The read-ahead is then lowered to fit the byte budget; the warning says by how much
    and how to choose (a smaller `prefetch_buffer_size`, or a larger budget).

    Example:
        >>> issubclass(ReadAheadWarning, UserWarning)
        True
    """


@dataclasses.dataclass(frozen=True)
class ReadOptions:
    """Options for reading a random-access dataset on a pool of threads (per process).

    With `num_threads=8` in each of 10 worker processes, 80 threads read. Threads pay
    off when reads wait on storage or the per-element work releases the GIL (NumPy,
    decoding, I/O); for cheap in-memory elements, `num_threads=0` avoids the thread
    hand-over cost.

    The buffer counts elements of the dataset being read, whatever they are: after
    `MapDataset.batch(128)` an element is a batch, so 500 means 500 batches. It is also
    bounded in bytes: the size of an element is measured from the first ones read
    (NumPy arrays, bytes and strings, summed over the element's pytree), and when
    `prefetch_buffer_size` such elements would hold more than `prefetch_buffer_bytes`,
    fewer are read ahead (at least one), with a `ReadAheadWarning` saying so.

    Attributes:
        num_threads: threads reading in parallel; 0 reads in the calling thread.
        prefetch_buffer_size: elements read ahead of the consumer at most (per process,
            not per thread); 0 reads in the calling thread, one chunk at a time.
        prefetch_buffer_bytes: bytes read ahead at most (about: measured from the first
            elements read), 256 MiB by default; None for no bound in bytes.

    Example:
        >>> ReadOptions()
        ReadOptions(num_threads=16, prefetch_buffer_size=500)
        >>> ReadOptions(num_threads=4, prefetch_buffer_size=64).num_threads
        4
        >>> ReadOptions(prefetch_buffer_bytes=2**30)
        ReadOptions(num_threads=16, prefetch_buffer_size=500, prefetch_buffer_bytes=1073741824)
    """

    num_threads: int = 16
    prefetch_buffer_size: int = 500
    prefetch_buffer_bytes: int | None = DEFAULT_PREFETCH_BUFFER_BYTES

    def __post_init__(self) -> None:
        for name in ("num_threads", "prefetch_buffer_size"):
            # Stored as a plain int (a NumPy integer would not be JSON-serialisable).
            object.__setattr__(self, name, check_count(getattr(self, name), name, "ReadOptions"))
        if self.prefetch_buffer_bytes is not None:
            budget = check_count(
                self.prefetch_buffer_bytes, "prefetch_buffer_bytes", "ReadOptions", minimum=1
            )
            object.__setattr__(self, "prefetch_buffer_bytes", budget)

    def __repr__(self) -> str:
        shown = f"num_threads={self.num_threads}, prefetch_buffer_size={self.prefetch_buffer_size}"
        if self.prefetch_buffer_bytes != DEFAULT_PREFETCH_BUFFER_BYTES:
            shown += f", prefetch_buffer_bytes={self.prefetch_buffer_bytes}"
        return f"ReadOptions({shown})"

    @property
    def threaded(self) -> bool:
        """Whether reads run on background threads (both numbers are positive)."""
        return self.num_threads > 0 and self.prefetch_buffer_size > 0


def element_nbytes(element: Any) -> int:
    """The bytes an element holds: its arrays, bytes and strings (8 for other leaves).

    Example:
        >>> element_nbytes({"image": np.zeros((4, 4), np.uint8), "label": 3, "id": "ab"})
        26
    """
    if isinstance(element, np.ndarray | np.generic):
        return int(element.nbytes)
    if isinstance(element, dict):
        return sum(element_nbytes(value) for value in element.values())
    if isinstance(element, list | tuple):
        return sum(element_nbytes(value) for value in element)
    if isinstance(element, bytes | str):
        return len(element)
    return 8
