"""`chute.grain`: code written for Grain 0.2.18 runs with `import chute.grain as grain`.

Every public name of Grain's `grain`, `grain.python`, `grain.transforms`,
`grain.sources`, `grain.samplers`, `grain.sharding`, `grain.experimental`,
`grain.checkpoint`, `grain.multiprocessing` and `grain.constants` modules that chute
can honour, on chute's classes: `grain.MapDataset` is `chute.MapDataset` with Grain's
mixtures and string batches (a subclass; see `_datasets`), Grain's
experimental dataset classes are functions returning the chute dataset that does the
same, and the legacy DataLoader operations are chute transforms. Behaviour is Grain's
documented behaviour except for the differences chute keeps on purpose (its shuffle
order, `DROPPED`, its state format, ...), each listed on the "Coming from Grain" page
together with the names left out (`NOT_PROVIDED`, with the reason for each).

Example:
    >>> import chute.grain as grain
    >>> ds = grain.MapDataset.range(10).shuffle(seed=0).map(lambda x: x * 2).batch(5)
    >>> [sorted(b.tolist()) == sorted(b.tolist()) for b in ds]
    [True, True]
    >>> from chute.grain import python as pygrain
    >>> pygrain.MapDataset is grain.MapDataset
    True
"""

from __future__ import annotations

from chute_core import RecordMetadata
from chute_execution import ReadOptions

from .._subclassing import DatasetIterator
from . import (
    checkpoint,
    constants,
    experimental,
    multiprocessing,
    python,
    samplers,
    sharding,
    sources,
    transforms,
)
from ._config import config
from ._datasets import IterDataset, MapDataset
from ._legacy import Record, load
from ._loader import DataLoader
from .multiprocessing import MultiprocessingOptions

DataLoaderIterator = python.PyGrainDatasetIterator
"""The base class of a `DataLoader`'s iterators."""

__version__ = "0.2.18"
"""The Grain release whose behaviour `chute.grain` follows (code may compare against it)."""

__version_info__ = (0, 2, 18)
"""`__version__` as a tuple of ints, as Grain gives it."""

NOT_PROVIDED: dict[str, str] = {
    "monitoring": "Grain's internal metrics; use `ds.iter(stats=True)` instead",
    "proto": "Grain's execution summary protobufs; use `ds.iter(stats=True)` instead",
    "transforms.TfRandomMap": "TensorFlow transforms: chute does not use TensorFlow",
    "experimental.PackAndBatchOperation": "legacy packing operation; use "
    "`IterDataset.pack(...).batch(...)`",
    "experimental.ShapeDtypeStructProtocol": "`ShapeDtypeStruct` has the same attributes",
    "multiprocessing.SharedMemoryArray": "chute's workers put array outputs in shared "
    "memory themselves",
    "multiprocessing.SharedMemoryArrayMetadata": "see SharedMemoryArray",
}
"""Grain 0.2.18's public names `chute.grain` leaves out, and why."""

__all__ = [
    "DataLoader",
    "DataLoaderIterator",
    "DatasetIterator",
    "IterDataset",
    "MapDataset",
    "MultiprocessingOptions",
    "NOT_PROVIDED",
    "ReadOptions",
    "Record",
    "RecordMetadata",
    "checkpoint",
    "config",
    "constants",
    "experimental",
    "load",
    "multiprocessing",
    "python",
    "samplers",
    "sharding",
    "sources",
    "transforms",
]
