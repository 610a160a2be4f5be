"""`DevicePutIter`: batches prefetched on the host, then on devices, ahead of the user."""

from __future__ import annotations

import collections
from typing import Any, TypeVar

import jax
import numpy as np

from chute_core import (
    CheckpointableIterator,
    InvalidStateError,
    IteratorState,
)
from chute_core.internal import check_int
from chute_execution import ThreadPrefetchIter
from chute_samplers import IterNode

from ._global_batch import Target, _is_target, put_batch

__all__ = ["DevicePutIter", "LockstepError"]

T = TypeVar("T")


class LockstepError(ValueError):
    """JAX processes disagree about a batch: one has it and another has not, or shapes differ.

    Example:
        >>> isinstance(LockstepError("process 1 ran out"), ValueError)
        True
    """


class DevicePutIter(IterNode[Any]):
    """Yields the parent's batches as `jax.Array`s on `target`, transferred ahead of time.

    A thread keeps up to `cpu_buffer_size` host batches ready; `device_buffer_size`
    batches are already dispatched to the devices (`jax.device_put` is asynchronous), so
    a training step rarely waits for a copy. With a sharding that spans several JAX
    processes, each process's batch is its local rows and the result is a global array.

    Checkpoints count only batches handed to the user: `get_state()` is the parent's
    state right after the last batch returned, whatever is in flight, so a restored
    iterator yields the first batch the user has not received.

    Lockstep: with more than one JAX process (and `lockstep=None` or True), every step
    the processes agree, with one small all-gather, that each of them has a batch of
    the same number of rows; when any process has run out, all stop together (a process
    never waits forever in a collective for a batch another one cannot produce), and a
    shape mismatch raises `LockstepError` on every process. An error making or placing
    a batch (a transform raised, rows that do not fit the sharding) takes part in that
    all-gather too: the failing process raises it, and every other one a
    `LockstepError` naming it, at the same step, after the batches before it. (A process
    that is killed, or hangs in the main thread, cannot take part: see the multi-host
    guide.)

    Args:
        parent: a checkpointable iterator of host batches (pytrees of NumPy arrays).
        target: a `jax.Device`, a `jax.sharding.Sharding`, or a pytree of shardings
            (a prefix of the batch's structure).
        cpu_buffer_size: host batches prepared ahead on a thread (0: none).
        device_buffer_size: batches dispatched to devices ahead of the user (>= 1).
        lockstep: agree across processes every step; None means "when there is more
            than one process".

    Example:
        >>> import jax, numpy as np
        >>> from chute_samplers import SequentialIter
        >>> batches = [np.arange(4) + 4 * i for i in range(3)]
        >>> it = DevicePutIter(SequentialIter(batches), jax.devices()[0])
        >>> first = next(it)
        >>> first.tolist(), it.get_state()
        ([0, 1, 2, 3], {'position': 1})
    """

    def __init__(
        self,
        parent: CheckpointableIterator[Any],
        target: Target,
        *,
        cpu_buffer_size: int = 2,
        device_buffer_size: int = 2,
        lockstep: bool | None = None,
    ) -> None:
        for name, value, low in (
            ("cpu_buffer_size", cpu_buffer_size, 0),
            ("device_buffer_size", device_buffer_size, 1),
        ):
            check_int(value, name, "device_put", minimum=low)
        leaves = jax.tree.leaves(target, is_leaf=_is_target)
        if not leaves or not all(map(_is_target, leaves)):
            raise TypeError(
                "device_put: target must be a jax.Device, a jax.sharding.Sharding or a pytree "
                f"of shardings, got {type(target).__name__}."
            )
        self._host = ThreadPrefetchIter(parent, cpu_buffer_size)
        self._target = target
        self._device_buffer_size = device_buffer_size
        self._lockstep = jax.process_count() > 1 if lockstep is None else bool(lockstep)
        self._in_flight: collections.deque[tuple[Any, IteratorState, bool]] = collections.deque()
        self._state: IteratorState = self._host.get_state()
        self._exhausted = False

    @property
    def target(self) -> Target:
        """Where batches go: a device, a sharding, or a pytree of shardings."""
        return self._target

    def _fill(self) -> None:
        """Prepares batches until `device_buffer_size` are in flight (or the end)."""
        while not self._exhausted and len(self._in_flight) < self._device_buffer_size:
            batch, error = None, None
            try:
                batch = next(self._host)
            except StopIteration:
                pass
            except Exception as caught:  # Raised in its turn, after the batches before it.
                error = caught
            state = self._host.get_state()
            status, rows, put = _DONE if error is None else _FAILED, -1, None
            if batch is not None:
                rows = _rows(batch)
                try:
                    put, status = put_batch(batch, self._target), _OK
                except Exception as caught:  # E.g. rows that do not fit the sharding.
                    error, status = caught, _PUT_FAILED
            if self._lockstep:
                # Every process makes this call once per batch it prepares, in the same
                # order, so the all-gathers pair up; a failure is reported, not raised,
                # so that no other process waits for this one in a collective.
                verdict, reason = _agree(rows, status)
                if verdict == _DONE:  # One ran out: all stop here, quietly.
                    error, status = None, _DONE
                elif verdict == _FAILED:  # A failed process raises its own error.
                    error = reason if error is None else error
                elif verdict == _MISMATCH:  # Batches of different sizes, on every process.
                    error = reason
            if error is not None:
                self._exhausted = True
                self._in_flight.append((error, state, True))
                return
            if status == _DONE:
                self._exhausted = True
                return
            self._in_flight.append((put, state, False))

    def __next__(self) -> Any:
        self._fill()
        if not self._in_flight:
            raise StopIteration
        batch, state, failed = self._in_flight.popleft()
        if failed:
            self._in_flight.appendleft((batch, state, failed))  # Raised again next time.
            raise batch
        self._state = state
        self._fill()  # Dispatch the next transfer before the user's step starts.
        return batch

    def get_state(self) -> IteratorState:
        return self._state

    def set_state(self, state: IteratorState, /) -> None:
        if not isinstance(state, dict):
            raise InvalidStateError(f"DevicePutIter: expected a state dict, got {state!r}.")
        self._in_flight.clear()
        self._host.set_state(state)
        self._state = state
        self._exhausted = False

    def close(self) -> None:
        """Stops the host prefetch thread and drops batches in flight."""
        self._in_flight.clear()
        self._host.close()

    def __repr__(self) -> str:
        return (
            f"DevicePutIter({self._host.parent!r}, {self._target!r}, "
            f"cpu_buffer_size={self._host.buffer_size}, "
            f"device_buffer_size={self._device_buffer_size})"
        )


def _rows(batch: Any) -> int:
    """The leading size of the batch's first array leaf (0 when it has none)."""
    for leaf in jax.tree.leaves(batch):
        if np.ndim(leaf):
            return int(np.shape(leaf)[0])
    return 0


_OK, _DONE, _FAILED, _PUT_FAILED, _MISMATCH = 0, 1, 2, 3, 4
"""A process's outcome for one step: a batch; none left; an error making it; an error
placing it on devices (ranked below a row-count mismatch, which causes such errors).
`_MISMATCH` is a verdict of `_agree` only."""


def _agree(rows: int, status: int) -> tuple[int, LockstepError | None]:
    """All processes compare their outcome for this step (`rows`: -1 when no batch).

    Returns:
        `(_OK, None)` when every process has a batch of the same size; `(_DONE, None)`
        when one has none left (all stop together); `(_FAILED, error)` when a process
        raised an error making or placing its batch (the others learn it here instead of
        waiting for it in the next collective); `(_MISMATCH, error)` when the batches
        have different numbers of rows.
    """
    from jax.experimental import multihost_utils

    pairs = np.array([rows, status], np.int64)
    gathered = np.asarray(multihost_utils.process_allgather(pairs)).reshape(-1, 2).tolist()
    statuses = [int(s) for _, s in gathered]
    failed = [process for process, s in enumerate(statuses) if s == _FAILED]
    if failed:
        return _FAILED, _failed(failed)
    if _DONE in statuses:
        return _DONE, None
    everyone = [int(r) for r, _ in gathered]
    if any(r != everyone[0] for r in everyone):
        return _MISMATCH, LockstepError(
            "JAX processes hold local batches of different sizes "
            f"({dict(enumerate(everyone))} rows by process): every process must yield "
            "batches of the same shape; batch with drop_remainder=True or pad=True."
        )
    failed = [process for process, s in enumerate(statuses) if s == _PUT_FAILED]
    if failed:
        return _FAILED, _failed(failed)
    return _OK, None


def _failed(processes: list[int]) -> LockstepError:
    return LockstepError(
        f"JAX process(es) {processes} raised an error making or placing their batch of this "
        "step (their own error is raised there; see their logs): every process stops at "
        "this step, so none waits for them in a collective."
    )
