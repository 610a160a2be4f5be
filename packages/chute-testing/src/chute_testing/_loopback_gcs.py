"""`LoopbackGCS`: gcp-storage-emulator on loopback, completed to answer obstore like GCS."""

from __future__ import annotations

import json
import urllib.parse
from typing import IO, TYPE_CHECKING

from ._loopback import _LoopbackServer

if TYPE_CHECKING:
    from obstore.store import ClientConfig, GCSStore, RetryConfig

__all__ = ["LoopbackGCS"]


class LoopbackGCS(_LoopbackServer):
    """A GCS server (gcp-storage-emulator, in memory) on 127.0.0.1, in a child process.

    The emulator serves GCS's JSON API; obstore speaks the XML API, which the emulator
    lacks almost entirely. The child runs the emulator through
    `chute_testing._gcs_emulator`, which adds what obstore uses (object headers, HEAD,
    conditional and range reads, uploads with generation preconditions, deletes, copies,
    multipart uploads, listing) and serves requests concurrently over kept-alive
    connections; its docstrings list each gap. Start-up takes about 0.1 s. Buckets made
    by `create_bucket` keep no soft-deleted copies, so a deleted object's memory is freed.
    Needs `gcp-storage-emulator`.

    Google's clients find the server through `env` (`STORAGE_EMULATOR_HOST`), obstore
    through `store()`. gcsfs (2026.10) first asks a bucket's layout over gRPC, which an
    emulator cannot answer: each lookup waits 60 s. Set
    `GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT=false` before importing gcsfs to skip it.

    Args:
        start_timeout: seconds to wait for the server to answer.

    Example:
        >>> import obstore
        >>> with LoopbackGCS() as gcs:
        ...     gcs.create_bucket("data")
        ...     gcs.put("data", "a/x.bin", b"hello")
        ...     obstore.get(gcs.store("data"), "a/x.bin").bytes().to_bytes()
        b'hello'
    """

    _KIND = "gcs"
    _SCHEME = "gs"
    _NEEDS = "gcp-storage-emulator"
    _MODULES = ("gcp_storage_emulator",)

    @property
    def env(self) -> dict[str, str]:
        """`STORAGE_EMULATOR_HOST`, read by Google's client libraries (and gcsfs)."""
        return {"STORAGE_EMULATOR_HOST": self.endpoint}

    def store(
        self,
        bucket: str,
        *,
        endpoint: str | None = None,
        client_options: ClientConfig | None = None,
        retry_config: RetryConfig | None = None,
    ) -> GCSStore:
        """An obstore `GCSStore` of `bucket` on this server (needs obstore).

        obstore reads no environment variable naming an emulator: its `base_url` is set
        here. Requests carry a static bearer token, which the server ignores: with
        `skip_signature` instead, obstore 0.12 skips credentials on reads only, and an
        upload asks the cloud metadata server for a token (and fails).

        Args:
            bucket: the bucket.
            endpoint: where to send requests instead of `self.endpoint` (a `FaultProxy`'s).
            client_options: obstore's client options; `allow_http` is always set.
            retry_config: obstore's retry settings (`{"max_retries": 0}`: no retries).

        Returns:
            The store.
        """
        from obstore.store import GCSStore

        return GCSStore(
            bucket,
            config={"base_url": endpoint or self.endpoint, "bearer_token": "chute-testing"},
            client_options={**(client_options or {}), "allow_http": True},
            retry_config=retry_config,
        )

    @staticmethod
    def _object_path(bucket: str, key: str) -> str:
        return f"/storage/v1/b/{bucket}/o/{urllib.parse.quote(key, safe='')}"

    def create_bucket(self, bucket: str) -> None:
        """Creates `bucket`, without soft delete; one that exists already is kept."""
        body = json.dumps({"name": bucket}).encode()
        headers = {"Content-Type": "application/json"}
        status, _, answer = self._request("POST", "/storage/v1/b?project=chute", body, headers)
        if status == 409:
            return
        if status != 200:
            raise self._refused(f"creating bucket {bucket!r}", status, answer)
        # Real GCS applies the fields sent with a new bucket; the emulator ignores them
        # (its soft delete would keep every deleted object in memory), but patches them.
        policy = json.dumps({"softDeletePolicy": {"retentionDurationSeconds": "0"}}).encode()
        self._checked(
            "disabling soft delete", (200,), "PATCH", f"/storage/v1/b/{bucket}", policy, headers
        )

    def _upload(self, bucket: str, key: str, body: bytes | IO[bytes], size: int) -> None:
        query = urllib.parse.urlencode({"uploadType": "media", "name": key})
        headers = {"Content-Type": "application/octet-stream", "Content-Length": str(size)}
        what = f"uploading {self.url(bucket, key)}"
        path = f"/upload/storage/v1/b/{bucket}/o?{query}"
        self._checked(what, (200,), "POST", path, body, headers)

    def get(self, bucket: str, key: str) -> bytes:
        """The bytes of `key` in `bucket`."""
        path = self._object_path(bucket, key) + "?alt=media"
        return self._checked(f"reading {self.url(bucket, key)}", (200,), "GET", path)

    def delete(self, bucket: str, key: str) -> None:
        """Deletes `key` from `bucket`; a missing key is not an error."""
        what = f"deleting {self.url(bucket, key)}"
        self._checked(what, (200, 204, 404), "DELETE", self._object_path(bucket, key))
