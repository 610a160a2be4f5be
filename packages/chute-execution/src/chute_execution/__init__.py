"""chute's execution layer: where the work runs.

`PrefetchReadIter` reads a random-access dataset in order on a pool of threads
(`ReadOptions(num_threads, prefetch_buffer_size)`), with a bounded read-ahead buffer;
`ThreadPrefetchIter` advances any checkpointable iterator on a background thread. Both
yield exactly the stream of their single-threaded counterparts, and their states are
interchangeable with those counterparts' and across thread counts and buffer sizes.
Readers built inside `sharing_reads()` (a mixture's components) share one `ReadGroup`:
one set of threads and one read-ahead budget, however many they are.

Example:
    >>> from chute_samplers import SequentialIter, ShuffleMap
    >>> from chute_execution import PrefetchReadIter, ReadOptions, ThreadPrefetchIter
    >>> dataset = ShuffleMap(range(100), seed=0)
    >>> with PrefetchReadIter(dataset, ReadOptions(num_threads=4)) as it:
    ...     list(it) == list(SequentialIter(dataset))
    True
    >>> with ThreadPrefetchIter(SequentialIter(dataset), buffer_size=8) as it:
    ...     first = next(it)
    ...     state = it.get_state()
    >>> state
    {'position': 1}
"""

from ._autotune import PerformanceConfig as PerformanceConfig
from ._autotune import pick_performance_config as pick_performance_config
from ._autotune_options import AutotuneOptions as AutotuneOptions
from ._autotune_options import TuningDecision as TuningDecision
from ._chunk_plan import ChunkPlan as ChunkPlan
from ._chunk_plan import ChunkResult as ChunkResult
from ._data_loader import DataLoader as DataLoader
from ._idle_workers import stop_idle_workers as stop_idle_workers
from ._mp_batch import MultiprocessBatchIter as MultiprocessBatchIter
from ._mp_options import MultiprocessingOptions as MultiprocessingOptions
from ._mp_prefetch import MultiprocessPrefetchIter as MultiprocessPrefetchIter
from ._mp_prefetch import WorkerError as WorkerError
from ._planner import BatchSpec as BatchSpec
from ._planner import PlanStep as PlanStep
from ._planner import WorkerPlan as WorkerPlan
from ._planner import batch_aligned_chunk_size as batch_aligned_chunk_size
from ._planner import default_chunk_size as default_chunk_size
from ._planner import plan_workers as plan_workers
from ._prefetch_read import PrefetchReadIter as PrefetchReadIter
from ._ray_options import RayOptions as RayOptions
from ._ray_prefetch import RayPrefetchIter as RayPrefetchIter
from ._read_group import ReadGroup as ReadGroup
from ._read_group import sharing_reads as sharing_reads
from ._read_options import ReadAheadWarning as ReadAheadWarning
from ._read_options import ReadOptions as ReadOptions
from ._shipping import ShippingError as ShippingError
from ._shipping import importable_in_workers as importable_in_workers
from ._shipping import ship as ship
from ._shipping import unship as unship
from ._stage_clock import StageClock as StageClock
from ._thread_prefetch import ThreadPrefetchIter as ThreadPrefetchIter
from ._trace import TraceOptions as TraceOptions
from ._trace import TraceRecorder as TraceRecorder
from ._trace import tracing as tracing
from ._transport.pool import free_idle_slabs as free_idle_slabs
from ._worker_pool import WorkerDiedError as WorkerDiedError
from ._worker_pool import WorkerTimeoutError as WorkerTimeoutError

__all__ = [
    "AutotuneOptions",
    "BatchSpec",
    "ChunkPlan",
    "ChunkResult",
    "DataLoader",
    "MultiprocessBatchIter",
    "MultiprocessPrefetchIter",
    "MultiprocessingOptions",
    "PerformanceConfig",
    "PlanStep",
    "PrefetchReadIter",
    "RayOptions",
    "RayPrefetchIter",
    "ReadAheadWarning",
    "ReadGroup",
    "ReadOptions",
    "ShippingError",
    "StageClock",
    "ThreadPrefetchIter",
    "TraceOptions",
    "TraceRecorder",
    "TuningDecision",
    "WorkerDiedError",
    "WorkerError",
    "WorkerPlan",
    "WorkerTimeoutError",
    "batch_aligned_chunk_size",
    "default_chunk_size",
    "free_idle_slabs",
    "importable_in_workers",
    "pick_performance_config",
    "plan_workers",
    "sharing_reads",
    "ship",
    "stop_idle_workers",
    "tracing",
    "unship",
]
