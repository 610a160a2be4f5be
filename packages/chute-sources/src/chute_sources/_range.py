"""`RangeSource`: the integers of a Python `range`, as a source."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from chute_core import InvalidArgumentError, LengthOverflowError, StageTraits, declare_op
from chute_core.internal import check_int

from ._base import Source

_VECTOR_LIMIT = 2**31
"""Ranges whose bounds stay below this are read with NumPy (int64 cannot overflow)."""

__all__ = ["RANGE", "RangeSource"]


class RangeSource(Source[int]):
    """The integers `range(start, stop, step)` as a random-access source.

    Called like `range`: `RangeSource(stop)` or `RangeSource(start, stop[, step])`.
    Useful for tests and for records generated on the fly from their key.

    Example:
        >>> source = RangeSource(1, 10, 2)
        >>> list(source), len(source), source[-1]
        ([1, 3, 5, 7, 9], 5, 9)
    """

    def __init__(self, start: int, stop: int | None = None, step: int = 1) -> None:
        if stop is None:
            start, stop = 0, start
        start, stop, step = (
            check_int(value, name, "RangeSource", minimum=None, maximum=None)
            for name, value in (("start", start), ("stop", stop), ("step", step))
        )
        if step == 0:
            raise InvalidArgumentError("RangeSource: step must not be zero.")
        self._range = range(start, stop, step)
        try:
            len(self._range)
        except OverflowError:
            raise LengthOverflowError(
                f"RangeSource: {self._range} has more than sys.maxsize elements, more than "
                "len() can count; use a shorter range."
            ) from None

    @property
    def start(self) -> int:
        """The first value."""
        return self._range.start

    @property
    def stop(self) -> int:
        """The end (exclusive)."""
        return self._range.stop

    @property
    def step(self) -> int:
        """The difference between consecutive values."""
        return self._range.step

    def __len__(self) -> int:
        return len(self._range)

    def _read(self, index: int) -> int:
        return self._range[index]

    def _read_many(self, indices: Sequence[int]) -> list[int]:
        r = self._range
        return [r[i] for i in indices]

    def _read_array(self, indices: npt.NDArray[np.int64]) -> list[int]:
        r = self._range
        if r.start == 0 and r.step == 1:
            values: list[int] = indices.tolist()
            return values
        if max(abs(r.start), abs(r.stop), abs(r.step)) < _VECTOR_LIMIT:  # No int64 overflow.
            values = (indices * r.step + r.start).tolist()
            return values
        return self._read_many(indices.tolist())

    def _params(self) -> dict[str, Any]:
        return {"start": self.start, "stop": self.stop, "step": self.step}


RANGE = declare_op("range", StageTraits(), map_node=RangeSource)
"""The op's declaration (see `chute_core.declare_op`)."""
