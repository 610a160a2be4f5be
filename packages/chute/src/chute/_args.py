"""Argument checks of the fluent API: every argument is checked when a stage is declared.

The rule is the lowest layer's (`chute_core._checks.check_int`, used by every node):
integers are Python or NumPy integers, never bools, and index-sized; weights are
positive finite numbers. Errors are `chute.ArgumentTypeError` (a `TypeError`) and
`chute.InvalidArgumentError` (a `ValueError`) naming the method and the argument, so a
bad pipeline fails where it is written, not when it is first iterated.
"""

from __future__ import annotations

from chute_core.internal import check_int, check_optional_int, check_seed, check_weights

__all__ = [
    "check_chunk_size",
    "check_device_buffers",
    "check_int",
    "check_optional_int",
    "check_seed",
    "check_weights",
]


def check_chunk_size(chunk_size: object) -> int | None:
    """`mp_prefetch`'s `chunk_size`: None (the default) or an int >= 1.

    Example:
        >>> check_chunk_size(None), check_chunk_size(8)
        (None, 8)
    """
    return check_optional_int(chunk_size, "chunk_size", "IterDataset.mp_prefetch", minimum=1)


def check_device_buffers(cpu_buffer_size: object, device_buffer_size: object) -> tuple[int, int]:
    """`to_device`'s buffer sizes as ints (`cpu_buffer_size >= 0`, `device_buffer_size >= 1`).

    Example:
        >>> check_device_buffers(0, 2)
        (0, 2)
    """
    owner = "IterDataset.to_device"
    return (
        check_int(cpu_buffer_size, "cpu_buffer_size", owner),
        check_int(device_buffer_size, "device_buffer_size", owner, minimum=1),
    )
