"""asv benchmarks of what a slab's pages cost: made fresh, taken over, or reused.

Why chute keeps slabs across chunks and iterators. Each `track_ratio_*` is the time of
one 16 MiB `np.copyto` (memcpy of a batch into ready memory) over the time of getting
16 MiB of shared memory ready to write, in the same run (median of 7 pairs): below 1,
getting the memory costs more than filling it.

- `fresh_populated`: what a worker does for a new slab (`Slab.create`: the file's pages
  reserved with `posix_fallocate`, then mapped with `MAP_POPULATE`).
- `fresh_faulted`: the alternative, mapping without `MAP_POPULATE` and taking a page
  fault on the first write of each page (the write is timed with it).
- `taken_over`: mapping a slab whose pages exist (`Slab.attach`, as a worker does with
  a slab of the idle pool, `SlabPool`), with `MAP_POPULATE`.
- `reused`: writing 16 MiB into a slab already mapped (the steady state).

Huge pages would cut the mapping cost ~512-fold, but tmpfs gives them only where
`/sys/kernel/mm/transparent_hugepage/shmem_enabled` allows (`never` on the development
VM and on most distributions' defaults), and `MAP_HUGETLB` needs reserved pages
(`vm.nr_hugepages`, 0 by default), so chute does not rely on them.
"""

from __future__ import annotations

import mmap
import os
import timeit
from typing import ClassVar

import numpy as np

from chute_core.internal import create_segment_file
from chute_execution.internal import Slab

from ._timing import median_ratio

SIZE = 16 * 2**20


class SlabPages:
    """Getting 16 MiB of shared memory ready to write, four ways (see the module)."""

    params: ClassVar[list[str]] = ["fresh_populated", "fresh_faulted", "taken_over", "reused"]
    param_names: ClassVar[list[str]] = ["slab"]
    timer = timeit.default_timer

    def setup(self, slab: str) -> None:
        self.source = np.ones(SIZE, np.uint8)
        self.target = np.empty_like(self.source)
        self.target[:] = 0
        self.kept = Slab.create(SIZE)
        self.kept.array[:] = 1

    def teardown(self, slab: str) -> None:
        self.kept.close()
        os.unlink(self.kept.path)

    def _memcpy(self) -> None:
        np.copyto(self.target, self.source)

    def _fresh_populated(self) -> None:
        made = Slab.create(SIZE)
        made.close()
        os.unlink(made.path)

    def _fresh_faulted(self) -> None:
        path, fd = create_segment_file("bench")
        try:
            os.posix_fallocate(fd, 0, SIZE)
            mapping = mmap.mmap(fd, SIZE, flags=mmap.MAP_SHARED)
            array = np.frombuffer(mapping, np.uint8)
            array[:] = 1  # The first touch of every page.
            del array
            mapping.close()
        finally:
            os.close(fd)
            os.unlink(path)

    def _taken_over(self) -> None:
        Slab.attach(self.kept.name, SIZE, writable=True).close()

    def _reused(self) -> None:
        self.kept.array[:] = 2

    def time_ready(self, slab: str) -> None:
        getattr(self, f"_{slab}")()

    def track_ratio_memcpy_to_ready(self, slab: str) -> float:
        """One 16 MiB memcpy's time over the time to get 16 MiB ready this way."""
        return median_ratio(getattr(self, f"_{slab}"), self._memcpy)

    track_ratio_memcpy_to_ready.unit = "ratio"  # type: ignore[attr-defined]
