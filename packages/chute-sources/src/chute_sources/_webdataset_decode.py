"""Decoding WebDataset fields by their extension: text, integers, JSON, NumPy, images.

The decoders are module-level functions, so a source that holds them pickles into
worker processes. Pickled Python objects (`.pyd`, `.pickle`) are never decoded: that
would run code from the data; such fields stay bytes.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from chute_core import CorruptRecordError

__all__ = ["FieldDecoder", "decoder_for", "webdataset_decoders"]

FieldDecoder = Callable[[bytes], Any]
"""A function from a field's bytes to its value."""

_TEXT = ("txt", "text", "transcript")
_INTEGERS = ("cls", "cls2", "class", "count", "index", "inx", "id")
_JSON = ("json", "jsn")
_IMAGES = ("jpg", "jpeg", "png", "ppm", "pgm", "pbm", "pnm", "bmp", "webp", "tif", "tiff")


def decode_text(data: bytes) -> str:
    """A field's bytes as UTF-8 text."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise CorruptRecordError(f"the field is not UTF-8 text: {error}") from error


def decode_int(data: bytes) -> int:
    """A field's bytes as an integer written in decimal (a class label)."""
    try:
        return int(data.decode("utf-8").strip())
    except ValueError as error:
        raise CorruptRecordError(f"the field is not an integer: {bytes(data[:40])!r}") from error


def decode_json(data: bytes) -> Any:
    """A field's bytes as a JSON value."""
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as error:
        raise CorruptRecordError(f"the field is not valid JSON: {error}") from error


def decode_npy(data: bytes) -> Any:
    """A field's bytes as a NumPy array written by `numpy.save` (no pickled objects)."""
    try:
        return np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, EOFError) as error:
        raise CorruptRecordError(f"the field is not a .npy array: {error}") from error


def decode_npz(data: bytes) -> dict[str, Any]:
    """A field's bytes as the arrays of a `.npz` file, by name."""
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
            return {name: arrays[name] for name in arrays.files}
    except (ValueError, OSError, EOFError) as error:
        raise CorruptRecordError(f"the field is not a .npz file: {error}") from error


def decode_image(data: bytes) -> Any:
    """A field's bytes as an RGB image, a uint8 array of shape (height, width, 3) (Pillow)."""
    from PIL import Image  # type: ignore[import-not-found, unused-ignore]

    try:
        with Image.open(io.BytesIO(data)) as image:
            return np.asarray(image.convert("RGB"))
    except (OSError, ValueError, SyntaxError) as error:
        raise CorruptRecordError(f"the field is not an image Pillow can read: {error}") from error


def webdataset_decoders(*, images: bool = False) -> dict[str, FieldDecoder]:
    """The decoders of `WebDatasetSource(decode=True)`, by field extension.

    `txt`, `text`, `transcript`: `str`; `cls`, `cls2`, `class`, `count`, `index`,
    `inx`, `id`: `int`; `json`, `jsn`: the JSON value; `npy`: a NumPy array; `npz`:
    a dict of arrays. With `images=True` also `jpg`, `jpeg`, `png`, `ppm`, `pgm`,
    `pbm`, `pnm`, `bmp`, `webp`, `tif`, `tiff`: an RGB uint8 array (height, width, 3),
    decoded by Pillow (which must be installed). Other fields stay bytes. Add to or
    replace entries, and pass the dict as `decode`.

    Raises:
        ImportError: `images=True` and Pillow is not installed.

    Example:
        >>> decoders = webdataset_decoders()
        >>> decoders["cls"](b"7"), decoders["json"](b'{"a": [1]}'), "png" in decoders
        (7, {'a': [1]}, False)
    """
    found: dict[str, FieldDecoder] = {}
    found.update(dict.fromkeys(_TEXT, decode_text))
    found.update(dict.fromkeys(_INTEGERS, decode_int))
    found.update(dict.fromkeys(_JSON, decode_json))
    found.update(npy=decode_npy, npz=decode_npz)
    if images:
        try:
            import PIL  # type: ignore[import-not-found, unused-ignore]  # noqa: F401
        except ImportError:
            raise ImportError(
                "webdataset_decoders(images=True) decodes images with Pillow, which is not "
                "installed: pip install pillow (or keep images as bytes: images=False)."
            ) from None
        found.update(dict.fromkeys(_IMAGES, decode_image))
    return found


def decoder_for(field: str, decoders: Mapping[str, FieldDecoder]) -> FieldDecoder | None:
    """The decoder of `field`: of its whole name, else of its last extension ("seg.png").

    Example:
        >>> decoder_for("seg.json", webdataset_decoders()) is decode_json
        True
    """
    found = decoders.get(field)
    if found is None and "." in field:
        found = decoders.get(field.rsplit(".", 1)[1])
    return found
