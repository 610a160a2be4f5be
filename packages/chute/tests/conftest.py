"""Helpers of this package's tests: small image files written without Pillow."""

import pytest

from chute_testing import png_bytes


@pytest.fixture(name="png_bytes")
def _png_bytes():
    return png_bytes
