"""The manifest of `chute convert`: which shards are finished, for resuming.

A small JSON file next to the shards (`<stem>.chute-convert.json`), rewritten
atomically (temporary file, fsync, rename) after every finished shard, so a conversion
killed at any moment leaves either the previous manifest or the new one. Next to
shards in a bucket it is an object, replaced whole by each write. Its `"complete"`
turns true only when every shard is written and verified: until then
`ArrayRecordSource` and `chute inspect` refuse the shards (the sources layer reads the
manifest for them: `chute_sources.internal.unfinished_conversions`).
"""

from __future__ import annotations

import json
import os
from typing import Any

from chute_core import SourceFileNotFoundError
from chute_sources import is_object_url, read_object, write_object
from chute_sources.internal import MANIFEST_SUFFIX, MANIFEST_VERSION

from ._common import usage_error

__all__ = ["MANIFEST_SUFFIX", "MANIFEST_VERSION", "load_manifest", "write_manifest"]


def write_manifest(path: str, manifest: dict[str, Any]) -> None:
    """Writes `manifest` to `path` atomically.

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "x" + MANIFEST_SUFFIX)
        >>> write_manifest(path, {"version": MANIFEST_VERSION, "shards": {}})
        >>> load_manifest(path)
        {'shards': {}, 'version': 1}
    """
    if is_object_url(path):
        write_object(path, (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode())
        return
    folder = os.path.dirname(path) or "."
    temporary = os.path.join(folder, f".{os.path.basename(path)}.tmp")
    with open(temporary, "w", encoding="utf-8") as file:
        json.dump(manifest, file, indent=1, sort_keys=True)
        file.write("\n")
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)
    try:  # Make the rename itself durable.
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory handles
        return
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def load_manifest(path: str) -> dict[str, Any] | None:
    """The manifest at `path`, or None when there is none.

    Raises:
        CliError: the file is not a manifest of this version (exit code 2).

    Example:
        >>> load_manifest("/no/such/manifest.json") is None
        True
    """
    if not is_object_url(path) and not os.path.exists(path):
        return None
    try:
        if is_object_url(path):
            manifest = json.loads(read_object(path))
        else:
            with open(path, encoding="utf-8") as file:
                manifest = json.load(file)
    except SourceFileNotFoundError:
        return None
    except (OSError, ValueError, RecursionError) as error:  # Recursion: nested too deeply.
        usage_error(f"cannot read the manifest {path!r} ({error}); delete it or pass --overwrite")
    if not isinstance(manifest, dict) or manifest.get("version") != MANIFEST_VERSION:
        usage_error(
            f"{path!r} is not a version {MANIFEST_VERSION} chute convert manifest; delete it "
            "or pass --overwrite"
        )
    return manifest
