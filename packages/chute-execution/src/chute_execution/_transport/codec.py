"""Pickling with NumPy data out of band, the layout of that data in a slab, the message.

`dumps` pickles an object with protocol 5 and a dispatch table that sends the raw bytes
of every NumPy array (any shape, dtype, byte order or memory layout, except object and
variable-width string dtypes, which hold Python objects) out of band as a `PickleBuffer`,
so only metadata and small Python objects are in the pickle stream. Non-contiguous arrays
are made contiguous first. Arrays of other kinds (subclasses with their own pickling such
as masked arrays) pickle as they always do.

`layout` places the out-of-band buffers in a slab: small ones packed at the start (the
reader copies them out in one block), large ones each on its own 64-byte boundary.

`loads` rebuilds the object from the stream and the buffers. Arrays rebuilt from writable
buffers are writable, also when the writer's array was read-only: the reader hands in
fresh copies, or views of a slab region leased to the result, which belong to nobody else.
"""

from __future__ import annotations

import copyreg
import io
import pickle
from collections.abc import Sequence
from types import MappingProxyType
from typing import Any, Literal, NamedTuple, TypeAlias

import numpy as np

__all__ = ["ALIGN", "SMALL_BUFFER", "SlabMessage", "Span", "dumps", "layout", "loads"]

ALIGN = 64
"""Byte alignment of every buffer in a slab (a cache line; enough for any dtype)."""

SMALL_BUFFER = 16 * 1024
"""Buffers below this many bytes are packed together and copied out as one block."""

Span: TypeAlias = tuple[int, int]
"""(offset, nbytes) of one out-of-band buffer in a slab."""


class SlabMessage(NamedTuple):
    """One written object: what the consumer needs to read it. Small and picklable.

    Attributes:
        data: the pickle stream, without the array bytes.
        spans: (offset, nbytes) of each out-of-band buffer in the slab, in stream order.
        packed: the leading bytes of the slab that hold the small buffers.
        slab: the slab's file name; empty when the object has no array bytes.
        slab_size: the slab's size in bytes.
        writer: the writer's id, `"<pid>-<random hex>"`.
        slot: which of the writer's slabs this is.
        token: what to hand back to the writer's `release` once read; None when the
            message holds no slab (nothing to release).

    Example:
        >>> from chute_execution._transport import SlabWriter
        >>> with SlabWriter(num_slabs=1) as writer:
        ...     message = writer.write({"x": np.zeros(1000), "label": 3})
        >>> message.spans, message.packed, message.token
        (((0, 8000),), 8000, 0)
    """

    data: bytes
    spans: tuple[Span, ...]
    packed: int
    slab: str
    slab_size: int
    writer: str
    slot: int
    token: int | None


def _rebuild_array(
    buffer: Any, dtype: np.dtype[Any], shape: tuple[int, ...], order: Literal["C", "F"]
) -> np.ndarray[Any, Any]:
    """The inverse of `_reduce_array`: a view of `buffer` with the array's dtype and shape."""
    if type(buffer) is memoryview and buffer.readonly and isinstance(buffer.obj, np.ndarray):
        # pickle marks buffers of read-only arrays read-only; ours are fresh copies.
        buffer = buffer.obj
    array = np.frombuffer(buffer, dtype=dtype)
    if len(shape) == 1:
        return array  # Already the shape; reshape is slow next to small arrays' copies.
    return array.reshape(shape, order=order) if order == "F" else array.reshape(shape)


def _reduce_array(array: np.ndarray[Any, Any]) -> str | tuple[Any, ...]:
    """Reduces a plain array to `_rebuild_array` and an out-of-band byte buffer."""
    dtype = array.dtype
    if dtype.hasobject or dtype.itemsize == 0:
        return array.__reduce_ex__(5)  # Python objects (or nothing) travel in band.
    flags = array.flags
    order = "C" if flags.c_contiguous else "F" if flags.f_contiguous else None
    if order is None:
        array, order = np.ascontiguousarray(array), "C"
    try:
        raw = pickle.PickleBuffer(array)  # type: ignore[arg-type]  # numpy types __buffer__ on 3.12+
    except (
        ValueError,
        TypeError,
        BufferError,
    ):  # datetime64 and timedelta64 export no buffer; their bytes do.
        flat = array.reshape(-1) if order == "C" else array.T.reshape(-1)
        raw = pickle.PickleBuffer(flat.view(np.uint8).data)
    return _rebuild_array, (raw, dtype, array.shape, order)


def _reduce_ndarray_subclass(array: np.ndarray[Any, Any]) -> str | tuple[Any, ...]:
    """`np.memmap` and the like: their data travels as a plain array."""
    return _reduce_array(array.view(np.ndarray))


class _Pickler(pickle.Pickler):
    dispatch_table = MappingProxyType(
        {**copyreg.dispatch_table, np.ndarray: _reduce_array, np.memmap: _reduce_ndarray_subclass}
    )


def dumps(obj: object) -> tuple[bytes, list[pickle.PickleBuffer]]:
    """Pickles `obj`; returns the stream and the out-of-band buffers, in order.

    Example:
        >>> data, buffers = dumps({"x": np.arange(1000), "label": 3})
        >>> len(buffers), buffers[0].raw().nbytes, len(data) < 300
        (1, 8000, True)
    """
    buffers: list[pickle.PickleBuffer] = []
    stream = io.BytesIO()
    _Pickler(stream, protocol=5, buffer_callback=buffers.append).dump(obj)
    return stream.getvalue(), buffers


def loads(data: bytes, buffers: Sequence[Any] = ()) -> Any:
    """Unpickles `data` with `buffers` for its out-of-band buffers (in `dumps` order).

    Only for streams from `dumps` in a process of this program: unpickling runs code named
    in the stream, so it must never see bytes from a file or the network.

    Example:
        >>> data, buffers = dumps([np.arange(3.0)])
        >>> loads(data, [bytearray(b.raw()) for b in buffers])
        [array([0., 1., 2.])]
    """
    return pickle.loads(data, buffers=buffers)


def layout(sizes: Sequence[int]) -> tuple[list[Span], int, int]:
    """Places buffers of `sizes` bytes in a slab.

    Returns:
        The span of each buffer, the length of the packed region of small buffers at the
        start of the slab, and the bytes the slab needs in all.

    Example:
        >>> layout([10, 100_000, 3])
        ([(0, 10), (128, 100000), (64, 3)], 128, 100128)
    """
    spans: list[Span] = []
    small_end = sum(-(-size // ALIGN) * ALIGN for size in sizes if size < SMALL_BUFFER)
    small_at, end = 0, small_end
    for size in sizes:
        if size < SMALL_BUFFER:
            spans.append((small_at, size))
            small_at += -(-size // ALIGN) * ALIGN
        else:
            offset = -(-end // ALIGN) * ALIGN
            spans.append((offset, size))
            end = offset + size
    return spans, small_end, end
