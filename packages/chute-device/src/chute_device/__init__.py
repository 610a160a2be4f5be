"""chute's device layer.

Getting batches onto accelerators. Not built yet; see the project's issue tracker.
"""

__all__: list[str] = []
