"""Origins of outputs that come from splitting one parent element into several."""

from __future__ import annotations

__all__ = ["child_origin"]


def child_origin(parent: object, offset: int) -> tuple[int, ...] | None:
    """The parent's current origin plus `offset - 1` (the output just returned), or None.

    `offset` counts the outputs already returned from the parent's current element
    (flat map outputs, unbatched rows); 0 means none yet.

    Example:
        >>> class Parent:
        ...     origin = (7,)
        >>> child_origin(Parent(), 2), child_origin(Parent(), 0)
        ((7, 1), None)
    """
    if offset == 0:
        return None
    inner: tuple[int, ...] | None = getattr(parent, "origin", None)
    return None if inner is None else (*inner, offset - 1)
