"""chute's checkpoint layer.

Saving and restoring iterators. Not built yet; see the project's issue tracker.
"""

__all__: list[str] = []
