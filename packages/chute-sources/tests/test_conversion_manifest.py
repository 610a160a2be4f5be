"""ArrayRecord shards of an unfinished `chute convert` are refused, or read with a warning."""

import json
import os
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chute_core import ArgumentTypeError, SourceFileError
from chute_sources import (
    ArrayRecordSource,
    IncompleteShardsWarning,
    shard_paths,
    write_array_record,
)
from chute_sources._conversion_manifest import manifest_of
from chute_sources.internal import MANIFEST_SUFFIX, unfinished_conversions


def _unfinished(tmp_path, *, complete=False):
    """4 shards of 3 records written, as `chute convert` leaves them: shard 3 missing."""
    stem = str(tmp_path / "train")
    paths = write_array_record(range(12), stem, num_shards=4)
    os.unlink(paths[3])
    manifest = {
        "version": 1,
        "complete": complete,
        "source": {"path": "/data/train.parquet", "format": "parquet", "num_records": 12},
        "layout": {"shard_records": [3, 3, 3, 3]},
        "shards": {str(i): {"file": os.path.basename(paths[i]), "records": 3} for i in range(3)},
    }
    (tmp_path / ("train" + MANIFEST_SUFFIX)).write_text(json.dumps(manifest))
    return paths[:3]


def _said(tmp_path):
    return (
        f"its manifest {str(tmp_path / 'train.chute-convert.json')!r} says the conversion is "
        "not complete: 3 of 4 shards written (9 of 12 records)"
    )


def test_shards_of_an_unfinished_conversion_are_refused_naming_manifest_counts_and_fix(tmp_path):
    _unfinished(tmp_path)
    expected = (
        "ArrayRecordSource: these shards are the output of an unfinished chute convert: "
        f"{_said(tmp_path)}. Finish it by running the same chute convert command again (of "
        "'/data/train.parquet'; it resumes, keeping the finished shards), or pass "
        "allow_incomplete=True to read the shards that are there."
    )
    for given_as in (str(tmp_path), str(tmp_path / "train-*"), str(tmp_path / "train-00001*")):
        with pytest.raises(SourceFileError, match=f"^{re.escape(expected)}$"):
            ArrayRecordSource(given_as)


def test_allow_incomplete_reads_the_written_shards_with_a_warning(tmp_path):
    paths = _unfinished(tmp_path)
    with pytest.warns(IncompleteShardsWarning, match=re.escape(_said(tmp_path))) as caught:
        source = ArrayRecordSource(paths, allow_incomplete=True)
    assert len(caught) == 1
    assert caught[0].filename == __file__  # It points at the caller's line.
    assert list(source) == list(range(9))
    assert "allow_incomplete=True" in repr(source)


def test_a_complete_conversion_reads_without_a_warning(tmp_path):
    paths = _unfinished(tmp_path, complete=True)
    source = ArrayRecordSource(paths)  # filterwarnings=error: a warning would fail here.
    assert list(source) == list(range(9))
    assert "allow_incomplete" not in repr(source)


def test_shards_of_another_stem_ignore_the_manifest(tmp_path):
    _unfinished(tmp_path)
    other = write_array_record(range(5), str(tmp_path / "other"), num_shards=2)
    assert list(ArrayRecordSource(other)) == list(range(5))


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"{not json", "not JSON: Expecting property name enclosed in double quotes"),
        (b"[1, 2]", "not a JSON object"),
        (b"[" * 100_000 + b"]" * 100_000, "not JSON: maximum recursion depth exceeded"),
    ],
)
def test_an_unreadable_manifest_is_refused_saying_why(tmp_path, content, problem):
    paths = write_array_record(range(4), str(tmp_path / "train"), num_shards=2)
    (tmp_path / ("train" + MANIFEST_SUFFIX)).write_bytes(content)
    manifest = str(tmp_path / ("train" + MANIFEST_SUFFIX))
    with pytest.raises(
        SourceFileError,
        match=re.escape(f"its manifest {manifest!r} cannot be read ({problem}"),
    ):
        ArrayRecordSource(paths)


def test_a_huge_file_named_like_a_manifest_is_not_read(tmp_path):
    paths = write_array_record(range(4), str(tmp_path / "train"), num_shards=2)
    with open(tmp_path / ("train" + MANIFEST_SUFFIX), "wb") as file:
        file.truncate(64 * 2**20 + 1)  # Sparse: no disk used.
    with pytest.raises(SourceFileError, match="67,108,865 bytes, too large to be a manifest"):
        ArrayRecordSource(paths)


def test_allow_incomplete_must_be_a_bool(tmp_path):
    paths = write_array_record(range(4), str(tmp_path / "train"))
    with pytest.raises(ArgumentTypeError, match="allow_incomplete must be a bool, got str 'yes'"):
        ArrayRecordSource(paths, allow_incomplete="yes")


@given(
    stem=st.text(alphabet="abz_.-09/", min_size=1, max_size=12).filter(
        lambda s: not s.endswith("/")
    ),
    shards=st.integers(1, 300),
    data=st.data(),
)
def test_every_shard_name_convert_writes_leads_to_its_manifest(stem, shards, data):
    path = shard_paths(stem, shards)[data.draw(st.integers(0, shards - 1))]
    assert manifest_of(path) == stem.removesuffix(".array_record") + MANIFEST_SUFFIX


def test_names_of_more_than_99999_shards_lead_to_their_manifest():
    assert manifest_of("out/t-123455-of-123456.array_record") == "out/t" + MANIFEST_SUFFIX
    assert manifest_of("out/t.tfrecord") is None


def test_objects_in_buckets_are_skipped_unless_asked():
    # buckets=False (the source's choice) never sends a request, so no server is needed.
    assert unfinished_conversions(["s3://bucket/out/train-00000-of-00002.array_record"]) == []


def test_a_folder_skips_the_hidden_partial_shard_a_killed_writer_left(tmp_path):
    paths = write_array_record(range(6), str(tmp_path / "train"), num_shards=2)
    (tmp_path / ".train-00002-of-00003.array_record.tmp").write_bytes(b"partial")
    source = ArrayRecordSource(str(tmp_path))
    assert [i.filename for i in source.instructions] == paths
    assert list(source) == list(range(6))
