"""`StorageOptions`: where and how chute reads objects in buckets."""

from __future__ import annotations

import dataclasses
import os

from chute_core import InvalidArgumentError

__all__ = ["DEFAULT_CACHE_BYTES", "StorageOptions", "default_cache_dir"]

DEFAULT_CACHE_BYTES = 32 << 30
"""The shard cache's default size limit (32 GiB)."""


def default_cache_dir() -> str:
    """`$CHUTE_CACHE_DIR`, else `$XDG_CACHE_HOME/chute/objects`, else `~/.cache/chute/objects`.

    Example:
        >>> default_cache_dir().endswith(os.path.join("chute", "objects")) or True
        True
    """
    explicit = os.environ.get("CHUTE_CACHE_DIR")
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "chute", "objects")


@dataclasses.dataclass(frozen=True)
class StorageOptions:
    """How chute reaches objects in `s3://` and `gs://` buckets, and how hard it tries.

    Every field left at None comes from the cloud's standard environment: for S3,
    `AWS_ENDPOINT_URL` (or `AWS_ENDPOINT_URL_S3`), `AWS_ACCESS_KEY_ID`,
    `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION` (or `AWS_DEFAULT_REGION`),
    and the instance's metadata service; for GCS, `STORAGE_EMULATOR_HOST`,
    `GOOGLE_APPLICATION_CREDENTIALS` and application default credentials. Options are
    pickled with a source, so worker processes read with the same settings.

    Options say how objects are reached, never which data they hold: they are left out
    of pipeline descriptions, fingerprints and checkpoints (a checkpoint restores after
    temporary credentials rotate or the endpoint moves), and the credentials are left
    out of `repr` too. What identifies a source's data is its objects' URLs, sizes and
    versions (ETags).

    Attributes:
        endpoint: the server's base URL (e.g. `http://127.0.0.1:9000` for a local S3
            server); overrides the environment.
        region: the S3 region.
        access_key_id: S3 access key (with `secret_access_key`).
        secret_access_key: S3 secret key.
        session_token: S3 session token of temporary credentials.
        service_account_path: a GCS service account key file.
        anonymous: read public buckets without credentials (no request signing).
        max_attempts: attempts per request before a transient failure (HTTP 5xx or 429,
            a timeout, a connection reset) is raised; at least 1.
        initial_backoff: seconds before the first retry; doubled each retry, with
            jitter, up to `max_backoff`.
        max_backoff: the longest wait between two attempts, in seconds.
        request_timeout: seconds a request may take before it counts as failed.
        connect_timeout: seconds to open a connection.
        cache_dir: the folder of the per-machine shard cache (ArrayRecord shards are
            read from local copies); default `default_cache_dir()`.
        cache_bytes: the cache's size limit; the least recently used shards are
            evicted beyond it.
        prefetch_bytes: bytes fetched ahead of the reads (plan-aware prefetch) at most,
            per process.

    Example:
        >>> options = StorageOptions(endpoint="http://127.0.0.1:9000", max_attempts=3)
        >>> options.max_attempts, options.anonymous
        (3, False)
        >>> "secret" in repr(StorageOptions(access_key_id="id", secret_access_key="secret"))
        False
    """

    endpoint: str | None = None
    region: str | None = None
    # Credentials never leave memory: not in `repr`, pipeline descriptions, fingerprints
    # or checkpoints (see `__chute_identity__`).
    access_key_id: str | None = dataclasses.field(default=None, repr=False)
    secret_access_key: str | None = dataclasses.field(default=None, repr=False)
    session_token: str | None = dataclasses.field(default=None, repr=False)
    service_account_path: str | None = None
    anonymous: bool = False
    max_attempts: int = 6
    initial_backoff: float = 0.1
    max_backoff: float = 5.0
    request_timeout: float = 60.0
    connect_timeout: float = 10.0
    cache_dir: str | None = None
    cache_bytes: int = DEFAULT_CACHE_BYTES
    prefetch_bytes: int = 256 << 20

    def __post_init__(self) -> None:
        for name in ("max_attempts", "cache_bytes", "prefetch_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidArgumentError(
                    f"StorageOptions: {name} must be an int, got {type(value).__name__}."
                )
        if self.max_attempts < 1:
            raise InvalidArgumentError("StorageOptions: max_attempts must be at least 1.")
        if self.cache_bytes < 1 or self.prefetch_bytes < 0:
            raise InvalidArgumentError(
                "StorageOptions: cache_bytes must be positive and prefetch_bytes >= 0."
            )
        for name in ("initial_backoff", "max_backoff", "request_timeout", "connect_timeout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise InvalidArgumentError(
                    f"StorageOptions: {name} must be a number of seconds >= 0, got {value!r}."
                )
        if (self.access_key_id is None) != (self.secret_access_key is None):
            raise InvalidArgumentError(
                "StorageOptions: give access_key_id and secret_access_key together."
            )

    def __chute_identity__(self) -> None:
        """None: how a bucket is reached never identifies the data read from it."""
        return None

    @property
    def cache_folder(self) -> str:
        """The shard cache's folder (`cache_dir` or the default)."""
        return self.cache_dir if self.cache_dir is not None else default_cache_dir()
