"""An interleave of Parquet streams reshards under a window shuffle or a packer: each
`ParquetStream` numbers its records (`origin`), so what a window yielded or a packer
emitted is named by file and record, as for a `MapDataset` read in order (issue 30)."""

import functools

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chute
from chute_checkpoint import ReshardError

COUNTS = st.integers(1, 6)


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    """20 files of 0 to 8 records (`100 * file + k`) in row groups of 3."""
    folder = tmp_path_factory.mktemp("parquet_streams")
    written = []
    for number in range(20):
        path = folder / f"{number:02d}.parquet"
        values = pa.array(range(number * 100, number * 100 + (number * 7) % 9), pa.int64())
        pq.write_table(pa.table({"x": values}), path, row_group_size=3)
        written.append(str(path))
    return written


def _stream(path):
    return chute.IterDataset.source(functools.partial(chute.ParquetStream, path, batch_rows=2))


def _value(record):
    return record["x"]


def _kept(record):
    return record["x"] % 4 != 1


def _document(record):
    """0 to 4 tokens, each unique to its record."""
    return {"t": np.arange(record["x"] % 5, dtype=np.int64) + 10 * record["x"]}


def tokens(row):
    """The tokens of a packed row, padding left out."""
    t, segments = np.asarray(row["t"]), np.asarray(row["t_segment_ids"])
    return t[segments > 0].tolist()


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from(["window", "window_batch", "pack"]),
    st.integers(1, 4),
    st.integers(1, 9),
    st.booleans(),
    COUNTS,
    st.lists(COUNTS, min_size=1, max_size=3),
    st.integers(0, 2**16),
)
def test_every_record_of_every_file_comes_once_on_any_counts(
    paths, kind, cycle, window, filtered, old, news, seed
):
    def make(index, count):
        files = chute.MapDataset.source(paths).shard(index, count).map(_stream)
        ds = chute.IterDataset.interleave(files, cycle_length=cycle)
        if filtered:
            ds = ds.filter(_kept)
        if kind == "pack":
            return ds.map(_document).pack(8, num_packing_bins=2)
        ds = ds.window_shuffle(window, seed=3).map(_value)
        return ds.batch(2) if kind == "window_batch" else ds

    records = {"pack": tokens, "window_batch": chute.testing.rows, "window": None}[kind]
    chute.checkpoint.check_reshardable(iter(make(0, old)))
    run = chute.testing.assert_reshards(make, old, news, seed=seed, records=records)
    assert run.counts == (old, *news)


class _Unnumbered(chute.ParquetStream):
    """A stream whose class does not say its origins are positions."""

    origins_are_positions = False


def test_a_stream_that_does_not_say_it_numbers_its_records_is_still_refused(paths):
    def stream(path):
        return chute.IterDataset.source(functools.partial(_Unnumbered, path))

    files = chute.MapDataset.source(paths).shard(0, 2).map(stream)
    ds = chute.IterDataset.interleave(files, cycle_length=2).window_shuffle(4, seed=0)
    with pytest.raises(ReshardError, match="whose streams do not number their elements"):
        chute.checkpoint.check_reshardable(iter(ds))
