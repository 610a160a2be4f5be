"""Named shared-memory files that nothing leaks: owner-only, reclaimed after a crash.

A segment is a file in `/dev/shm` (or the folder `$CHUTE_SHM_DIR` names, or the temp
folder where there is no `/dev/shm`) named `chute-<pid>-<start time>-<token>`. The
process that creates it owns it and unlinks it on close, at garbage collection and at
interpreter exit. When a process dies without cleaning up (SIGKILL, power cut of the
container), the next chute process that creates a segment reclaims it: the name says
which process owned it, and `/proc` says whether that process still lives.
"""

from __future__ import annotations

import errno
import os
import secrets
import shutil
import tempfile
from pathlib import Path

from ._errors import SharedMemoryError

__all__ = [
    "SHM_DIR_ENV",
    "SHM_PREFIX",
    "create_segment_file",
    "new_segment_path",
    "no_space_error",
    "owner_tag_of",
    "reclaim_orphaned_segments",
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


def _start_time(pid: int) -> str | None:
    """The process's start time (clock ticks since boot), or None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Field 22; the command name (field 2) may hold spaces, so count from its ')'.
    return stat.rsplit(")", 1)[1].split()[19]


def _owner_tag() -> str:
    pid = os.getpid()
    return f"{pid}-{_start_time(pid) or '0'}"


def owner_tag_of(pid: int) -> str | None:
    """The `<pid>-<start time>` that names process `pid`'s segments (None: it is gone).

    Read while the process lives, it tells its segments from those of a later process
    that gets the same pid.

    Example:
        >>> owner_tag_of(os.getpid()).startswith(f"{os.getpid()}-")
        True
    """
    start = _start_time(pid)
    return None if start is None else f"{pid}-{start}"


def _is_orphan(name: str) -> bool:
    parts = name[len(SHM_PREFIX) :].split("-")
    if len(parts) < 3 or not parts[0].isdigit():
        return False
    pid, start = int(parts[0]), parts[1]
    if pid == os.getpid():
        return False
    if not Path("/proc").is_dir():
        return False  # Cannot tell; never remove what may be in use.
    alive = _start_time(pid)
    return alive is None or alive != start


def reclaim_orphaned_segments(folder: Path | None = None) -> list[str]:
    """Removes segments whose owning process has died; returns their names."""
    folder = folder or shm_dir()
    removed: list[str] = []
    try:
        names = [n for n in os.listdir(folder) if n.startswith(SHM_PREFIX)]
    except OSError:
        return removed
    for name in names:
        if _is_orphan(name):
            try:
                os.unlink(folder / name)
                removed.append(name)
            except OSError:
                pass
    return removed


def remove_own_segments(folder: Path | None = None) -> list[str]:
    """Unlinks every segment this process made; returns their names.

    For a process about to end abruptly (`os._exit`), whose objects will not get to
    unlink theirs: it leaves nothing for the next chute process to reclaim.
    """
    folder = folder or shm_dir()
    mine = f"{SHM_PREFIX}{_owner_tag()}-"
    removed: list[str] = []
    try:
        names = [n for n in os.listdir(folder) if n.startswith(mine)]
    except OSError:
        return removed
    for name in names:
        try:
            os.unlink(folder / name)
            removed.append(name)
        except OSError:
            pass
    return removed


def new_segment_path(kind: str) -> Path:
    """A fresh name for a segment of this process holding `kind` (nothing is created).

    For taking over an existing segment by renaming it: the new name makes this process
    its owner, so it is unlinked with this process's other segments (and reclaimed
    after a crash).

    Example:
        >>> new_segment_path("slab").name.startswith(f"{SHM_PREFIX}{os.getpid()}-")
        True
    """
    return shm_dir() / f"{SHM_PREFIX}{_owner_tag()}-{kind}-{secrets.token_hex(6)}"


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
