"""Test helpers: several JAX processes on one machine, joined over localhost.

A test starts one script as N processes with `run_processes`; the script calls
`join_processes(parser)` first (it adds the common options, gives the processes 8 CPU
devices between them and calls `jax.distributed.initialize`), does its work, and
writes what it saw with `write_result`. `run_processes` returns those results, one per
process, or fails with the output of the process that did not finish.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["TOTAL_DEVICES", "free_port", "join_processes", "run_processes", "write_result"]

TOTAL_DEVICES = 8
"""CPU devices the processes of a run have between them."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now.

    Example:
        >>> 1024 <= free_port() < 65536
        True
    """
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def run_processes(
    script: str | Path, processes: int, out: str | Path, *args: str, timeout: float = 180.0
) -> list[Any]:
    """Runs `script` as `processes` processes and returns each one's result, in order.

    Every process gets `--num-processes`, `--process-id`, `--port` (the coordinator's,
    on 127.0.0.1), `--out` and `args`; the script must write its result with
    `write_result`. `XLA_FLAGS` is not passed on (`join_processes` sets the device
    count) and JAX runs on the CPU.

    Raises:
        AssertionError: a process exited with an error (its last output is shown), or
            the run took longer than `timeout` seconds (all processes are killed).

    Example:
        >>> import tempfile, textwrap
        >>> folder = Path(tempfile.mkdtemp())
        >>> script = folder / "echo.py"
        >>> _ = script.write_text(textwrap.dedent('''
        ...     import argparse
        ...     from chute_testing.device import write_result
        ...     parser = argparse.ArgumentParser()
        ...     for name in ("--num-processes", "--process-id", "--port", "--out"):
        ...         parser.add_argument(name)
        ...     args = parser.parse_args()
        ...     write_result(args, {"me": int(args.process_id)})
        ... '''))
        >>> run_processes(script, 2, folder / "out")
        [{'me': 0}, {'me': 1}]
    """
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    env.pop("XLA_FLAGS", None)
    port = str(free_port())
    command = [sys.executable, str(script), "--num-processes", str(processes), "--port", port]
    children = [
        subprocess.Popen(
            [*command, "--process-id", str(index), "--out", str(out), *args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for index in range(processes)
    ]
    try:
        outputs = [child.communicate(timeout=timeout)[0] for child in children]
    except subprocess.TimeoutExpired:
        raise AssertionError(f"{script}: {processes} processes took over {timeout} s") from None
    finally:
        for child in children:
            child.kill()
    for child, output in zip(children, outputs, strict=True):
        assert child.returncode == 0, output[-3000:]
    return [json.loads(Path(f"{out}.{index}").read_text()) for index in range(processes)]


def join_processes(parser: argparse.ArgumentParser) -> argparse.Namespace:
    """Parses a script's options and joins the JAX processes of the run.

    Adds `--process-id`, `--num-processes`, `--port` and `--out` to `parser`, gives this
    process `TOTAL_DEVICES // num_processes` CPU devices (before jax first uses them),
    and with several processes calls `jax.distributed.initialize` on 127.0.0.1.

    Example (the start of a script that `run_processes` runs)::

        parser = argparse.ArgumentParser()
        parser.add_argument("--steps", type=int, default=3)
        args = join_processes(parser)  # Now jax.devices() spans every process.
        ...
        write_result(args, {"steps": args.steps})
    """
    parser.add_argument("--process-id", type=int, default=0)
    parser.add_argument("--num-processes", type=int, default=1)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    import jax

    jax.config.update("jax_num_cpu_devices", TOTAL_DEVICES // args.num_processes)  # type: ignore[no-untyped-call]
    if args.num_processes > 1:
        jax.distributed.initialize(
            coordinator_address=f"127.0.0.1:{args.port}",
            num_processes=args.num_processes,
            process_id=args.process_id,
        )
    return args


def write_result(args: argparse.Namespace, result: Any) -> None:
    """Writes this process's result (JSON) where `run_processes` reads it.

    Example:
        >>> import tempfile
        >>> out = Path(tempfile.mkdtemp()) / "run"
        >>> write_result(argparse.Namespace(out=str(out), process_id=1), {"x": 1})
        >>> json.loads(Path(f"{out}.1").read_text())
        {'x': 1}
    """
    with open(f"{args.out}.{args.process_id}", "w") as file:
        json.dump(result, file)
