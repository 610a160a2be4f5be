"""Object keys that chute cannot address, and where a listing goes on after one.

Object stores take almost any key: `run/../x`, `run/./x`, `run//x` and keys holding
control characters are all allowed. obstore (Rust's `object_store`) refuses them on the
client: it cannot send a request naming one, and a listing page holding one fails
whole. chute therefore never reads such a key, says so when a URL names one
(`key_problem`), and lists past them (`skip_offset`, used by `_listing`).
"""

from __future__ import annotations

import re

__all__ = ["key_problem", "keys_in_error", "problem_folder", "problem_kind", "skip_offset"]

_CONTROL = re.compile("[\x00-\x1f\x7f]")
# Anything that may be a problem: a segment `.` / `..`, an empty one, a control character.
_SUSPECT = re.compile(r"(?:^|/)(?:\.\.?(?:/|$)|/)|[\x00-\x1f\x7f]")
_ERROR_ENDS = re.compile(
    r'": Encountered illegal character sequence "|" contained empty path segment', re.S
)


def key_problem(key: str) -> str | None:
    r"""What keeps chute from addressing `key`, or None if nothing does.

    A trailing `/` names a folder and is no problem.

    Example:
        >>> key_problem("run/../x"), key_problem("run//x"), key_problem("run/x/")
        ("a '..' segment", "an empty segment ('//')", None)
        >>> key_problem("run/a\x01b")
        'the control character U+0001'
    """
    found = _first_problem(key)
    if found is None:
        return None
    start, end, kind = found
    if kind == "empty":
        return "an empty segment ('//')"
    if kind == "dots":
        return f"a {key[start:end]!r} segment"
    return f"the control character U+{ord(key[end]):04X}"


def _first_problem(key: str) -> tuple[int, int, str] | None:
    """`(start of the segment, position of the problem, kind)` of `key`'s first problem.

    `kind` is "empty", "dots" or "control"; the position is the segment's end for the
    first two and the control character's for the last.
    """
    if _SUSPECT.search(key) is None:
        return None
    start = 0
    for segment in key.split("/"):
        end = start + len(segment)
        if segment == "" and end < len(key):
            return start, end, "empty"
        if segment in (".", ".."):
            return start, end, "dots"
        control = _CONTROL.search(segment)
        if control is not None:
            return start, start + control.start(), "control"
        start = end + 1
    return None


def problem_kind(key: str) -> str | None:
    r"""The kind of `key`'s first problem: "empty", "dots", "control" (or None).

    Example:
        >>> problem_kind("run/../x"), problem_kind("run/a\x7f"), problem_kind("run/x")
        ('dots', 'control', None)
    """
    found = _first_problem(key)
    return None if found is None else found[2]


def problem_folder(key: str) -> str:
    """The folder (ending in `/`, or "") that holds `key`'s first unaddressable segment.

    Example:
        >>> problem_folder("data/sub/../x"), problem_folder("data/..")
        ('data/sub/', 'data/')
    """
    found = _first_problem(key)
    if found is None:
        raise ValueError(f"{key!r} has no unaddressable segment")
    return key[: found[0]]


def skip_offset(key: str) -> str:
    r"""A listing offset past `key` and every key after it that shares its problem.

    Listings return the keys after an offset, so listing on from this skips the
    unaddressable keys that sort next to `key` (`run/../a`, `run/../b`, ...) in one
    step. The offset is itself an addressable key (obstore needs that), and the only
    addressable key a listing from it misses: look it up by itself.

    Example:
        >>> skip_offset("run/../a"), skip_offset("run/.."), skip_offset("run//a")
        ('run/..0', 'run/.. ', 'run/0')
        >>> skip_offset("run/a\x01b")
        'run/a '
    """
    found = _first_problem(key)
    if found is None:
        raise ValueError(f"{key!r} has no unaddressable segment")
    _, end, kind = found
    if kind == "control":
        # Every key with this prefix and any control character next is unaddressable.
        return key[:end] + ("\u0080" if key[end] == "\x7f" else " ")
    if end < len(key):  # `.`, `..` or an empty segment, then `/`: that whole folder.
        return key[:end] + "0"  # "0" comes right after "/".
    return key + " "  # A last segment `.` or `..`: this key alone.


def keys_in_error(message: str) -> list[str]:
    """The keys obstore's "invalid path" error `message` may be naming, longest last.

    The key is quoted without escaping, so where it could end is ambiguous if it
    holds quotes: each reading is returned, for the caller to check.

    Example:
        >>> keys_in_error(
        ...     'Encountered object with invalid path: Error parsing Path "a/..": '
        ...     'Encountered illegal character sequence ".." whilst parsing path segment ".."'
        ... )
        ['a/..']
    """
    begin = message.find('Path "')
    if begin == -1:
        return []
    begin += len('Path "')
    return [message[begin : end.start()] for end in _ERROR_ENDS.finditer(message, begin)]
