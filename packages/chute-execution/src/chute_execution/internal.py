"""What the meta-package builds on from the execution layer: seams, not the user's API.

Stable between chute's own packages of one release; may change between releases.

- `add_preload`: modules the fork server imports before it forks workers (the
  meta-package adds itself, which this layer cannot name).
- `warm_up`: start the fork server ahead of the first loader.
- `Slab`: one mapped shared-memory segment (benchmarks of what its pages cost).
- `WorkerPool`: the worker processes of one iterator; its `start_path` and
  `fork_refused` tell how they started (tests), and `thread_count` counts this
  process's threads as the fork check does.
- `SlabReader`, `SlabWriter`: the shared-memory transport's two ends (benchmarks),
  `DEFAULT_SLAB_SIZE` its slabs' size, `LEASE_MIN_BYTES` the smallest result handed
  out as a view into a slab rather than copied.
- `complete_event`, `lay_out`, `STAGES_TID_OFFSET`: trace events of this process, for
  the meta-package's traced iterator (`ds.iter(trace=...)`).
- `health`, `Health`, `parked_workers`: a prefetching iterator's buffer and workers
  now, and the workers parked for the next iterator (live metrics).
- `CHUNK_POSITIONS`: the layout of the workers' `{"position", "offset"}` state (and of
  older versions' `{"chunk", "offset"}`), for resharding; `THROUGH`, `AT` and `SKIP`,
  the keys it adds for resharding (see `_chunk_positions`).
- `Tuner`, `GAIN`, `RETRY`, `WAIT_SHARE`, `WARM_START`, `FEWER`: the runtime autotuner's
  policy, for tests that feed it measurements of their own; `TuningMemory` and
  `Settled`, where a plan's last tuner settled (its next one starts there).

Example:
    >>> from chute_execution.internal import CHUNK_POSITIONS
    >>> CHUNK_POSITIONS.write(70, 64)
    {'position': 70, 'offset': 0}
"""

from ._chunk_positions import AT, CHUNK_POSITIONS, SKIP, THROUGH
from ._fork_start import thread_count
from ._health import Health, health, parked_workers
from ._leases import LEASE_MIN_BYTES
from ._trace import STAGES_TID_OFFSET, complete_event, lay_out
from ._transport import DEFAULT_SLAB_SIZE, SlabReader, SlabWriter
from ._transport.slab import Slab
from ._tuner import FEWER, GAIN, RETRY, WAIT_SHARE, WARM_START, Tuner
from ._tuning_memory import Settled, TuningMemory
from ._worker_pool import WorkerPool, add_preload, warm_up

__all__ = [
    "AT",
    "CHUNK_POSITIONS",
    "DEFAULT_SLAB_SIZE",
    "FEWER",
    "GAIN",
    "LEASE_MIN_BYTES",
    "RETRY",
    "SKIP",
    "STAGES_TID_OFFSET",
    "THROUGH",
    "WAIT_SHARE",
    "WARM_START",
    "Health",
    "Settled",
    "Slab",
    "SlabReader",
    "SlabWriter",
    "Tuner",
    "TuningMemory",
    "WorkerPool",
    "add_preload",
    "complete_event",
    "health",
    "lay_out",
    "parked_workers",
    "thread_count",
    "warm_up",
]
