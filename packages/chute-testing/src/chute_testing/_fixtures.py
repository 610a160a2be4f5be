"""Loopback object-storage servers as pytest fixtures (bodies of session-scoped fixtures)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TypeVar

from ._loopback import LoopbackS3, _LoopbackServer
from ._loopback_gcs import LoopbackGCS

__all__ = ["loopback_gcs_fixture", "loopback_s3_fixture"]

_Server = TypeVar("_Server", bound=_LoopbackServer)


def _serve_or_skip(server: _Server) -> Iterator[_Server]:
    import pytest  # Only ever run by pytest.

    missing = server.missing()
    if missing is not None:
        pytest.skip(missing)
    with server:
        yield server


def loopback_s3_fixture() -> Iterator[LoopbackS3]:
    """The body of a session-scoped pytest fixture: a running `LoopbackS3`.

    Skips the tests that use it, saying what to install, when moto[server] is missing.
    chute's `conftest.py` files declare the fixture `loopback_s3` with it.

    Example:
        In a `conftest.py`:

        ```python
        import pytest
        from chute_testing import loopback_s3_fixture

        loopback_s3 = pytest.fixture(scope="session", name="loopback_s3")(loopback_s3_fixture)
        ```
    """
    yield from _serve_or_skip(LoopbackS3())


def loopback_gcs_fixture() -> Iterator[LoopbackGCS]:
    """The body of a session-scoped pytest fixture: a running `LoopbackGCS`.

    Skips the tests that use it, saying what to install, when gcp-storage-emulator is
    missing. chute's `conftest.py` files declare the fixture `loopback_gcs` with it.

    Example:
        ```python
        import pytest
        from chute_testing import loopback_gcs_fixture

        loopback_gcs = pytest.fixture(scope="session", name="loopback_gcs")(loopback_gcs_fixture)
        ```
    """
    yield from _serve_or_skip(LoopbackGCS())
