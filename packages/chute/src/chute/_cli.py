"""The `chute` command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ._version import __version__

__all__ = ["main"]


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="chute",
        description="chute: a fast, exactly resumable data loader for JAX.",
    )
    parser.add_argument("--version", action="version", version=f"chute {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = commands.add_parser(
        "demo",
        help="write a sample ArrayRecord data set and read it back, printing records/s",
        description=(
            "Writes a sample data set of images and labels to ArrayRecord shards, reads it "
            "back in order and at random, checks every record, and prints records/s."
        ),
    )
    demo.add_argument("--records", type=int, default=20_000, help="records to write (20000)")
    demo.add_argument("--shards", type=int, default=4, help="ArrayRecord files (4)")
    demo.add_argument("--dir", default=None, help="folder for the files (a temporary one)")
    demo.add_argument("--seed", type=int, default=0, help="seed of the random reads (0)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns the exit code."""
    parser = _build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    from ._demo import run_demo

    return run_demo(records=args.records, shards=args.shards, folder=args.dir, seed=args.seed)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
