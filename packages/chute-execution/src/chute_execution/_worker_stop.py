"""Stopping worker processes: asked politely, confirmed, reaped later; signals as a last resort."""

from __future__ import annotations

import contextlib
import time
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from ._worker import STOPPED

__all__ = ["JOIN_SECONDS", "ask", "finish", "linger", "reap_lingering", "shutdown"]

JOIN_SECONDS = 2.0
"""How long stopping workers may take, all together, before they are sent signals."""

_LINGERING: list[tuple[BaseProcess, float]] = []
"""Workers that confirmed their stop and are exiting, with when: reaped later."""


def linger(process: BaseProcess, since: float) -> None:
    """Counts `process` as exiting on its own since `since`: `reap_lingering` reaps it."""
    _LINGERING.append((process, since))


def reap_lingering() -> None:
    """Reaps workers that have exited since they confirmed their stop (no zombies).

    One still there `JOIN_SECONDS` after its confirmation is stopped by signal.
    """
    now = time.monotonic()
    for process, since in list(_LINGERING):
        if process.is_alive() and now - since > JOIN_SECONDS:
            process.kill()
            process.join(JOIN_SECONDS)
        if not process.is_alive():
            _LINGERING.remove((process, since))


def _confirmed(connection: Connection, deadline: float) -> bool:
    """Waits until the worker confirms its stop (reading past results it sent before)."""
    try:
        while connection.poll(max(0.0, deadline - time.monotonic())):
            message = connection.recv()
            if message == (STOPPED,):
                return True
    except (EOFError, OSError):
        pass
    return False


def ask(connections: list[Connection], message: Any) -> list[bool]:
    """Sends each worker `message` (None: stop; `("park", s)`: wait idle) and waits.

    Returns, per worker, whether it confirmed within `JOIN_SECONDS` (for all of them
    together): it has given its slabs back, and whatever it sent before is read.
    """
    for connection in connections:
        with contextlib.suppress(OSError, ValueError):
            connection.send(message)
    deadline = time.monotonic() + JOIN_SECONDS
    return [_confirmed(connection, deadline) for connection in connections]


def finish(
    processes: list[BaseProcess], connections: list[Connection], confirmed: list[bool]
) -> None:
    """Ends workers asked to stop; their connections close.

    The confirmed ones exit on their own (reaped later); the others are joined, then
    sent SIGTERM, then SIGKILL.
    """
    stopping = []
    for process, done in zip(processes, confirmed, strict=True):
        if done:
            linger(process, time.monotonic())
        else:
            stopping.append(process)
    deadline = time.monotonic() + JOIN_SECONDS
    for process in stopping:
        process.join(max(0.0, deadline - time.monotonic()))
    for process in stopping:
        if process.is_alive():
            process.terminate()
            process.join(JOIN_SECONDS)
        if process.is_alive():
            process.kill()
            process.join(JOIN_SECONDS)
    for connection in connections:
        connection.close()
    reap_lingering()


def shutdown(processes: list[BaseProcess], connections: list[Connection]) -> None:
    """Stops the workers: politely, then by signal; all within a few seconds.

    A worker that confirms its stop has given its slabs back and ends on its own:
    its exit (freeing its memory takes milliseconds) is not waited for; it is reaped
    by the next pool or at exit.
    """
    finish(processes, connections, ask(connections, None))
