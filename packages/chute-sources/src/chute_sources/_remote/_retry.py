"""Retrying a request on transient failures, with exponential backoff and jitter."""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable
from typing import TypeVar

from chute_core import (
    ObjectChangedError,
    ObjectStorageCredentialsError,
    ObjectStorageError,
    ObjectStoragePermissionError,
    ObjectStorageReadError,
    SourceFileNotFoundError,
)
from chute_core.internal import COUNTERS, STORAGE_REQUESTS, STORAGE_RETRIES

from ._options import StorageOptions

__all__ = ["Request", "backoff_delay", "is_transient", "translate", "with_retries"]

T = TypeVar("T")

_STATUS = re.compile(r"status code: (\d{3})|\b(\d{3}) [A-Z][a-z]+")


def _status(error: BaseException) -> int | None:
    match = _STATUS.search(str(error))
    if match is None:
        return None
    return int(match.group(1) or match.group(2))


def is_transient(error: BaseException) -> bool:
    """Whether `error` is worth retrying: HTTP 5xx, 429 or 408, a timeout, a reset.

    Errors that retrying cannot fix (not found, permission, a changed object, other 4xx,
    a bad argument) are not transient.

    Example:
        >>> is_transient(TimeoutError("timed out")), is_transient(FileNotFoundError("k"))
        (True, False)
    """
    from obstore import exceptions as obx  # The optional dependency; present if we got here.

    permanent = (
        obx.NotFoundError,
        obx.PermissionDeniedError,
        obx.UnauthenticatedError,
        obx.PreconditionError,
        obx.NotModifiedError,
        obx.InvalidPathError,
        obx.NotSupportedError,
        obx.AlreadyExistsError,
        FileNotFoundError,
        PermissionError,
        ValueError,
        TypeError,
    )
    if isinstance(error, permanent):
        return False
    status = _status(error)
    if status is None:
        return True  # No HTTP answer: a connection error, a timeout, a reset body.
    return status >= 500 or status in (408, 429)


def backoff_delay(attempt: int, options: StorageOptions, rng: random.Random) -> float:
    """Seconds to wait after failed attempt `attempt` (1-based): doubling, with jitter.

    Half the delay is fixed and half is random, so retries of many clients spread out
    while each still waits long enough for the server to recover.

    Example:
        >>> options = StorageOptions(initial_backoff=0.1, max_backoff=1.0)
        >>> 0.05 <= backoff_delay(1, options, random.Random(0)) <= 0.1
        True
    """
    ceiling = min(options.max_backoff, options.initial_backoff * 2 ** (attempt - 1))
    return float(ceiling / 2 + rng.uniform(0, ceiling / 2))


class Request:
    """What a request is, for messages: the URL and the byte range."""

    __slots__ = ("byte_range", "url", "verb")

    def __init__(self, verb: str, url: str, byte_range: tuple[int, int] | None = None) -> None:
        self.verb = verb
        self.url = url
        self.byte_range = byte_range

    def __str__(self) -> str:
        if self.byte_range is None:
            return f"{self.verb} {self.url}"
        start, end = self.byte_range
        return f"{self.verb} {self.url} bytes [{start}, {end})"


_METADATA_SERVICES = ("169.254.169.254", "metadata.google.internal", "token request")


def missing_credentials(error: BaseException, request: Request) -> Exception | None:
    """The error to raise if `error` says no credentials could be found, else None."""
    text = str(error)
    if not any(service in text for service in _METADATA_SERVICES):
        return None
    if request.url.startswith("s3://"):
        where = (
            "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for "
            "temporary ones), or pass StorageOptions(access_key_id=..., "
            "secret_access_key=...)"
        )
    else:
        where = (
            "set GOOGLE_APPLICATION_CREDENTIALS to a service account key file, or pass "
            "StorageOptions(service_account_path=...)"
        )
    return ObjectStorageCredentialsError(
        f"{request}: no credentials found (not in the environment, and the machine's "
        f"metadata service gave none); {where}, or StorageOptions(anonymous=True) for a "
        f"public bucket. ({text.splitlines()[0]})"
    )


def translate(error: BaseException, request: Request, hint: str = "") -> Exception:
    """An obstore error as chute's own error type, naming the request."""
    from obstore import exceptions as obx

    credentials = missing_credentials(error, request)
    if credentials is not None:
        return credentials
    detail = str(error).split("\n", 1)[0]
    if isinstance(error, obx.PreconditionError):
        return ObjectChangedError(
            f"{request.url} changed after the source was created (its ETag/generation is "
            f"not the one read then), so chute refuses to mix bytes of two versions; "
            f"create the source again. ({detail})"
        )
    status = _status(error)
    if isinstance(error, FileNotFoundError) or status == 404:
        return SourceFileNotFoundError(f"{request.url} does not exist{hint}. ({detail})")
    denied = (obx.PermissionDeniedError, obx.UnauthenticatedError, PermissionError)
    if isinstance(error, denied) or status in (401, 403):
        return ObjectStoragePermissionError(
            f"{request}: permission denied; check the credentials in use (for S3: "
            f"AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN; for GCS: "
            f"GOOGLE_APPLICATION_CREDENTIALS) and the bucket's access rules. ({detail})"
        )
    return ObjectStorageError(f"{request} failed: {detail}")


def with_retries(
    call: Callable[[], T],
    request: Request,
    options: StorageOptions,
    rng: random.Random | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """`call()`, retried on transient failures up to `options.max_attempts` times.

    Every request to a store passes here: each attempt counts one request (label `op`:
    `request.verb` in lower case) and each attempt after a failure one retry, in
    `chute_core.internal.COUNTERS`. (`call()` counts the bytes it reads itself, and
    requests beyond its first, as for the later pages of a listing.)

    Raises:
        ObjectStorageReadError: the last of `options.max_attempts` attempts failed
            transiently; names the URL, the byte range and the attempts.
        ObjectStorageError: (or a subclass, or `SourceFileNotFoundError`) a failure
            that retrying cannot fix, at once.
    """
    rng = rng or random.Random()
    op = request.verb.lower()
    for attempt in range(1, options.max_attempts + 1):
        COUNTERS.add(STORAGE_REQUESTS, op=op)
        try:
            return call()
        except Exception as error:
            if isinstance(error, ObjectStorageError | SourceFileNotFoundError):
                raise
            if not is_transient(error) or missing_credentials(error, request) is not None:
                raise translate(error, request) from error
            if attempt == options.max_attempts:
                detail = str(error).split("\n", 1)[0]
                raise ObjectStorageReadError(
                    f"{request} failed {attempt} time(s) in a row (transient errors; the "
                    f"last: {detail}); raise StorageOptions.max_attempts or check the "
                    "network and the server.",
                    request.url,
                    request.byte_range,
                    attempt,
                ) from error
            sleep(backoff_delay(attempt, options, rng))
            COUNTERS.add(STORAGE_RETRIES)
    raise AssertionError("unreachable")  # pragma: no cover
