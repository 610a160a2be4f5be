"""`chute bench`: how fast a user's pipeline runs, where its time goes, what to tune."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from typing import Any

from chute import IterDataset, MapDataset
from chute_execution import TraceOptions

from ._bench_plot import check_plot_path, write_plot
from ._bench_run import measure, within
from ._common import EXIT_OK, data_error, help_epilog, usage_error
from ._live_view import rich_module
from ._top import live_while

__all__ = ["add_bench_parser", "load_dataset", "run_bench"]

_DESCRIPTION = """\
Imports FUNCTION from MODULE (the working directory is on the import path, so
my_pipeline:make_dataset finds ./my_pipeline.py), calls it without arguments, and
iterates the chute dataset (MapDataset or IterDataset) it returns for --seconds or
--batches, whichever comes first, in this process. Prints elements/s (batches/s when
the pipeline batches), each stage's share of the time (ds.iter(stats=True)), the
bottleneck stage, and the configuration chute.pick_performance_config suggests.
--seconds is a deadline: an element still being produced then is abandoned, and what
was measured until then is reported (and said to be cut short).
With --trace, also writes a Chrome / Perfetto trace of the run (ds.iter(trace=PATH)):
open it in https://ui.perfetto.dev or chrome://tracing. With --plot, a chart of each
stage's share of the time and the consumer's input wait (needs matplotlib:
pip install 'chute-cli[plot]'). With --live, the view of `chute top` while it runs:
rates, shares and the bottleneck, refreshed in place (needs rich: pip install
'chute-cli[top]')."""


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
            "chute bench my_pipeline:make_dataset --batches 200 --plot stages.svg",
            "chute bench my_pipeline:make_dataset --seconds 30 --live",
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("target", metavar="MODULE:FUNCTION", help="the function making the dataset")
    parser.add_argument(
        "--seconds",
        type=float,
        default=10.0,
        metavar="S",
        help=(
            "run at most S seconds (10), also when an element takes longer; the suggested "
            "configuration measures up to min(1, S) s more"
        ),
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
    parser.add_argument(
        "--plot",
        default=None,
        metavar="FILE",
        help="draw time per stage and input wait to FILE (.svg or .png; needs matplotlib)",
    )
    parser.add_argument(
        "--live",
        action="store_true",
        help="show the stages' rates, shares and the bottleneck live while it runs",
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


def run_bench(args: argparse.Namespace) -> int:
    """Runs `chute bench` with parsed arguments; returns the exit code.

    Example:
        >>> import argparse, contextlib, io
        >>> args = argparse.Namespace(target="chute_cli._bench:_example", seconds=1.0,
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
    plot = getattr(args, "plot", None)
    if plot is not None:
        check_plot_path(plot)
    live = getattr(args, "live", False)
    if live:
        rich_module("live")  # A clear error before the run if the extra is missing.
    dataset = load_dataset(args.target)
    streamed = dataset.to_iter_dataset() if isinstance(dataset, MapDataset) else dataset
    if live:
        result = live_while(lambda: measure(streamed, args.seconds, args.batches, trace))
    else:
        result = measure(streamed, args.seconds, args.batches, trace)
    if trace is not None:
        result["trace"] = trace
    result["target"] = args.target
    if result["ended"]:
        result["stopped_by"] = "the end of the data set"
    elif args.batches is not None and result["elements"] >= args.batches:
        result["stopped_by"] = f"--batches {args.batches}"
    else:
        result["stopped_by"] = f"--seconds {args.seconds:g}"
    result["suggested"], result["not_suggested"] = _suggest(streamed, args, result["cut_short"])
    if plot is not None:
        write_plot(result, plot)
        result["plot"] = plot
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        _print(result, dataset, args.ram_budget_mb)
    return EXIT_OK


def _suggest(
    streamed: IterDataset[Any], args: argparse.Namespace, cut_short: bool
) -> tuple[dict[str, Any] | None, str | None]:
    """`chute.pick_performance_config`'s suggestion, or None and why there is none.

    It measures the pipeline again for `min(1, --seconds)`; it is abandoned 1 s after
    that, so that a slow element cannot hold the command.
    """
    if cut_short:
        return None, (
            f"the run was cut short by --seconds {args.seconds:g} in the middle of an element; "
            "measure with a larger --seconds for one"
        )
    from chute_execution import pick_performance_config

    seconds = min(1.0, args.seconds)
    try:
        done, config = within(
            seconds + 1.0,
            lambda: pick_performance_config(streamed, args.ram_budget_mb, seconds=seconds),
        )
    except Exception as error:
        data_error(f"the pipeline raised {type(error).__name__}: {error}")
    if not done:
        return None, (
            f"chute.pick_performance_config did not finish within {seconds + 1.0:g} "
            "s (an element took longer); measure with a larger --seconds for one"
        )
    suggested = {
        "read_options": repr(config.read_options),
        "multiprocessing_options": repr(config.multiprocessing_options),
        "seconds_per_element": config.seconds_per_element,
        "bytes_per_element": config.bytes_per_element,
    }
    return suggested, None


def _print(result: dict[str, Any], dataset: Any, budget: int) -> None:
    kind = type(dataset).__name__
    unit = "batches" if result["batched"] else "elements"
    first = "batch" if result["batched"] else "element"
    count, seconds = result["elements"], result["seconds"]
    print(f"chute bench: {result['target']} ({kind}), {count:,} {unit} in {seconds:.2f} s")
    for line in repr(dataset).splitlines()[1:]:
        print(f"  {line}")
    if result["cut_short"]:
        print(
            f"stopped by: {result['stopped_by']}, in the middle of {first} {count + 1:,} "
            f"(still being produced after {result['in_flight_seconds']:.2f} s; abandoned"
            + ("" if not count else ": the figures below are what was measured until then")
            + ")"
        )
    else:
        print(f"stopped by: {result['stopped_by']}")
    if count:
        _print_figures(result, dataset, unit, first)
    elif result["cut_short"]:
        print(f"no {first} was produced within --seconds: nothing to measure")
    else:
        print("the data set is empty: nothing to measure")
        return
    suggested = result["suggested"]
    if suggested is None:
        print(f"suggested configuration: none ({result['not_suggested']})")
    else:
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
    if "plot" in result:
        print(f"chart: {result['plot']} (time per stage and input wait)")


def _print_figures(result: dict[str, Any], dataset: Any, unit: str, first: str) -> None:
    count, seconds = result["elements"], result["seconds"]
    line = f"throughput: {result['elements_per_second']:,.1f} {unit}/s"
    if result["batched"]:
        line += (
            f" = {result['examples'] / seconds:,.0f} elements/s "
            f"({result['examples'] / count:,.4g} elements per batch)"
        )
    print(line)
    print(f"first {first} after {result['first_element_seconds']:.3f} s")
    print(
        "time per stage (own time, not its inputs'; share of the wall time, or for stages "
        "in N workers of N x the wall time):"
    )
    for text in result["table"].splitlines():
        if not text.startswith("bottleneck:"):
            print(f"  {text}")
    if result["cut_short"]:
        print(f"  (the abandoned {first}'s time is in no stage: they count finished elements)")
    if result["bottleneck"] is not None:
        share = result["bottleneck_share"]
        of = "the workers' time" if "workers]" in result["bottleneck"] else "the time"
        print(f"bottleneck: {result['bottleneck']} ({share:.0%} of {of})")
    if isinstance(dataset, MapDataset):
        print(
            "  (a MapDataset's stages all run inside to_iter_dataset(); to time them one by "
            "one, return ds.to_iter_dataset() and apply map / batch after it)"
        )


def _example() -> MapDataset[Any]:
    """A small batched pipeline for the doctest of `run_bench`."""
    return MapDataset.range(100).map(lambda x: x * 2).batch(10)
