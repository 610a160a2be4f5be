"""The `chute` command line: parses arguments and hands each command to its module.

`main` is the `chute` console script and `python -m chute_cli`.
Each command lives in a module of its own: `_convert`, `_inspect`, `_bench`, `_top`
and `_demo`; `_common` holds what they share (exit codes, one-line errors) and `_inputs`
opens the files they read.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from chute import __version__

from ._bench import add_bench_parser, run_bench
from ._common import EXIT_CODES_HELP, EXIT_USAGE, run_command
from ._convert import add_convert_parser, run_convert
from ._inspect import add_inspect_parser, run_inspect
from ._top import add_top_parser, run_top

__all__ = ["main"]

_EXAMPLES = """\
examples:
  chute convert data/train.parquet out/train --shards 8
  chute inspect out/train-*.array_record
  chute bench my_pipeline:make_dataset --seconds 10
  chute top 9464
  chute COMMAND --help

"""


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="chute",
        description="chute: a fast, exactly resumable data loader for JAX.",
        epilog=_EXAMPLES + EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"chute {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    add_convert_parser(commands)
    add_inspect_parser(commands)
    add_bench_parser(commands)
    add_top_parser(commands)
    demo = commands.add_parser(
        "demo",
        help="train on real data, get preempted, resume, and match step for step",
        description=(
            "Converts scikit-learn's handwritten digits to ArrayRecord shards, trains a small "
            "JAX model on a chute pipeline (global shuffle, random augmentation, 2 worker "
            "processes, device prefetch) with Orbax checkpoints, kills the training process "
            "part way, resumes it, and checks that batches and losses match an uninterrupted "
            "run step for step. With --text: a language model's data instead (the standard "
            "library's docstrings, a BPE tokenizer trained on them, tokenization in 2 "
            "worker processes, best-fit packing) for a tiny transformer. With --elastic: "
            "simulated hosts preempted at their own steps and resumed on other numbers of "
            "hosts (4 -> 3 -> 6), counting per epoch the records seen, lost and repeated."
        ),
        epilog=(
            "examples:\n  chute demo --steps 300 --save-every 25 --dir /tmp/chute-demo\n"
            "  chute demo --text\n  chute demo --elastic"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    demo.add_argument("--dir", default=None, help="working folder (a new temporary one)")
    kind = demo.add_mutually_exclusive_group()
    kind.add_argument(
        "--text", action="store_true", help="the language-model demo (tokenize, pack)"
    )
    kind.add_argument(
        "--elastic",
        action="store_true",
        help="hosts preempted unevenly, resumed on other host counts (4 -> 3 -> 6)",
    )
    demo.add_argument(
        "--steps", type=_positive, default=None, help="training steps (300; --text: 200)"
    )
    demo.add_argument(
        "--save-every", type=_positive, default=25, help="steps between checkpoints (25)"
    )
    return parser


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {value}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns the exit code (see `chute --help`).

    Example:
        >>> main(["inspect", "/no/such/file.parquet"])  # One line on stderr, and:
        2
    """
    parser = _build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    if args.command == "convert":
        return run_command("convert", run_convert, args)
    if args.command == "inspect":
        return run_command("inspect", run_inspect, args)
    if args.command == "bench":
        return run_command("bench", run_bench, args)
    if args.command == "top":
        return run_command("top", run_top, args)
    if args.elastic:
        from ._demo_elastic import run_elastic_demo

        return run_elastic_demo(folder=args.dir)
    if args.text:
        from ._demo_text import run_text_demo

        steps = 200 if args.steps is None else args.steps
        return run_text_demo(folder=args.dir, steps=steps, save_every=args.save_every)
    from ._demo import run_demo

    steps = 300 if args.steps is None else args.steps
    return run_demo(folder=args.dir, steps=steps, save_every=args.save_every)
