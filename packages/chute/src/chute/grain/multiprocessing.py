"""`chute.grain.multiprocessing`: Grain 0.2.18's `grain.multiprocessing` names.

Grain's `SharedMemoryArray` (arrays a worker places in shared memory) has no chute
spelling: chute's workers put every array output in shared memory themselves.

Example:
    >>> import chute.grain as grain
    >>> grain.multiprocessing.MultiprocessingOptions(num_workers=2).num_workers
    2
"""

from __future__ import annotations

import dataclasses

import chute_execution
from chute_execution import AutotuneOptions

__all__ = ["MultiprocessingOptions"]


@dataclasses.dataclass(frozen=True)
class MultiprocessingOptions(chute_execution.MultiprocessingOptions):
    """chute's `MultiprocessingOptions` with Grain's defaults: no workers, not tuned.

    `chute.MultiprocessingOptions()` without a worker count lets the autotuner pick
    the workers; code written for Grain means no workers by it, so this spelling keeps
    that (pass `autotune=True` to tune).

    Example:
        >>> import chute.grain as grain
        >>> options = grain.MultiprocessingOptions()
        >>> options.num_workers, options.autotune
        (0, False)
    """

    num_workers: int = 0
    autotune: AutotuneOptions | bool = False
