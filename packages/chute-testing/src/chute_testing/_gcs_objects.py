"""How GCS describes an object over HTTP: headers, conditional requests, ranges, replies.

Every value comes from the emulator's JSON metadata of the object (`generation`,
`metageneration`, `md5Hash`, `crc32c`, `updated`, `size`, ...), so the XML API's headers
agree with what the JSON API reports. See `chute_testing._gcs_xml` for why they are needed.

Example:
    >>> parse_range("bytes=-3", 10), parse_range("bytes=4-", 10), parse_range("bytes=5-3", 10)
    ((7, 10), (4, 10), None)
"""

from __future__ import annotations

import base64
import email.utils
import json
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.message import Message
from http import HTTPStatus
from typing import Any

__all__ = [
    "STORED_HEADERS",
    "Reply",
    "add_text",
    "error_reply",
    "generation_failed",
    "object_headers",
    "parse_range",
    "quoted_etag",
    "read_precondition",
    "updated",
    "write_headers",
    "xml_reply",
]

_ISO = "%Y-%m-%dT%H:%M:%S.%fZ"


@dataclass
class Reply:
    """An HTTP answer: status, headers, body; `length` overrides Content-Length (HEAD)."""

    status: int = HTTPStatus.OK
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | memoryview = b""
    length: int | None = None

    # The emulator's handler functions write to their response through these three.
    def __setitem__(self, key: str, value: object) -> None:
        self.headers[key] = str(value)

    def __getitem__(self, key: str) -> str:
        return self.headers[key]

    def write(self, text: str) -> None:
        self.body = bytes(self.body) + text.encode()

    def write_file(self, content: bytes, content_type: str | None = None) -> None:
        if content_type is not None:
            self.headers["Content-Type"] = content_type
        self.body = content

    def json(self, value: Any) -> None:
        self.headers["Content-Type"] = "application/json"
        self.body = json.dumps(value).encode()


def error_reply(status: int, code: str, message: str) -> Reply:
    """An error answer with GCS's XML error body."""
    root = ElementTree.Element("Error")
    ElementTree.SubElement(root, "Code").text = code
    ElementTree.SubElement(root, "Message").text = message
    body = ElementTree.tostring(root, encoding="utf-8", xml_declaration=True)
    return Reply(status, {"Content-Type": "application/xml; charset=UTF-8"}, body)


def xml_reply(root: ElementTree.Element, headers: dict[str, str] | None = None) -> Reply:
    """A 200 answer whose body is the XML document `root`."""
    body = ElementTree.tostring(root, encoding="utf-8", xml_declaration=True)
    return Reply(HTTPStatus.OK, {"Content-Type": "application/xml", **(headers or {})}, body)


def add_text(parent: ElementTree.Element, tag: str, text: object) -> None:
    """Appends `<tag>text</tag>` to `parent`."""
    ElementTree.SubElement(parent, tag).text = str(text)


def parse_range(header: str | None, size: int) -> tuple[int, int] | None:
    """The `[first, end)` byte span a single-range `Range` header asks of `size` bytes.

    Returns None when there is no header, or one this server ignores as real GCS does
    (several ranges, bad syntax). Raises `ValueError` for an unsatisfiable range.
    """
    if not header or not header.startswith("bytes=") or "," in header:
        return None
    first_text, _, last_text = header[len("bytes=") :].strip().partition("-")
    if not (first_text or last_text) or not (first_text + last_text).isdigit():
        return None
    if not first_text:  # A suffix: the last N bytes.
        count = int(last_text)
        if count == 0 or size == 0:
            raise ValueError(header)
        return max(size - count, 0), size
    first = int(first_text)
    if last_text and int(last_text) < first:
        return None  # Invalid: ignored, as RFC 9110 says.
    if first >= size:
        raise ValueError(header)
    return first, size if not last_text else min(int(last_text) + 1, size)


def quoted_etag(obj: dict[str, Any]) -> str:
    """The XML API's ETag of an object: its MD5 in hex, quoted."""
    return '"' + base64.b64decode(obj["md5Hash"]).hex() + '"'


def updated(obj: dict[str, Any]) -> datetime:
    """When the object was last written (its JSON `updated`)."""
    return datetime.strptime(obj["updated"], _ISO).replace(tzinfo=UTC)


def _etag_set(header: str) -> set[str]:
    return {tag.strip().removeprefix("W/").strip('"') for tag in header.split(",")}


def _since(header: str | None) -> datetime | None:
    try:
        moment = email.utils.parsedate_to_datetime(header or "")
    except (TypeError, ValueError):
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def generation_failed(obj: dict[str, Any] | None, headers: Message) -> bool:
    """Whether an `x-goog-if-(meta)generation-(not-)match` header fails for `obj`."""
    generation = obj["generation"] if obj else "0"
    metageneration = obj["metageneration"] if obj else None
    checks = (
        ("x-goog-if-generation-match", generation, True),
        ("x-goog-if-generation-not-match", generation, False),
        ("x-goog-if-metageneration-match", metageneration, True),
        ("x-goog-if-metageneration-not-match", metageneration, False),
    )
    for name, actual, must_equal in checks:
        wanted = headers.get(name)
        if wanted is not None and (str(actual) == wanted.strip()) != must_equal:
            return True
    return False


def read_precondition(obj: dict[str, Any], headers: Message) -> int | None:
    """412 or 304 when a conditional read's headers say so (RFC 9110's order), else None."""
    current = quoted_etag(obj).strip('"')
    modified = updated(obj).replace(microsecond=0)
    if_match, if_none_match = headers.get("If-Match"), headers.get("If-None-Match")
    if if_match is not None and not ({"*", current} & _etag_set(if_match)):
        return HTTPStatus.PRECONDITION_FAILED
    unmodified_since = _since(headers.get("If-Unmodified-Since"))
    if if_match is None and unmodified_since is not None and modified > unmodified_since:
        return HTTPStatus.PRECONDITION_FAILED
    if generation_failed(obj, headers):
        return HTTPStatus.PRECONDITION_FAILED
    if if_none_match is not None and {"*", current} & _etag_set(if_none_match):
        return HTTPStatus.NOT_MODIFIED
    modified_since = _since(headers.get("If-Modified-Since"))
    if if_none_match is None and modified_since is not None and modified <= modified_since:
        return HTTPStatus.NOT_MODIFIED
    return None


def object_headers(obj: dict[str, Any]) -> dict[str, str]:
    """The headers real GCS sends with an object's bytes (a GET or HEAD)."""
    headers = {
        "ETag": quoted_etag(obj),
        "Last-Modified": email.utils.format_datetime(updated(obj), usegmt=True),
        "x-goog-generation": str(obj["generation"]),
        "x-goog-metageneration": str(obj["metageneration"]),
        "x-goog-stored-content-length": str(obj["size"]),
        "x-goog-stored-content-encoding": obj.get("contentEncoding") or "identity",
        "x-goog-hash": f"crc32c={obj['crc32c']},md5={obj['md5Hash']}",
        "x-goog-storage-class": obj.get("storageClass") or "STANDARD",
        "Content-Type": obj.get("contentType") or "application/octet-stream",
        "Accept-Ranges": "bytes",
    }
    for header, key in STORED_HEADERS.items():
        if obj.get(key):
            headers[header] = obj[key]
    for key, value in (obj.get("metadata") or {}).items():
        headers[f"x-goog-meta-{key}"] = str(value)
    return headers


def write_headers(obj: dict[str, Any]) -> dict[str, str]:
    """The headers of an answer to a write: the new ETag, generation and hashes."""
    headers = object_headers(obj)
    kept = {k: v for k, v in headers.items() if k.startswith("x-goog-") and "-meta-" not in k}
    return {"ETag": headers["ETag"], **kept}


STORED_HEADERS = {
    "Cache-Control": "cacheControl",
    "Content-Disposition": "contentDisposition",
    "Content-Encoding": "contentEncoding",
    "Content-Language": "contentLanguage",
}
