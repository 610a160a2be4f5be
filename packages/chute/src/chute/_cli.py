"""The `chute` command line: parses arguments and hands each command to its module."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ._cli_bench import add_bench_parser, run_bench
from ._cli_common import EXIT_CODES_HELP, EXIT_USAGE, run_command
from ._cli_convert import add_convert_parser, run_convert
from ._cli_inspect import add_inspect_parser, run_inspect
from ._version import __version__

__all__ = ["main"]

_EXAMPLES = """\
examples:
  chute convert data/train.parquet out/train --shards 8
  chute inspect out/train-*.array_record
  chute bench my_pipeline:make_dataset --seconds 10
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
    demo = commands.add_parser(
        "demo",
        help="write a sample ArrayRecord data set and read it back, printing records/s",
        description=(
            "Writes a sample data set of images and labels to ArrayRecord shards, reads it "
            "back in order and at random, checks every record, and prints records/s."
        ),
        epilog="example:\n  chute demo --records 20000 --shards 4",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    demo.add_argument("--records", type=int, default=20_000, help="records to write (20000)")
    demo.add_argument("--shards", type=int, default=4, help="ArrayRecord files (4)")
    demo.add_argument("--dir", default=None, help="folder for the files (a temporary one)")
    demo.add_argument("--seed", type=int, default=0, help="seed of the random reads (0)")
    return parser


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
    from ._demo import run_demo

    return run_demo(records=args.records, shards=args.shards, folder=args.dir, seed=args.seed)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
