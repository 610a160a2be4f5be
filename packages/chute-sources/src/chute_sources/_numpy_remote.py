"""`.npy` files in buckets: the header from a ranged read, rows from merged ranged reads.

A `.npy` file is a header followed by the array's bytes, so row `i` of a C-order array
is one byte range, and of a Fortran-order array one element in each of the `K` column
stripes (`K` = the elements of a row). A read finds the byte ranges ("runs") of its
rows, merges runs less than `_GAP` bytes apart into one request (reading the bytes in
between along: a request costs more than that many bytes), cuts long requests into
`_PIECE`-byte pieces fetched concurrently, and copies the rows out. Every request asks
for the version (ETag) seen when the source was created, so rows never mix versions.

`prefetch` fetches the runs of rows to be read soon in the background, within
`StorageOptions.prefetch_bytes`; reads take their bytes from there when they can.
"""

from __future__ import annotations

import dataclasses
import io
import math
import struct
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
from numpy.lib import format as npy_format

from chute_core import SourceFileError

from ._npy_header import FIX, MAX_HEADER_SIZE, NpyHeader, check_header, read_header
from ._remote._client import ObjectInfo, client_for
from ._remote._options import StorageOptions
from ._remote._urls import parse_object_url

__all__ = ["RemoteNpy"]

_OWNER = "NumpySource"
_FIRST_READ = 4096  # Bytes read to find the header (np.save writes 128 or so).
_GAP = 1 << 20  # Runs closer than this are read in one request, with the bytes between.
_PIECE = 8 << 20  # Longer requests are cut into pieces of this size, fetched concurrently.
_ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")

_Ints = npt.NDArray[np.int64]


class _Runs(NamedTuple):
    """Byte runs of the file, sorted by `start`, and where their units go in the output."""

    start: _Ints  # Offset in the file.
    units: _Ints  # Length, in units (rows for C order, elements for Fortran order).
    dst: _Ints  # First unit's index in the output block.
    row_run: _Ints  # Which run of consecutive rows it belongs to.


@dataclasses.dataclass
class _Entry:
    """A prefetched byte range and the hinted rows it holds bytes of (not yet read)."""

    start: int
    end: int
    future: Future[Any]
    rows: _Ints


def _aranges(firsts: _Ints, lengths: _Ints) -> _Ints:
    """`concatenate([arange(f, f + n) for f, n in zip(firsts, lengths)])`, vectorized."""
    total = int(lengths.sum())
    before = np.cumsum(lengths) - lengths
    return np.repeat(firsts - before, lengths) + np.arange(total, dtype=np.int64)


def _merge(start: _Ints, end: _Ints) -> tuple[_Ints, _Ints]:
    """Sorted byte ranges merged where less than `_GAP` bytes apart."""
    new = np.ones(len(start), dtype=bool)
    new[1:] = start[1:] - end[:-1] > _GAP
    firsts = np.flatnonzero(new)
    return start[firsts], np.maximum.reduceat(end, firsts)


def _header_length(head: bytes) -> int:
    """The bytes magic plus header take, from the version and length fields."""
    if len(head) >= 10 and head[6] == 1:
        return 10 + int(struct.unpack("<H", head[8:10])[0])
    if len(head) >= 12 and head[6] in (2, 3):
        return 12 + int(struct.unpack("<I", head[8:12])[0])
    return len(head)  # An unknown version or a truncated file: the parser says which.


class RemoteNpy:
    """One `.npy` object: its header, and rows read by ranged reads.

    Args:
        info: the object (its URL, size and version).
        options: how to reach it, and the prefetch budget.
        header: its parsed header (see `open`).
    """

    def __init__(self, info: ObjectInfo, options: StorageOptions, header: NpyHeader) -> None:
        self.info = info
        self.options = options
        self.header = header
        self._init_runtime()

    def _init_runtime(self) -> None:
        self._lock = threading.Lock()
        self._entries: list[_Entry] = []
        self._held = 0
        self._pool: ThreadPoolExecutor | None = None

    @classmethod
    def open(cls, url: str, options: StorageOptions) -> RemoteNpy:
        """Reads and checks the header of the `.npy` object at `url`.

        Raises:
            SourceFileNotFoundError: no such object or bucket.
            SourceFileError: not a `.npy` file (a `.npz` says to use `.npy` files),
                a corrupt header, an object or 0-d array, or a truncated file.
        """
        client = client_for(options)
        info = client.stat(parse_object_url(url, _OWNER))
        head = bytes(client.read(info, 0, min(info.size, _FIRST_READ)))
        if head[:4] in _ZIP_MAGICS:
            raise SourceFileError(
                f"NumpySource: {url} is a .npz archive; NumpySource reads .npy files from "
                "buckets (by ranged reads of the rows wanted). Save each array as its own .npy "
                "file (np.save), or download the .npz and pass its local path."
            )
        prefix = npy_format.MAGIC_PREFIX
        if head[: len(prefix)] != prefix:
            raise SourceFileError(
                f"NumpySource: {url} is not a .npy file (starting with {prefix!r}), it starts "
                f"with {head[:8]!r}; {FIX}."
            )
        wanted = min(_header_length(head), info.size, 12 + MAX_HEADER_SIZE + 1)
        if wanted > len(head):
            head += bytes(client.read(info, len(head), wanted))
        header = read_header(io.BytesIO(head), url)
        check_header(header, url, info.size - header.size)
        return cls(info, options, header)

    @property
    def shape(self) -> tuple[int, ...]:
        """The array's shape."""
        return self.header.shape

    @property
    def dtype(self) -> np.dtype[Any]:
        """The array's dtype."""
        return self.header.dtype

    def __len__(self) -> int:
        return self.header.shape[0]

    def __getitem__(self, key: Any) -> Any:
        """Row `key` (an int), or rows `key` (an integer array), as NumPy indexing gives."""
        if isinstance(key, np.ndarray):
            return self.rows(key)
        return self.rows([int(key)])[0]

    def __getstate__(self) -> dict[str, Any]:
        return {"info": self.info, "options": self.options, "header": self.header}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_runtime()

    @property
    def _striped(self) -> bool:
        """Whether a row is spread over column stripes (Fortran order, 2-D or more)."""
        return self.header.fortran_order and len(self.header.shape) > 1

    @property
    def _unit(self) -> int:
        """Bytes of one unit: a row (C order) or an element (Fortran order)."""
        header = self.header
        if self._striped:
            return header.dtype.itemsize
        return math.prod(header.shape[1:]) * header.dtype.itemsize

    @property
    def _row_bytes(self) -> int:
        return math.prod(self.header.shape[1:]) * self.header.dtype.itemsize

    def _runs(self, rows: _Ints) -> _Runs:
        """The byte runs of the sorted, distinct `rows`."""
        header = self.header
        unit = self._unit
        breaks = np.flatnonzero(np.diff(rows) != 1) + 1
        firsts = np.concatenate([[0], breaks]).astype(np.int64)
        counts = np.diff(np.concatenate([firsts, [len(rows)]])).astype(np.int64)
        start = header.size + rows[firsts] * unit
        if not self._striped:
            return _Runs(start, counts, firsts, np.arange(len(firsts), dtype=np.int64))
        stripes = np.arange(math.prod(header.shape[1:]), dtype=np.int64)[:, None]
        stride = header.shape[0] * unit  # Bytes of one column stripe.
        return _Runs(
            (start[None, :] + stripes * stride).ravel(),
            np.broadcast_to(counts, (len(stripes), len(counts))).ravel(),
            (firsts[None, :] + stripes * len(rows)).ravel(),
            np.broadcast_to(np.arange(len(firsts)), (len(stripes), len(firsts))).ravel(),
        )

    def rows(self, positions: Sequence[int] | _Ints) -> npt.NDArray[Any]:
        """Rows `positions` (in range, any order, repeats allowed) as one array."""
        header = self.header
        keys = np.asarray(positions, dtype=np.int64)
        if len(keys) == 0 or self._row_bytes == 0:
            return np.zeros((len(keys), *header.shape[1:]), header.dtype)
        unit = self._unit
        unique, inverse = np.unique(keys, return_inverse=True)
        runs = self._runs(unique)
        out = np.empty((len(unique) * self._row_bytes // unit, unit), np.uint8)
        taken = self._from_prefetched(runs, unit, out)
        rest = np.flatnonzero(~taken)
        if len(rest):
            ends = runs.start[rest] + runs.units[rest] * unit
            merged = _merge(runs.start[rest], ends)
            segments = list(zip(*merged, self._fetch(*merged), strict=True))
            _copy(runs, rest, segments, unit, out)
        self._used(unique)
        block = out.reshape(-1).view(header.dtype)
        shape = (len(unique), *header.shape[1:])
        rows = block.reshape(shape, order="F") if self._striped else block.reshape(shape)
        return rows[inverse]

    def _fetch(self, starts: _Ints, ends: _Ints) -> list[Any]:
        """The bytes of each range, requests cut into pieces fetched concurrently."""
        pieces = [
            (offset, min(offset + _PIECE, end))
            for start, end in zip(starts.tolist(), ends.tolist(), strict=True)
            for offset in range(start, end, _PIECE)
        ]
        data = client_for(self.options).read_ranges(self.info, pieces)
        out: list[Any] = []
        index = 0
        for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
            count = -(-(end - start) // _PIECE)
            parts = data[index : index + count]
            out.append(parts[0] if count == 1 else b"".join(parts))
            index += count
        return out

    def _fetch_one(self, start: int, end: int) -> Any:
        return self._fetch(np.asarray([start]), np.asarray([end]))[0]

    def _from_prefetched(self, runs: _Runs, unit: int, out: npt.NDArray[np.uint8]) -> Any:
        """Copies the runs that prefetched ranges hold into `out`; returns which those were."""
        taken = np.zeros(len(runs.start), dtype=bool)
        with self._lock:
            entries = sorted(self._entries, key=lambda entry: entry.start)
        if not entries:
            return taken
        starts = np.asarray([entry.start for entry in entries], dtype=np.int64)
        which = np.searchsorted(starts, runs.start, side="right") - 1
        ends = runs.start + runs.units * unit
        for number in np.unique(which[which >= 0]).tolist():
            entry = entries[number]
            inside = np.flatnonzero((which == number) & (ends <= entry.end))
            if not len(inside):
                continue
            try:
                data = entry.future.result()
            except Exception:  # A failed prefetch: the read asks again (and reports).
                self._drop(entry)
                continue
            _copy(runs, inside, [(entry.start, entry.end, data)], unit, out)
            taken[inside] = True
        return taken

    def prefetch(self, positions: Sequence[int] | _Ints) -> None:
        """Starts fetching the rows `positions` in the background (a hint; returns at once).

        Ranges already fetched or under way are not fetched again; prefetching stops
        at `StorageOptions.prefetch_bytes` held, after dropping the oldest finished
        ranges. Reads use what arrived and fetch the rest themselves.
        """
        budget = self.options.prefetch_bytes
        keys = np.asarray(positions, dtype=np.int64)
        if budget <= 0 or len(keys) == 0 or self._row_bytes == 0:
            return
        unique = np.unique(keys)
        runs = self._runs(unique)
        unit = self._unit
        ends = runs.start + runs.units * unit
        with self._lock:
            fresh = np.ones(len(runs.start), dtype=bool)
            for entry in self._entries:
                fresh &= ~((runs.start >= entry.start) & (ends <= entry.end))
            if not fresh.any():
                return
            index = np.flatnonzero(fresh)
            merged_starts, merged_ends = _merge(runs.start[index], ends[index])
            owner = np.searchsorted(merged_starts, runs.start[index], side="right") - 1
            firsts = np.concatenate([[0], np.flatnonzero(np.diff(unique) != 1) + 1])
            lasts = np.concatenate([firsts[1:], [len(unique)]])
            for number, (start, end) in enumerate(zip(merged_starts, merged_ends, strict=True)):
                size = int(end - start)
                if not self._make_room(size, budget):
                    break
                row_runs = np.unique(runs.row_run[index[owner == number]])
                held = np.concatenate([unique[firsts[r] : lasts[r]] for r in row_runs])
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(2, thread_name_prefix="chute-npy-prefetch")
                future = self._pool.submit(self._fetch_one, int(start), int(end))
                self._entries.append(_Entry(int(start), int(end), future, held))
                self._held += size

    def _make_room(self, size: int, budget: int) -> bool:
        """Drops the oldest finished entries until `size` more bytes fit (lock held)."""
        while self._held + size > budget:
            done = next((entry for entry in self._entries if entry.future.done()), None)
            if done is None:
                return False
            self._entries.remove(done)
            self._held -= done.end - done.start
        return True

    def _drop(self, entry: _Entry) -> None:
        with self._lock:
            if entry in self._entries:
                self._entries.remove(entry)
                self._held -= entry.end - entry.start

    def _used(self, rows: _Ints) -> None:
        """Forgets prefetched ranges once every hinted row they hold was read."""
        with self._lock:
            for entry in list(self._entries):
                entry.rows = np.setdiff1d(entry.rows, rows, assume_unique=True)
                if not len(entry.rows):
                    self._entries.remove(entry)
                    self._held -= entry.end - entry.start

    def close(self) -> None:
        """Stops prefetching and drops what was prefetched."""
        with self._lock:
            pool, self._pool = self._pool, None
            self._entries.clear()
            self._held = 0
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


def _copy(
    runs: _Runs,
    which: _Ints,
    segments: list[tuple[Any, Any, Any]],
    unit: int,
    out: npt.NDArray[np.uint8],
) -> None:
    """Copies runs `which` from the byte ranges `segments` (sorted, holding them) to `out`."""
    starts = np.asarray([int(start) for start, _, _ in segments], dtype=np.int64)
    owner = np.searchsorted(starts, runs.start[which], side="right") - 1
    for number in np.unique(owner).tolist():
        start, end, data = segments[number]
        chosen = which[owner == number]
        source = np.frombuffer(data, np.uint8, count=int(end) - int(start)).reshape(-1, unit)
        lengths = runs.units[chosen]
        src = _aranges((runs.start[chosen] - int(start)) // unit, lengths)
        out[_aranges(runs.dst[chosen], lengths)] = source[src]
