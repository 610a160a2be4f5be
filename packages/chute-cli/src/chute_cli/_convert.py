"""`chute convert`: data sets in any format chute reads to ArrayRecord, WebDataset or TFRecord."""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
import tempfile
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from chute_sources import IncompleteShardsWarning, delete_object, is_object_url

from ._common import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    CliError,
    data_error,
    first_difference,
    help_epilog,
    usage_error,
)
from ._convert_outputs import (
    OUTPUT_FORMATS,
    WrittenShards,
    expected_records,
    output_kind,
    output_paths,
    write_output_shard,
)
from ._inputs import CONVERTIBLE_FORMATS, Input, open_input
from ._manifest import MANIFEST_SUFFIX, MANIFEST_VERSION, load_manifest, write_manifest
from ._urls import existing, file_bytes, parent_url, strip_file_scheme, upload, url_names

__all__ = ["add_convert_parser", "run_convert", "shard_bounds"]

_CHUNK = 256
_DEFAULT_RECORDS_PER_SHARD = 10_000
_SHOWN = {"array_record": "ArrayRecord", "tfrecord": "TFRecord", "webdataset": "WebDataset"}

_DESCRIPTION = f"""\
Converts SRC into sharded ArrayRecord files, each record encoded with chute's record
codec, readable with chute.ArrayRecordSource (or chute.MapDataset.source(...)); or,
with --to webdataset, into WebDataset tar shards (DST-00000-of-00004.tar ...): a dict
record's "__key__" (else its number) and other entries (bytes, str, int, JSON in .json
fields; not those starting with _) become a sample, read by chute.WebDatasetSource; or,
with --to tfrecord, into TFRecord files (DST-00000-of-00004.tfrecord ...): bytes
records as they are, dict records as tf.train.Example records, read by
chute.TFRecordSource (and TensorFlow).

SRC formats (from the suffix, or --format):
  parquet  a .parquet file, a folder or a glob of them: one record per row, a dict
           {{column: value}} as pyarrow's to_pylist() gives it
  npy      a .npy file: one record per row along the first axis
  npz      a .npz file: one record per row, a dict {{name: array[i]}} of all arrays
  jsonl    a JSON Lines file: one record per non-blank line
  webdataset
           WebDataset .tar shards (a shard, a folder or a glob of them): one record per
           sample, {{"__key__": ..., "__url__": shard, field: bytes, ...}}
  array_record
           ArrayRecord shards (to reshard them, or --to webdataset)
  tfrecord a TFRecord file (.tfrecord, .tfrecord.gz for GZIP, TFDS's
           name.tfrecord-00000-of-00004), a folder or a glob of them: one record per
           TFRecord record, its bytes as they are (tf.train.Example records are not
           parsed: chute_sources.parse_example does that when reading); every CRC is
           checked. --to tfrecord writes them back, byte for byte
  images   a folder laid out like torchvision's ImageFolder, root/<class>/<image>:
           one record per PNG or JPEG file, {{"image": the file's encoded bytes,
           "label": the class's index in the sorted class folder names, "path":
           "<class>/<file>"}}; images are stored as is, not decoded (checked with
           Pillow when it is installed)
  huggingface
           a folder that Hugging Face datasets' save_to_disk wrote (or the folder of one
           split of a DatasetDict): one record per row, a dict {{column: value}} as
           chute.HuggingFaceDiskSource gives it, read in place (datasets not needed)

DST is the output prefix: out/train gives out/train-00000-of-00004.array_record ...
(one shard: out/train.array_record); an existing folder gives <folder>/<SRC name>.
Shards hold consecutive records (default: {_DEFAULT_RECORDS_PER_SHARD:,} records each).

A manifest, <DST>{MANIFEST_SUFFIX}, records each finished shard. If the conversion is
interrupted (Ctrl-C, a crash, a killed process), run the same command again: finished
shards are checked and kept, the others are written. At the end every shard's record
count is checked and a sample of records is decoded and compared with SRC.

SRC may be an s3:// or gs:// URL of Parquet, .npy, JSON Lines or TFRecord objects (an
object, a quoted pattern, or a folder ending in /), and DST an s3:// or gs:// prefix (a folder
when it ends in /): each shard is written to a temporary local folder and uploaded,
one at a time, then the manifest. Credentials and endpoints come from the environment
(AWS_* for S3, GOOGLE_APPLICATION_CREDENTIALS or STORAGE_EMULATOR_HOST for GCS). The
sampled records are read back from the bucket through chute's shard cache."""


def add_convert_parser(commands: Any) -> argparse.ArgumentParser:
    """Adds `convert` to the subcommands `commands` of the `chute` parser.

    Example:
        >>> import argparse
        >>> parser = argparse.ArgumentParser(prog="chute")
        >>> _ = add_convert_parser(parser.add_subparsers(dest="command"))
        >>> args = parser.parse_args(["convert", "a.parquet", "out/a", "--shards", "4"])
        >>> args.src, args.dst, args.shards, args.records_per_shard
        ('a.parquet', 'out/a', 4, None)
    """
    parser: argparse.ArgumentParser = commands.add_parser(
        "convert",
        help=(
            "convert Parquet, NumPy, JSON Lines, TFRecord, images or a saved Hugging Face data "
            "set to sharded ArrayRecord files"
        ),
        description=_DESCRIPTION,
        epilog=help_epilog(
            "chute convert data/train.parquet out/train --shards 8",
            "chute convert images/ out/images --records-per-shard 1000",
            "chute convert saved/train out/train --shards 16",
            "chute convert 's3://bucket/raw/*.parquet' s3://bucket/out/train --shards 64",
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("src", metavar="SRC", help="the input file, folder or glob pattern")
    parser.add_argument("dst", metavar="DST", help="the output prefix (or an existing folder)")
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--shards", type=int, metavar="N", help="number of output files")
    size.add_argument(
        "--records-per-shard",
        type=int,
        metavar="N",
        help=f"records per output file (default {_DEFAULT_RECORDS_PER_SHARD:,})",
    )
    parser.add_argument(
        "--format", choices=CONVERTIBLE_FORMATS, help="the format of SRC (default: from its name)"
    )
    parser.add_argument(
        "--to",
        choices=OUTPUT_FORMATS,
        default="array_record",
        help="the format of DST (default array_record)",
    )
    parser.add_argument(
        "--verify-samples",
        type=int,
        default=64,
        metavar="N",
        help="records decoded and compared with SRC at the end (default 64; 0: counts only)",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace shards and a manifest that DST holds from another conversion",
    )
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    return parser


def shard_bounds(
    num_records: int, *, shards: int | None = None, records_per_shard: int | None = None
) -> list[tuple[int, int]]:
    """The `(start, stop)` record range of each shard: consecutive, covering every record.

    With `shards`, sizes differ by at most one; with `records_per_shard`, every shard but
    the last is full.

    Example:
        >>> shard_bounds(10, shards=3)
        [(0, 3), (3, 6), (6, 10)]
        >>> shard_bounds(10, records_per_shard=4)
        [(0, 4), (4, 8), (8, 10)]
    """
    if shards is not None:
        return [(i * num_records // shards, (i + 1) * num_records // shards) for i in range(shards)]
    per = records_per_shard or _DEFAULT_RECORDS_PER_SHARD
    count = max(1, math.ceil(num_records / per))
    return [(i * per, min(num_records, (i + 1) * per)) for i in range(count)]


def _output_stem(dst: str, src: str) -> str:
    if dst.endswith(("/", os.sep)) or os.path.isdir(dst):
        name = os.path.basename(os.path.normpath(src))
        if any(char in name for char in "*?["):
            name = os.path.basename(os.path.dirname(os.path.normpath(src))) or "data"
        return os.path.join(dst, os.path.splitext(name)[0])
    return dst[: -len(".array_record")] if dst.endswith(".array_record") else dst


def _check_args(args: argparse.Namespace) -> None:
    for name in ("shards", "records_per_shard"):
        value = getattr(args, name)
        if value is not None and value < 1:
            usage_error(f"--{name.replace('_', '-')} must be at least 1, got {value}")
    if args.verify_samples < 0:
        usage_error(f"--verify-samples must be at least 0, got {args.verify_samples}")


def run_convert(args: argparse.Namespace) -> int:
    """Runs `chute convert` with parsed arguments; returns the exit code.

    Example:
        >>> import argparse, os, tempfile, contextlib, io
        >>> import numpy as np
        >>> folder = tempfile.mkdtemp()
        >>> np.save(os.path.join(folder, "x.npy"), np.arange(10))
        >>> args = argparse.Namespace(
        ...     src=os.path.join(folder, "x.npy"), dst=os.path.join(folder, "out"),
        ...     shards=2, records_per_shard=None, format=None, verify_samples=4,
        ...     overwrite=False, quiet=True)
        >>> with contextlib.redirect_stdout(io.StringIO()):
        ...     code = run_convert(args)
        >>> code
        0
        >>> import chute
        >>> [int(x) for x in chute.ArrayRecordSource(os.path.join(folder, "out*.array_record"))]
        [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
    """
    _check_args(args)
    dst = strip_file_scheme(args.dst)
    if is_object_url(dst):
        url_names(parent_url(dst))  # A missing bucket: a usage error, before reading SRC.
    opened = open_input(args.src, args.format)
    if opened.format not in CONVERTIBLE_FORMATS:
        usage_error(
            f"{args.src!r} is {opened.format}, which convert does not take; choose one of "
            f"{', '.join(CONVERTIBLE_FORMATS)} with --format"
        )
    total = opened.num_records
    if total == 0:
        data_error(f"{args.src!r} holds no records; there is nothing to convert")
    if args.shards is not None and args.shards > total:
        usage_error(f"--shards {args.shards} is more than the {total:,} records of {args.src!r}")
    bounds = shard_bounds(total, shards=args.shards, records_per_shard=args.records_per_shard)
    stem = _output_stem(dst, args.src)
    to = getattr(args, "to", "array_record")
    paths = output_paths(stem, len(bounds), to)
    manifest_path = stem + MANIFEST_SUFFIX
    plan = {
        "version": MANIFEST_VERSION,
        "source": {
            "path": opened.path if is_object_url(opened.path) else os.path.abspath(opened.path),
            "format": opened.format,
            "fingerprint": opened.fingerprint(),
            "num_records": total,
        },
        "layout": {"shard_records": [stop - start for start, stop in bounds]}
        | ({"to": to} if to != "array_record" else {}),
        "classes": opened.classes,
    }
    manifest = _start(plan, manifest_path, paths, args.overwrite)
    done = manifest["shards"]
    todo = [i for i in range(len(bounds)) if str(i) not in done]
    from tqdm.auto import tqdm

    bar = tqdm(
        total=sum(bounds[i][1] - bounds[i][0] for i in todo),
        unit=" records",
        desc="chute convert",
        file=sys.stderr,
        disable=args.quiet or not sys.stderr.isatty(),
        dynamic_ncols=True,
    )
    staging = tempfile.TemporaryDirectory(prefix="chute-convert-") if is_object_url(stem) else None
    try:
        with bar, staging or contextlib.nullcontext():
            for i in todo:
                size = _write_shard(opened, paths[i], *bounds[i], bar, staging)
                done[str(i)] = {
                    "file": os.path.basename(paths[i]),
                    "records": bounds[i][1] - bounds[i][0],
                    "bytes": size,
                }
                write_manifest(manifest_path, manifest)
    except KeyboardInterrupt:
        raise CliError(
            f"interrupted; {len(done)} of {len(bounds)} shards are complete, rerun the same "
            "command to resume",
            EXIT_INTERRUPTED,
        ) from None
    checked = _verify(opened, paths, bounds, args.verify_samples)
    manifest["complete"] = True
    write_manifest(manifest_path, manifest)
    _summary(opened, paths, manifest, todo, checked, manifest_path)
    return EXIT_OK


def _start(
    plan: dict[str, Any], manifest_path: str, paths: list[str], overwrite: bool
) -> dict[str, Any]:
    """The manifest to continue: the old one when it matches `plan`, else a fresh one."""
    old = None if overwrite else load_manifest(manifest_path)
    if old is not None:
        differs = [key for key in ("source", "layout", "classes") if old.get(key) != plan[key]]
        if differs:
            usage_error(
                f"the output already holds another conversion (its manifest {manifest_path!r} "
                f"has another {' and '.join(differs)}); pass --overwrite to replace it, or "
                "choose another DST"
            )
        shards = {
            key: entry
            for key, entry in old.get("shards", {}).items()
            if _shard_intact(paths[int(key)], entry)
        }
        return {**plan, "shards": shards, "complete": False}
    found = existing(paths)
    if found and not overwrite:
        usage_error(
            f"{found[0]!r} already exists and no manifest {manifest_path!r} says how it was "
            "made; pass --overwrite to replace it, or choose another DST"
        )
    if overwrite:
        _remove_old(manifest_path)
    return {**plan, "shards": {}, "complete": False}


def _remove_old(manifest_path: str) -> None:
    try:
        old = load_manifest(manifest_path)
    except CliError:
        old = None
    folder = os.path.dirname(manifest_path)
    for entry in (old or {}).get("shards", {}).values():
        path = os.path.join(folder, os.path.basename(str(entry.get("file", ""))))
        if is_object_url(path):
            delete_object(path)
        elif os.path.isfile(path):
            os.unlink(path)
    if is_object_url(manifest_path):
        delete_object(manifest_path)
    elif os.path.exists(manifest_path):
        os.unlink(manifest_path)


def _written(paths: str | Sequence[str], decode: bool) -> Any:
    """An `ArrayRecordSource` of shards this conversion writes, before it is complete.

    Its manifest says `"complete": false` until the end, so the source is told to allow
    that (without the warning a user gets: this is the conversion itself).
    """
    from chute_sources import ArrayRecordSource

    if output_kind(paths) != "array_record":
        return WrittenShards(paths)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IncompleteShardsWarning)
        return ArrayRecordSource(paths, decode=decode, allow_incomplete=True)


def _shard_intact(path: str, entry: dict[str, Any]) -> bool:
    """Whether a shard the manifest lists is still there, of the size and count recorded."""
    try:
        if not is_object_url(path) and not os.path.isfile(path):
            return False
        if file_bytes(path) != entry.get("bytes"):
            return False
        return len(_written(path, decode=False)) == entry.get("records")
    except Exception:
        return False


def _encoded(opened: Input, start: int, stop: int, bar: Any) -> Iterator[bytes]:
    from chute_core import RecordCodecError
    from chute_sources import encode_record

    for first in range(start, stop, _CHUNK):
        keys = range(first, min(stop, first + _CHUNK))
        for key, record in zip(keys, opened.read(keys), strict=True):
            try:
                yield encode_record(record)
            except RecordCodecError as error:
                data_error(f"record {key} of {opened.path!r} cannot be stored: {error}")
        bar.update(len(keys))


def _write_shard(
    opened: Input, path: str, start: int, stop: int, bar: Any, staging: Any | None
) -> int:
    """Writes one shard (into `staging`'s folder and uploaded, for a URL); its size."""
    from chute_sources import write_array_record

    local = path if staging is None else os.path.join(staging.name, os.path.basename(path))
    if output_kind(path) != "array_record":
        write_output_shard(opened, local, start, stop, bar)
    else:
        write_array_record(_encoded(opened, start, stop, bar), local, encode=False)
    size = os.path.getsize(local)
    if staging is not None:
        bar.set_postfix_str(f"uploading {os.path.basename(path)}")
        upload(local, path)
        os.unlink(local)
        bar.set_postfix_str("")
    return size


def _sample(total: int, count: int) -> list[int]:
    if count >= total:
        return list(range(total))
    if count == 0:
        return []
    if count == 1:
        return [0]
    inner = np.random.default_rng(0).choice(np.arange(1, total - 1), size=count - 2, replace=False)
    return sorted({0, total - 1, *inner.tolist()})


def _verify(opened: Input, paths: list[str], bounds: list[tuple[int, int]], samples: int) -> int:
    """Checks each shard's record count and compares a sample with the source."""
    for path, (start, stop) in zip(paths, bounds, strict=True):
        try:
            found = len(_written(path, decode=False))
        except Exception as error:
            data_error(f"verification failed: cannot read {path!r}: {error}")
        if found != stop - start:
            data_error(
                f"verification failed: {path!r} holds {found:,} records, expected {stop - start:,}"
            )
    keys = _sample(opened.num_records, samples)
    written = _written(paths, decode=True)
    for first in range(0, len(keys), _CHUNK):
        chunk = keys[first : first + _CHUNK]
        wanted = expected_records(opened, chunk, output_kind(paths))
        for key, expected, actual in zip(chunk, wanted, written.__getitems__(chunk), strict=True):
            difference = first_difference(expected, actual)
            if difference is not None:
                shard = next(n for n, (lo, hi) in enumerate(bounds) if lo <= key < hi)
                data_error(
                    f"verification failed: record {key} of SRC (record {key - bounds[shard][0]}"
                    f" of {paths[shard]!r}) differs from what SRC holds now: {difference}; the "
                    "shard or SRC changed after the shard was written. Rerun with --overwrite "
                    "to write every shard again"
                )
    written.close()
    return len(keys)


def _size(nbytes: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if nbytes < 1024 or unit == "GiB":
            return f"{nbytes:,} B" if unit == "B" else f"{nbytes:,.1f} {unit}"
        nbytes /= 1024  # type: ignore[assignment]
    raise AssertionError  # pragma: no cover


def _summary(
    opened: Input,
    paths: list[str],
    manifest: dict[str, Any],
    written: list[int],
    checked: int,
    manifest_path: str,
) -> None:
    shards = manifest["shards"]
    total_bytes = sum(entry["bytes"] for entry in shards.values())
    print(
        f"chute convert: {opened.num_records:,} records of {opened.path} ({opened.format}) "
        f"-> {len(paths)} {_SHOWN[output_kind(paths)]} "
        f"shard{'s' if len(paths) > 1 else ''}"
    )
    shown = (
        list(range(len(paths)))
        if len(paths) <= 12
        else [*range(5), *range(len(paths) - 5, len(paths))]
    )
    width = max(len(paths[i]) for i in shown)
    for number, i in enumerate(shown):
        if number and i != shown[number - 1] + 1:
            print(f"  ... {len(paths) - len(shown)} more shards")
        entry = shards[str(i)]
        state = "written" if i in written else "kept (finished before)"
        print(
            f"  {paths[i]:<{width}}  {entry['records']:>10,} records  "
            f"{_size(entry['bytes']):>10}  {state}"
        )
    if opened.classes is not None:
        labels = ", ".join(f"{n}={name}" for n, name in enumerate(opened.classes[:10]))
        more = f", ... ({len(opened.classes)} classes)" if len(opened.classes) > 10 else ""
        print(f"  labels: {labels}{more}")
    print(
        f"  total: {opened.num_records:,} records, {_size(total_bytes)}; manifest {manifest_path}"
    )
    kept = len(paths) - len(written)
    if kept:
        plural = "s" if kept > 1 else ""
        print(f"  resumed: {kept} finished shard{plural} kept, {len(written)} written")
    shards_text = f"all {len(paths)} shards" if len(paths) > 1 else "the shard"
    print(
        f"  verified: record count of {shards_text}, and {checked:,} sampled records "
        "decoded equal to SRC"
    )
