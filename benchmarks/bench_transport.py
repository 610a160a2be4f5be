"""asv benchmarks of the shared-memory transport (`SlabWriter` -> `SlabReader`).

Writer and reader run in this one process, so a message costs both sides' work: pickling
with the array bytes copied into a reused slab, and unpickling with one copy out into
fresh memory. Across processes the two copies run on different cores.

Each `track_ratio_*` divides the transport's throughput by a plain baseline moving the
same bytes or elements in the same call (alternating, median of 7): 1.0 is parity. For
large arrays the baseline is one `np.copyto` of the batch into a ready buffer, memcpy
bandwidth; the transport copies twice, so its ceiling in one process is 0.5.
"""

from __future__ import annotations

import pickle
import timeit
from typing import Any, ClassVar

import numpy as np

from chute_execution.internal import SlabReader, SlabWriter

from ._timing import median_ratio, median_seconds

ARRAY_BYTES = 2 * 2**20
BATCH = 8
CHUNK = 1000  # Elements per message for small elements: the caller groups them.


class LargeArrays:
    """A batch of 8 float32 arrays of 2 MiB each, (a) stacked into one 16 MiB array,
    (b) as a list of 8 arrays."""

    params: ClassVar[list[str]] = ["stacked", "list"]
    param_names: ClassVar[list[str]] = ["batch"]
    timer = timeit.default_timer

    def setup(self, batch: str) -> None:
        rng = np.random.default_rng(0)
        stacked = rng.random((BATCH, ARRAY_BYTES // 4), dtype=np.float32)
        self.batch: Any = stacked if batch == "stacked" else list(stacked.copy())
        self.target = np.empty_like(stacked)
        self.source = stacked.copy()
        self.writer = SlabWriter(num_slabs=2)
        self.reader = SlabReader()
        self._round_trip()  # The slab grows to fit once.

    def teardown(self, batch: str) -> None:
        self.reader.close()
        self.writer.close()

    def _round_trip(self) -> object:
        message = self.writer.write(self.batch)
        result = self.reader.read(message)
        self.writer.release(message.token)
        return result

    def _memcpy(self) -> None:
        np.copyto(self.target, self.source)

    def _leased_round_trip(self) -> object:
        """Copied into the slab once, read as views leased until the result is dropped."""
        message = self.writer.write(self.batch)
        self.writer.lease(message.token)
        result = self.reader.read_leased(message, lambda: self.writer.release(message.token))
        return result  # Dropped by the caller: the lease ends and the slab is free.

    def time_write_and_read_batch(self, batch: str) -> None:
        self._round_trip()

    def time_write_and_read_batch_leased(self, batch: str) -> None:
        """One copy (into the slab) and views out of it: what `mp_prefetch` does."""
        self._leased_round_trip()

    def track_ratio_leased_to_memcpy(self, batch: str) -> float:
        """Throughput of the leased round trip over one `np.copyto` (ceiling ~1: one copy)."""
        return median_ratio(self._leased_round_trip, self._memcpy)

    track_ratio_leased_to_memcpy.unit = "ratio"  # type: ignore[attr-defined]

    def track_megabytes_per_second(self, batch: str) -> float:
        """Batch bytes through writer and reader per second (1 MB = 1e6 bytes)."""
        return self.source.nbytes / median_seconds(self._round_trip) / 1e6

    track_megabytes_per_second.unit = "MB/s"  # type: ignore[attr-defined]

    def track_ratio_to_memcpy(self, batch: str) -> float:
        """Throughput over one `np.copyto` of the same bytes (at most 0.5: two copies)."""
        return median_ratio(self._round_trip, self._memcpy)

    track_ratio_to_memcpy.unit = "ratio"  # type: ignore[attr-defined]


class SmallElements:
    """A chunk of 1000 elements `{"x": int32[16], "label": int}` as one message."""

    timer = timeit.default_timer

    def setup(self) -> None:
        self.elements = [
            {"x": np.arange(i, i + 16, dtype=np.int32), "label": i} for i in range(CHUNK)
        ]
        self.writer = SlabWriter(num_slabs=2)
        self.reader = SlabReader()

    def teardown(self) -> None:
        self.reader.close()
        self.writer.close()

    def _round_trip(self) -> object:
        message = self.writer.write(self.elements)
        result = self.reader.read(message)
        self.writer.release(message.token)
        return result

    def _pickle(self) -> object:
        return pickle.loads(pickle.dumps(self.elements, protocol=pickle.HIGHEST_PROTOCOL))

    def time_write_and_read_chunk(self) -> None:
        self._round_trip()

    def track_elements_per_second(self) -> float:
        """Elements through writer and reader per second."""
        return CHUNK / median_seconds(self._round_trip)

    track_elements_per_second.unit = "elements/s"  # type: ignore[attr-defined]

    def track_ratio_to_pickle(self) -> float:
        """Throughput over a plain in-band `pickle` round trip (what a queue does)."""
        return median_ratio(self._round_trip, self._pickle)

    track_ratio_to_pickle.unit = "ratio"  # type: ignore[attr-defined]
