"""What `chute inspect` shows of records: an inferred schema and shortened records."""

from __future__ import annotations

import collections
import reprlib
from collections.abc import Iterable
from typing import Any

import numpy as np

__all__ = ["infer_schema", "schema_table", "shorten"]

_MAX_SHAPES = 5


def _flatten(record: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(record, dict) and record and all(isinstance(k, str) for k in record):
        for key, value in record.items():
            _flatten(value, f"{prefix}.{key}" if prefix else key, out)
    else:
        out[prefix or "(record)"] = record


def _kind(value: Any) -> tuple[str, str | None, tuple[int, ...] | None]:
    """A value's type name, dtype and shape (None where they do not apply)."""
    if isinstance(value, np.ndarray):
        return "ndarray", str(value.dtype), tuple(value.shape)
    if isinstance(value, np.generic):
        return "numpy scalar", str(value.dtype), None
    if value is None:
        return "None", None, None
    if isinstance(value, list | tuple):
        return type(value).__name__, None, (len(value),)
    return type(value).__name__, None, None


def infer_schema(records: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """Per field (dotted paths into dict records): type, dtype and shape, or how they vary.

    Example:
        >>> import numpy as np
        >>> schema = infer_schema([{"x": np.zeros(3), "n": 1}, {"x": np.zeros(4), "n": 2}])
        >>> schema["n"]
        {'type': 'int'}
        >>> schema["x"]
        {'type': 'ndarray', 'dtype': 'float64', 'shape': 'varies', 'shapes': [[3], [4]]}
    """
    seen: dict[str, dict[str, collections.Counter[Any]]] = {}
    count = 0
    for record in records:
        count += 1
        fields: dict[str, Any] = {}
        _flatten(record, "", fields)
        for name, value in fields.items():
            kind, dtype, shape = _kind(value)
            entry = seen.setdefault(
                name,
                {
                    "types": collections.Counter(),
                    "dtypes": collections.Counter(),
                    "shapes": collections.Counter(),
                    "present": collections.Counter(),
                },
            )
            entry["types"][kind] += 1
            entry["present"][0] += 1
            if dtype is not None:
                entry["dtypes"][dtype] += 1
            if shape is not None:
                entry["shapes"][shape] += 1
    schema: dict[str, dict[str, Any]] = {}
    for name, entry in seen.items():
        types = list(entry["types"])
        if entry["present"][0] < count:
            types.append("missing")
        field: dict[str, Any] = {"type": " | ".join(types)}
        dtypes = list(entry["dtypes"])
        if dtypes:
            field["dtype"] = dtypes[0] if len(dtypes) == 1 else "varies: " + ", ".join(dtypes)
        shapes = entry["shapes"]
        if len(shapes) == 1:
            field["shape"] = list(next(iter(shapes)))
        elif shapes:
            field["shape"] = "varies"
            field["shapes"] = [list(s) for s, _ in shapes.most_common(_MAX_SHAPES)]
        schema[name] = field
    return schema


def schema_table(schema: dict[str, dict[str, Any]]) -> list[str]:
    r"""The schema as aligned text lines.

    Example:
        >>> print("\n".join(schema_table({"x": {"type": "ndarray", "dtype": "int64",
        ...                                       "shape": [3]}})))
        field  type     dtype  shape
        x      ndarray  int64  (3,)
    """
    rows = [("field", "type", "dtype", "shape")]
    for name, field in schema.items():
        shape = field.get("shape")
        if shape == "varies":
            shown = ", ".join(str(tuple(s)) for s in field["shapes"])
            more = ", ..." if len(field["shapes"]) == _MAX_SHAPES else ""
            text = f"varies: {shown}{more}"
        else:
            text = "" if shape is None else str(tuple(shape))
        rows.append((name, field["type"], field.get("dtype", ""), text))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    return [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]


class _Repr(reprlib.Repr):
    def __init__(self) -> None:
        super().__init__()
        self.maxstring = 40
        self.maxother = 80
        self.maxlist = self.maxtuple = self.maxdict = 6
        self.maxlevel = 4

    def repr_bytes(self, value: bytes, level: int) -> str:
        if len(value) <= 24:
            return repr(value)
        return f"<{len(value):,} bytes {value[:12]!r}...>"

    def repr_ndarray(self, value: np.ndarray[Any, Any], level: int) -> str:
        if value.size <= 8:
            return " ".join(repr(value).split())
        first = ", ".join(str(x) for x in value.reshape(-1)[:4].tolist())
        return f"array(shape={value.shape}, dtype={value.dtype}, [{first}, ...])"

    def repr_dict(self, value: dict[Any, Any], level: int) -> str:
        if level <= 0:
            return "{...}"
        items = [
            f"{self.repr1(k, level - 1)}: {self.repr1(v, level - 1)}"
            for k, v in list(value.items())[: self.maxdict]
        ]
        more = ", ..." if len(value) > self.maxdict else ""
        return "{" + ", ".join(items) + more + "}"


def shorten(record: Any, width: int = 300) -> str:
    """A one-line `repr` of `record` with long arrays, strings and bytes cut short.

    Example:
        >>> import numpy as np
        >>> print(shorten({"x": np.arange(100), "n": np.int64(3)}))
        {'x': array(shape=(100,), dtype=int64, [0, 1, 2, 3, ...]), 'n': np.int64(3)}
        >>> print(shorten([b"x" * 1000]))
        [<1,000 bytes b'xxxxxxxxxxxx'...>]
    """
    text = _Repr().repr(record)
    return text if len(text) <= width else text[: width - 3] + "..."
