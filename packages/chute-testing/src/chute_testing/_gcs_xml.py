"""GCS's XML API over gcp-storage-emulator's storage: what obstore needs and the emulator lacks.

obstore (Rust `object_store`) talks to GCS through the XML API only: `GET`, `HEAD`, `PUT`
and `DELETE` on `{base}/{bucket}/{object}`, `POST` for multipart uploads, and
`GET {base}/{bucket}?list-type=2` to list. gcp-storage-emulator serves the JSON API well
and the XML API barely. `XmlApi` answers these requests itself, on the emulator's own
in-memory `Storage` (so objects uploaded through the JSON API are seen here, and the
other way round), keeping the JSON metadata (`generation`, `md5Hash`, `updated`, ...)
the one source of every header. The gaps it fills, each as 'real GCS does X; the
emulator does not':

- Real GCS sends `ETag` (the quoted hex MD5 of the object), `Last-Modified`,
  `x-goog-generation`, `x-goog-metageneration`, `x-goog-stored-content-length` and
  `x-goog-hash` with every object read; the emulator omits all of them but `x-goog-hash`,
  and that one on whole-object reads only. obstore refuses a response without `ETag` or
  `Last-Modified`, so every read failed.
- Real GCS answers `HEAD` on an object; the emulator has no HEAD route (501).
- Real GCS honours `If-Match`, `If-None-Match`, `If-Modified-Since`,
  `If-Unmodified-Since` and `x-goog-if-generation-match` (412, or 304 on a read); the
  emulator ignores them all and always answers 200.
- Real GCS answers a suffix range (`bytes=-N`) with the object's last N bytes and a
  range that starts past the end with 416; the emulator ignores a suffix range (200, the
  whole object) and answers a range past the end with 206 and an inverted
  `Content-Range`.
- Real GCS answers `?generation=N` naming a generation that is not live with 404 (in a
  bucket without versioning); the emulator serves the live object whatever N is.
- Real GCS sends `ETag` and `x-goog-generation` after an upload (`PUT`), and refuses an
  upload whose `x-goog-if-generation-match` fails (`0`: the object must not exist); the
  emulator sends neither (obstore's `put` failed) and always overwrites.
- Real GCS deletes an object with `DELETE {base}/{bucket}/{object}`, copies one with
  `PUT` and `x-goog-copy-source`, and has XML multipart uploads (`POST ?uploads`,
  `PUT ?partNumber=&uploadId=`, `POST ?uploadId=`); the emulator has none of them.
- Real GCS lists with `GET {base}/{bucket}?list-type=2`, an S3-style `ListBucketResult`;
  the emulator has no such route (501).

On purpose unlike real GCS: every object's ETag is the MD5 of its bytes, multipart
uploads included (real GCS gives those an opaque ETag); error bodies are short XML.

Example:
    >>> from email.message import Message
    >>> from gcp_storage_emulator.handlers import objects
    >>> from gcp_storage_emulator.storage import Storage
    >>> api = XmlApi(Storage(use_memory_fs=True), objects)
    >>> _ = api.storage.create_bucket("data", {"name": "data"})
    >>> int(api.write("data", "x.bin", {}, Message(), b"hello", "http://host").status)
    200
    >>> suffix = Message()
    >>> suffix["Range"] = "bytes=-3"
    >>> reply = api.read("data", "x.bin", {}, suffix, head=False)
    >>> int(reply.status), bytes(reply.body), reply.headers["Content-Range"]
    (206, b'llo', 'bytes 2-4/5')
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
import time
import urllib.parse
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field
from email.message import Message
from http import HTTPStatus
from typing import Any

from ._gcs_objects import (
    STORED_HEADERS,
    Reply,
    add_text,
    error_reply,
    generation_failed,
    object_headers,
    parse_range,
    quoted_etag,
    read_precondition,
    updated,
    write_headers,
    xml_reply,
)

__all__ = ["XmlApi"]

_NAMESPACE = "http://doc.s3.amazonaws.com/2006-03-01"
_MAX_KEYS = 1000


@dataclass
class _Upload:
    bucket: str
    name: str
    headers: Message
    parts: dict[int, bytes] = field(default_factory=dict)


class XmlApi:
    """The XML API requests of obstore, answered on the emulator's `storage`.

    Thread-safe: every access to the storage holds `lock`, which the JSON API handlers
    must hold too. A body is sent after the lock is released, as a view of the stored
    bytes (never copied).
    """

    def __init__(self, storage: Any, objects: Any) -> None:
        self.storage = storage
        self.lock = threading.RLock()
        self._objects = objects  # gcp_storage_emulator.handlers.objects
        self._uploads: dict[str, _Upload] = {}
        self._last_generation = 0

    def _live(self, bucket: str, name: str) -> dict[str, Any] | None:
        live: dict[str, Any] | None = self.storage.objects.get(bucket, {}).get(name)
        return live

    def read(
        self, bucket: str, name: str, query: dict[str, list[str]], headers: Message, *, head: bool
    ) -> Reply:
        """`GET`/`HEAD` of an object, whole or a range, with conditions and generation."""
        with self.lock:
            obj = self._live(bucket, name)
            data: bytes = self.storage.get_file(bucket, name, False) if obj else b""
        if obj is None or query.get("generation", [obj["generation"]])[0] != obj["generation"]:
            return error_reply(
                HTTPStatus.NOT_FOUND, "NoSuchKey", f"No such object: {bucket}/{name}"
            )
        reply = Reply(HTTPStatus.OK, object_headers(obj))
        status = read_precondition(obj, headers)
        if status == HTTPStatus.PRECONDITION_FAILED:
            return error_reply(status, "PreconditionFailed", "a precondition did not hold")
        if status is not None:
            reply.status = status
            return reply
        try:
            span = parse_range(headers.get("Range"), len(data))
        except ValueError:
            reply = error_reply(416, "InvalidRange", "The requested range cannot be satisfied.")
            reply.headers["Content-Range"] = f"bytes */{len(data)}"
            return reply
        first, end = span or (0, len(data))
        if span is not None:
            reply.status = HTTPStatus.PARTIAL_CONTENT
            reply.headers["Content-Range"] = f"bytes {first}-{end - 1}/{len(data)}"
        reply.length = end - first
        reply.body = b"" if head else memoryview(data)[first:end]
        return reply

    def _store(
        self, bucket: str, name: str, data: bytes, headers: Message, base_url: str
    ) -> dict[str, Any]:
        """Creates or replaces an object with a new generation; lock held by the caller."""
        content_type = headers.get("Content-Type") or "application/octet-stream"
        obj: dict[str, Any] = self._objects._make_object_resource(
            base_url, bucket, name, content_type, str(len(data))
        )
        obj = self._objects._checksums(data, obj)
        generation = max(time.time_ns(), self._last_generation + 1)
        self._last_generation = generation
        obj["generation"], obj["id"] = str(generation), f"{bucket}/{name}/{generation}"
        quoted = urllib.parse.quote(name, safe="")
        obj["mediaLink"] = (
            f"{base_url}/download/storage/v1/b/{bucket}/o/{quoted}?generation={generation}"
            "&alt=media"
        )
        for header, key in STORED_HEADERS.items():
            if headers.get(header):
                obj[key] = headers[header]
        metadata = {
            key[len("x-goog-meta-") :]: value
            for key, value in headers.items()
            if key.lower().startswith("x-goog-meta-")
        }
        if metadata:
            obj["metadata"] = metadata
        self.storage.create_file(bucket, name, data, obj)
        return obj

    def _check_write(self, bucket: str, name: str, headers: Message) -> Reply | None:
        if bucket not in self.storage.buckets:
            return error_reply(HTTPStatus.NOT_FOUND, "NoSuchBucket", f"No such bucket: {bucket}")
        if generation_failed(self._live(bucket, name), headers):
            return error_reply(
                HTTPStatus.PRECONDITION_FAILED, "PreconditionFailed", "a precondition failed"
            )
        return None

    def write(
        self,
        bucket: str,
        name: str,
        query: dict[str, list[str]],
        headers: Message,
        body: bytes,
        base_url: str,
    ) -> Reply:
        """`PUT` of an object: an upload, a copy, or one part of a multipart upload."""
        if "uploadId" in query and "partNumber" in query:
            with self.lock:
                upload = self._uploads.get(query["uploadId"][0])
                if upload is None:
                    return error_reply(HTTPStatus.NOT_FOUND, "NoSuchUpload", "No such upload")
                upload.parts[int(query["partNumber"][0])] = body
            return Reply(HTTPStatus.OK, {"ETag": f'"{hashlib.md5(body).hexdigest()}"'})
        source = headers.get("x-goog-copy-source")
        with self.lock:
            refused = self._check_write(bucket, name, headers)
            if refused is not None:
                return refused
            if source is not None:
                return self._copy(source, bucket, name, base_url)
            return Reply(
                HTTPStatus.OK, write_headers(self._store(bucket, name, body, headers, base_url))
            )

    def _copy(self, source: str, bucket: str, name: str, base_url: str) -> Reply:
        """Copies `source` (`bucket/object`) with its metadata; lock held by the caller."""
        source_bucket, _, source_name = urllib.parse.unquote(source).lstrip("/").partition("/")
        original = self._live(source_bucket, source_name)
        if original is None:
            return error_reply(HTTPStatus.NOT_FOUND, "NoSuchKey", f"No such object: {source}")
        data = self.storage.get_file(source_bucket, source_name, False)
        headers = Message()
        headers["Content-Type"] = original.get("contentType") or "application/octet-stream"
        for key, value in object_headers(original).items():
            if key.startswith("x-goog-meta-") or key in STORED_HEADERS:
                headers[key] = value
        copy = self._store(bucket, name, data, headers, base_url)
        root = ElementTree.Element("CopyObjectResult")
        add_text(root, "LastModified", object_headers(copy)["Last-Modified"])
        add_text(root, "ETag", quoted_etag(copy))
        return xml_reply(root, write_headers(copy))

    def post(
        self,
        bucket: str,
        name: str,
        query: dict[str, list[str]],
        headers: Message,
        body: bytes,
        base_url: str,
    ) -> Reply:
        """`POST ?uploads` starts a multipart upload; `POST ?uploadId=` completes one."""
        if "uploads" in query:
            upload_id = secrets.token_urlsafe(16)
            with self.lock:
                self._uploads[upload_id] = _Upload(bucket, name, headers)
            root = ElementTree.Element("InitiateMultipartUploadResult")
            for tag, text in (("Bucket", bucket), ("Key", name), ("UploadId", upload_id)):
                add_text(root, tag, text)
            return xml_reply(root)
        if "uploadId" not in query:
            return error_reply(HTTPStatus.BAD_REQUEST, "InvalidArgument", "POST needs ?uploads")
        with self.lock:
            upload = self._uploads.get(query["uploadId"][0])
            if upload is None or (upload.bucket, upload.name) != (bucket, name):
                return error_reply(HTTPStatus.NOT_FOUND, "NoSuchUpload", "No such upload")
            chunks = []
            for part in ElementTree.fromstring(body).iter("Part"):
                number, given = int(part.findtext("PartNumber", "0")), part.findtext("ETag", "")
                data = upload.parts.get(number)
                if data is None or hashlib.md5(data).hexdigest() != given.strip('"'):
                    return error_reply(HTTPStatus.BAD_REQUEST, "InvalidPart", f"part {number}")
                chunks.append(data)
            refused = self._check_write(bucket, name, upload.headers)
            if refused is not None:
                return refused
            stored = self._store(bucket, name, b"".join(chunks), upload.headers, base_url)
            del self._uploads[query["uploadId"][0]]
        root = ElementTree.Element("CompleteMultipartUploadResult")
        for tag, text in (("Bucket", bucket), ("Key", name), ("ETag", quoted_etag(stored))):
            add_text(root, tag, text)
        return xml_reply(root, write_headers(stored))

    def delete(
        self, bucket: str, name: str, query: dict[str, list[str]], headers: Message
    ) -> Reply:
        """`DELETE` of an object (soft-deleted if its bucket says so), or of an upload."""
        with self.lock:
            if "uploadId" in query:
                self._uploads.pop(query["uploadId"][0], None)
                return Reply(HTTPStatus.NO_CONTENT)
            obj = self._live(bucket, name)
            if obj is None:
                return error_reply(
                    HTTPStatus.NOT_FOUND, "NoSuchKey", f"No such object: {bucket}/{name}"
                )
            if generation_failed(obj, headers):
                return error_reply(HTTPStatus.PRECONDITION_FAILED, "PreconditionFailed", "failed")
            self.storage.delete_file(bucket, name)
        return Reply(HTTPStatus.NO_CONTENT)

    def list(self, bucket: str, query: dict[str, list[str]]) -> Reply:
        """`GET {bucket}?list-type=2`: one page of keys and common prefixes, in name order."""
        arg = {key: values[0] for key, values in query.items()}
        prefix, delimiter = arg.get("prefix", ""), arg.get("delimiter", "")
        max_keys = min(int(arg.get("max-keys", _MAX_KEYS)), _MAX_KEYS)
        marker, skip_under = arg.get("start-after", ""), False
        if "continuation-token" in arg:
            marker, skip_under = json.loads(base64.urlsafe_b64decode(arg["continuation-token"]))
        with self.lock:
            if bucket not in self.storage.buckets:
                return error_reply(
                    HTTPStatus.NOT_FOUND, "NoSuchBucket", f"No such bucket: {bucket}"
                )
            live = sorted(self.storage.objects.get(bucket, {}).items())
        root = ElementTree.Element("ListBucketResult", xmlns=_NAMESPACE)
        for tag, text in (("Name", bucket), ("Prefix", prefix), ("MaxKeys", max_keys)):
            add_text(root, tag, text)
        entries: list[tuple[str, dict[str, Any] | None]] = []  # (key or prefix, meta or None)
        truncated = False
        for name, obj in live:
            if not name.startswith(prefix) or name <= marker:
                continue
            if skip_under and name.startswith(marker):
                continue
            cut = name.find(delimiter, len(prefix)) if delimiter else -1
            entry = (name[: cut + len(delimiter)], None) if cut >= 0 else (name, obj)
            if entries and entries[-1][0] == entry[0]:
                continue
            if len(entries) == max_keys:
                truncated = True
                break
            entries.append(entry)
        for key, obj in entries:
            if obj is None:
                add_text(ElementTree.SubElement(root, "CommonPrefixes"), "Prefix", key)
                continue
            contents = ElementTree.SubElement(root, "Contents")
            for tag, text in (
                ("Key", key),
                ("Generation", obj["generation"]),
                ("MetaGeneration", obj["metageneration"]),
                ("LastModified", updated(obj).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"),
                ("ETag", quoted_etag(obj)),
                ("Size", obj["size"]),
            ):
                add_text(contents, tag, text)
        add_text(root, "KeyCount", len(entries))
        add_text(root, "IsTruncated", "true" if truncated else "false")
        if delimiter:
            add_text(root, "Delimiter", delimiter)
        if truncated:
            last, obj = entries[-1]
            token = json.dumps([last, obj is None]).encode()
            add_text(root, "NextContinuationToken", base64.urlsafe_b64encode(token).decode())
        return xml_reply(root)
