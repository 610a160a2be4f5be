"""chute's samplers layer.

Which record comes next. Not built yet; see the project's issue tracker.
"""

__all__: list[str] = []
