"""`WorkerPool`: worker processes, one connection each, with death detection."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import threading
import time
import weakref
from collections.abc import Iterator
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from chute_core import ChuteError
from chute_core.internal import threads_quieted

from ._fork_start import (
    GO,
    fork_refusal,
    forked_worker,
    forking,
    keep_from_forks,
    probe_refusal,
    thread_count,
)
from ._idle_workers import claim, park, reuse_key
from ._mp_options import MultiprocessingOptions
from ._worker import worker_main
from ._worker_stop import shutdown

__all__ = ["WorkerDiedError", "WorkerPool", "WorkerTimeoutError"]

_POLL_SECONDS = 0.05
_PRELOAD = ["chute_execution._worker", "chute_transforms", "chute_samplers", "chute_sources"]
"""What the fork server imports once, so that each worker forked from it starts at once."""


def add_preload(*modules: str) -> None:
    """Has the fork server also import `modules` (before it starts; never jax).

    The meta-package `chute` adds itself, which a layer below cannot name.
    """
    _PRELOAD.extend(name for name in modules if name not in _PRELOAD)


_STARTING = threading.Lock()
"""Held while a pool starts its workers (the main script is left out, forks are checked)."""


def _new_starting_lock() -> None:
    global _STARTING
    _STARTING = threading.Lock()  # A forked child must not inherit it held.


os.register_at_fork(after_in_child=_new_starting_lock)


@contextlib.contextmanager
def _without_main_script() -> Iterator[None]:
    """While starting workers, leaves the consumer's main script out of their start-up.

    `spawn` and `forkserver` children run the parent's main script again (as
    `__mp_main__`) so that objects pickled from it can be found by name. chute sends
    such objects by value instead (see `ship`), so a worker never runs the user's
    script: no `if __name__ == "__main__":` guard is needed, and a script that imports
    jax at its top level does not make every worker import jax.
    """
    from multiprocessing import spawn

    original = spawn.get_preparation_data

    def without_main(name: str) -> dict[str, Any]:
        data: dict[str, Any] = original(name)
        data.pop("init_main_from_path", None)
        data.pop("init_main_from_name", None)
        return data

    spawn.get_preparation_data = without_main
    try:
        yield
    finally:
        spawn.get_preparation_data = original


def _fallback_method() -> str:
    """What "auto" uses when it may not fork: the fork server where there is one."""
    return "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"


def start_method_context(method: str) -> Any:
    """The multiprocessing context for `method`; a fork server preloads chute."""
    context = multiprocessing.get_context(method)
    if method == "forkserver":
        context.set_forkserver_preload(list(_PRELOAD))
    return context


def warm_up(method: str) -> None:
    """Starts the fork server now (in the background), so the first workers start fast.

    The fork server is a fresh process that imports chute (never jax) once; workers
    are forked from it, which takes milliseconds instead of a full interpreter start.
    With "auto", only if this process may not fork its workers itself now (starting
    a fork server that is not needed would take a core from the first batch): a
    child forked to count threads tells (`probe_refusal`).
    """
    if method == "auto":
        with threads_quieted():
            method = "forkserver" if probe_refusal() is not None else ""
    if method != "forkserver" or method not in multiprocessing.get_all_start_methods():
        return
    start_method_context(method)
    from multiprocessing import forkserver

    try:
        forkserver.ensure_running()
    except Exception:
        pass


class WorkerDiedError(ChuteError, RuntimeError):
    """A worker process died (killed by a signal, out of memory, ...) mid-work.

    The message names the worker, its pid, how it ended and what it was doing; the
    iterator that raised it can be restored from its last state.

    Example:
        >>> issubclass(WorkerDiedError, RuntimeError)
        True
    """


class WorkerTimeoutError(WorkerDiedError):
    """A worker took longer than `worker_timeout` for one chunk; the workers were stopped.

    Example:
        >>> issubclass(WorkerTimeoutError, WorkerDiedError)
        True
    """


def _killed_by_sigkill(process: BaseProcess) -> bool:
    import signal

    return process.exitcode == -signal.SIGKILL


def _describe_exit(process: BaseProcess) -> str:
    code = process.exitcode
    if code is None:
        return "stopped answering"
    if code < 0:
        import signal

        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"was killed by {name}"
    return f"exited with code {code}"


class WorkerPool:
    """`num_workers` processes running chunks of one shipped plan.

    Started as `options.start_method` says: "auto" forks them from this process when
    that is provably safe (see `_fork_start`) and starts them from the fork server
    otherwise; never a plain fork, and never running the consumer's main script. The
    plan and the init function come already shipped (`ship`), so everything a worker
    receives at start is bytes: whatever fails to load fails in the worker's own
    code, which reports it. `close()` parks the workers for the next pool (see
    `_idle_workers`) or stops them (politely, then by signal); it
    also runs when the pool is garbage collected or the interpreter exits.

    Args:
        plan: the shipped plan (`ship(plan)`).
        options: how many workers, how they start, how long they may take.
        init_fn: the shipped `worker_init_fn` (`ship(fn)`), or None.
        caller: what the user called, for error messages (`mp_prefetch`,
            `DataLoader(worker_count=2)`).
    """

    def __init__(
        self,
        plan: bytes,
        options: MultiprocessingOptions,
        init_fn: bytes | None = None,
        caller: str = "mp_prefetch",
    ) -> None:
        self.caller = caller
        self.num_workers = options.num_workers
        self.timeout = options.worker_timeout
        self.processes: list[BaseProcess] = []
        self.connections: list[Connection] = []
        self._fork_refused: str | None = None
        key = reuse_key(options, init_fn)
        idle = claim(key, plan)
        if idle is not None:  # Parked by an earlier iterator: they load this pipeline.
            self.processes, self.connections = idle.processes, idle.connections
            method = idle.start_path
        else:
            method = self._start_all(plan, options, init_fn)
        self._start_path = method
        self.reused = idle is not None
        """Whether the workers were taken over from an earlier iterator (`_idle_workers`)."""
        seconds = options.idle_worker_seconds
        self.idle_seconds = seconds
        """How long the workers wait parked once the iterator ends, and its slabs idle."""
        self._retire: dict[str, Any] = {"key": key, "path": method, "seconds": seconds}
        self._finalizer = weakref.finalize(
            self, _retire, self.processes, self.connections, self._retire
        )

    def _start_all(
        self, plan: bytes, options: MultiprocessingOptions, init_fn: bytes | None
    ) -> str:
        """Starts the workers as `options.start_method` says; returns how they started."""
        slabs = options.per_worker_buffer_size + 1
        arguments = [(w, plan, init_fn, self.num_workers, slabs) for w in range(self.num_workers)]
        method: str = options.start_method
        try:
            with _STARTING, threads_quieted():  # No thread of ours may run at a fork.
                if method == "auto":
                    self._fork_refused = fork_refusal() or self._fork(arguments)
                    method = "fork" if self._fork_refused is None else _fallback_method()
                if method != "fork":
                    self._start(method, arguments)
        except BaseException:
            shutdown(self.processes, self.connections)
            raise
        return method

    def _fork(self, arguments: list[tuple[Any, ...]]) -> str | None:
        """Forks the workers from this process; why not, if a fork proved unsafe.

        Each fork is checked: right after it this process must run one thread. The
        children wait for `GO`, sent once every fork passed; otherwise they are killed
        before they ran anything of the user's, and the reason is returned.
        """
        context = multiprocessing.get_context("fork")
        for worker_arguments in arguments:
            ours, theirs = context.Pipe(duplex=True)
            keep_from_forks(ours)
            process = context.Process(
                target=forked_worker,
                args=(theirs, *worker_arguments),
                name=f"chute-worker-{worker_arguments[0]}",
                daemon=True,
            )
            with forking():
                process.start()
                threads = thread_count()
            theirs.close()
            self.processes.append(process)
            self.connections.append(ours)
            if threads != 1:
                for started in self.processes:
                    started.kill()
                    started.join()
                for connection in self.connections:
                    connection.close()
                self.processes.clear()
                self.connections.clear()
                return f"{threads} threads ran when it forked a worker"
        for connection in self.connections:
            with contextlib.suppress(OSError, ValueError):
                connection.send(GO)  # A child gone meanwhile is reported by `receive`.
        return None

    def _start(self, method: str, arguments: list[tuple[Any, ...]]) -> None:
        """Starts the workers with the fork server or spawn, leaving out the main script."""
        context = start_method_context(method)
        for worker, *rest in arguments:
            ours, theirs = context.Pipe(duplex=True)
            keep_from_forks(ours)
            process = context.Process(
                target=worker_main,
                args=(worker, theirs, *rest),
                name=f"chute-worker-{worker}",
                daemon=True,
            )
            with _without_main_script():
                process.start()
            theirs.close()
            self.processes.append(process)
            self.connections.append(ours)

    @property
    def start_path(self) -> str:
        """How the workers started: "fork", "forkserver" or "spawn"."""
        return self._start_path

    @property
    def fork_refused(self) -> str | None:
        """Why "auto" did not fork the workers: None if it did, or if not asked to."""
        return self._fork_refused

    def send(self, worker: int, task: Any) -> None:
        """Sends a task to `worker`; if it is gone, the next `receive` from it says why.

        A worker that could not start reports why, then exits: a task sent meanwhile
        finds the pipe closed. What the worker sent before it exited is still to be
        read, so `receive` reports it first (and the death only if there is nothing).
        """
        try:
            self.connections[worker].send(task)
        except (OSError, ValueError) as error:
            if self.closed:
                raise self._died(worker, "while receiving a task") from error

    def receive(self, worker: int, doing: str) -> Any:
        """Waits for the next message of `worker`; raises `WorkerDiedError` if it died."""
        connection, process = self.connections[worker], self.processes[worker]
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        while True:
            if deadline is not None and time.monotonic() > deadline:
                pid = process.pid
                self._retire["key"] = None  # Stopped, never parked.
                process.terminate()  # Stuck in user code: it would not read a stop message.
                self.close()
                raise WorkerTimeoutError(
                    f"{self.caller}: chute worker {worker} (pid {pid}) took more than "
                    f"{self.timeout} s {doing}; it looks stuck (a transform that never "
                    "returns?). The workers were stopped; the iterator can be restored from its "
                    "last state."
                )
            try:
                if connection.poll(_POLL_SECONDS):
                    return connection.recv()
            except (EOFError, OSError) as error:
                raise self._died(worker, doing) from error
            if not process.is_alive():
                if connection.poll(0):  # It may have answered just before exiting.
                    continue
                raise self._died(worker, doing)

    def _died(self, worker: int, doing: str) -> WorkerDiedError:
        self._retire["key"] = None  # Its group is stopped, never parked.
        process = self.processes[worker]
        process.join(0.5)
        advice = (
            "If it ran out of memory (the kernel's OOM killer sends SIGKILL), use fewer "
            "workers or a smaller per_worker_buffer_size; "
            if _killed_by_sigkill(process)
            else "Its own error output (above, on stderr) says why; "
        )
        return WorkerDiedError(
            f"{self.caller}: chute worker {worker} (pid {process.pid}) "
            f"{_describe_exit(process)} {doing}. {advice}the iterator can be restored from "
            "its last state."
        )

    def close(self) -> None:
        """Parks the workers for the next iterator, or stops them (idempotent).

        Parked (`_idle_workers`) if they may be reused and all stop cleanly; else
        stopped, and the connections closed.
        """
        self._finalizer()

    @property
    def closed(self) -> bool:
        """Whether `close` ran."""
        return not self._finalizer.alive


def _retire(
    processes: list[BaseProcess], connections: list[Connection], retire: dict[str, Any]
) -> None:
    """Parks the workers (`park`) if they may be reused, else stops them (`shutdown`)."""
    key = retire["key"]
    if key is None or not processes:
        shutdown(processes, connections)
    else:
        park(processes, connections, key, retire["path"], retire["seconds"])
