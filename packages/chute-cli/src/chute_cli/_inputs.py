"""The inputs `chute convert` and `chute inspect` read, each as a random-access source.

Formats: Parquet, NumPy `.npy` / `.npz`, JSON Lines, folders of PNG / JPEG images laid
out like torchvision's `ImageFolder` (one subfolder per class), folders that Hugging Face
`datasets` wrote with `save_to_disk`, ArrayRecord, TFRecord (plain or GZIP) and WebDataset
tar shards. Each is
read by its `chute_sources` source; this module turns their errors into one-line
`CliError`s and, for images, adds a decoding check (with Pillow, when installed).
`s3://` and `gs://` URLs (objects, patterns, folders) are read by the sources that
take them: ArrayRecord, Parquet, NumPy `.npy`, JSON Lines, TFRecord and WebDataset.
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import io
import json
import os
import re
import warnings
from collections.abc import Sequence
from typing import Any, NoReturn

from chute_core import ChuteError, SourceFileNotFoundError
from chute_sources import (
    ImageFolderSource,
    IncompleteShardsWarning,
    JsonLinesSource,
    TFRecordSource,
    WebDatasetSource,
    is_object_url,
    object_info,
)
from chute_sources.internal import UnfinishedConversion, unfinished_conversions

from ._common import CliError, data_error, usage_error
from ._urls import file_stamp, strip_file_scheme, url_matches, url_names

__all__ = [
    "CONVERTIBLE_FORMATS",
    "FORMATS",
    "Input",
    "detect_format",
    "open_input",
]

FORMATS = (
    "array_record",
    "huggingface",
    "images",
    "jsonl",
    "npy",
    "npz",
    "parquet",
    "tfrecord",
    "webdataset",
)
"""Every format `chute inspect` reads."""
CONVERTIBLE_FORMATS = (
    "array_record",
    "huggingface",
    "images",
    "jsonl",
    "npy",
    "npz",
    "parquet",
    "tfrecord",
    "webdataset",
)
"""The formats `chute convert` turns into ArrayRecord."""

_SUFFIXES = {
    ".array_record": "array_record",
    ".arrayrecord": "array_record",
    ".parquet": "parquet",
    ".parq": "parquet",
    ".npy": "npy",
    ".npz": "npz",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".tfrecord": "tfrecord",
    ".tfrecords": "tfrecord",
    ".tfrec": "tfrecord",
    ".tar": "webdataset",
}
_TFRECORD_NAME = re.compile(r"\.(tfrecords?|tfrec)(-\d+-of-\d+)?(\.gz)?\Z")
"""TFRecord names: `x.tfrecord`, `x.tfrecord.gz`, TFDS's `train.tfrecord-00000-of-00004`."""
_OWN_WORDING = ("images", "jsonl", "webdataset")
"""Formats whose sources word their errors as the CLI does: shown as they are."""
_GLOB_CHARS = ("*", "?", "[")


_HF_FILES = ("state.json", "dataset_dict.json")
"""What `Dataset.save_to_disk` / `DatasetDict.save_to_disk` write into the folder."""


def _folder_format(folder: str) -> str | None:
    names = os.listdir(folder)
    if any(name in names for name in _HF_FILES):  # Before images: splits are subfolders.
        return "huggingface"
    for suffix in (".array_record", ".parquet", ".parq", ".tfrecord", ".tfrec", ".tar"):
        if any(suffix in name for name in names):
            return _SUFFIXES[suffix]
    if any(os.path.isdir(os.path.join(folder, n)) and not n.startswith(".") for n in names):
        return "images"
    return None


def detect_format(path: str, given: str | None = None) -> str:
    """The format of `path`: `given` if set, else from the suffix or a folder's contents.

    Raises:
        CliError: `path` does not exist (exit code 2), or its format is unknown (2).

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "train.parquet")
        >>> open(path, "wb").close()
        >>> detect_format(path), detect_format("x.bin", given="npy")
        ('parquet', 'npy')
    """
    path = strip_file_scheme(path)
    if is_object_url(path):
        return given if given is not None else _url_format(path)
    is_glob = any(char in path for char in _GLOB_CHARS)
    if given is None and not is_glob and not os.path.exists(path):
        usage_error(f"{path!r} does not exist (working directory {os.getcwd()!r})")
    if given is not None:
        return given
    if is_glob:
        matches = sorted(glob.glob(path, recursive=True))
        if not matches:
            usage_error(f"the pattern {path!r} matches nothing (working directory {os.getcwd()!r})")
        path = matches[0]
    if os.path.isdir(path):
        found = _folder_format(path)
        if found is None:
            usage_error(
                f"cannot tell the format of the folder {path!r}: it holds no .array_record or "
                ".parquet file, no state.json of datasets' save_to_disk and no class "
                "subfolders of images; pass --format"
            )
        return found
    if _is_tfrecord(path):
        return "tfrecord"
    suffix = os.path.splitext(path)[1].lower()
    if suffix not in _SUFFIXES:
        usage_error(
            f"unknown format of {path!r} (suffix {suffix or 'none'!r}); known suffixes: "
            f"{', '.join(sorted(_SUFFIXES))}, or a folder; pass --format to choose one"
        )
    return _SUFFIXES[suffix]


def _is_tfrecord(path: str) -> bool:
    return _TFRECORD_NAME.search(path.rsplit("/", 1)[-1].lower()) is not None


def _suffix_format(path: str) -> str | None:
    if _is_tfrecord(path):
        return "tfrecord"
    return _SUFFIXES.get(os.path.splitext(path.rsplit("/", 1)[-1])[1].lower())


def _url_format(url: str) -> str:
    """The format of an object, a pattern of objects or a folder of objects."""
    if any(char in url for char in _GLOB_CHARS):
        matches = url_matches(url)
        if not matches:
            usage_error(f"the pattern {url!r} matches no object")
        url = matches[0]
    found = _suffix_format(url)
    if found is not None:
        return found
    folder = url.rstrip("/") + "/"
    names = [name[len(folder) :] for name in url_names(folder)]
    if not names:
        try:
            object_info(url)
        except SourceFileNotFoundError as error:
            usage_error(f"{url!r} does not exist (no such object, nor objects under it): {error}")
        usage_error(
            f"unknown format of {url!r} (its name has no known suffix); known suffixes: "
            f"{', '.join(sorted(_SUFFIXES))}; pass --format to choose one"
        )
    top = [name for name in names if "/" not in name]
    if any(name in _HF_FILES for name in top) or len(top) < len(names):
        usage_error(
            f"{url!r} looks like a folder of images or a datasets save_to_disk folder, which "
            "chute reads from local folders only; download it first (aws s3 sync / gcloud "
            "storage cp -r) or pass the objects of another format"
        )
    for suffix in (
        ".array_record",
        ".parquet",
        ".parq",
        ".jsonl",
        ".ndjson",
        ".tfrecord",
        ".tfrec",
        ".tar",
    ):
        if any(suffix in name for name in top):
            return _SUFFIXES[suffix]
    usage_error(
        f"cannot tell the format of {url!r}: it holds no .array_record, .parquet, .jsonl or "
        ".tfrecord objects; pass --format"
    )


@dataclasses.dataclass
class Input:
    """An opened input: its random-access source and the files behind it.

    Example:
        >>> import numpy as np, os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "x.npy")
        >>> np.save(path, np.arange(5))
        >>> opened = open_input(path)
        >>> opened.format, len(opened.source), opened.file_records
        ('npy', 5, [5])
    """

    path: str
    format: str
    source: Any
    files: list[str]
    file_records: list[int]
    fingerprint_files: list[str]
    classes: list[str] | None = None
    unfinished: list[UnfinishedConversion] = dataclasses.field(default_factory=list)
    """ArrayRecord shards of a `chute convert` that did not finish (allowed, to report)."""

    @property
    def num_records(self) -> int:
        """The number of records."""
        return len(self.source)

    def fingerprint(self) -> str:
        """A hash of the input files' names, sizes and modification times (or ETags)."""
        digest = hashlib.sha256(self.format.encode())
        for file in self.fingerprint_files:
            digest.update(f"\0{file_stamp(file)}".encode())
        return digest.hexdigest()

    def read(self, indices: Sequence[int]) -> list[Any]:
        """Reads records; a failure is a data error naming the input and the records."""
        try:
            records = list(self.source.__getitems__(list(indices)))
        except ChuteError as error:
            if self.format in _OWN_WORDING:  # A bad JSON line, a file that is no image.
                data_error(str(error))
            _unreadable(self.path, indices, error)
        except Exception as error:
            _unreadable(self.path, indices, error)
        if self.format == "images":
            for record in records:
                _check_decodes(os.path.join(self.path, record["path"]), record["image"])
        return records


def open_input(path: str, format: str | None = None, *, allow_incomplete: bool = False) -> Input:
    r"""Opens `path` (format detected unless given) as an `Input`.

    ArrayRecord shards whose `chute convert` manifest says the conversion did not finish
    are refused, unless `allow_incomplete` (then `Input.unfinished` lists them).

    Raises:
        CliError: a missing path or unknown format (exit code 2); a file that cannot be
            read as its format, or shards of an unfinished conversion (1).

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "x.jsonl")
        >>> with open(path, "w") as file:
        ...     _ = file.write('[1, 2]\n')
        >>> opened = open_input(path)
        >>> opened.format, opened.read([0])
        ('jsonl', [[1, 2]])
    """
    path = strip_file_scheme(path)
    kind = detect_format(path, format)
    if is_object_url(path):
        if kind in ("images", "huggingface"):
            usage_error(
                f"--format {kind} reads local folders only; download {path!r} first (aws s3 "
                "sync / gcloud storage cp -r)"
            )
    else:
        _check_local(path, kind)
    try:
        return _open(path, kind, allow_incomplete)
    except CliError:
        raise
    except Exception as error:
        if is_object_url(path) and isinstance(error, SourceFileNotFoundError):
            usage_error(str(error))  # No such object or bucket: the message names it.
        denied = _permission_denied(error)
        if denied is not None and not is_object_url(path):
            where = denied.filename or path
            data_error(
                f"cannot read {path!r}: permission denied for {where!r}; give the user "
                "running chute read access to it (see its owner and mode with ls -l)"
            )
        if kind == "images" and isinstance(error, ChuteError):  # An empty class folder, ...
            data_error(str(error))
        what = {
            "images": "an image folder",
            "array_record": "ArrayRecord",
            "huggingface": "a datasets save_to_disk folder",
        }.get(kind, kind)
        data_error(f"cannot read {path!r} as {what}: {error}")


def _check_local(path: str, kind: str) -> None:
    if kind == "images" and not os.path.isdir(path):
        usage_error(f"--format images needs a folder of class subfolders, got {path!r}")
    is_glob = any(char in path for char in _GLOB_CHARS)
    if kind != "images" and not is_glob and not os.path.exists(path):
        usage_error(f"{path!r} does not exist (working directory {os.getcwd()!r})")
    if is_glob and not glob.glob(path, recursive=True):
        usage_error(f"the pattern {path!r} matches no file (working directory {os.getcwd()!r})")


def _permission_denied(error: BaseException) -> PermissionError | None:
    """The `PermissionError` that `error` is or was caused by, if any.

    Example:
        >>> try:
        ...     try:
        ...         raise PermissionError(13, "Permission denied", "/data/x.npy")
        ...     except OSError as inner:
        ...         raise ValueError("cannot read") from inner
        ... except ValueError as outer:
        ...     _permission_denied(outer).filename
        '/data/x.npy'
    """
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, PermissionError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _open(path: str, kind: str, allow_incomplete: bool = False) -> Input:
    if kind == "jsonl":
        jsonl = JsonLinesSource(path)
        files = list(jsonl.files) if is_object_url(path) else [path]
        return Input(path, kind, jsonl, files, list(jsonl.file_records), files)
    if kind == "tfrecord":
        tfrecord = TFRecordSource(path)
        files = list(tfrecord.files)
        return Input(path, kind, tfrecord, files, list(tfrecord.file_records), files)
    if kind == "webdataset":
        shards = WebDatasetSource(path)
        files = list(shards.shards)
        return Input(path, kind, shards, files, list(shards.shard_samples), files)
    if kind == "images":
        images = ImageFolderSource(path)
        files = [os.path.join(path, p) for p, _ in images.samples]
        return Input(path, kind, images, [path], [len(images)], files, list(images.classes))
    if kind in ("npy", "npz"):
        from chute_sources import NumpySource

        numpy = NumpySource(path)
        return Input(path, kind, numpy, [path], [len(numpy)], [path])
    if kind == "parquet":
        from chute_sources import ParquetSource

        parquet = ParquetSource(path)
        counts = [len(ParquetSource(file)) for file in parquet.files]
        files = list(parquet.files)
        return Input(path, kind, parquet, files, counts, files)
    if kind == "huggingface":
        return _open_saved_dataset(path)
    if kind == "array_record":
        from chute_sources import ArrayRecordSource

        entries: Any = path
        if any(char in path for char in _GLOB_CHARS):  # Skip manifests and other files.
            if is_object_url(path):
                matches = url_matches(path)
            else:
                matches = sorted(glob.glob(path, recursive=True))
            entries = [m for m in matches if ".array_record" in m or ".arrayrecord" in m]
            entries = entries or path
        with warnings.catch_warnings():  # Told below, in the command's words.
            warnings.simplefilter("ignore", IncompleteShardsWarning)
            records = ArrayRecordSource(entries, allow_incomplete=True)
        files = [i.filename for i in records.instructions]
        counts = [i.num_records for i in records.instructions]
        unfinished = unfinished_conversions(files, buckets=True)
        if unfinished and not allow_incomplete:
            data_error(unfinished[0].message(f"the shards of {path!r}", "pass --allow-incomplete"))
        return Input(path, kind, records, files, counts, files, unfinished=unfinished)
    usage_error(f"unknown format {kind!r}; choose one of {', '.join(FORMATS)}")


def _open_saved_dataset(path: str) -> Input:
    """A folder of datasets' `save_to_disk`; a `DatasetDict`'s splits are its subfolders."""
    from chute_sources import HuggingFaceDiskSource

    if not os.path.isdir(path):
        usage_error(f"--format huggingface needs the folder that save_to_disk wrote, got {path!r}")
    if not os.path.isfile(os.path.join(path, "state.json")) and os.path.isfile(
        os.path.join(path, "dataset_dict.json")
    ):
        splits = [
            name
            for name in _listed_splits(os.path.join(path, "dataset_dict.json"))
            if os.path.isfile(os.path.join(path, name, "state.json"))
        ]
        example = os.path.join(path, splits[0] if splits else "train")
        usage_error(
            f"{path!r} holds a DatasetDict with the splits {', '.join(splits)}; pass the "
            f"folder of one split, e.g. {example!r}"
        )
    source = HuggingFaceDiskSource(path)
    files = list(source.files)
    state = os.path.join(path, "state.json")
    return Input(path, "huggingface", source, files, list(source.file_records), [state, *files])


def _listed_splits(path: str) -> list[str]:
    """The splits that a `dataset_dict.json` lists, in its order ([] if it is damaged)."""
    try:
        with open(path, encoding="utf-8") as file:
            splits = json.load(file).get("splits")
    except (OSError, ValueError, AttributeError, RecursionError):
        return []
    return [name for name in splits if isinstance(name, str)] if isinstance(splits, list) else []


def _unreadable(path: str, indices: Sequence[int], error: Exception) -> NoReturn:
    shown = f"{indices[0]}..{indices[-1]}" if len(indices) > 1 else f"{indices[0]}"
    data_error(f"cannot read records {shown} of {path!r}: {error}")


def _check_decodes(path: str, data: bytes) -> None:
    """Decodes an image with Pillow, when it is installed, to catch a corrupt file."""
    try:
        from PIL import Image  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return
    try:
        with Image.open(io.BytesIO(data)) as image:
            image.load()
    except Exception as error:
        data_error(f"{path!r} is a corrupt image: {error}")
