"""Keys chute cannot address (`run/../x`, `run/./x`, `run//x`, control characters).

Object stores accept them; obstore refuses every listing page that holds one. A listing
leaves them out and lists everything else (real servers on loopback, and a paged
in-memory bucket for page boundaries); a URL naming one is a clear error.
"""

from __future__ import annotations

import os
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chute_core import InvalidArgumentError, ObjectStorageError, SourceFileNotFoundError
from chute_sources import ArrayRecordSource, StorageOptions, list_objects, write_array_record
from chute_sources._remote._keys import key_problem, problem_folder, skip_offset
from chute_sources._remote._listing import list_folder

RECORDS = [bytes([i]) * 3 for i in range(30)]


def _options(server, tmp_path):
    env = server.env
    if "AWS_ENDPOINT_URL" in env:
        return StorageOptions(
            endpoint=env["AWS_ENDPOINT_URL"],
            access_key_id=env["AWS_ACCESS_KEY_ID"],
            secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
            region=env["AWS_REGION"],
            cache_dir=str(tmp_path / "cache"),
            max_attempts=2,
        )
    return StorageOptions(
        endpoint=env["STORAGE_EMULATOR_HOST"], cache_dir=str(tmp_path / "cache"), max_attempts=2
    )


# The GCS emulator refuses `..` in a name (real GCS takes `a/../b`); both take `.`, `//`.
_BAD = {
    "s3": ["images/..", "images/../escape.array_record", "images/./x.array_record"],
    "gs": ["images/./x.array_record", "images//y.array_record"],
}


@pytest.fixture(params=["s3", "gs"])
def server(request):
    return request.getfixturevalue("loopback_s3" if request.param == "s3" else "loopback_gcs")


@pytest.fixture
def shards(tmp_path_factory):
    return write_array_record(RECORDS, str(tmp_path_factory.mktemp("shards") / "s"), num_shards=3)


def _bucket(server, shards, bad=()):
    name = f"keys-{uuid.uuid4().hex[:12]}"
    server.create_bucket(name)
    for path in shards:
        server.put_file(name, "images/" + os.path.basename(path), path)
    for key in bad:
        server.put(name, key, b"not a shard")
    return name


def test_a_glob_and_a_folder_list_past_keys_with_dot_segments(server, shards, tmp_path):
    scheme = server.url("b")[:2]
    bucket = _bucket(server, shards, _BAD[scheme])
    options = _options(server, tmp_path)
    expected = [server.url(bucket, "images/" + os.path.basename(p)) for p in shards]
    for url in (server.url(bucket, "images/*"), server.url(bucket, "images/")):
        source = ArrayRecordSource(url, storage_options=options)
        assert [i.filename for i in source.instructions] == expected
        assert source.__getitems__(range(30)) == RECORDS
    assert [info.url for info in list_objects(server.url(bucket, "images"), options)] == expected


def test_a_url_naming_such_a_key_says_what_is_wrong(server, shards, tmp_path):
    bucket = _bucket(server, shards)
    options = _options(server, tmp_path)
    for key, problem in [
        ("images/../escape.array_record", r"a '\.\.' segment"),
        ("images/./x.array_record", r"a '\.' segment"),
        ("images/a\x01.array_record", "the control character U\\+0001"),
    ]:
        with pytest.raises(InvalidArgumentError, match=f"names a key with {problem}.*rename"):
            ArrayRecordSource(server.url(bucket, key), storage_options=options)
    with pytest.raises(InvalidArgumentError, match=r"a '\.\.' segment"):
        list_objects(server.url(bucket, "images/../"), options)


def test_a_missing_object_beside_such_a_key_is_not_found(loopback_s3, shards, tmp_path):
    bucket = _bucket(loopback_s3, shards, ["images/.."])  # In the bucket's first page.
    options = _options(loopback_s3, tmp_path)
    missing = loopback_s3.url(bucket, "images/none.array_record")
    with pytest.raises(SourceFileNotFoundError, match=r"none\.array_record"):
        ArrayRecordSource(missing, storage_options=options)
    with pytest.raises(SourceFileNotFoundError, match=r"Left out, as keys .*/\.\. \(a '\.\.'"):
        ArrayRecordSource(loopback_s3.url(bucket, "images/*.parquet"), storage_options=options)


def test_objects_in_the_page_before_a_deeper_such_key_are_listed(loopback_s3, tmp_path):
    bucket = f"keys-{uuid.uuid4().hex[:12]}"
    loopback_s3.create_bucket(bucket)
    keys = [f"data/k{i:04d}" for i in range(1003)]  # Past the first page of 1,000.
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda key: loopback_s3.put(bucket, key, b""), [*keys, "data/zz/../x"]))
    listed = list_objects(loopback_s3.url(bucket, "data/"), _options(loopback_s3, tmp_path))
    assert [info.url for info in listed] == [loopback_s3.url(bucket, key) for key in keys]


def test_keys_that_hide_their_neighbours_are_an_error_naming_them(loopback_s3, shards, tmp_path):
    options = _options(loopback_s3, tmp_path)
    control = _bucket(loopback_s3, shards, ["images/a\x01b"])
    hidden = r"images/a\x01b has the control character U\+0001"
    with pytest.raises(ObjectStorageError, match=hidden):
        ArrayRecordSource(loopback_s3.url(control, "images/*"), storage_options=options)
    two = _bucket(loopback_s3, shards, ["images/..", "images/sub/../x"])
    hidden = r"images/sub/\.\./x has a '\.\.' segment.*another such key directly"
    with pytest.raises(ObjectStorageError, match=hidden):
        list_objects(loopback_s3.url(two, "images/"), options)


class PagedBucket:
    """A bucket in memory whose listings fail page by page as obstore's do (`Pages`)."""

    def __init__(self, keys, page):
        self.keys, self.page = sorted(set(keys)), page

    def url(self, key):
        return f"mem://{key}"

    def flat(self, folder, offset):
        after = [k for k in self.keys if k.startswith(folder) and (offset is None or k > offset)]
        found = []
        for start in range(0, len(after), self.page):
            page = after[start : start + self.page]
            bad = [k for k in page if key_problem(k) is not None]
            if bad:
                return found, bad[0]
            found += [{"path": k} for k in page]
        return found, None

    def level(self, folder):
        under = [k for k in self.keys if k.startswith(folder)]
        if any(key_problem(k) is not None and problem_folder(k) == folder for k in under):
            return None
        objects = [{"path": k} for k in under if "/" not in k[len(folder) :]]
        subs = {folder + k[len(folder) :].split("/")[0] + "/" for k in under}
        return objects, sorted(s for s in subs if any(k.startswith(s) for k in under))

    def head(self, key):
        return {"path": key} if key in self.keys else None


_SEGMENT = st.sampled_from(["a", "b0", "zz", ".", "..", ""])
_KEY = (
    st.lists(_SEGMENT, min_size=1, max_size=3)
    .map(lambda parts: "d/" + "/".join(parts))
    .filter(lambda key: not key.endswith("/"))  # A folder's marker: listed without its "/".
)


def _listed(bucket):
    """The keys a listing of `d/` gives, or None if it said some keys hide others."""
    try:
        listing = list_folder(bucket, "d/")
    except ObjectStorageError as error:
        if "another such key directly" not in str(error):
            raise
        return None
    assert all(key_problem(key) is not None for key in listing.skipped)
    return [meta["path"] for meta in listing.objects]


@settings(max_examples=300, deadline=None)
@given(keys=st.lists(_KEY, max_size=25), page=st.integers(1, 4))
def test_a_listing_gives_every_addressable_key_or_says_which_keys_hide_some(keys, page):
    bucket = PagedBucket([*keys, "d/zz/k"], page)
    got = _listed(bucket)
    if got is None:  # Only where one such key's page may hide what lies before another.
        assert len({problem_folder(k) for k in bucket.keys if key_problem(k) is not None}) >= 2
    else:
        assert got == [k for k in bucket.keys if key_problem(k) is None]


_NAME = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=8)


@settings(max_examples=300)
@given(name=_NAME, cut=st.integers(0, 12), tail=_NAME)
def test_the_offset_past_a_key_skips_only_keys_sharing_its_problem(name, cut, tail):
    key = f"d/{name}"
    if key_problem(key) is None:
        return
    offset = skip_offset(key)
    assert key_problem(offset) is None and offset > key
    probe = key[: 2 + cut] + tail  # A key that sorts near `key`.
    if key < probe < offset:
        assert key_problem(probe) is not None, (key, probe, offset)
