"""`ImageFolderSource`: PNG and JPEG files in class subfolders, as labelled records.

The layout of torchvision's `ImageFolder`: `root/<class>/**/<image>`. Opening the
source lists the files once; a read opens and reads only the files it is asked for, so
the source holds no open file and pickles as its list of files. Images stay encoded:
decoding them (with Pillow, or on the device) is a transform's job.
"""

from __future__ import annotations

import os
from typing import Any

from chute_core import CorruptRecordError, SourceFileError, SourceFileNotFoundError

from ._base import Source

__all__ = ["ImageFolderSource"]

_IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")  # What an image file is named (in lower case).
_IMAGE_MAGICS = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff")  # How PNG and JPEG files start.
_LAYOUT = "every subfolder of an image folder is a class, as in torchvision's ImageFolder"


class ImageFolderSource(Source[dict[str, Any]]):
    r"""PNG and JPEG files in class subfolders, as `{"image": bytes, "label": int, "path": str}`.

    Laid out like torchvision's `ImageFolder`: `root/<class>/**/<file>`. The classes are
    the subfolders of `root` (not hidden ones) in sorted order, and a record's `label` is
    its class's position there. Files are listed once, when the source is opened: every
    `.png`, `.jpg` or `.jpeg` file (any case, not hidden) under a class folder, nested
    folders included and symbolic links followed, in sorted order, class by class.
    Other files are ignored.

    A record's `image` holds the file's encoded bytes unchanged and `path` its path
    relative to `root`, with `/` between folders. With `check=True` (the default) a
    read also checks that the bytes start like a PNG or a JPEG file (a cheap check of
    the first bytes; nothing is decoded).

    Reads are thread-safe and open each file only while reading it; pickling the source
    sends its list of files.

    Args:
        root: the folder of class subfolders. Kept as given for messages and `repr`; a
            relative path is resolved now.
        check: check that each file read starts like a PNG or JPEG file.

    Raises:
        SourceFileNotFoundError: `root` does not exist.
        SourceFileError: `root` is not a folder, holds no class subfolder, a class folder
            holds no image, or a symbolic link inside loops back to a folder above it.
        TypeError: `root` is not a str or `os.PathLike`.

    Reads raise `CorruptRecordError` (with `check=True`) for a file that is not a PNG or
    JPEG image, naming it, and `OSError` for a file that can no longer be read.

    Example:
        >>> import os, tempfile
        >>> root = tempfile.mkdtemp()
        >>> png, jpeg = b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff"  # How the files start.
        >>> for name, data in [("cat/1.png", png), ("cat/more/2.png", png), ("dog/1.jpg", jpeg)]:
        ...     os.makedirs(os.path.dirname(os.path.join(root, name)), exist_ok=True)
        ...     with open(os.path.join(root, name), "wb") as file:
        ...         _ = file.write(data)
        >>> source = ImageFolderSource(root)
        >>> source.classes, len(source)
        (('cat', 'dog'), 3)
        >>> record = source[-1]
        >>> record["label"], record["path"], record["image"]
        (1, 'dog/1.jpg', b'\xff\xd8\xff')
        >>> [record["path"] for record in source.__getitems__([1, 0])]
        ['cat/more/2.png', 'cat/1.png']
    """

    def __init__(self, root: str | os.PathLike[str], *, check: bool = True) -> None:
        if not isinstance(root, str | os.PathLike) or not isinstance(os.fspath(root), str):
            raise TypeError(
                f"ImageFolderSource: root must be a str or os.PathLike of a folder, got "
                f"{type(root).__name__} {root!r}."
            )
        self._root = os.fspath(root)
        self._folder = os.path.abspath(self._root)
        self._check = bool(check)
        # Listed through the path as given, so that errors (PermissionError too) name it.
        self._classes = _classes(self._root)
        samples: list[tuple[str, int]] = []
        for label, name in enumerate(self._classes):
            samples.extend((path, label) for path in _images(self._root, name))
        self._samples = tuple(samples)

    @property
    def root(self) -> str:
        """The folder of class subfolders, as given."""
        return self._root

    @property
    def classes(self) -> tuple[str, ...]:
        """The class names, sorted: a record's `label` is its class's position here."""
        return self._classes

    @property
    def samples(self) -> tuple[tuple[str, int], ...]:
        """Every record's `(path, label)`, in record order; paths relative to `root`."""
        return self._samples

    def __len__(self) -> int:
        return len(self._samples)

    def _read(self, index: int) -> dict[str, Any]:
        path, label = self._samples[index]
        with open(os.path.join(self._folder, path), "rb") as file:
            data = file.read()
        if self._check and not data.startswith(_IMAGE_MAGICS):
            raise CorruptRecordError(
                f"{os.path.join(self._root, path)!r} is not a PNG or JPEG image "
                f"(it starts with {data[:8]!r})"
            )
        return {"image": data, "label": label, "path": path}

    def _params(self) -> dict[str, Any]:
        params: dict[str, Any] = {"root": self._root, "classes": len(self._classes)}
        params["len"] = len(self._samples)
        if not self._check:
            params["check"] = False
        return params


def _classes(root: str) -> tuple[str, ...]:
    if not os.path.exists(root):
        raise SourceFileNotFoundError(
            f"image folder {root!r} does not exist (working directory {os.getcwd()!r})."
        )
    if not os.path.isdir(root):
        raise SourceFileError(
            f"{root!r} is a file; ImageFolderSource needs a folder of class subfolders "
            "(root/<class>/<image>)."
        )
    with os.scandir(root) as entries:
        names = [e.name for e in entries if e.is_dir() and not e.name.startswith(".")]
    if not names:
        raise SourceFileError(
            f"image folder {root!r} holds no class subfolder; lay the images out as "
            f"root/<class>/<image> ({_LAYOUT})"
        )
    return tuple(sorted(names))


def _images(root: str, name: str) -> list[str]:
    """The image files of class `name`, relative to the root, sorted folder by folder."""
    found: list[str] = []
    # onerror: a folder that cannot be listed is an error, not an empty folder.
    walk = os.walk(os.path.join(root, name), onerror=_raise, followlinks=True)
    for here, subfolders, files in walk:
        subfolders.sort()
        _refuse_loops(here, subfolders)
        rel = os.path.relpath(here, root).replace(os.sep, "/")
        found.extend(f"{rel}/{file}" for file in sorted(files) if _is_image_name(file))
    if not found:
        raise SourceFileError(
            f"class folder {os.path.join(root, name)!r} holds no PNG or JPEG image ({_LAYOUT})"
        )
    return found


def _refuse_loops(here: str, subfolders: list[str]) -> None:
    """Refuses a subfolder that is a symbolic link to `here` or to a folder above it.

    Following it (as `os.walk(followlinks=True)` does) would list the same images again
    and again, under the wrong class, until the path is too long to resolve.
    """
    real = os.path.realpath(here)
    for name in subfolders:
        path = os.path.join(here, name)
        if not os.path.islink(path):
            continue
        target = os.path.realpath(path)
        if real == target or real.startswith(target.rstrip(os.sep) + os.sep):
            raise SourceFileError(
                f"{path!r} is a symbolic link to {target!r}, which holds it: following it "
                "would loop; remove the link or point it elsewhere"
            )


def _is_image_name(name: str) -> bool:
    return name.lower().endswith(_IMAGE_SUFFIXES) and not name.startswith(".")


def _raise(error: OSError) -> None:
    raise error
