"""`chute.grain.multiprocessing`: Grain 0.2.18's `grain.multiprocessing` names.

Grain's `SharedMemoryArray` (arrays a worker places in shared memory) has no chute
spelling: chute's workers put every array output in shared memory themselves.

Example:
    >>> import chute.grain as grain
    >>> grain.multiprocessing.MultiprocessingOptions(num_workers=2).num_workers
    2
"""

from __future__ import annotations

from chute_execution import MultiprocessingOptions

__all__ = ["MultiprocessingOptions"]
