"""Mixtures and zips of many read streams run on one set of read threads (issue 32)."""

import threading

import pytest

import chute


def _components(count, options):
    return [
        chute.MapDataset.range(40 + k).seed(k).shuffle().map(lambda x, k=k: (k, x))
        .to_iter_dataset(read_options=options)
        for k in range(count)
    ]  # fmt: skip


def _read_threads():
    return [t for t in threading.enumerate() if t.name.startswith("chute-read")]


@pytest.mark.parametrize(
    "combine",
    [
        lambda parts: chute.IterDataset.mix(parts),
        lambda parts: chute.IterDataset.zip(parts),
    ],
    ids=["mix", "zip"],
)
def test_sixty_four_streams_read_with_default_options_use_one_streams_threads(combine):
    shared = iter(combine(_components(64, chute.ReadOptions())))
    plain = list(combine(_components(64, chute.ReadOptions(num_threads=0))))
    seen = []
    most = 0
    for element in shared:
        seen.append(element)
        most = max(most, len(_read_threads()))
    assert seen == plain
    assert 0 < most <= chute.ReadOptions().num_threads  # 16, not 64 x 16.
