"""What every `chute` command shares: exit codes, one-line errors, record comparison."""

from __future__ import annotations

import argparse
import math
import os
import sys
import textwrap
import traceback
from collections.abc import Callable
from typing import Any, NoReturn

import numpy as np

__all__ = [
    "EXIT_CODES_HELP",
    "EXIT_DATA",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "CliError",
    "data_error",
    "first_difference",
    "help_epilog",
    "run_command",
    "usage_error",
]

EXIT_OK = 0
"""The command did what it was asked."""
EXIT_DATA = 1
"""Bad data: an unreadable or corrupt file, a failed verification, a pipeline that raised."""
EXIT_USAGE = 2
"""Bad usage: wrong options, a missing path, an unknown format, a bad MODULE:FUNCTION."""
EXIT_INTERRUPTED = 130
"""Interrupted with Ctrl-C (SIGINT), as shells report it (128 + 2)."""

EXIT_CODES_HELP = """\
exit codes:
  0    success
  1    data error (unreadable or corrupt file, failed verification, pipeline raised)
  2    usage error (bad option, missing path, unknown format, bad MODULE:FUNCTION)
  130  interrupted (Ctrl-C)
errors are one line on stderr, "chute COMMAND: error: ..."; set CHUTE_TRACEBACK=1 to
also print the Python traceback."""


class CliError(Exception):
    """An error a command reports as one line, with the exit code scripts see.

    Example:
        >>> error = CliError("no such file 'x.parquet'", EXIT_USAGE)
        >>> str(error), error.code
        ("no such file 'x.parquet'", 2)
    """

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def usage_error(message: str) -> NoReturn:
    """Raises a `CliError` with exit code 2 (`EXIT_USAGE`).

    Example:
        >>> try:
        ...     usage_error("unknown format 'csv'")
        ... except CliError as error:
        ...     print(error.code, error)
        2 unknown format 'csv'
    """
    raise CliError(message, EXIT_USAGE)


def data_error(message: str) -> NoReturn:
    """Raises a `CliError` with exit code 1 (`EXIT_DATA`).

    Example:
        >>> try:
        ...     data_error("corrupt file")
        ... except CliError as error:
        ...     print(error.code, error)
        1 corrupt file
    """
    raise CliError(message, EXIT_DATA)


def help_epilog(*examples: str) -> str:
    """The end of a command's `--help`: examples, then the exit codes.

    Example:
        >>> print(help_epilog("chute inspect data/").splitlines()[:2])
        ['example:', '  chute inspect data/']
    """
    lines = ["example:" if len(examples) == 1 else "examples:"]
    lines.extend(f"  {example}" for example in examples)
    return "\n".join(lines) + "\n\n" + EXIT_CODES_HELP


def _one_line(text: str) -> str:
    return " ".join(text.split())


def run_command(name: str, command: Callable[[argparse.Namespace], int], args: Any) -> int:
    r"""Runs `command(args)`, turning every failure into one stderr line and an exit code.

    `CliError` keeps its code; `KeyboardInterrupt` gives 130; any other exception is a
    data error (1), shown as its type and message (the traceback too with
    `CHUTE_TRACEBACK=1`).

    Example:
        >>> def command(args):
        ...     data_error("bad record 3")
        >>> import contextlib, io
        >>> with contextlib.redirect_stderr(io.StringIO()) as err:
        ...     code = run_command("inspect", command, None)
        >>> code, err.getvalue()
        (1, 'chute inspect: error: bad record 3\n')
    """
    prefix = f"chute {name}"
    try:
        return command(args)
    except CliError as error:
        _report(f"{prefix}: error: {_one_line(str(error))}")
        return error.code
    except KeyboardInterrupt:
        _report(f"{prefix}: interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `chute inspect ... | head`: the reader left; not an error.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except Exception as error:
        _report(f"{prefix}: error: {type(error).__name__}: {_one_line(str(error))}")
        return EXIT_DATA


def _report(line: str) -> None:
    if os.environ.get("CHUTE_TRACEBACK"):
        traceback.print_exc()
    print(line, file=sys.stderr, flush=True)


def first_difference(expected: Any, actual: Any, path: str = "record") -> str | None:
    """Where two records differ (a readable path), or None when they are equal.

    Arrays compare by dtype, shape and values (NaN equals NaN); containers by type,
    keys and items.

    Example:
        >>> import numpy as np
        >>> first_difference({"x": np.arange(3)}, {"x": np.arange(3)}) is None
        True
        >>> first_difference({"x": np.arange(3)}, {"x": np.zeros(3)})
        "record['x']: dtype int64 != float64"
    """
    if isinstance(expected, np.ndarray | np.generic) or isinstance(actual, np.ndarray | np.generic):
        a, b = np.asarray(expected), np.asarray(actual)
        if type(expected) is not type(actual) and not (
            isinstance(expected, np.generic) and isinstance(actual, np.generic)
        ):
            return f"{path}: type {type(expected).__name__} != {type(actual).__name__}"
        if a.dtype != b.dtype:
            return f"{path}: dtype {a.dtype} != {b.dtype}"
        if a.shape != b.shape:
            return f"{path}: shape {a.shape} != {b.shape}"
        nan = a.dtype.kind in "fc"
        return None if np.array_equal(a, b, equal_nan=nan) else f"{path}: values differ"
    if type(expected) is not type(actual):
        return f"{path}: type {type(expected).__name__} != {type(actual).__name__}"
    if isinstance(expected, dict):
        if list(expected) != list(actual):
            return f"{path}: keys {list(expected)} != {list(actual)}"
        for key, value in expected.items():
            found = first_difference(value, actual[key], f"{path}[{key!r}]")
            if found:
                return found
        return None
    if isinstance(expected, list | tuple):
        if len(expected) != len(actual):
            return f"{path}: length {len(expected)} != {len(actual)}"
        for number, (a_item, b_item) in enumerate(zip(expected, actual, strict=True)):
            found = first_difference(a_item, b_item, f"{path}[{number}]")
            if found:
                return found
        return None
    if isinstance(expected, float) and math.isnan(expected) and math.isnan(actual):
        return None
    if expected != actual:
        shown = [textwrap.shorten(repr(value), 60) for value in (expected, actual)]
        return f"{path}: {shown[0]} != {shown[1]}"
    return None
