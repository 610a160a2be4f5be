"""Naming the stage and the position in an exception raised by a user's function."""

from __future__ import annotations

__all__ = ["annotate"]


def annotate(error: BaseException, stage: str, where: str) -> None:
    """Adds a note to `error` naming the stage and the element (keeps its type).

    The exception stays what the user's code raised (so `except KeyError` works), and
    its traceback ends with e.g. `chute: raised by map(parse) on the element at
    position 17`. Notes added again by outer stages are not repeated.
    """
    notes = getattr(error, "__notes__", [])
    if any(note.startswith("chute: raised by") for note in notes):
        return
    error.add_note(f"chute: raised by {stage} on the element at {where}")
