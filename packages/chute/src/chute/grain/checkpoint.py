"""`chute.grain.checkpoint`: Grain 0.2.18's `grain.checkpoint` names (Orbax handlers).

Example:
    >>> import chute.grain as grain
    >>> grain.checkpoint.CheckpointSave.__name__
    'CheckpointSave'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_names

if TYPE_CHECKING:
    from chute_checkpoint import CheckpointHandler, CheckpointRestore, CheckpointSave

__getattr__ = lazy_names(
    __name__,
    {
        name: ("chute_checkpoint", name)
        for name in ("CheckpointHandler", "CheckpointRestore", "CheckpointSave")
    },
)

__all__ = ["CheckpointHandler", "CheckpointRestore", "CheckpointSave"]
