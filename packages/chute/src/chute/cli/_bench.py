"""`chute bench`: how fast a user's pipeline runs, where its time goes, what to tune."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from typing import Any

import numpy as np

from chute_execution import TraceOptions

from .._iter_dataset import IterDataset
from .._map_dataset import MapDataset
from .._pipeline import has_stage
from ._common import EXIT_OK, data_error, help_epilog, usage_error

__all__ = ["add_bench_parser", "load_dataset", "run_bench"]

_DESCRIPTION = """\
Imports FUNCTION from MODULE (the working directory is on the import path, so
my_pipeline:make_dataset finds ./my_pipeline.py), calls it without arguments, and
iterates the chute dataset (MapDataset or IterDataset) it returns for --seconds or
--batches, whichever comes first, in this process. Prints elements/s (batches/s when
the pipeline batches), each stage's share of the time (ds.iter(stats=True)), the
bottleneck stage, and the configuration chute.pick_performance_config suggests.
With --trace, also writes a Chrome / Perfetto trace of the run (ds.iter(trace=PATH)):
open it in https://ui.perfetto.dev or chrome://tracing."""


def add_bench_parser(commands: Any) -> argparse.ArgumentParser:
    """Adds `bench` to the subcommands `commands` of the `chute` parser.

    Example:
        >>> import argparse
        >>> parser = argparse.ArgumentParser(prog="chute")
        >>> _ = add_bench_parser(parser.add_subparsers(dest="command"))
        >>> parser.parse_args(["bench", "pipe:make", "--seconds", "2"]).seconds
        2.0
    """
    parser: argparse.ArgumentParser = commands.add_parser(
        "bench",
        help="measure a pipeline: elements/s, time per stage, bottleneck, suggested config",
        description=_DESCRIPTION,
        epilog=help_epilog(
            "chute bench my_pipeline:make_dataset --seconds 10",
            "chute bench my_pipeline:make_dataset --batches 200 --json",
            "chute bench my_pipeline:make_dataset --seconds 5 --trace trace.json",
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("target", metavar="MODULE:FUNCTION", help="the function making the dataset")
    parser.add_argument(
        "--seconds", type=float, default=10.0, metavar="S", help="run at most S seconds (10)"
    )
    parser.add_argument(
        "--batches",
        type=int,
        default=None,
        metavar="N",
        help="stop after N elements (batches, for a batched pipeline)",
    )
    parser.add_argument(
        "--ram-budget-mb",
        type=int,
        default=1024,
        metavar="MB",
        help="memory the suggested buffers may use (1024)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead")
    parser.add_argument(
        "--trace",
        default=None,
        metavar="PATH",
        help="write a Chrome / Perfetto trace of the run to PATH (a JSON file)",
    )
    return parser


def load_dataset(target: str) -> MapDataset[Any] | IterDataset[Any]:
    """Imports `MODULE:FUNCTION` (cwd on the path), calls it, checks it made a dataset.

    Raises:
        CliError: a malformed target, a module or attribute not found, or a result that
            is not a dataset (exit code 2); the module or the function raising (1).

    Example:
        >>> load_dataset("chute:MapDataset.range")  # doctest: +SKIP
        >>> try:
        ...     load_dataset("no_such_module_xyz:make")
        ... except Exception as error:
        ...     print(error.code, str(error).split(":")[0])
        2 cannot import 'no_such_module_xyz'
    """
    module_name, colon, name = target.partition(":")
    if not colon or not module_name or not name:
        usage_error(f"expected MODULE:FUNCTION (e.g. my_pipeline:make_dataset), got {target!r}")
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        missing = error.name or ""
        if module_name == missing or module_name.startswith(missing + "."):
            usage_error(
                f"cannot import {module_name!r}: no module {missing!r} (looked in the working "
                f"directory {cwd!r} and the installed packages)"
            )
        data_error(f"importing {module_name!r} raised ModuleNotFoundError: {error}")
    except Exception as error:
        data_error(f"importing {module_name!r} raised {type(error).__name__}: {error}")
    function: Any = module
    for part in name.split("."):
        if not hasattr(function, part):
            usage_error(f"module {module_name!r} ({module.__file__}) has no attribute {name!r}")
        function = getattr(function, part)
    if not callable(function):
        usage_error(f"{target} is not a function (found a value of type {type(function).__name__})")
    try:
        dataset = function()
    except Exception as error:
        data_error(f"{target}() raised {type(error).__name__}: {error}")
    if not isinstance(dataset, MapDataset | IterDataset):
        usage_error(
            f"{target}() returned a {type(dataset).__name__}; it must return a chute dataset "
            "(chute.MapDataset or chute.IterDataset)"
        )
    return dataset


def _batch_size(element: Any) -> int | None:
    if isinstance(element, np.ndarray) and element.ndim:
        return int(element.shape[0])
    if isinstance(element, dict):
        element = list(element.values())
    if isinstance(element, list | tuple):
        for item in element:
            size = _batch_size(item)
            if size is not None:
                return size
    return None


def _measure(
    dataset: IterDataset[Any], seconds: float, limit: int | None, trace: str | None = None
) -> dict[str, Any]:
    batched = has_stage(dataset._stages, frozenset({"batch"}))
    iterator = dataset.iter(stats=True, trace=trace)
    count = examples = 0
    first = None
    ended = False
    start = time.perf_counter()
    deadline = start + seconds
    try:
        while (limit is None or count < limit) and time.perf_counter() < deadline:
            try:
                element = next(iterator)
            except StopIteration:
                ended = True
                break
            if first is None:
                first = time.perf_counter() - start
            count += 1
            if batched:
                examples += _batch_size(element) or 0
    except Exception as error:
        data_error(f"the pipeline raised {type(error).__name__} after {count} elements: {error}")
    elapsed = time.perf_counter() - start
    stats = iterator.stats()  # type: ignore[attr-defined]
    close = getattr(iterator, "close", None)
    if callable(close):
        close()
    stages = [
        {
            "name": stage.name,
            "elements": stage.elements,
            "seconds": stage.seconds,
            "share": stats.share(stage),
        }
        for stage in stats.stages
    ]
    bottleneck = stats.bottleneck
    return {
        "elements": count,
        "batched": batched,
        "examples": examples if batched else count,
        "seconds": elapsed,
        "elements_per_second": count / elapsed if elapsed > 0 else 0.0,
        "first_element_seconds": first,
        "ended": ended,
        "stages": stages,
        "bottleneck": None if bottleneck is None else bottleneck.name,
        "bottleneck_share": None if bottleneck is None else stats.share(bottleneck),
        "table": str(stats),
    }


def run_bench(args: argparse.Namespace) -> int:
    """Runs `chute bench` with parsed arguments; returns the exit code.

    Example:
        >>> import argparse, contextlib, io
        >>> args = argparse.Namespace(target="chute.cli._bench:_example", seconds=1.0,
        ...                           batches=5, ram_budget_mb=64, json=False)
        >>> with contextlib.redirect_stdout(io.StringIO()) as out:
        ...     code = run_bench(args)
        >>> code
        0
        >>> [line for line in out.getvalue().splitlines() if line.startswith("stopped")]
        ['stopped by: --batches 5']
    """
    if args.seconds <= 0:
        usage_error(f"--seconds must be positive, got {args.seconds}")
    if args.batches is not None and args.batches < 1:
        usage_error(f"--batches must be at least 1, got {args.batches}")
    if args.ram_budget_mb < 1:
        usage_error(f"--ram-budget-mb must be at least 1, got {args.ram_budget_mb}")
    trace = getattr(args, "trace", None)
    if trace is not None:
        try:
            TraceOptions(trace)
        except (OSError, ValueError) as error:
            usage_error(f"--trace: {str(error).removeprefix('trace: ')}")
    dataset = load_dataset(args.target)
    streamed = dataset.to_iter_dataset() if isinstance(dataset, MapDataset) else dataset
    result = _measure(streamed, args.seconds, args.batches, trace)
    if trace is not None:
        result["trace"] = trace
    from chute_execution import pick_performance_config

    try:
        config = pick_performance_config(
            streamed, args.ram_budget_mb, seconds=min(1.0, args.seconds)
        )
    except Exception as error:
        data_error(f"the pipeline raised {type(error).__name__}: {error}")
    result["target"] = args.target
    if result["ended"]:
        result["stopped_by"] = "the end of the data set"
    elif args.batches is not None and result["elements"] >= args.batches:
        result["stopped_by"] = f"--batches {args.batches}"
    else:
        result["stopped_by"] = f"--seconds {args.seconds:g}"
    result["suggested"] = {
        "read_options": repr(config.read_options),
        "multiprocessing_options": repr(config.multiprocessing_options),
        "seconds_per_element": config.seconds_per_element,
        "bytes_per_element": config.bytes_per_element,
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        _print(result, dataset, args.ram_budget_mb)
    return EXIT_OK


def _print(result: dict[str, Any], dataset: Any, budget: int) -> None:
    kind = type(dataset).__name__
    unit = "batches" if result["batched"] else "elements"
    count, seconds = result["elements"], result["seconds"]
    print(f"chute bench: {result['target']} ({kind}), {count:,} {unit} in {seconds:.2f} s")
    for line in repr(dataset).splitlines()[1:]:
        print(f"  {line}")
    print(f"stopped by: {result['stopped_by']}")
    if not count:
        print("the data set is empty: nothing to measure")
        return
    rate = result["elements_per_second"]
    line = f"throughput: {rate:,.1f} {unit}/s"
    if result["batched"]:
        line += (
            f" = {result['examples'] / seconds:,.0f} elements/s "
            f"({result['examples'] / count:,.4g} elements per batch)"
        )
    print(line)
    first = "batch" if result["batched"] else "element"
    print(f"first {first} after {result['first_element_seconds']:.3f} s")
    print(
        "time per stage (own time, not its inputs'; share of the wall time, or for stages "
        "in N workers of N x the wall time):"
    )
    for text in result["table"].splitlines():
        if not text.startswith("bottleneck:"):
            print(f"  {text}")
    if result["bottleneck"] is not None:
        share = result["bottleneck_share"]
        of = "the workers' time" if "workers]" in result["bottleneck"] else "the time"
        print(f"bottleneck: {result['bottleneck']} ({share:.0%} of {of})")
    if isinstance(dataset, MapDataset):
        print(
            "  (a MapDataset's stages all run inside to_iter_dataset(); to time them one by "
            "one, return ds.to_iter_dataset() and apply map / batch after it)"
        )
    suggested = result["suggested"]
    print(
        f"suggested configuration (chute.pick_performance_config, RAM budget {budget} MiB; "
        f"measured {suggested['seconds_per_element'] * 1e6:,.1f} us and "
        f"{suggested['bytes_per_element']:,} bytes per {first}):"
    )
    print(f"  read_options = chute.{suggested['read_options']}")
    print(f"  multiprocessing_options = chute.{suggested['multiprocessing_options']}")
    print("  use: ds.to_iter_dataset(read_options).mp_prefetch(multiprocessing_options)")
    if "trace" in result:
        print(f"trace: {result['trace']} (open it in https://ui.perfetto.dev or chrome://tracing)")


def _example() -> MapDataset[Any]:
    """A small batched pipeline for the doctest of `run_bench`."""
    return MapDataset.range(100).map(lambda x: x * 2).batch(10)
