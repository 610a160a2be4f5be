"""`ShardCache`: whole objects kept on local disk, shared by every process of a machine.

Entries are named by a digest of (URL, version), so a replaced object gets a new entry
and an old one is never read for it. A download goes to a temporary file in the cache
folder and is renamed into place, so a process killed mid-download leaves no entry
(only a temporary file, removed by the next eviction pass once its process is gone).
Each entry has a lock file: a reader holds it shared while it opens the entry, a
downloader exclusively, so that several worker processes, or several training
processes, asking for one shard download it once. Eviction removes the least recently
used entries (by modification time, refreshed on every use) beyond the size limit,
skipping entries someone holds; a file already opened stays readable after eviction
(POSIX keeps unlinked files open), so a data set larger than the limit still reads
correctly, only with more downloads.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import time
import uuid
from collections.abc import Iterator

from ._client import ObjectClient, ObjectInfo

__all__ = ["ShardCache"]

_LAYOUT = "v1"


def _holds(lock_path: str, mode: int) -> int:
    """Opens `lock_path` and takes `flock(mode)`; returns the descriptor."""
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, mode)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class ShardCache:
    """A size-limited folder of downloaded objects (see the module docs).

    Args:
        folder: where entries live (created if missing).
        max_bytes: the size limit; least recently used entries beyond it are evicted.

    Example:
        >>> import tempfile
        >>> cache = ShardCache(tempfile.mkdtemp(), max_bytes=1 << 20)
        >>> cache.size_bytes()
        0
    """

    def __init__(self, folder: str, max_bytes: int) -> None:
        self.folder = os.path.join(folder, _LAYOUT)
        self.max_bytes = max_bytes
        os.makedirs(os.path.join(self.folder, "tmp"), exist_ok=True)

    def __chute_identity__(self) -> None:
        """None: a machine's cache folder never identifies the data read through it."""
        return None

    def entry_path(self, info: ObjectInfo) -> str:
        """Where `info`'s copy lives (whether or not it is there)."""
        digest = hashlib.sha256(f"{info.url}\0{info.version}\0{info.size}".encode()).hexdigest()
        name = "".join(c if c.isalnum() or c in "._-" else "_" for c in info.url.rsplit("/")[-1])
        return os.path.join(self.folder, digest[:2], f"{digest[:32]}-{name[-80:]}")

    @contextlib.contextmanager
    def local(self, info: ObjectInfo, client: ObjectClient) -> Iterator[str]:
        """The path of a complete local copy of `info`, downloaded if needed.

        The entry cannot be evicted while the `with` block runs: open the file inside
        it (an open file stays readable after eviction).
        """
        path = self.entry_path(info)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        lock = path + ".lock"
        fd = _holds(lock, fcntl.LOCK_SH)
        try:
            while not self._complete(path, info):
                fcntl.flock(fd, fcntl.LOCK_EX)  # Waits for a download under way.
                if not self._complete(path, info):
                    self._download(info, client, path)
                    self.evict(keep=path)
                fcntl.flock(fd, fcntl.LOCK_SH)
            with contextlib.suppress(FileNotFoundError):
                os.utime(path)  # The last use, for LRU eviction.
            yield path
        finally:
            os.close(fd)

    @staticmethod
    def _complete(path: str, info: ObjectInfo) -> bool:
        try:
            return os.stat(path).st_size == info.size
        except FileNotFoundError:
            return False

    def _download(self, info: ObjectInfo, client: ObjectClient, path: str) -> None:
        temporary = os.path.join(self.folder, "tmp", f"{os.getpid()}.{uuid.uuid4().hex}.part")
        try:
            with open(temporary, "wb") as file:
                client.download(info, file)
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
            raise

    def entries(self) -> list[tuple[float, int, str]]:
        """(last use, size, path) of every complete entry."""
        found = []
        for shard in os.listdir(self.folder):
            directory = os.path.join(self.folder, shard)
            if shard == "tmp" or not os.path.isdir(directory):
                continue
            for name in os.listdir(directory):
                if name.endswith(".lock"):
                    continue
                path = os.path.join(directory, name)
                try:
                    stat = os.stat(path)
                except FileNotFoundError:
                    continue
                found.append((stat.st_mtime, stat.st_size, path))
        return found

    def size_bytes(self) -> int:
        """The bytes of the complete entries."""
        return sum(size for _, size, _ in self.entries())

    def evict(self, keep: str | None = None) -> None:
        """Removes least recently used entries until the cache fits its limit.

        Entries in use (their lock held by a reader or a downloader) and `keep` stay;
        temporary files of processes that died are removed.
        """
        self._remove_orphans()
        evict_fd = _holds(os.path.join(self.folder, "evict.lock"), fcntl.LOCK_EX)
        try:
            entries = sorted(self.entries())
            total = sum(size for _, size, _ in entries)
            for _, size, path in entries:
                if total <= self.max_bytes:
                    break
                if path == keep:
                    continue
                try:
                    fd = os.open(path + ".lock", os.O_RDWR | os.O_CREAT, 0o644)
                except OSError:
                    continue
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError as error:
                    if error.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                        raise
                    os.close(fd)
                    continue  # In use.
                try:
                    os.unlink(path)
                    total -= size
                except FileNotFoundError:
                    pass
                finally:
                    os.close(fd)
        finally:
            os.close(evict_fd)

    def _remove_orphans(self) -> None:
        directory = os.path.join(self.folder, "tmp")
        now = time.time()
        for name in os.listdir(directory):
            pid_text = name.split(".", 1)[0]
            path = os.path.join(directory, name)
            if pid_text.isdigit() and not _alive(int(pid_text)):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
            elif not pid_text.isdigit():
                with contextlib.suppress(FileNotFoundError):
                    if now - os.stat(path).st_mtime > 86400:
                        os.unlink(path)
