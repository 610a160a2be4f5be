"""chute's transforms layer.

What happens to each element. Not built yet; see the project's issue tracker.
"""

__all__: list[str] = []
