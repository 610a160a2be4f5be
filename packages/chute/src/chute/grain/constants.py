"""`chute.grain.constants`: Grain 0.2.18's `grain.constants` (record dict keys).

Example:
    >>> import chute.grain as grain
    >>> grain.constants.RECORD_KEY
    '_record_key'
"""

from __future__ import annotations

__all__ = ["DATASET_INDEX", "EPOCH", "INDEX", "META_FEATURES", "RECORD", "RECORD_KEY", "SEED"]

DATASET_INDEX = "_dataset_index"
EPOCH = "_epoch"
INDEX = "_index"
RECORD = "_record"
RECORD_KEY = "_record_key"
SEED = "_seed"
META_FEATURES = frozenset({DATASET_INDEX, EPOCH, INDEX, RECORD, RECORD_KEY, SEED})
"""Every key above (as in Grain)."""
