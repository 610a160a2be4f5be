"""What the meta-package builds on from the execution layer: seams, not the user's API.

Stable between chute's own packages of one release; may change between releases.

- `add_preload`: modules the fork server imports before it forks workers (the
  meta-package adds itself, which this layer cannot name).
- `warm_up`: start the fork server ahead of the first loader.
- `SlabReader`, `SlabWriter`: the shared-memory transport's two ends (benchmarks).

Example:
    >>> from chute_execution.internal import add_preload
    >>> add_preload("json")
"""

from ._chunk_positions import CHUNK_POSITIONS
from ._transport import SlabReader, SlabWriter
from ._worker_pool import add_preload, warm_up

__all__ = ["CHUNK_POSITIONS", "SlabReader", "SlabWriter", "add_preload", "warm_up"]
