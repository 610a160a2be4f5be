"""Reads mutated data files in a child process: `python fuzz_readers_run.py FORMAT SEED N DIR`.

Writes one valid file of FORMAT (arrayrecord, parquet, npy, npz), then N mutations of
it (bytes flipped, ranges overwritten, the file truncated), and reads every record of
each through chute's source. A read may succeed (the mutation hit padding or a value)
or raise one of chute's errors; anything else is printed as `UNEXPECTED ...`. The test
runs this in a child so that a crash of a native reader (a signal) or a hang is seen
as such instead of taking the test run down with it.
"""

from __future__ import annotations

import os
import random
import sys

import numpy as np

from chute_testing import corrupt


def write_valid(kind: str, folder: str) -> str:
    if kind == "arrayrecord":
        from chute_sources import write_array_record

        records = [{"x": np.arange(i % 7, dtype=np.int32), "s": f"r{i}"} for i in range(60)]
        (path,) = write_array_record(records, os.path.join(folder, "valid.array_record"))
        return path
    if kind == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        path = os.path.join(folder, "valid.parquet")
        table = pa.table({"a": list(range(300)), "b": [f"v{i}" * (i % 5) for i in range(300)]})
        pq.write_table(table, path, row_group_size=50)
        return path
    if kind == "npy":
        path = os.path.join(folder, "valid.npy")
        np.save(path, np.arange(600, dtype=np.float32).reshape(100, 6))
        return path
    if kind == "npz":
        path = os.path.join(folder, "valid.npz")
        np.savez(path, x=np.arange(200).reshape(50, 4), y=np.arange(50))
        return path
    raise SystemExit(f"unknown format {kind}")


def read_all(kind: str, path: str) -> None:
    import chute_sources as cs

    if kind == "arrayrecord":
        source = cs.ArrayRecordSource(path)
    elif kind == "parquet":
        source = cs.ParquetSource(path)
    else:
        source = cs.NumpySource(path)
    for i in range(len(source)):
        source[i]
    if len(source):
        source[len(source) - 1]


def main() -> None:
    kind, seed, count, folder = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    from chute_core import ChuteError

    valid = write_valid(kind, folder)
    read_all(kind, valid)
    with open(valid, "rb") as file:
        data = file.read()
    rng = random.Random(seed)
    outcomes = {"ok": 0, "chute error": 0}
    for number in range(count):
        path = os.path.join(folder, f"mutated-{number}{os.path.splitext(valid)[1]}")
        with open(path, "wb") as file:
            file.write(corrupt(data, rng))
        try:
            read_all(kind, path)
            outcomes["ok"] += 1
        except ChuteError:
            outcomes["chute error"] += 1
        except Exception as error:  # What the test looks for.
            print(f"UNEXPECTED {number} {type(error).__module__}.{type(error).__name__}: {error}")
        os.unlink(path)
    print(f"OUTCOMES {outcomes}")


if __name__ == "__main__":
    main()
