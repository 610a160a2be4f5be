"""Transforms that fail on purpose, for testing pipelines on worker processes.

They live in an importable module (not in a test file) because worker processes
started with spawn import the functions they run by name.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import numpy as np

from chute_transforms import RandomMapTransform

from ._leak_checks import (
    all_exited,
    chute_threads,
    exited,
    no_leaked_slabs,
    no_leaked_threads,
    own_slabs,
    slabs_of,
    wait_until,
)

__all__ = [
    "all_exited",
    "exited",
    "ANSWER_CTRL_C",
    "AddNoise",
    "BrokenSource",
    "Busy",
    "FailAt",
    "FailOn",
    "FailOnceAt",
    "FailOnSum",
    "FullArray",
    "KillWorkerAt",
    "KillWorkerOnSum",
    "LengthByBatch",
    "Remainder",
    "Repeat",
    "SleepAt",
    "chute_threads",
    "no_leaked_slabs",
    "no_leaked_threads",
    "own_slabs",
    "slabs_of",
    "wait_until",
]


ANSWER_CTRL_C = "import signal; signal.signal(signal.SIGINT, signal.default_int_handler)\n"
"""Python code that a test's child program starts with when it must answer Ctrl-C.

A process started with SIGINT ignored (`nohup pytest &`, some CI runners) passes that
on to the programs it starts, and Python then never raises `KeyboardInterrupt` in
them. A test of Ctrl-C sets the disposition its child needs, in the child (a
`preexec_fn` would run fork hooks in the test process, which jax warns about).

Example:
    >>> import subprocess, sys
    >>> code = ANSWER_CTRL_C + "print(signal.getsignal(signal.SIGINT).__name__)"
    >>> subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout
    'default_int_handler\\n'
"""


class FailAt:
    """A map that raises `exception_type(message)` on one element, identity elsewhere.

    Example:
        >>> FailAt(3)(2)
        2
    """

    def __init__(self, element: Any, exception_type: type[Exception] = ValueError) -> None:
        self.element = element
        self.exception_type = exception_type

    def __call__(self, element: Any) -> Any:
        """Returns `element`, or raises if it is the chosen one."""
        if element == self.element:
            raise self.exception_type(f"bad element {element!r}")
        return element


class FailOn:
    """A map that raises `exception_type` on every element in `elements`, identity elsewhere.

    Example:
        >>> FailOn({3, 5})(2)
        2
    """

    def __init__(self, elements: Any, exception_type: type[Exception] = ValueError) -> None:
        self.elements = frozenset(elements)
        self.exception_type = exception_type

    def __call__(self, element: Any) -> Any:
        """Returns `element`, or raises if it is one of the chosen ones."""
        if element in self.elements:
            raise self.exception_type(f"bad element {element!r}")
        return element


class FailOnceAt:
    """A map that raises on one element the first time only, in any process.

    The first failure creates the file `marker`; later calls (in this process or any
    other) pass the element through: a transient failure, such as a read that timed out.

    Example:
        >>> import os, tempfile
        >>> marker = os.path.join(tempfile.mkdtemp(), "failed")
        >>> fail = FailOnceAt(1, marker)
        >>> try:
        ...     fail(1)
        ... except OSError as error:
        ...     print(error)
        transient failure on 1
        >>> fail(1)
        1
    """

    def __init__(self, element: Any, marker: str) -> None:
        self.element, self.marker = element, marker

    def __call__(self, element: Any) -> Any:
        """Returns `element`, or raises the first time it is the chosen one."""
        if element == self.element and not os.path.exists(self.marker):
            with open(self.marker, "x"):
                pass
            raise OSError(f"transient failure on {element!r}")
        return element


class BrokenSource:
    """A source of `range(length)` whose records at `broken` positions fail to decode.

    Example:
        >>> source = BrokenSource(4, {2})
        >>> source[1], len(source)
        (1, 4)
    """

    def __init__(self, length: int, broken: Any) -> None:
        self.length, self.broken = length, frozenset(broken)

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, key: int) -> int:
        """Record `key`, or `CorruptRecordError` if it is broken."""
        from chute_core import CorruptRecordError

        if key in self.broken:
            raise CorruptRecordError(f"record {key} does not decode")
        return int(key)

    def __repr__(self) -> str:
        return f"BrokenSource({self.length}, broken={sorted(self.broken)})"


class KillWorkerAt:
    """A map that kills its own process with SIGKILL on one element (in a worker only).

    Example:
        >>> KillWorkerAt(3)(2)
        2
    """

    def __init__(self, element: Any) -> None:
        self.element = element
        self.parent = os.getpid()

    def __call__(self, element: Any) -> Any:
        """Returns `element`, or kills this (worker) process if it is the chosen one."""
        if element == self.element and os.getpid() != self.parent:
            os.kill(os.getpid(), signal.SIGKILL)
        return element


class SleepAt:
    """A map that sleeps `seconds` on one element (a stuck worker), identity elsewhere.

    Example:
        >>> SleepAt(3, 0.0)(3)
        3
    """

    def __init__(self, element: Any, seconds: float) -> None:
        self.element = element
        self.seconds = seconds

    def __call__(self, element: Any) -> Any:
        """Returns `element`, after sleeping if it is the chosen one."""
        if element == self.element:
            time.sleep(self.seconds)
        return element


class Busy:
    """A map that keeps the CPU busy `seconds` per element, then returns it (a slow transform).

    Example:
        >>> Busy(0.0)(3)
        3
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __call__(self, element: Any) -> Any:
        """Returns `element` after `seconds` of work."""
        until = time.perf_counter() + self.seconds
        while time.perf_counter() < until:
            pass
        return element


class Remainder:
    """A predicate: `element % divisor == remainder` (a picklable filter for tests).

    Example:
        >>> [x for x in range(7) if Remainder(3, 1)(x)]
        [1, 4]
    """

    def __init__(self, divisor: int, remainder: int) -> None:
        self.divisor, self.remainder = divisor, remainder

    def __call__(self, element: int) -> bool:
        """Whether `element` leaves the remainder."""
        return element % self.divisor == self.remainder


class Repeat:
    """A flat map: `element` repeated `element % modulus` times (0 times drops it).

    Example:
        >>> Repeat(3)(5), Repeat(3)(6)
        ([5, 5], [])
    """

    def __init__(self, modulus: int) -> None:
        self.modulus = modulus

    def __call__(self, element: int) -> list[int]:
        """The repeated element."""
        return [element] * (element % self.modulus)


class AddNoise(RandomMapTransform[Any, float]):
    """A random map: `element + rng.random()` (a picklable random transform for tests).

    Example:
        >>> import numpy as np
        >>> 0 <= AddNoise().random_map(0, np.random.default_rng(0)) < 1
        True
    """

    def random_map(self, element: Any, rng: np.random.Generator) -> float:
        """The element plus a uniform draw in [0, 1)."""
        return float(element) + float(rng.random())


class FullArray:
    """A map from an int to an int64 array of `size` copies of it.

    Example:
        >>> FullArray(3)(7)
        array([7, 7, 7])
    """

    def __init__(self, size: int) -> None:
        self.size = size

    def __call__(self, element: int) -> np.ndarray[Any, np.dtype[np.int64]]:
        """The array."""
        return np.full(self.size, element, dtype=np.int64)


class LengthByBatch:
    """A map from `i` to an int64 array of `i // size + 1` copies of `i`.

    Batches of `size` then each have their own shape, so a chunk holding several of
    them cannot be stacked as one.

    Example:
        >>> LengthByBatch(2)(3)
        array([3, 3])
    """

    def __init__(self, size: int) -> None:
        self.size = size

    def __call__(self, element: int) -> np.ndarray[Any, np.dtype[np.int64]]:
        """The array."""
        return np.full(element // self.size + 1, element, dtype=np.int64)


class FailOnSum:
    """A map over arrays that raises `ValueError` when an array sums to `total`.

    Example:
        >>> FailOnSum(5)(np.arange(3)).tolist()
        [0, 1, 2]
    """

    def __init__(self, total: int) -> None:
        self.total = total

    def __call__(self, array: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """Returns `array`, or raises if it sums to the total."""
        if int(array.sum()) == self.total:
            raise ValueError(f"array sums to {self.total}")
        return array


class KillWorkerOnSum:
    """A map over arrays that SIGKILLs its (worker) process when an array sums to `total`.

    Example:
        >>> KillWorkerOnSum(5)(np.arange(3)).tolist()
        [0, 1, 2]
    """

    def __init__(self, total: int) -> None:
        self.total = total
        self.parent = os.getpid()

    def __call__(self, array: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """Returns `array`, or kills this worker if it sums to the total."""
        if int(array.sum()) == self.total and os.getpid() != self.parent:
            os.kill(os.getpid(), signal.SIGKILL)
        return array
