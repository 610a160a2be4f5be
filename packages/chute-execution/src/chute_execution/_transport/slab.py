"""One shared-memory slab: a segment file of fixed size, mapped once and reused.

The writer creates a slab with every page reserved up front (`posix_fallocate`), so a
full `/dev/shm` fails here, as a `SharedMemoryError`, and never later as a `SIGBUS` on a
write into the mapping (tmpfs would otherwise hand out pages lazily). Both sides map the
whole slab once with its pages pre-faulted (`MAP_POPULATE`), so a reused slab costs no
page faults. A slab's name and size never change: a larger one is a new segment.
"""

from __future__ import annotations

import errno
import mmap
import os
from pathlib import Path
from typing import Any

import numpy as np

from chute_core import SharedMemoryError
from chute_core.internal import SHM_PREFIX, create_segment_file, no_space_error, shm_dir

__all__ = ["Slab", "slab_path", "unlink_quietly"]

_POPULATE = getattr(mmap, "MAP_POPULATE", 0)
_ZEROS = bytes(1 << 20)


def slab_path(name: str) -> Path:
    """The path of the slab `name`; refuses names that are not chute segments."""
    if not name.startswith(SHM_PREFIX) or "/" in name or name in (".", ".."):
        raise SharedMemoryError(f"{name!r} is not the name of a chute shared-memory slab")
    return shm_dir() / name


def unlink_quietly(path: str) -> bool:
    """Unlinks `path`; returns False if it was already gone or cannot be removed.

    Never raises: clean-up goes on past a file it may not remove (another user's file
    under a name of ours, a folder that was removed).
    """
    try:
        os.unlink(path)
    except OSError:
        return False
    return True


def _reserve(fd: int, size: int) -> None:
    """Gives the file `size` bytes of storage that exist now, not at first write."""
    if hasattr(os, "posix_fallocate"):
        try:
            os.posix_fallocate(fd, 0, size)
            return
        except OSError as error:
            if error.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                raise
    os.ftruncate(fd, size)
    for offset in range(0, size, len(_ZEROS)):  # Writing zeros allocates every page.
        os.pwrite(fd, _ZEROS[: min(len(_ZEROS), size - offset)], offset)


class Slab:
    """A mapped segment and a `uint8` array over all of it.

    Use `Slab.create` in the writer (owner) and `Slab.attach` in the reader.

    Example:
        >>> slab = Slab.create(4096)
        >>> slab.array[:3] = [1, 2, 3]
        >>> copy = Slab.attach(slab.name, 4096)
        >>> copy.array[:4].tolist(), copy.array.flags.writeable
        ([1, 2, 3, 0], False)
        >>> copy.close(); slab.close(); unlink_quietly(slab.path)
        True
    """

    def __init__(self, path: str, size: int, mapping: mmap.mmap) -> None:
        self.path = path
        self.size = size
        self.inode = -1
        """The file's inode (`attach` sets it): the same slab under any later name."""
        self._mapping: mmap.mmap | None = mapping
        self.array: np.ndarray[Any, np.dtype[np.uint8]] = np.frombuffer(mapping, np.uint8)

    @property
    def name(self) -> str:
        """The segment's file name."""
        return os.path.basename(self.path)

    @classmethod
    def create(cls, size: int) -> Slab:
        """A new owner-only segment of `size` bytes, all reserved, mapped read-write.

        Raises:
            SharedMemoryError: the segment cannot be created (e.g. `/dev/shm` is full).
        """
        path, fd = create_segment_file("slab")
        try:
            try:
                _reserve(fd, size)
            except OSError as error:
                raise no_space_error(path, size, error) from error
            mapping = mmap.mmap(fd, size, flags=mmap.MAP_SHARED | _POPULATE)
        except BaseException:
            unlink_quietly(str(path))
            raise
        finally:
            os.close(fd)
        return cls(str(path), size, mapping)

    @classmethod
    def attach(cls, name: str, size: int, *, writable: bool = False) -> Slab:
        """Maps an existing slab, read-only unless `writable`.

        A writable mapping lets a consumer hand out writable arrays that are views of a
        region the writer has leased to it (see `SlabReader.read_leased`).

        Raises:
            SharedMemoryError: the slab is gone or smaller than `size`.
        """
        path = slab_path(name)
        try:
            fd = os.open(path, os.O_RDWR if writable else os.O_RDONLY)
        except FileNotFoundError:
            raise SharedMemoryError(
                f"the shared-memory slab {path} is gone: the worker process that wrote it "
                "exited or closed its writer before the message was read."
            ) from None
        except OSError as error:
            raise SharedMemoryError(f"cannot open shared-memory slab {path}: {error}") from error
        try:
            found = os.fstat(fd).st_size
            if found < size:
                raise SharedMemoryError(
                    f"the shared-memory slab {path} has {found} bytes, the message says "
                    f"{size}: it is not the slab the message was written to."
                )
            prot = mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0)
            mapping = mmap.mmap(fd, size, flags=mmap.MAP_SHARED | _POPULATE, prot=prot)
            inode = os.fstat(fd).st_ino
        finally:
            os.close(fd)
        slab = cls(str(path), size, mapping)
        slab.inode = inode
        return slab

    def region(self, start: int, stop: int) -> np.ndarray[Any, np.dtype[np.uint8]]:
        """A new `uint8` array over bytes `[start, stop)` whose `.base` is the mapping.

        Views of it (slices, `np.frombuffer`, reshapes) all keep it as their `.base`
        (NumPy stops collapsing a chain of bases at a non-array), so it lives exactly
        as long as any array made from it: a `weakref.finalize` on it runs once the
        last of them is gone.
        """
        if self._mapping is None:
            raise ValueError(f"the slab {self.name} is closed")
        return np.frombuffer(self._mapping, np.uint8, count=stop - start, offset=start)

    def close(self) -> None:
        """Unmaps the slab (once nothing else uses the mapping); does not unlink it."""
        mapping, self._mapping = self._mapping, None
        self.array = np.empty(0, np.uint8)
        if mapping is not None:
            try:
                mapping.close()
            except BufferError:
                pass  # A copy in flight still holds a view; the mapping goes with it.
