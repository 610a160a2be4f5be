"""The shard cache's files: owner-only, locked while written, orphans told by their lock.

Every folder the cache makes is 0700 and every file 0600, whatever the umask (modes are
set after creation, since a umask may only take bits away). Files are written under a
temporary name in the cache's `tmp/` folder and renamed into place. A temporary file is
locked (`flock`, exclusive) by the process writing it before it gets its visible name
(`<token>.part`), and stays locked until it is renamed or the process dies: the kernel
drops the lock however the process ends. So whether a temporary file is an orphan is
asked of the lock, not of a pid, and the answer holds for processes in other PID
namespaces (containers) and on other hosts sharing the folder, where pids mean nothing.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import secrets
import time

from chute_core import SourceFileError

__all__ = [
    "holds",
    "new_temporary",
    "open_private",
    "private_folder",
    "remove_orphans",
    "write_private",
]

_FOLDER_MODE = 0o700
_FILE_MODE = 0o600
_STALE_SECONDS = 60.0
"""A `<token>.new` file (locked a moment after it is made) is an orphan only this old."""


def private_folder(path: str) -> None:
    """Makes `path` and its missing parents, each 0700; checks `path` is this user's.

    Raises:
        SourceFileError: `path` belongs to another user (a cache is never shared
            between users), or cannot be made.
    """
    missing: list[str] = []
    head = os.path.abspath(path)
    while not os.path.isdir(head):
        missing.append(head)
        head = os.path.dirname(head)
    for folder in reversed(missing):
        try:
            os.mkdir(folder, _FOLDER_MODE)
        except FileExistsError:
            continue  # Made meanwhile by another process (with this mode).
        except OSError as error:
            raise SourceFileError(
                f"cannot make the shard cache folder {folder} ({error}); set "
                "StorageOptions(cache_dir=...) or $CHUTE_CACHE_DIR to a writable folder."
            ) from error
        os.chmod(folder, _FOLDER_MODE)
    status = os.stat(path)
    if status.st_uid != os.geteuid():
        raise SourceFileError(
            f"the shard cache folder {path} belongs to user id {status.st_uid}, not to this "
            f"process's ({os.geteuid()}): a shard cache is private to one user; set "
            "StorageOptions(cache_dir=...) or $CHUTE_CACHE_DIR to a folder of your own."
        )
    if status.st_mode & 0o777 != _FOLDER_MODE:
        os.chmod(path, _FOLDER_MODE)


def open_private(path: str, flags: int = os.O_RDWR) -> int:
    """Opens `path`, made 0600 if it is missing; returns the descriptor (close-on-exec)."""
    flags |= os.O_CLOEXEC
    while True:
        try:
            return os.open(path, flags)
        except FileNotFoundError:
            pass
        try:
            fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, _FILE_MODE)
        except FileExistsError:
            continue  # Made meanwhile by another process.
        os.fchmod(fd, _FILE_MODE)
        return fd


def holds(path: str, mode: int) -> int:
    """Opens the lock file `path` (made 0600 if missing) and takes `flock(mode)`."""
    fd = open_private(path)
    try:
        fcntl.flock(fd, mode)
    except BaseException:
        os.close(fd)
        raise
    return fd


def new_temporary(folder: str) -> tuple[int, str]:
    """A new empty 0600 file in `folder`, locked by this process: (descriptor, path).

    Made as `<token>.new`, locked, then renamed `<token>.part`: a `.part` file is always
    locked while its process lives. Rename it into place before closing the descriptor.
    """
    token = secrets.token_hex(16)
    making = os.path.join(folder, f"{token}.new")
    fd = os.open(making, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, _FILE_MODE)
    try:
        os.fchmod(fd, _FILE_MODE)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        path = os.path.join(folder, f"{token}.part")
        os.rename(making, path)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(making)
        raise
    return fd, path


def write_private(path: str, data: bytes, folder: str) -> None:
    """Writes `path` whole (0600) through a temporary file in `folder`, then renames it."""
    fd, temporary = new_temporary(folder)
    try:
        with open(fd, "wb", closefd=False) as file:
            file.write(data)
        os.rename(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    finally:
        os.close(fd)


def remove_orphans(folder: str) -> list[str]:
    """Removes the temporary files in `folder` that no live process holds; their names.

    A `.part` file whose lock is free belongs to a process that died (or has just renamed
    it into place: then the name is gone and nothing is removed). Other names (a file
    whose maker died between making and locking it) go once they are a minute old.
    """
    removed = []
    now = time.time()
    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue  # Renamed into place or removed meanwhile.
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as error:
                if error.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    raise
                continue  # Its writer lives.
            if not name.endswith(".part") and now - os.fstat(fd).st_mtime < _STALE_SECONDS:
                continue  # Perhaps being made now: its lock comes next.
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
                removed.append(name)
        finally:
            os.close(fd)
    return removed
