"""Reading WebDataset shards with `WebDatasetSource` / `WebDatasetStream` against a plain
loop over Python's `tarfile` that groups the same members into the same samples."""

import os
import re
import shutil
import statistics
import tarfile
import tempfile
import timeit

import numpy as np

from chute_sources import WebDatasetSource, WebDatasetStream, write_webdataset

NUM_SAMPLES = 8_000
PER_SHARD = 2_000
BATCH = 256
REPEATS = 5
_KEY = re.compile(r"^((?:.*/|)[^.]+)[.]([^/]*)$")


def _samples():
    rng = np.random.default_rng(0)
    for i in range(NUM_SAMPLES):
        yield {
            "__key__": f"train/{i:06d}",
            "jpg": rng.bytes(int(rng.integers(1_000, 4_000))),
            "cls": i % 1000,
            "json": {"id": i},
        }


def _tarfile_baseline(paths):
    """WebDataset's grouping over `tarfile`: consecutive members with one key."""
    samples = []
    for path in paths:
        with tarfile.open(path) as tar:
            for info in tar:
                if not info.isreg():
                    continue
                key, field = _KEY.match(info.name).groups()
                if not samples or samples[-1]["__key__"] != key:
                    samples.append({"__key__": key, "__url__": path})
                samples[-1][field.lower()] = tar.extractfile(info).read()
    return samples


def _source_read(paths):
    """Opens the source (indexes the shards) and reads every sample in batches, in order."""
    with WebDatasetSource(paths) as source:
        out = []
        for start in range(0, len(source), BATCH):
            out.extend(source.__getitems__(range(start, min(len(source), start + BATCH))))
        return out


def _stream_read(paths):
    with WebDatasetStream(paths) as stream:
        return list(stream)


class WebDatasetRead:
    """8,000 samples (jpg of 1-4 KB, cls, json) in 4 shards, page-cached, read in order."""

    timer = timeit.default_timer
    number = 1
    repeat = 5
    warmup_time = 0.0

    def setup(self):
        self.folder = tempfile.mkdtemp(prefix="chute-bench-wds-")
        pattern = os.path.join(self.folder, "shard-%02d.tar")
        self.paths = write_webdataset(_samples(), pattern, max_count=PER_SHARD)

    def teardown(self):
        shutil.rmtree(self.folder, ignore_errors=True)

    def time_source_read_all(self):
        _source_read(self.paths)

    def time_stream_read_all(self):
        _stream_read(self.paths)

    def _ratio(self, read):
        ours, theirs = [], []
        for _ in range(REPEATS):
            start = timeit.default_timer()
            got = read(self.paths)
            ours.append(timeit.default_timer() - start)
            start = timeit.default_timer()
            want = _tarfile_baseline(self.paths)
            theirs.append(timeit.default_timer() - start)
        assert got == want
        # samples/s of chute divided by samples/s of tarfile = time of tarfile / time of chute
        return statistics.median(theirs) / statistics.median(ours)

    def track_samples_per_s_ratio_to_tarfile_source(self):
        return self._ratio(_source_read)

    track_samples_per_s_ratio_to_tarfile_source.unit = "ratio"

    def track_samples_per_s_ratio_to_tarfile_stream(self):
        return self._ratio(_stream_read)

    track_samples_per_s_ratio_to_tarfile_stream.unit = "ratio"
