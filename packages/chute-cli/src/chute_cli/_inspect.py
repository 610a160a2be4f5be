"""`chute inspect`: records, files, an inferred schema and the first records of a data set."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import numpy as np

from chute_sources import is_object_url

from ._common import EXIT_OK, help_epilog, usage_error
from ._inputs import FORMATS, open_input
from ._schema import infer_schema, schema_table, shorten
from ._urls import file_bytes

__all__ = ["add_inspect_parser", "inspect_data", "run_inspect"]

_DESCRIPTION = """\
Shows what a data set holds: the number of records, its files (with sizes and record
counts), a schema inferred from a sample of records (per field: type, dtype and shape,
or "varies" with the shapes seen), and the first records, shortened.

PATH is an ArrayRecord file, folder or glob pattern (quote it), or a Parquet file,
folder or pattern, a .npy / .npz file, a .jsonl file, an image folder, or a folder that
Hugging Face datasets' save_to_disk wrote (a split's folder of a DatasetDict). It may be
an s3:// or gs:// URL of ArrayRecord, Parquet, .npy or JSON Lines objects (an object, a
quoted pattern, or a folder ending in /), read with the credentials of the environment.
Fields are the keys of dict records (nested dicts as dotted paths); other records are
one field, "(record)".

ArrayRecord shards that an unfinished `chute convert` left (its manifest,
<stem>.chute-convert.json, says "complete": false) are refused, since they read like a
whole, smaller data set: rerun the conversion to finish it, or pass --allow-incomplete
to inspect them anyway, with a warning."""


def add_inspect_parser(commands: Any) -> argparse.ArgumentParser:
    """Adds `inspect` to the subcommands `commands` of the `chute` parser.

    Example:
        >>> import argparse
        >>> parser = argparse.ArgumentParser(prog="chute")
        >>> _ = add_inspect_parser(parser.add_subparsers(dest="command"))
        >>> parser.parse_args(["inspect", "out/", "--json"]).json
        True
    """
    parser: argparse.ArgumentParser = commands.add_parser(
        "inspect",
        help="show the records, files, schema and first records of a data set",
        description=_DESCRIPTION,
        epilog=help_epilog(
            "chute inspect 'out/train-*.array_record'",
            "chute inspect data.parquet --json",
            "chute inspect s3://bucket/out/",
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("path", metavar="PATH", help="a file, folder or quoted glob pattern")
    parser.add_argument("--format", choices=FORMATS, help="the format (default: from PATH)")
    parser.add_argument(
        "--records", type=int, default=3, metavar="N", help="first records shown (default 3)"
    )
    parser.add_argument(
        "--sample",
        type=int,
        default=100,
        metavar="N",
        help="records read to infer the schema, spread over the data set (default 100)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead")
    parser.add_argument(
        "--allow-incomplete",
        action="store_true",
        help="inspect the shards of an unfinished chute convert (with a warning)",
    )
    return parser


_ARRAY_FORMATS = ("npy", "npz")
"""Formats whose records are rows of arrays: every row has the same types, dtypes and
shapes, so the first rows give the schema (and a compressed `.npz` decompresses only
those)."""


def _sample_keys(total: int, count: int, format: str) -> list[int]:
    if count >= total or format in _ARRAY_FORMATS:
        return list(range(min(count, total)))
    return sorted(set(np.linspace(0, total - 1, count).round().astype(int).tolist()))


def inspect_data(
    path: str,
    format: str | None = None,
    records: int = 3,
    sample: int = 100,
    *,
    allow_incomplete: bool = False,
) -> dict[str, Any]:
    """What `chute inspect --json` prints, as a dict.

    With `allow_incomplete`, the shards of an unfinished `chute convert` are inspected,
    and the report's `"incomplete"` says what their manifest says (otherwise they are
    refused with a `CliError`).

    Example:
        >>> import os, tempfile
        >>> import numpy as np
        >>> path = os.path.join(tempfile.mkdtemp(), "x.npy")
        >>> np.save(path, np.zeros((10, 3), np.float32))
        >>> report = inspect_data(path, records=1)
        >>> report["num_records"], report["schema"]
        (10, {'(record)': {'type': 'ndarray', 'dtype': 'float32', 'shape': [3]}})
        >>> report["records"]
        ['array([0., 0., 0.], dtype=float32)']
    """
    opened = open_input(path, format, allow_incomplete=allow_incomplete)
    total = opened.num_records
    files = [
        {"path": file, "bytes": _bytes(file), "records": count}
        for file, count in zip(opened.files, opened.file_records, strict=True)
    ]
    keys = _sample_keys(total, sample, opened.format)
    schema = infer_schema(opened.read(keys)) if total else {}
    first = opened.read(list(range(min(records, total)))) if total else []
    report: dict[str, Any] = {
        "path": path,
        "format": opened.format,
        "num_records": total,
        "num_files": len(files),
        "files": files,
        "schema": schema,
        "schema_sample": min(sample, total),
        "records": [shorten(record) for record in first],
    }
    if opened.classes is not None:
        report["classes"] = opened.classes
    if opened.unfinished:
        report["incomplete"] = [
            {
                "manifest": unfinished.manifest,
                "shards_written": unfinished.shards_done,
                "shards_total": unfinished.shards_total,
                "records_written": unfinished.records_done,
                "records_total": unfinished.records_total,
                "problem": unfinished.problem,
                "message": unfinished.describe(),
            }
            for unfinished in opened.unfinished
        ]
    return report


def _bytes(path: str) -> int:
    if is_object_url(path):
        return file_bytes(path)
    if os.path.isdir(path):
        return sum(
            os.path.getsize(os.path.join(folder, name))
            for folder, _, names in os.walk(path)
            for name in names
        )
    return os.path.getsize(path)


def run_inspect(args: argparse.Namespace) -> int:
    r"""Runs `chute inspect` with parsed arguments; returns the exit code.

    Example:
        >>> import argparse, os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "x.jsonl")
        >>> with open(path, "w") as file:
        ...     _ = file.write('{"a": 1}\n{"a": 2}\n')
        >>> args = argparse.Namespace(path=path, format=None, records=1, sample=10, json=False)
        >>> run_inspect(args)  # doctest: +ELLIPSIS
        chute inspect: ...x.jsonl (jsonl)
        records: 2 in 1 file
        ...
        0
    """
    for name in ("records", "sample"):
        if getattr(args, name) < 0:
            usage_error(f"--{name} must be at least 0, got {getattr(args, name)}")
    report = inspect_data(
        args.path,
        args.format,
        args.records,
        args.sample,
        allow_incomplete=getattr(args, "allow_incomplete", False),
    )
    for unfinished in report.get("incomplete", []):
        print(
            "chute inspect: warning: these shards are the output of an unfinished chute "
            f"convert (--allow-incomplete): {unfinished['message']}",
            file=sys.stderr,
            flush=True,
        )
    if args.json:
        print(json.dumps(report, indent=2))
        return EXIT_OK
    files = report["files"]
    plural = "s" if len(files) != 1 else ""
    print(f"chute inspect: {report['path']} ({report['format']})")
    incomplete = " (incomplete: an unfinished chute convert)" if "incomplete" in report else ""
    print(f"records: {report['num_records']:,} in {len(files)} file{plural}{incomplete}")
    shown = files if len(files) <= 12 else [*files[:5], None, *files[-5:]]
    width = max(len(_short_path(f["path"])) for f in files)
    for file in shown:
        if file is None:
            print(f"  ... {len(files) - 10} more files")
            continue
        print(
            f"  {_short_path(file['path']):<{width}}  {file['records']:>10,} records  "
            f"{file['bytes']:>12,} bytes"
        )
    if "classes" in report:
        print("classes: " + ", ".join(f"{n}={c}" for n, c in enumerate(report["classes"])))
    if report["schema"]:
        count = report["schema_sample"]
        if report["format"] in _ARRAY_FORMATS:  # Rows of arrays: all alike.
            print(f"schema (from the first {count:,} rows of the arrays):")
        else:
            print(f"schema (from {count:,} records spread over the data set):")
        for line in schema_table(report["schema"]):
            print(f"  {line}")
    if report["records"]:
        count = len(report["records"])
        print(f"first {count} records:" if count > 1 else "first record:")
        for number, text in enumerate(report["records"]):
            print(f"  [{number}] {text}")
    return EXIT_OK


def _short_path(path: str) -> str:
    if is_object_url(path):
        return path
    relative = os.path.relpath(path)
    return relative if not relative.startswith("..") else path
