"""`ShardCache`: whole objects kept on local disk, verified, shared by a machine's processes.

Entries are named by a digest of (URL, version, size), so a replaced object gets a new
entry and an old one is never read for it. A download goes to a temporary file in the
cache folder, is synced and renamed into place, and only then gets its record (see
`_cache_record`): what the store said of the object and the SHA-256 of the bytes as
they arrived. An entry is served only if its record describes the object asked for
and its bytes are the recorded ones: each use compares the file's stamp (inode, size,
modification and change times) with the recorded one, one `stat`; a file whose stamp
moved (written, replaced, copied) is hashed whole again, and served (and stamped anew)
only if the hash matches. An entry that fails is deleted and downloaded once more; a
download pins the object's version (ETag), so an object replaced in the bucket since
raises `ObjectChangedError` instead. Bytes that were never verified are never served.

Each entry has a lock file: a reader holds it shared while it opens the entry, a
downloader or checker exclusively, so that several worker processes, or several training
processes, asking for one shard download it once. Eviction removes the least recently
used entries (by the modification time of their records, refreshed on every use) beyond
the size limit, skipping entries someone holds; a file already opened stays readable
after eviction (POSIX keeps unlinked files open), so a data set larger than the limit
still reads correctly, only with more downloads. Temporary files of downloaders that
died are removed by eviction, told dead by their lock (see `_cache_files`).

Folders are 0700 and files 0600. This is layout `v2`; copies in the folder `v1` of
earlier chute versions (no records) are never read, and can be deleted.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import hashlib
import logging
import os
from collections.abc import Iterator

from chute_core.internal import CACHE_HITS, CACHE_MISSES, COUNTERS

from ._cache_files import (
    holds,
    new_temporary,
    open_private,
    private_folder,
    remove_orphans,
    write_private,
)
from ._cache_record import EntryRecord, HashingWriter, read_record, sha256_of, stamp_of
from ._client import ObjectClient, ObjectInfo

__all__ = ["ShardCache"]

_LAYOUT = "v2"
_DIGEST = 32  # Hex digits of the digest that starts every name of an entry's files.
_log = logging.getLogger("chute_sources.cache")


@dataclasses.dataclass(frozen=True)
class _Files:
    """The files of one entry: the copy, its lock and its record."""

    entry: str
    lock: str
    record: str

    @classmethod
    def of_entry(cls, entry: str) -> _Files:
        base = os.path.join(os.path.dirname(entry), os.path.basename(entry)[:_DIGEST])
        return cls(entry, base + ".lock", base + ".record")


def _sync(fd: int) -> None:
    """Makes the file's bytes durable before its name is: no zeroed entry after a crash."""
    (getattr(os, "fdatasync", None) or os.fsync)(fd)


class ShardCache:
    """A size-limited folder of downloaded objects, verified (see the module docs).

    Args:
        folder: where entries live (created if missing, owner-only).
        max_bytes: the size limit; least recently used entries beyond it are evicted.

    Raises:
        SourceFileError: `folder` belongs to another user or cannot be made.

    Example:
        >>> import tempfile
        >>> cache = ShardCache(tempfile.mkdtemp(), max_bytes=1 << 20)
        >>> cache.size_bytes(), oct(os.stat(cache.folder).st_mode & 0o777)
        (0, '0o700')
    """

    def __init__(self, folder: str, max_bytes: int) -> None:
        self.folder = os.path.join(folder, _LAYOUT)
        self.max_bytes = max_bytes
        self._tmp = os.path.join(self.folder, "tmp")
        private_folder(self.folder)
        private_folder(self._tmp)

    def __chute_identity__(self) -> None:
        """None: a machine's cache folder never identifies the data read through it."""
        return None

    def entry_path(self, info: ObjectInfo) -> str:
        """Where `info`'s copy lives (whether or not it is there)."""
        digest = hashlib.sha256(f"{info.url}\0{info.version}\0{info.size}".encode()).hexdigest()
        name = "".join(c if c.isalnum() or c in "._-" else "_" for c in info.url.rsplit("/")[-1])
        return os.path.join(self.folder, digest[:2], f"{digest[:_DIGEST]}-{name[-80:]}")

    @contextlib.contextmanager
    def local(self, info: ObjectInfo, client: ObjectClient) -> Iterator[str]:
        """The path of a complete, verified local copy of `info`, downloaded if needed.

        The entry cannot be evicted while the `with` block runs: open the file inside
        it (an open file stays readable after eviction). Counts a cache miss (label
        `cache="shard"`) if this call downloaded the object, else a hit (also when
        another process downloaded it meanwhile).

        Raises:
            ObjectChangedError: the copy had to be downloaded again and the object was
                replaced in its bucket since `info` was taken.
            ObjectStorageError: the download failed (see `ObjectClient.download`).
        """
        files = _Files.of_entry(self.entry_path(info))
        private_folder(os.path.dirname(files.entry))
        fd = holds(files.lock, fcntl.LOCK_SH)
        try:
            downloaded = False
            if not self._verified(files, info):
                fcntl.flock(fd, fcntl.LOCK_EX)  # Waits for a download or check under way.
                downloaded = self._make_good(files, info, client)
            COUNTERS.add(CACHE_MISSES if downloaded else CACHE_HITS, cache="shard")
            with contextlib.suppress(FileNotFoundError):
                os.utime(files.record)  # The last use, for LRU eviction.
            yield files.entry
        finally:
            os.close(fd)

    @staticmethod
    def _verified(files: _Files, info: ObjectInfo) -> bool:
        """Whether the entry is a copy of `info` whose bytes are those hashed (by stamp)."""
        record = read_record(files.record)
        if record is None or not record.describes(info):
            return False
        try:
            status = os.stat(files.entry)
        except FileNotFoundError:
            return False
        return status.st_size == info.size and stamp_of(status) == record.stamp

    def _make_good(self, files: _Files, info: ObjectInfo, client: ObjectClient) -> bool:
        """Verifies the entry by its bytes, or downloads it again (the lock held exclusively).

        Returns whether it downloaded.
        """
        if self._verified(files, info):
            return False  # Downloaded or checked by another process meanwhile.
        try:
            status: os.stat_result | None = os.stat(files.entry)
        except FileNotFoundError:
            status = None
        if status is not None:
            problem = self._check_bytes(files, info, status)
            if problem is None:
                return False
            _log.warning(
                "chute: the shard cache's copy %s of %s %s; downloading it again.",
                files.entry,
                info.url,
                problem,
            )
        for path in (files.record, files.entry):  # The record first: no record w/o entry.
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        self._download(files, info, client)
        self.evict(keep=files.entry)
        return True

    def _check_bytes(self, files: _Files, info: ObjectInfo, status: os.stat_result) -> str | None:
        """None if the entry holds the recorded bytes (then stamped anew); else what is wrong."""
        record = read_record(files.record)
        if record is None:
            return "has no record of what it holds (its download stopped before recording it)"
        if not record.describes(info):
            return f"is recorded as another object ({record.url}, version {record.version})"
        if status.st_size != info.size:
            return f"has {status.st_size} bytes, not {info.size}"
        digest = sha256_of(files.entry)
        after = os.stat(files.entry)
        if digest != record.sha256:
            return "does not hold the bytes downloaded (their SHA-256 differs)"
        if stamp_of(after) != stamp_of(status):
            return "changed while it was being checked"
        stamped = dataclasses.replace(record, stamp=stamp_of(after))
        write_private(files.record, stamped.dump(), self._tmp)
        return None

    def _download(self, files: _Files, info: ObjectInfo, client: ObjectClient) -> None:
        private_folder(self._tmp)  # Again, in case the cache folder was deleted meanwhile.
        fd, temporary = new_temporary(self._tmp)
        try:
            with open(fd, "wb", closefd=False) as file:
                writer = HashingWriter(file, info)
                client.download(info, writer)
            _sync(fd)
            os.rename(temporary, files.entry)
            record = EntryRecord.of(info, writer.hexdigest(), stamp_of(os.fstat(fd)))
            write_private(files.record, record.dump(), self._tmp)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
            raise
        finally:
            os.close(fd)  # Drops the temporary file's lock: only now, once renamed.

    def entries(self) -> list[tuple[float, int, str]]:
        """(last use, size, path) of every complete entry."""
        found = []
        for shard in os.listdir(self.folder):
            directory = os.path.join(self.folder, shard)
            if len(shard) != 2 or not os.path.isdir(directory):
                continue  # tmp/ and evict.lock.
            for name in os.listdir(directory):
                if len(name) <= _DIGEST or name[_DIGEST] != "-":
                    continue  # A lock or a record.
                files = _Files.of_entry(os.path.join(directory, name))
                try:
                    status = os.stat(files.entry)
                except FileNotFoundError:
                    continue
                try:
                    used = os.stat(files.record).st_mtime
                except FileNotFoundError:
                    used = status.st_mtime  # No record (yet): the copy's own time.
                found.append((used, status.st_size, files.entry))
        return found

    def size_bytes(self) -> int:
        """The bytes of the complete entries."""
        return sum(size for _, size, _ in self.entries())

    def evict(self, keep: str | None = None) -> None:
        """Removes least recently used entries until the cache fits its limit.

        Entries in use (their lock held by a reader or a downloader) and `keep` stay;
        temporary files of processes that died are removed.
        """
        remove_orphans(self._tmp)
        evict_fd = holds(os.path.join(self.folder, "evict.lock"), fcntl.LOCK_EX)
        try:
            entries = sorted(self.entries())
            total = sum(size for _, size, _ in entries)
            for _, size, path in entries:
                if total <= self.max_bytes:
                    break
                if path != keep and self._remove_unused(_Files.of_entry(path)):
                    total -= size
        finally:
            os.close(evict_fd)

    @staticmethod
    def _remove_unused(files: _Files) -> bool:
        """Removes the entry unless someone holds its lock; whether it was removed."""
        try:
            fd = open_private(files.lock)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            os.close(fd)
            if error.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise
            return False  # In use.
        try:
            for path in (files.record, files.entry):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
            return True
        finally:
            os.close(fd)
