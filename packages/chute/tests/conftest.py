"""Helpers of this package's tests: small image files written without Pillow."""

import struct
import zlib

import pytest


def png_bytes(width, height, value):
    """A valid RGB PNG of one colour, written without Pillow."""

    def chunk(kind, data):
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    rows = b"".join(b"\0" + bytes([value % 256]) * (3 * width) for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


@pytest.fixture(name="png_bytes")
def _png_bytes():
    return png_bytes
