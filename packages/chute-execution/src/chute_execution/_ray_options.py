"""`RayOptions`: running the workers' part of a plan as tasks on a Ray cluster."""

from __future__ import annotations

import dataclasses

from chute_core.internal import check_count

__all__ = ["RayOptions"]


@dataclasses.dataclass(frozen=True)
class RayOptions:
    """Options for running a pipeline's chunks on a Ray cluster (`ray_prefetch`).

    The plan is the one `mp_prefetch` runs: each chunk of positions is a Ray task,
    and this process puts the chunks back in order. So the output, and the state, are
    those of 0 workers: a state saved under Ray restores with local workers, and back.
    Needs `ray` (`pip install chute-execution[ray]`), imported only when used.

    Attributes:
        num_workers: chunks that run at once (tasks in flight, beyond those buffered).
        address: the Ray cluster: None joins the one this process already joined (or
            the one `RAY_ADDRESS` names, as in a Ray job), or else starts a local one
            (stopped when this process exits); an address
            (`"auto"`, `"ray://host:10001"`, `"host:6379"`) connects to a cluster
            someone started, which chute leaves running.
        per_worker_buffer_size: chunks per worker that may be done or running ahead of
            the consumer: at most `num_workers * per_worker_buffer_size` are in flight,
            so memory is bounded whatever the consumer's speed.
        max_retries: how many times a chunk whose Ray worker died (killed, lost node)
            runs again elsewhere before `WorkerDiedError`; an exception raised by a
            transform is never retried (it would raise again).
        num_cpus: CPUs each chunk's task asks the Ray scheduler for.
        worker_timeout: seconds a chunk may take before `WorkerTimeoutError` (None:
            wait as long as it takes). The head of the cluster is watched whatever
            this is: losing it raises within `head_timeout` seconds.
        head_timeout: seconds without an answer from the cluster's head before the
            iterator gives up with `ChuteError`.

    Example:
        >>> options = RayOptions(num_workers=4, max_retries=2)
        >>> options.num_workers, options.address, options.per_worker_buffer_size
        (4, None, 2)
    """

    num_workers: int = 2
    address: str | None = None
    per_worker_buffer_size: int = 2
    max_retries: int = 3
    num_cpus: float = 1.0
    worker_timeout: float | None = None
    head_timeout: float = 30.0

    def __post_init__(self) -> None:
        owner = "RayOptions"
        workers = check_count(self.num_workers, "num_workers", owner, minimum=1)
        object.__setattr__(self, "num_workers", workers)
        size = check_count(self.per_worker_buffer_size, "per_worker_buffer_size", owner, minimum=1)
        object.__setattr__(self, "per_worker_buffer_size", size)
        object.__setattr__(self, "max_retries", check_count(self.max_retries, "max_retries", owner))
        if self.address is not None and not isinstance(self.address, str):
            raise TypeError(
                f"{owner}: address must be None or a str (e.g. 'auto' or "
                f"'ray://host:10001'), got {type(self.address).__name__} {self.address!r}."
            )
        for name in ("num_cpus", "head_timeout", "worker_timeout"):
            value = getattr(self, name)
            if value is None and name == "worker_timeout":
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ValueError(f"{owner}: {name} must be a number > 0, got {value!r}.")

    @property
    def start_method(self) -> str:
        """Ray starts its own workers: no local start method applies."""
        return "ray"
