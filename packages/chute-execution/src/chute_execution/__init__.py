"""chute's execution layer.

Where work runs (threads, worker processes, shared-memory transport). Not built yet; see
the project's issue tracker.
"""

__all__: list[str] = []
