"""What the upper chute packages build on from the transforms: seams, not the user's API.

Stable between chute's own packages of one release; may change between releases.

- `Allocate` and `stacking_into`: have `batch_elements` stack array leaves into memory
  the caller provides (a worker's shared-memory slab), not into fresh arrays.
- `check_key_kind`: the check of a random map's `key` ("position" or "record"), for
  the fluent API to refuse a bad one when the stage is declared.
- `PARENT_STATES` and `PACK_STATES`: the layouts of the stream ops' states around their
  parent's, for resharding (see `_state` and `_pack_states`); `position_counts`, the
  check of a state's `[[position, count], ...]` list (a resharded state's `skip`).

Example:
    >>> import numpy as np
    >>> from chute_transforms import batch_elements
    >>> buffer = np.empty(6, np.uint8)
    >>> def allocate(shape, dtype):
    ...     return buffer[: int(np.prod(shape))].view(dtype).reshape(shape)
    >>> with stacking_into(allocate):
    ...     batch = batch_elements([np.arange(3, dtype=np.uint8)] * 2)
    >>> np.shares_memory(batch, buffer)
    True
"""

from ._batch import Allocate, stacking_into
from ._pack_states import PACK_STATES
from ._record_rng import check_key_kind
from ._state import PARENT_STATES, position_counts

__all__ = [
    "PACK_STATES",
    "PARENT_STATES",
    "Allocate",
    "check_key_kind",
    "position_counts",
    "stacking_into",
]
