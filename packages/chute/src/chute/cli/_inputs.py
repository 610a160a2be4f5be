"""The inputs `chute convert` and `chute inspect` read, each as a random-access source.

Formats: Parquet, NumPy `.npy` / `.npz`, JSON Lines, folders of PNG / JPEG images laid
out like torchvision's `ImageFolder` (one subfolder per class), folders that Hugging Face
`datasets` wrote with `save_to_disk`, and ArrayRecord. Each is
read by its `chute_sources` source; this module turns their errors into one-line
`CliError`s and, for images, adds a decoding check (with Pillow, when installed).
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import io
import json
import os
from collections.abc import Sequence
from typing import Any, NoReturn

from chute_sources import ChuteError, ImageFolderSource, JsonLinesSource

from ._common import CliError, data_error, usage_error

__all__ = [
    "CONVERTIBLE_FORMATS",
    "FORMATS",
    "Input",
    "detect_format",
    "open_input",
]

FORMATS = ("array_record", "huggingface", "images", "jsonl", "npy", "npz", "parquet")
"""Every format `chute inspect` reads."""
CONVERTIBLE_FORMATS = ("huggingface", "images", "jsonl", "npy", "npz", "parquet")
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
}
_OWN_WORDING = ("images", "jsonl")
"""Formats whose sources word their errors as the CLI does: shown as they are."""
_GLOB_CHARS = ("*", "?", "[")


_HF_FILES = ("state.json", "dataset_dict.json")
"""What `Dataset.save_to_disk` / `DatasetDict.save_to_disk` write into the folder."""


def _folder_format(folder: str) -> str | None:
    names = os.listdir(folder)
    if any(name in names for name in _HF_FILES):  # Before images: splits are subfolders.
        return "huggingface"
    for suffix in (".array_record", ".parquet", ".parq"):
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
    suffix = os.path.splitext(path)[1].lower()
    if suffix not in _SUFFIXES:
        usage_error(
            f"unknown format of {path!r} (suffix {suffix or 'none'!r}); known suffixes: "
            f"{', '.join(sorted(_SUFFIXES))}, or a folder; pass --format to choose one"
        )
    return _SUFFIXES[suffix]


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

    @property
    def num_records(self) -> int:
        """The number of records."""
        return len(self.source)

    def fingerprint(self) -> str:
        """A hash of the input files' names, sizes and modification times."""
        digest = hashlib.sha256(self.format.encode())
        for file in self.fingerprint_files:
            stat = os.stat(file)
            digest.update(f"\0{os.path.abspath(file)}\0{stat.st_size}\0{stat.st_mtime_ns}".encode())
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


def open_input(path: str, format: str | None = None) -> Input:
    r"""Opens `path` (format detected unless given) as an `Input`.

    Raises:
        CliError: a missing path or unknown format (exit code 2); a file that cannot be
            read as its format (1).

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "x.jsonl")
        >>> with open(path, "w") as file:
        ...     _ = file.write('[1, 2]\n')
        >>> opened = open_input(path)
        >>> opened.format, opened.read([0])
        ('jsonl', [[1, 2]])
    """
    kind = detect_format(path, format)
    if kind == "images" and not os.path.isdir(path):
        usage_error(f"--format images needs a folder of class subfolders, got {path!r}")
    is_glob = any(char in path for char in _GLOB_CHARS)
    if kind != "images" and not is_glob and not os.path.exists(path):
        usage_error(f"{path!r} does not exist (working directory {os.getcwd()!r})")
    if is_glob and not glob.glob(path, recursive=True):
        usage_error(f"the pattern {path!r} matches no file (working directory {os.getcwd()!r})")
    try:
        return _open(path, kind)
    except CliError:
        raise
    except Exception as error:
        denied = _permission_denied(error)
        if denied is not None:
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


def _open(path: str, kind: str) -> Input:
    if kind == "jsonl":
        jsonl = JsonLinesSource(path)
        return Input(path, kind, jsonl, [path], [len(jsonl)], [path])
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
            matches = sorted(glob.glob(path, recursive=True))
            entries = [m for m in matches if ".array_record" in m or ".arrayrecord" in m]
            entries = entries or path
        records = ArrayRecordSource(entries)
        files = [i.filename for i in records.instructions]
        counts = [i.num_records for i in records.instructions]
        return Input(path, kind, records, files, counts, files)
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
