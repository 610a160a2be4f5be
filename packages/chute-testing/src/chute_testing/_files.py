"""Small files for tests, written by hand: PNG images (no Pillow needed) and corruptions.

Example:
    >>> png_bytes(2, 1, 7)[1:4]
    b'PNG'
    >>> import random
    >>> len(corrupt(bytes(100), random.Random(0))) <= 100
    True
"""

from __future__ import annotations

import random
import struct
import zlib
from collections.abc import Iterable

__all__ = ["corrupt", "png", "png_bytes"]


def png(width: int, height: int, rows: Iterable[bytes], *, rgb: bool) -> bytes:
    """A valid 8-bit PNG of `rows` (each `width` grey bytes, or `3 * width` RGB bytes).

    Example:
        >>> image = png(2, 2, [bytes([0, 255]), bytes([255, 0])], rgb=False)
        >>> image[12:16], int.from_bytes(image[16:20], "big")  # The header and its width.
        (b'IHDR', 2)
    """

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    scanlines = b"".join(b"\0" + row for row in rows)  # Filter type 0 on each row.
    header = struct.pack(">IIBBBBB", width, height, 8, 2 if rgb else 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(scanlines))
        + chunk(b"IEND", b"")
    )


def png_bytes(width: int, height: int, value: int) -> bytes:
    """A valid RGB PNG of one colour (`value % 256` in each channel).

    Example:
        >>> png_bytes(3, 2, 300) == png(3, 2, [bytes([44]) * 9] * 2, rgb=True)
        True
    """
    row = bytes([value % 256]) * (3 * width)
    return png(width, height, (row for _ in range(height)), rgb=True)


def corrupt(data: bytes, rng: random.Random) -> bytes:
    """`data` with bits flipped, a range overwritten, a truncation or a zeroed tail.

    Which one, and where, is drawn from `rng` (so a fuzz run is repeated by its seed).

    Example:
        >>> import random
        >>> corrupt(bytes(8), random.Random(1)) == corrupt(bytes(8), random.Random(1))
        True
    """
    out = bytearray(data)
    how = rng.choice(["flip", "overwrite", "truncate", "zero-tail"])
    if how == "flip":
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(out))
            out[i] ^= 1 << rng.randrange(8)
    elif how == "overwrite":
        start = rng.randrange(len(out))
        length = rng.randint(1, 64)
        out[start : start + length] = bytes(rng.randrange(256) for _ in range(length))
    elif how == "truncate":
        del out[rng.randrange(1, len(out)) :]
    else:
        start = rng.randrange(len(out))
        out[start:] = bytes(len(out) - start)
    return bytes(out)
