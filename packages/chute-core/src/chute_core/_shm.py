"""Named shared-memory files that nothing leaks: owner-only, reclaimed after a crash.

A segment is a file in `/dev/shm` (or the folder `$CHUTE_SHM_DIR` names, or the temp
folder where there is no `/dev/shm`) named `chute-<owner tag>-<kind>-<token>`, where the
owner tag is `<pid>-o<random hex>`. The process that creates it owns it and unlinks it
on close, at garbage collection and at interpreter exit. When a process dies without
cleaning up (SIGKILL, power cut of the container), the next chute process that creates
a segment reclaims it: the name says which process owned it, and the lock that process
held on its owner file (`.chute-owner-<owner tag>`) says whether it still lives. The
kernel answers that, not `/proc`, so processes in other PID namespaces sharing the
folder (containers run with `--ipc=host`, pods sharing IPC) never take each other's
live segments for orphans, even when their pids are equal.

Segments named by chute before owner files (`chute-<pid>-<start time>-...`) are never
reclaimed: their owners cannot be told apart across namespaces.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import fcntl
import os
import secrets
import shutil
import tempfile
import threading
import time
from pathlib import Path

from ._errors import SharedMemoryError

__all__ = [
    "SHM_DIR_ENV",
    "SHM_PREFIX",
    "create_segment_file",
    "new_segment_path",
    "no_space_error",
    "owner_tag",
    "reclaim_orphaned_segments",
    "release_owner",
    "remove_own_segments",
    "shm_dir",
]

SHM_PREFIX = "chute-"
SHM_DIR_ENV = "CHUTE_SHM_DIR"
"""The environment variable that chooses another folder for shared memory."""


def shm_dir() -> Path:
    """The folder that holds shared-memory files.

    `$CHUTE_SHM_DIR` if set (e.g. a larger tmpfs where `/dev/shm` is small, or a small
    one to test a full `/dev/shm`), else `/dev/shm`, else the temp folder. Set it before
    the first worker starts: workers and your process must agree on it.

    Raises:
        SharedMemoryError: `$CHUTE_SHM_DIR` is set but names no writable folder.
    """
    chosen = os.environ.get(SHM_DIR_ENV)
    if chosen:
        folder = Path(chosen)
        if not (folder.is_dir() and os.access(folder, os.W_OK)):
            raise SharedMemoryError(
                f"{SHM_DIR_ENV}={chosen!r} is not a writable folder; set it to an existing "
                "folder on a tmpfs (memory, like /dev/shm), or unset it to use /dev/shm."
            )
        return folder
    dev_shm = Path("/dev/shm")
    if dev_shm.is_dir() and os.access(dev_shm, os.W_OK):
        return dev_shm
    return Path(tempfile.gettempdir())


_STALE_SECONDS = 60.0
_OWNER_FILE = ".chute-owner-"
"""How an owner lock file is named: `.chute-owner-<owner tag>` (hidden, not a segment)."""


class _Owner:
    """This process's owner tag, and the lock on its owner file that proves it alive.

    The tag is `<pid>-o<random hex>`: the pid helps people and tests tell processes
    apart, the random part keeps two processes apart that have the same pid in
    different PID namespaces (containers sharing `/dev/shm`). The owner file is created
    under a temporary name, locked (`flock`, exclusive) and only then renamed into
    place, so a visible owner file is always locked while its process lives. The kernel
    drops the lock when the process dies, however it dies, and that is how any other
    process, in any namespace, tells a live owner from a dead one.
    """

    def __init__(self) -> None:
        self.lock = threading.RLock()  # Reentrant: a finalizer (GC) may reclaim within `ensure`.
        self.pid = 0  # The process the tag and files belong to (0: none yet).
        self.tag = ""
        self.files: dict[Path, int] = {}  # Owner file -> its locked descriptor, per folder.

    def ensure(self, folder: Path) -> str:
        """The tag, with an owner file locked in `folder` (made on first use there)."""
        with self.lock:
            self._check_pid()
            path = folder / f"{_OWNER_FILE}{self.tag}"
            if path not in self.files:
                self.files[path] = _locked_owner_file(path)
            return self.tag

    def current(self) -> str:
        """The tag (without making an owner file)."""
        with self.lock:
            self._check_pid()
            return self.tag

    def _check_pid(self) -> None:
        if self.pid != os.getpid():  # First use, or a child of `fork` without the hook.
            self.pid = os.getpid()
            self.tag = f"{self.pid}-o{secrets.token_hex(6)}"
            self.files = {}

    def forget_after_fork(self) -> None:
        """In a forked child: lets go of the parent's owner files; the child makes its own.

        Closing the inherited descriptors leaves the parent's locks held (they belong
        to the parent's open files, which the parent keeps); LOCK_UN would drop them.
        """
        for fd in self.files.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self.lock = threading.RLock()
        self.pid, self.tag, self.files = 0, "", {}

    def release(self) -> None:
        """Removes this process's owner files (at exit, once its segments are gone)."""
        with self.lock:
            if self.pid != os.getpid():
                return
            for path, fd in self.files.items():
                with contextlib.suppress(OSError):
                    os.unlink(path)
                with contextlib.suppress(OSError):
                    os.close(fd)
            self.files = {}


def _locked_owner_file(path: Path) -> int:
    """Creates `path` already locked (made under a temporary name, locked, renamed)."""
    temporary = path.with_name(f"{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        fd = os.open(temporary, os.O_CREAT | os.O_EXCL | os.O_RDWR | os.O_CLOEXEC, 0o600)
    except OSError as error:
        raise SharedMemoryError(
            f"cannot create the owner file {temporary} of this process's shared memory: {error}"
        ) from error
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.rename(temporary, path)
    except OSError as error:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise SharedMemoryError(
            f"cannot lock the owner file {path} of this process's shared memory ({error}); "
            "the folder must support flock (a tmpfs such as /dev/shm does)."
        ) from error
    return fd


_OWNER = _Owner()
os.register_at_fork(after_in_child=_OWNER.forget_after_fork)
atexit.register(_OWNER.release)


def release_owner() -> None:
    """Removes this process's owner files: what segments it leaves are orphans from now.

    For a process about to end (a worker at the end of its work, which exits through
    `os._exit`, skipping `atexit`), so that it leaves no owner file behind.

    Example:
        >>> tag = owner_tag()
        >>> release_owner()
        >>> (shm_dir() / f"{_OWNER_FILE}{tag}").exists()
        False
    """
    _OWNER.release()


def owner_tag(create: bool = True) -> str:
    """This process's owner tag, `<pid>-o<random hex>`, which starts its segments' names.

    Made on first use (and anew in a forked child). With `create` (for naming segments),
    a locked owner file in the shared-memory folder proves this process alive to every
    other process sharing the folder, in this PID namespace or another; without it
    (for finding this process's segments), nothing is created.

    Example:
        >>> tag = owner_tag()
        >>> tag.startswith(f"{os.getpid()}-o"), tag == owner_tag()
        (True, True)
    """
    return _OWNER.ensure(shm_dir()) if create else _OWNER.current()


def _owner_of(name: str) -> str | None:
    """The owner tag in a segment's name; None for a name chute did not make this way."""
    parts = name[len(SHM_PREFIX) :].split("-")
    if len(parts) < 3 or not parts[0].isdigit() or not parts[1].startswith("o"):
        return None  # Also the names of chute before owner files (pid and start time).
    return f"{parts[0]}-{parts[1]}"


def _hold_if_dead(folder: Path, tag: str) -> tuple[bool, int]:
    """Whether `tag`'s process is gone, and a descriptor holding its lock if it is.

    A missing owner file means gone: it exists, locked, before any segment does. A file
    another user owns, or a lock that cannot be tried, means alive: never remove what
    may be in use.
    """
    try:
        fd = os.open(folder / f"{_OWNER_FILE}{tag}", os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return True, -1
    except OSError:
        return False, -1
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return False, -1
    return True, fd


def _remove_stale_temporary(path: Path) -> None:
    """Removes an owner file left half-made by a process killed while making it."""
    try:
        if time.time() - path.stat().st_mtime < _STALE_SECONDS:
            return  # Perhaps being made now: its lock comes next.
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.unlink(path)
    except OSError:
        pass
    finally:
        os.close(fd)


def reclaim_orphaned_segments(folder: Path | None = None) -> list[str]:
    """Removes segments whose owning process has died; returns their names.

    A process is dead when the lock on its owner file is free (the kernel releases it
    with the process), whatever PID namespace or container either process is in. The
    dead process's owner file goes too (not listed).
    """
    folder = folder or shm_dir()
    removed: list[str] = []
    try:
        names = [n for n in os.listdir(folder) if n.startswith((SHM_PREFIX, _OWNER_FILE))]
    except OSError:
        return removed
    mine = _OWNER.current()
    by_owner: dict[str, list[str]] = {}
    for name in names:
        if name.startswith(_OWNER_FILE):
            tag = name[len(_OWNER_FILE) :]
            if tag.endswith(".tmp"):
                _remove_stale_temporary(folder / name)
            else:
                by_owner.setdefault(tag, [])
            continue
        owner = _owner_of(name)
        if owner is not None:
            by_owner.setdefault(owner, []).append(name)
    for tag, segments in by_owner.items():
        if tag == mine:
            continue
        dead, fd = _hold_if_dead(folder, tag)
        if not dead:
            continue
        try:
            removed.extend(_unlink_all(folder, segments))
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.unlink(folder / f"{_OWNER_FILE}{tag}")
        finally:
            if fd >= 0:
                os.close(fd)
    return removed


def remove_own_segments(folder: Path | None = None) -> list[str]:
    """Unlinks every segment this process made, and its owner file; returns the segments.

    For a process about to end abruptly (`os._exit`), whose objects will not get to
    unlink theirs: it leaves nothing for the next chute process to reclaim.
    """
    folder = folder or shm_dir()
    mine = f"{SHM_PREFIX}{_OWNER.current()}-"
    removed: list[str] = []
    try:
        names = [n for n in os.listdir(folder) if n.startswith(mine)]
    except OSError:
        return removed
    removed = _unlink_all(folder, names)
    _OWNER.release()
    return removed


def _unlink_all(folder: Path, names: list[str]) -> list[str]:
    """Unlinks each of `names` in `folder`; returns those it removed (never raises)."""
    removed = []
    for name in names:
        try:
            os.unlink(folder / name)
            removed.append(name)
        except OSError:
            pass
    return removed


def new_segment_path(kind: str, folder: Path | None = None) -> Path:
    """A fresh name for a segment of this process holding `kind` (nothing is created).

    For taking over an existing segment by renaming it: the new name makes this process
    its owner, so it is unlinked with this process's other segments (and reclaimed
    after a crash).

    Args:
        kind: a short word naming what the segment holds, kept in its name.
        folder: the shared-memory folder (default: `shm_dir()`); a segment taken over
            stays in its own folder, whatever `CHUTE_SHM_DIR` says meanwhile.

    Example:
        >>> new_segment_path("slab").name.startswith(f"{SHM_PREFIX}{os.getpid()}-")
        True
    """
    folder = shm_dir() if folder is None else folder
    return folder / f"{SHM_PREFIX}{_OWNER.ensure(folder)}-{kind}-{secrets.token_hex(6)}"


def create_segment_file(kind: str) -> tuple[Path, int]:
    """Creates a new owner-only (mode 0600) segment file; returns its path and an fd.

    Args:
        kind: a short word naming what the segment holds, kept in its name.
    """
    reclaim_orphaned_segments()
    path = new_segment_path(kind)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    except OSError as error:
        raise SharedMemoryError(f"cannot create shared memory {path}: {error}") from error
    return path, fd


def no_space_error(path: Path, needed: int, error: OSError) -> SharedMemoryError:
    """A clear error for a full shared-memory folder."""
    free = shutil.disk_usage(path.parent).free
    hint = ""
    if error.errno in (errno.ENOSPC, errno.EFBIG):
        hint = (
            f" {path.parent} has {free / 2**20:.1f} MiB free and this needs "
            f"{needed / 2**20:.1f} MiB more. Free space there or make it larger (in Docker: "
            "--shm-size)."
        )
    return SharedMemoryError(f"cannot write shared memory {path}: {error}.{hint}")
