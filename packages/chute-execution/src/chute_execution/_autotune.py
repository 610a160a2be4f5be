"""`pick_performance_config`: workers and buffers chosen from a short measurement."""

from __future__ import annotations

import dataclasses
import os
import statistics
import time
from collections.abc import Iterable
from typing import Any

from chute_core.internal import check_count

from ._mp_options import MultiprocessingOptions
from ._read_options import ReadOptions, element_nbytes

__all__ = ["PerformanceConfig", "pick_performance_config"]

_CHEAP_SECONDS = 20e-6
"""Below this per-element cost, handing elements between processes costs more than it saves."""
_CHUNK = 64


@dataclasses.dataclass(frozen=True)
class PerformanceConfig:
    """What `pick_performance_config` chose, and what it measured to choose it.

    Attributes:
        read_options: threads and read-ahead for `to_iter_dataset(read_options)`.
        multiprocessing_options: workers and buffers for `mp_prefetch(...)`.
        seconds_per_element: time to produce an element in this process (the total over
            the count: pipelines read in chunks, so single `next` calls vary widely).
        bytes_per_element: NumPy bytes in one element (what buffers hold).
        elements_measured: how many elements the measurement read.

    Example:
        >>> config = pick_performance_config(range(10), ram_budget_mb=8)
        >>> config.elements_measured, config.bytes_per_element  # Python ints: 8 bytes.
        (10, 8)
    """

    read_options: ReadOptions
    multiprocessing_options: MultiprocessingOptions
    seconds_per_element: float
    bytes_per_element: int
    elements_measured: int


def pick_performance_config(
    ds: Iterable[Any],
    ram_budget_mb: int,
    max_workers: int | None = None,
    max_buffer_size: int | None = None,
    *,
    seconds: float = 1.0,
    max_elements: int = 512,
) -> PerformanceConfig:
    """Measures a pipeline briefly in this process and picks workers and buffers.

    It reads up to `max_elements` elements for at most `seconds`, and divides the time
    by the count (pipelines read in chunks), and takes the median bytes of an element's
    arrays. Elements cheaper than 20 us are not worth
    sending between processes: then no workers. Otherwise one worker per CPU (at most
    `max_workers`). Buffers are sized so that what they hold stays within half of
    `ram_budget_mb`. The output of a pipeline never depends on these numbers; keep the
    config you deploy in a file so that speed, too, is reproducible.

    Args:
        ds: the dataset to measure (iterated from its start).
        ram_budget_mb: memory the buffers may use, in MiB.
        max_workers: at most this many worker processes (None: the CPU count).
        max_buffer_size: at most this many chunks per worker / elements read ahead.
        seconds: the measurement's time limit.
        max_elements: the measurement's element limit.

    Returns:
        The chosen options and the measurements behind them.

    Example:
        >>> config = pick_performance_config(range(100), ram_budget_mb=64)
        >>> config.multiprocessing_options.num_workers  # Cheap elements: no workers.
        0
    """
    budget = check_count(ram_budget_mb, "ram_budget_mb", "pick_performance_config", minimum=1)
    cpus = os.cpu_count() or 1
    limit = cpus if max_workers is None else check_count(max_workers, "max_workers", "pick")
    sizes: list[int] = []
    start = time.perf_counter()
    iterator = iter(ds)
    deadline = start + seconds
    while len(sizes) < max_elements and time.perf_counter() < deadline:
        try:
            element = next(iterator)
        except StopIteration:
            break
        sizes.append(element_nbytes(element))
    elapsed = time.perf_counter() - start
    close = getattr(iterator, "close", None)
    if callable(close):
        close()
    per_element = elapsed / len(sizes) if sizes else 0.0
    per_bytes = max(1, int(statistics.median(sizes))) if sizes else 1
    workers = 0 if per_element < _CHEAP_SECONDS else min(cpus, limit)
    half_budget = budget * 2**20 // 2
    cap = max_buffer_size if max_buffer_size is not None else 8
    chunk_bytes = _CHUNK * per_bytes
    per_worker = max(1, min(cap, half_budget // max(1, workers * chunk_bytes)))
    read_ahead = max(1, min(max_buffer_size or 500, half_budget // per_bytes))
    return PerformanceConfig(
        read_options=ReadOptions(num_threads=min(16, read_ahead), prefetch_buffer_size=read_ahead),
        multiprocessing_options=MultiprocessingOptions(
            num_workers=workers, per_worker_buffer_size=per_worker
        ),
        seconds_per_element=per_element,
        bytes_per_element=per_bytes,
        elements_measured=len(sizes),
    )
