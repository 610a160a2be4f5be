"""chute's transforms layer: what happens to each element.

The transform base classes of the seeds (`MapTransform`, `RandomMapTransform`,
`FilterTransform`, `FlatMapTransform`, `BatchTransform`, ...) and adapters that accept
plain callables wherever a transform is; the element ops as nodes over random-access
datasets (`MapMap`, `FilterMap`, `RandomMapMap`, `FlatMapMap`, `BatchMap`, ...) and
over streams (`MapIter`, `FilterIter`, ...); batching of pytrees (`batch_elements`,
`unbatch_elements`, `pad_batch`); and checkpointable iterators that batch, unbatch and
pack variable-length sequences for language-model training.

Example:
    >>> import numpy as np
    >>> from chute_transforms import BatchIter
    >>> from chute_samplers import SequentialIter
    >>> elements = [{"x": np.full(2, i), "label": i} for i in range(5)]
    >>> batches = BatchIter(SequentialIter(elements), 2, drop_remainder=True)
    >>> [batch["label"].tolist() for batch in batches]
    [[0, 1], [2, 3]]
"""

from ._adapters import as_filter_fn as as_filter_fn
from ._adapters import as_flat_map_fn as as_flat_map_fn
from ._adapters import as_map_fn as as_map_fn
from ._adapters import as_map_with_index_fn as as_map_with_index_fn
from ._adapters import as_random_map_fn as as_random_map_fn
from ._batch import BatchFn as BatchFn
from ._batch import Mask as Mask
from ._batch import batch_elements as batch_elements
from ._batch_iter import BatchIter as BatchIter
from ._batch_slices import batch_rows as batch_rows
from ._batch_slices import concat_batches as concat_batches
from ._batch_slices import slice_batch as slice_batch
from ._batch_tree import pad_batch as pad_batch
from ._batch_tree import unbatch_elements as unbatch_elements
from ._best_fit import BestFitPackIter as BestFitPackIter
from ._concat_split import ConcatSplitIter as ConcatSplitIter
from ._errors import BatchError as BatchError
from ._errors import PackingError as PackingError
from ._errors import TransformTypeError as TransformTypeError
from ._filter_thresholds import FilterRatioError as FilterRatioError
from ._filter_thresholds import FilterThresholds as FilterThresholds
from ._filter_thresholds import FilterWarning as FilterWarning
from ._first_fit import FirstFitPackIter as FirstFitPackIter
from ._flat_map_iter import FlatMapIter as FlatMapIter
from ._iter_ops import FilterIter as FilterIter
from ._iter_ops import MapIter as MapIter
from ._iter_ops import MapWithIndexIter as MapWithIndexIter
from ._iter_ops import RandomMapIter as RandomMapIter
from ._key_ops import MapWithKeyIter as MapWithKeyIter
from ._key_ops import MapWithKeyMap as MapWithKeyMap
from ._map_chain import MapChain as MapChain
from ._map_ops import FilterMap as FilterMap
from ._map_ops import MapMap as MapMap
from ._map_ops import MapWithIndexMap as MapWithIndexMap
from ._map_ops import RandomMapMap as RandomMapMap
from ._map_structure_ops import BatchMap as BatchMap
from ._map_structure_ops import FlatMapMap as FlatMapMap
from ._packing import PackedRow as PackedRow
from ._rebatch import RebatchIter as RebatchIter
from ._select_keys import MissingKeyError as MissingKeyError
from ._select_keys import SelectKeysIter as SelectKeysIter
from ._select_keys import SelectKeysMap as SelectKeysMap
from ._skip_errors import SkipErrorsIter as SkipErrorsIter
from ._tokenize import Tokenize as Tokenize
from ._transforms import BatchTransform as BatchTransform
from ._transforms import FilterTransform as FilterTransform
from ._transforms import FlatMapTransform as FlatMapTransform
from ._transforms import MapTransform as MapTransform
from ._transforms import MapWithIndexTransform as MapWithIndexTransform
from ._transforms import RandomMapTransform as RandomMapTransform
from ._unbatch_iter import UnbatchIter as UnbatchIter
from ._unbatch_map import UnbatchMap as UnbatchMap

__all__ = [
    "BatchError",
    "BatchFn",
    "BatchIter",
    "BatchMap",
    "BatchTransform",
    "BestFitPackIter",
    "ConcatSplitIter",
    "FilterIter",
    "FilterMap",
    "FilterRatioError",
    "FilterThresholds",
    "FilterTransform",
    "FilterWarning",
    "FirstFitPackIter",
    "FlatMapIter",
    "FlatMapMap",
    "FlatMapTransform",
    "MapChain",
    "MapIter",
    "MapMap",
    "MapTransform",
    "MapWithIndexIter",
    "MapWithIndexMap",
    "MapWithIndexTransform",
    "MapWithKeyIter",
    "MapWithKeyMap",
    "Mask",
    "MissingKeyError",
    "PackedRow",
    "PackingError",
    "RandomMapIter",
    "RandomMapMap",
    "RandomMapTransform",
    "RebatchIter",
    "SelectKeysIter",
    "SelectKeysMap",
    "SkipErrorsIter",
    "Tokenize",
    "TransformTypeError",
    "UnbatchIter",
    "UnbatchMap",
    "as_filter_fn",
    "as_flat_map_fn",
    "as_map_fn",
    "as_map_with_index_fn",
    "as_random_map_fn",
    "batch_elements",
    "batch_rows",
    "concat_batches",
    "pad_batch",
    "slice_batch",
    "unbatch_elements",
]
