"""chute's samplers layer: which record comes next.

Everything here is a pure function of (seed, position): a stateless global
`Permutation` of any size, per-record generators (`record_rng`), the `IndexSampler`
with epochs and `ShardOptions`, random-access dataset nodes (`ShuffleMap`,
`RepeatMap`, `SliceMap`, `TakeMap`, `ShardMap`, `MixMap`, `SelectFromMap`) and checkpointable
streams (`SequentialIter`, `MixIter`, `InterleaveIter`, `WindowShuffleIter`) whose
state is a small JSON dict.

Example:
    >>> from chute_samplers import RepeatMap, ShuffleMap, SliceMap
    >>> train = SliceMap(ShuffleMap(range(10), seed=0), slice(0, 8))
    >>> epochs = RepeatMap(ShuffleMap(train, seed=1), num_epochs=2)
    >>> set(epochs[:8]) == set(epochs[8:]) == set(train)
    True
"""

from ._cache import CacheIter as CacheIter
from ._cache import CacheMap as CacheMap
from ._concatenate import ConcatenateIter as ConcatenateIter
from ._concatenate import ConcatenateMap as ConcatenateMap
from ._index_sampler import IndexSampler as IndexSampler
from ._index_sampler import IndexSamplerIterator as IndexSamplerIterator
from ._interleave import InterleaveIter as InterleaveIter
from ._iter_base import IterNode as IterNode
from ._iter_base import upstream_iterators as upstream_iterators
from ._limit import LimitIter as LimitIter
from ._mix import MixMap as MixMap
from ._mix_iter import MixIter as MixIter
from ._node import ENDLESS as ENDLESS
from ._node import EpochArray as EpochArray
from ._node import MapNode as MapNode
from ._node import PositionArray as PositionArray
from ._node import PositionMap as PositionMap
from ._node import SliceMap as SliceMap
from ._node import fetch as fetch
from ._node import node_epoch_length as node_epoch_length
from ._permutation import Permutation as Permutation
from ._record_keys import prefetch_span as prefetch_span
from ._record_keys import reader_dataset as reader_dataset
from ._record_keys import record_keys as record_keys
from ._repeat import RepeatMap as RepeatMap
from ._repeat_iter import RepeatIter as RepeatIter
from ._rng import record_rng as record_rng
from ._rng import record_rngs as record_rngs
from ._schedule import MixSchedule as MixSchedule
from ._select_from import SelectFromMap as SelectFromMap
from ._sequential import SequentialIter as SequentialIter
from ._shard import ShardMap as ShardMap
from ._shard_options import NoSharding as NoSharding
from ._shard_options import ShardOptions as ShardOptions
from ._shuffle import ShuffleMap as ShuffleMap
from ._take import TakeMap as TakeMap
from ._weight_schedule import WeightSchedule as WeightSchedule
from ._window_shuffle import WindowShuffleIter as WindowShuffleIter
from ._zip import ZipIter as ZipIter
from ._zip import ZipMap as ZipMap

__all__ = [
    "CacheIter",
    "CacheMap",
    "ConcatenateIter",
    "ConcatenateMap",
    "ENDLESS",
    "EpochArray",
    "IndexSampler",
    "IndexSamplerIterator",
    "InterleaveIter",
    "IterNode",
    "LimitIter",
    "MapNode",
    "MixIter",
    "MixMap",
    "MixSchedule",
    "NoSharding",
    "Permutation",
    "PositionArray",
    "PositionMap",
    "RepeatIter",
    "RepeatMap",
    "SelectFromMap",
    "SequentialIter",
    "ShardMap",
    "ShardOptions",
    "ShuffleMap",
    "SliceMap",
    "TakeMap",
    "WeightSchedule",
    "WindowShuffleIter",
    "ZipIter",
    "ZipMap",
    "fetch",
    "node_epoch_length",
    "prefetch_span",
    "reader_dataset",
    "record_keys",
    "record_rng",
    "record_rngs",
    "upstream_iterators",
]
