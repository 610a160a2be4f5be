"""What the upper chute packages build on from the samplers: seams, not the user's API.

Stable between chute's own packages of one release; may change between releases. Other
chute packages import the samplers only through `chute_samplers` and this module (an
import-linter contract forbids `chute_samplers._x` from outside).

- `Span`, `read_span`, `reader_name`: reading a run of positions of a random-access
  dataset at once (what a chunk of work reads), with failures kept per position.
- `Frontier`, `SkipConsumed`, `read_reader_state`, `reader_state` (and `FRONTIER`,
  `level_of`, `watermark`, `is_watermark`, `first_position`, `residue`): the positions
  a resharded reader skips because other processes consumed them before the reshard;
  `shard_global` and `shard_locals` turn a shard's positions into global ones and back.
- `OPEN_STREAMS`: the layout of an interleave's state (its next input, the streams open
  in part), for resharding.
- `REPEAT_STATES`: the layout of a stream repeat's state (its epoch, the parent's state
  and, resharded, the parent's states of later epochs), for resharding; `REPEAT_ENDED`:
  the epoch of an endless repeat that ended.
- `MIX_STATES`: the layout of a mixture's state, for resharding each component.
- `WINDOW_STATES`: the layout of a window shuffle's state, and the positions its current
  window yielded, for resharding; `window_span` and `span_positions` write and read the
  positions of the elements a stage holds, as its state names them; `named_origins`,
  `named_count` and `ordered_positions` the same in an order that is not ascending (a
  packer's after a window shuffle), or by stream (a packer's over an interleave).
- `consecutive`: whether an array of positions is one run `p, p + 1, ...`.
- `origin_key`: the key a record's own random generator derives from its origin.
- `RNG_OP`: the salt of the per-record generator `record_rng` gives a random map.

Example:
    >>> from chute_samplers.internal import read_span
    >>> read_span(range(10), 2, 5).elements
    [2, 3, 4]
"""

from ._frontier import (
    FRONTIER,
    Frontier,
    SkipConsumed,
    is_watermark,
    level_of,
    read_reader_state,
    reader_state,
    watermark,
)
from ._hashing import origin_key
from ._index_sampler import RNG_OP
from ._interleave_states import OPEN_STREAMS
from ._mix_iter import MIX_STATES
from ._node import consecutive
from ._positions import READER_POSITIONS
from ._read_order import named_count, named_origins, ordered_positions
from ._repeat_iter import ENDED as REPEAT_ENDED
from ._repeat_states import REPEAT_STATES
from ._shard_globals import first_position, residue, shard_global, shard_locals
from ._span import Span, read_span, reader_name
from ._window_states import MAX_SPAN_BITS, WINDOW_STATES, reads_pairs, span_positions, window_span

__all__ = [
    "FRONTIER",
    "MAX_SPAN_BITS",
    "MIX_STATES",
    "OPEN_STREAMS",
    "READER_POSITIONS",
    "REPEAT_ENDED",
    "REPEAT_STATES",
    "RNG_OP",
    "WINDOW_STATES",
    "Frontier",
    "SkipConsumed",
    "Span",
    "consecutive",
    "first_position",
    "is_watermark",
    "level_of",
    "named_count",
    "named_origins",
    "ordered_positions",
    "origin_key",
    "read_reader_state",
    "read_span",
    "reader_name",
    "reader_state",
    "reads_pairs",
    "residue",
    "shard_global",
    "shard_locals",
    "span_positions",
    "watermark",
    "window_span",
]
