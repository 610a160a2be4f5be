"""The inputs `chute convert` and `chute inspect` read, each as a random-access source.

Formats: Parquet, NumPy `.npy` / `.npz`, JSON Lines, folders of PNG / JPEG images laid
out like torchvision's `ImageFolder` (one subfolder per class), and ArrayRecord.
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import io
import json
import mmap
import os
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from ._common import CliError, data_error, usage_error

__all__ = [
    "CONVERTIBLE_FORMATS",
    "FORMATS",
    "ImageFolderSource",
    "Input",
    "JsonLinesSource",
    "detect_format",
    "open_input",
]

FORMATS = ("array_record", "images", "jsonl", "npy", "npz", "parquet")
"""Every format `chute inspect` reads."""
CONVERTIBLE_FORMATS = ("images", "jsonl", "npy", "npz", "parquet")
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
_IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
_IMAGE_MAGICS = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff")
_GLOB_CHARS = ("*", "?", "[")


def _folder_format(folder: str) -> str | None:
    names = os.listdir(folder)
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
                ".parquet file and no class subfolders of images; pass --format"
            )
        return found
    suffix = os.path.splitext(path)[1].lower()
    if suffix not in _SUFFIXES:
        usage_error(
            f"unknown format of {path!r} (suffix {suffix or 'none'!r}); known suffixes: "
            f"{', '.join(sorted(_SUFFIXES))}, or a folder; pass --format to choose one"
        )
    return _SUFFIXES[suffix]


class JsonLinesSource:
    r"""The objects of a JSON Lines file, one a line (blank lines skipped), by index.

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "a.jsonl")
        >>> with open(path, "w") as file:
        ...     _ = file.write('{"a": 1}\n\n{"a": 2}\n')
        >>> source = JsonLinesSource(path)
        >>> len(source), source.__getitems__([1, 0])
        (2, [{'a': 2}, {'a': 1}])
    """

    def __init__(self, path: str) -> None:
        self.path = path
        with open(path, "rb") as file:
            size = os.fstat(file.fileno()).st_size
            self._data: Any = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
        raw = np.frombuffer(self._data, np.uint8) if size else np.zeros(0, np.uint8)
        ends = np.flatnonzero(raw == ord("\n"))
        if size and raw[-1] != ord("\n"):
            ends = np.append(ends, size)
        starts = np.concatenate([[0], ends[:-1] + 1]).astype(np.int64) if len(ends) else ends
        lengths = ends - starts
        blank = lengths == 0
        crlf = lengths == 1
        if crlf.any():
            blank |= crlf & (raw[np.minimum(starts, max(size - 1, 0))] == ord("\r"))
        keep = np.flatnonzero(~blank)
        self._starts, self._ends, self._lines = starts[keep], ends[keep], keep + 1

    def __len__(self) -> int:
        return len(self._starts)

    def __getitems__(self, indices: Sequence[int]) -> list[Any]:
        out = []
        for index in indices:
            start, end = int(self._starts[index]), int(self._ends[index])
            try:
                out.append(json.loads(self._data[start:end]))
            except (ValueError, UnicodeDecodeError) as error:
                line = int(self._lines[index])
                data_error(f"{self.path!r} line {line} is not valid JSON: {error}")
            except RecursionError:
                line = int(self._lines[index])
                data_error(
                    f"{self.path!r} line {line} nests arrays or objects too deeply to decode "
                    f"(deeper than Python's recursion limit, {sys.getrecursionlimit()})"
                )
        return out


class ImageFolderSource:
    r"""PNG / JPEG files in class subfolders, as `{"image": bytes, "label", "path"}`.

    Laid out like torchvision's `ImageFolder`: `root/<class>/**/<file>`; classes are the
    subfolders in sorted order, and a record's `label` is its class's position there.
    `image` holds the file's encoded bytes unchanged; each is checked to be a PNG or a
    JPEG (and decoded by Pillow, when installed, to catch corrupt files).

    Example:
        >>> import os, tempfile
        >>> root = tempfile.mkdtemp()
        >>> os.makedirs(os.path.join(root, "cat"))
        >>> with open(os.path.join(root, "cat", "1.png"), "wb") as file:
        ...     _ = file.write(b"\x89PNG\r\n\x1a\n...")
        >>> source = ImageFolderSource(root, check=False)
        >>> source.classes, source.__getitems__([0])[0]["path"]
        (['cat'], 'cat/1.png')
    """

    def __init__(self, root: str, *, check: bool = True) -> None:
        self.root = root
        self.check = check
        self.classes = sorted(
            entry.name
            for entry in os.scandir(root)
            if entry.is_dir() and not entry.name.startswith(".")
        )
        self.samples: list[tuple[str, int]] = []
        for label, name in enumerate(self.classes):
            found: list[str] = []
            # onerror: a folder that cannot be listed is an error, not an empty folder.
            walk = os.walk(os.path.join(root, name), onerror=_raise, followlinks=True)
            for folder, subfolders, files in walk:
                subfolders.sort()
                _refuse_loops(folder, subfolders)
                rel = os.path.relpath(folder, root).replace(os.sep, "/")
                found.extend(f"{rel}/{f}" for f in sorted(files) if _is_image_name(f))
            if not found:
                data_error(
                    f"class folder {os.path.join(root, name)!r} holds no PNG or JPEG image "
                    "(every subfolder of an image folder is a class, as in torchvision's "
                    "ImageFolder)"
                )
            self.samples.extend((path, label) for path in found)

    def __len__(self) -> int:
        return len(self.samples)

    def __getitems__(self, indices: Sequence[int]) -> list[dict[str, Any]]:
        out = []
        for index in indices:
            path, label = self.samples[index]
            with open(os.path.join(self.root, path), "rb") as file:
                data = file.read()
            if self.check:
                _check_image(os.path.join(self.root, path), data)
            out.append({"image": data, "label": label, "path": path})
        return out


def _refuse_loops(folder: str, subfolders: list[str]) -> None:
    """Refuses a subfolder that is a symbolic link to `folder` or to a folder above it.

    Following it (as `os.walk(followlinks=True)` does) would list the same images again
    and again, under the wrong class, until the path is too long to resolve.
    """
    here = os.path.realpath(folder)
    for name in subfolders:
        path = os.path.join(folder, name)
        if not os.path.islink(path):
            continue
        target = os.path.realpath(path)
        if here == target or here.startswith(target.rstrip(os.sep) + os.sep):
            data_error(
                f"{path!r} is a symbolic link to {target!r}, which holds it: following it "
                "would loop; remove the link or point it elsewhere"
            )


def _is_image_name(name: str) -> bool:
    return name.lower().endswith(_IMAGE_SUFFIXES) and not name.startswith(".")


def _check_image(path: str, data: bytes) -> None:
    if not data.startswith(_IMAGE_MAGICS):
        data_error(f"{path!r} is not a PNG or JPEG image (it starts with {data[:8]!r})")
    try:
        from PIL import Image  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return
    try:
        with Image.open(io.BytesIO(data)) as image:
            image.load()
    except Exception as error:
        data_error(f"{path!r} is a corrupt image: {error}")


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
            return list(self.source.__getitems__(list(indices)))
        except CliError:
            raise
        except Exception as error:
            shown = f"{indices[0]}..{indices[-1]}" if len(indices) > 1 else f"{indices[0]}"
            data_error(f"cannot read records {shown} of {self.path!r}: {error}")


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
        what = {"images": "an image folder", "array_record": "ArrayRecord"}.get(kind, kind)
        data_error(f"cannot read {path!r} as {what}: {error}")


def _raise(error: OSError) -> None:
    raise error


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
        return Input(path, kind, images, [path], [len(images)], files, images.classes)
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
