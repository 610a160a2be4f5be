"""`ReadOptions`: how many threads read a random-access dataset, and how far ahead."""

from __future__ import annotations

import dataclasses

from ._checks import check_count

__all__ = ["ReadOptions"]


@dataclasses.dataclass(frozen=True)
class ReadOptions:
    """Options for reading a random-access dataset on a pool of threads (per process).

    With `num_threads=8` in each of 10 worker processes, 80 threads read. Threads pay
    off when reads wait on storage or the per-element work releases the GIL (NumPy,
    decoding, I/O); for cheap in-memory elements, `num_threads=0` avoids the thread
    hand-over cost.

    Attributes:
        num_threads: threads reading in parallel; 0 reads in the calling thread.
        prefetch_buffer_size: elements read ahead of the consumer at most (per process,
            not per thread); 0 reads in the calling thread, one chunk at a time.

    Example:
        >>> ReadOptions()
        ReadOptions(num_threads=16, prefetch_buffer_size=500)
        >>> ReadOptions(num_threads=4, prefetch_buffer_size=64).num_threads
        4
    """

    num_threads: int = 16
    prefetch_buffer_size: int = 500

    def __post_init__(self) -> None:
        for name in ("num_threads", "prefetch_buffer_size"):
            # Stored as a plain int (a NumPy integer would not be JSON-serialisable).
            object.__setattr__(self, name, check_count(getattr(self, name), name, "ReadOptions"))

    @property
    def threaded(self) -> bool:
        """Whether reads run on background threads (both numbers are positive)."""
        return self.num_threads > 0 and self.prefetch_buffer_size > 0
