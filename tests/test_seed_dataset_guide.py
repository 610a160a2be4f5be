"""The `Dataset` examples of Grain's advanced guide (seed 003), ported to `import chute`.

The guide reads MNIST and PneumoniaMNIST through `tfds.data_source`; here the sources
are small local ArrayRecord files (and Parquet files for the hierarchical shuffle) with
records shaped like theirs: `{"image": uint8[28, 28], "label": int}`. Every image
carries its identity in its first pixels (`image[0, 0]` the source tag, `image[0, 1:3]`
the record number), so tests can assert exact sequences.
"""

import functools
import json
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import chute

MNIST_TAG, PNEUMONIA_TAG = 1, 2
MNIST_SIZE, PNEUMONIA_SIZE = 600, 70


def make_records(tag, size, num_labels, seed):
    rng = np.random.default_rng(seed)
    records = []
    for number in range(size):
        image = rng.integers(0, 256, size=(28, 28), dtype=np.uint8)
        image[0, 0] = tag
        image[0, 1], image[0, 2] = divmod(number, 256)
        records.append({"image": image, "label": int(rng.integers(num_labels))})
    return records


def ident(image):
    """(source tag, record number) of an image made by `make_records`."""
    return int(image[0, 0]), int(image[0, 1]) * 256 + int(image[0, 2])


@pytest.fixture(scope="module")
def mnist_records():
    return make_records(MNIST_TAG, MNIST_SIZE, num_labels=10, seed=0)


@pytest.fixture(scope="module")
def pneumonia_records():
    return make_records(PNEUMONIA_TAG, PNEUMONIA_SIZE, num_labels=2, seed=1)


@pytest.fixture(scope="module")
def mnist(tmp_path_factory, mnist_records):
    """Stands in for `tfds.data_source("mnist", split="train")`."""
    paths = chute.write_array_record(
        mnist_records, tmp_path_factory.mktemp("mnist") / "train", num_shards=3
    )
    return chute.ArrayRecordDataSource(paths)


@pytest.fixture(scope="module")
def pneumonia_mnist(tmp_path_factory, pneumonia_records):
    """Stands in for `tfds.data_source(name="pneumonia_mnist", split="train")`."""
    paths = chute.write_array_record(
        pneumonia_records, tmp_path_factory.mktemp("pneumonia") / "train", num_shards=2
    )
    return chute.ArrayRecordDataSource(paths)


def test_local_sources_look_like_the_guides(mnist, pneumonia_mnist, mnist_records):
    assert len(mnist) == MNIST_SIZE and len(pneumonia_mnist) == PNEUMONIA_SIZE
    first = mnist[0]
    assert sorted(first) == ["image", "label"]
    assert first["image"].dtype == np.uint8 and first["image"].shape == (28, 28)
    np.testing.assert_array_equal(first["image"], mnist_records[0]["image"])
    assert [ident(mnist[i]["image"]) for i in (0, 299, 599)] == [(1, 0), (1, 299), (1, 599)]


# --- Checkpointing ------------------------------------------------------------------


def test_checkpointing_example(mnist):
    ds = chute.MapDataset.source(mnist).seed(seed=45).shuffle().to_iter_dataset()

    num_steps = 4
    ds_iter = iter(ds)

    # Read some elements.
    first = [next(ds_iter) for _ in range(num_steps)]

    # Save the checkpoint (Orbax writes the iterator state as JSON).
    checkpoint = json.dumps(ds_iter.get_state())

    # Read more elements and advance the iterator.
    continuation = [next(ds_iter) for _ in range(4, 8)]

    # Restore iterator from the previously saved checkpoint.
    ds_iter.set_state(json.loads(checkpoint))
    # Iterator should be set back to start from 4.
    restored = [next(ds_iter) for _ in range(4, 8)]

    assert [x["label"] for x in restored] == [x["label"] for x in continuation]
    assert [ident(x["image"]) for x in restored] == [ident(x["image"]) for x in continuation]
    for a, b in zip(restored, continuation, strict=True):
        np.testing.assert_array_equal(a["image"], b["image"])

    # The stream is the shuffled dataset read in order: exact elements 0..7.
    shuffled = chute.MapDataset.source(mnist).seed(seed=45).shuffle()
    expected = [ident(shuffled[i]["image"]) for i in range(8)]
    assert [ident(x["image"]) for x in first + continuation] == expected
    assert expected != [(MNIST_TAG, i) for i in range(8)]  # really shuffled

    # Restoring into a fresh iterator (as after a restart) continues the same way.
    fresh = iter(ds)
    fresh.set_state(json.loads(checkpoint))
    assert [ident(next(fresh)["image"]) for _ in range(4)] == expected[4:]

    # One pass is a permutation of the whole dataset.
    assert sorted(ident(x["image"]) for x in ds) == [(MNIST_TAG, i) for i in range(MNIST_SIZE)]


def test_checkpoint_at_every_position_resumes_exactly(pneumonia_mnist):
    ds = (
        chute.MapDataset.source(pneumonia_mnist)
        .seed(45)
        .shuffle()
        .to_iter_dataset()
        .map(lambda features: ident(features["image"]))
    )
    full = list(ds)
    ds_iter = iter(ds)
    for position in range(len(full) + 1):
        state = json.loads(json.dumps(ds_iter.get_state()))
        resumed = iter(ds)
        resumed.set_state(state)
        assert list(resumed) == full[position:]
        if position < len(full):
            assert next(ds_iter) == full[position]


def test_print_shows_the_checkpointed_pipeline(mnist):
    ds = chute.MapDataset.source(mnist).seed(seed=45).shuffle().to_iter_dataset()
    lines = repr(ds).splitlines()
    assert lines[0] == "IterDataset"
    assert lines[1].startswith("  source(ArrayRecordSource(")
    assert lines[2] == "  .seed(seed=45)"
    assert lines[3].startswith("  .shuffle(seed=")
    assert lines[4] == "  .to_iter_dataset()"


# --- Mixing datasets ----------------------------------------------------------------

# The order chute's weighted mixture takes components in, one period of weights 0.7 /
# 0.3 (documented in `chute_samplers.MixSchedule`): every prefix is within one
# element of its share.
PERIOD_70_30 = [0, 0, 1, 0, 0, 1, 0, 0, 0, 1]


def expected_mix(components, pattern):
    """Takes components in the repeating `pattern` until the one whose turn it is ends."""
    cursors = [0] * len(components)
    out = []
    while True:
        for j in pattern:
            if cursors[j] == len(components[j]):
                return out
            out.append(components[j][cursors[j]])
            cursors[j] += 1


def test_map_dataset_mix_example(mnist, pneumonia_mnist):
    # This particular dataset mixes medical images with hand written numbers.
    source1 = pneumonia_mnist
    source2 = mnist
    ds1 = chute.MapDataset.source(source1).map(lambda features: features["image"])
    ds2 = chute.MapDataset.source(source2).map(lambda features: features["image"])
    ds = chute.MapDataset.mix([ds1, ds2], weights=[0.7, 0.3])

    # ds1 (70 records at weight 0.7) runs out first: the mix ends there, having used
    # 30 records of ds2; the rest of ds2 is discarded.
    assert len(ds) == 100
    assert np.shape(ds[0]) == (28, 28)

    got = [ident(image) for image in ds]
    pneumonia_ids = [(PNEUMONIA_TAG, i) for i in range(PNEUMONIA_SIZE)]
    mnist_ids = [(MNIST_TAG, i) for i in range(MNIST_SIZE)]
    assert got == expected_mix([pneumonia_ids, mnist_ids], PERIOD_70_30)
    assert got[:10] == [
        (2, 0),
        (2, 1),
        (1, 0),
        (2, 2),
        (2, 3),
        (1, 1),
        (2, 4),
        (2, 5),
        (2, 6),
        (1, 2),
    ]
    assert [x for x in got if x[0] == PNEUMONIA_TAG] == pneumonia_ids
    assert [x for x in got if x[0] == MNIST_TAG] == mnist_ids[:30]
    # Random access agrees with iteration, and the end is the end.
    assert [ident(ds[i]) for i in range(len(ds))] == got
    with pytest.raises(IndexError):
        ds[len(ds)]
    # Every prefix is within one element of its share.
    for p in range(1, len(got) + 1):
        count = sum(1 for x in got[:p] if x[0] == PNEUMONIA_TAG)
        assert abs(count - 0.7 * p) < 1, p
    # The next epoch begins with the components from their start.
    assert [ident(image) for image in ds.repeat(2)] == got * 2


def test_iter_dataset_mix_of_filtered_components(
    mnist, pneumonia_mnist, mnist_records, pneumonia_records
):
    source1 = pneumonia_mnist
    source2 = mnist
    ds1 = (
        chute.MapDataset.source(source1)
        .filter(lambda features: int(features["label"]) == 1)
        .to_iter_dataset()
    )
    ds2 = (
        chute.MapDataset.source(source2)
        .filter(lambda features: int(features["label"]) > 4)
        .to_iter_dataset()
    )

    ds = chute.IterDataset.mix([ds1, ds2], weights=[0.7, 0.3]).map(
        lambda features: features["image"]
    )
    assert np.shape(next(iter(ds))) == (28, 28)

    kept1 = [(PNEUMONIA_TAG, i) for i, r in enumerate(pneumonia_records) if r["label"] == 1]
    kept2 = [(MNIST_TAG, i) for i, r in enumerate(mnist_records) if r["label"] > 4]
    got = [ident(image) for image in ds]
    assert got == expected_mix([kept1, kept2], PERIOD_70_30)
    # The filtered pneumonia stream is the short one: all of it is used.
    assert [x for x in got if x[0] == PNEUMONIA_TAG] == kept1
    assert [x for x in got if x[0] == MNIST_TAG] == kept2[: len(got) - len(kept1)]

    # Resuming the mixture mid-way continues exactly.
    it = iter(ds)
    for _ in range(17):
        next(it)
    state = json.loads(json.dumps(it.get_state()))
    resumed = iter(ds)
    resumed.set_state(state)
    assert [ident(image) for image in resumed] == got[17:]


# --- Multi-epoch training -----------------------------------------------------------


def test_multi_epoch_mix_of_repeated_datasets(mnist, pneumonia_mnist):
    source1 = pneumonia_mnist
    source2 = mnist
    ds1 = chute.MapDataset.source(source1).repeat()
    ds2 = chute.MapDataset.source(source2).repeat()

    ds = chute.MapDataset.mix([ds1, ds2], weights=[1, 2])
    assert len(ds1) == sys.maxsize
    assert len(ds2) == sys.maxsize
    # Ds1 and ds2 are repeated to fill out the sys.maxsize with respect to weights.
    assert len(ds) == sys.maxsize

    # Nothing is discarded any more: ds1 wraps around into its next epoch.
    n = 3 * 2 * PNEUMONIA_SIZE + 3
    got = [ident(ds[i]["image"]) for i in range(n)]
    pattern = [1, 0, 1]  # Weights [1, 2]: within one element of 1/3, 2/3 in every prefix.
    assert [0 if tag == PNEUMONIA_TAG else 1 for tag, _ in got] == (pattern * n)[:n]
    assert [i for tag, i in got if tag == PNEUMONIA_TAG] == [
        i % PNEUMONIA_SIZE for i in range(2 * PNEUMONIA_SIZE + 1)
    ]
    assert [i for tag, i in got if tag == MNIST_TAG] == list(range(4 * PNEUMONIA_SIZE + 2))
    # Far-away positions are reachable in O(1).
    far = sys.maxsize - 1
    assert ident(ds[far]["image"])[0] in (PNEUMONIA_TAG, MNIST_TAG)


# --- Global shuffle -----------------------------------------------------------------


def test_global_shuffle_of_mixed_repeated_datasets(mnist, pneumonia_mnist):
    source1 = pneumonia_mnist
    source2 = mnist
    ds1 = chute.MapDataset.source(source1).seed(42).shuffle().repeat()
    ds2 = chute.MapDataset.source(source2).seed(43).shuffle().repeat()

    ds = chute.MapDataset.mix([ds1, ds2], weights=[1, 2])
    assert len(ds) == sys.maxsize

    n = 3 * MNIST_SIZE  # Two epochs of mnist, 600 / 70 epochs of pneumonia.
    got = [ident(ds[i]["image"]) for i in range(n)]
    assert [0 if tag == PNEUMONIA_TAG else 1 for tag, _ in got] == [1, 0, 1] * MNIST_SIZE
    pneumonia = [i for tag, i in got if tag == PNEUMONIA_TAG]
    mnist_order = [i for tag, i in got if tag == MNIST_TAG]

    # Each component is read in the order of its own shuffled, repeated dataset.
    assert pneumonia == [ident(ds1[i]["image"])[1] for i in range(MNIST_SIZE)]
    assert mnist_order == [ident(ds2[i]["image"])[1] for i in range(2 * MNIST_SIZE)]

    def epochs(order, size):
        return [order[k : k + size] for k in range(0, len(order) - size + 1, size)]

    for order, size in ((pneumonia, PNEUMONIA_SIZE), (mnist_order, MNIST_SIZE)):
        chunks = epochs(order, size)
        assert len(chunks) >= 2
        for chunk in chunks:  # Every epoch is a permutation of the whole component...
            assert sorted(chunk) == list(range(size))
            assert chunk != list(range(size))  # ...really shuffled...
        assert chunks[0] != chunks[1]  # ...and shuffled anew each epoch.

    # Different seeds give different permutations; the same seed the same stream.
    assert [ident(x["image"])[1] for x in chute.MapDataset.source(source1).seed(42).shuffle()] != [
        ident(x["image"])[1] for x in chute.MapDataset.source(source1).seed(43).shuffle()
    ]
    again = chute.MapDataset.mix(
        [
            chute.MapDataset.source(source1).seed(42).shuffle().repeat(),
            chute.MapDataset.source(source2).seed(43).shuffle().repeat(),
        ],
        weights=[1, 2],
    )
    assert [ident(again[i]["image"]) for i in range(n)] == got


# --- Hierarchical shuffle -----------------------------------------------------------

NUM_FILES, ROWS_PER_FILE = 5, 12


@pytest.fixture(scope="module")
def filenames(tmp_path_factory):
    """Sharded Parquet files (no efficient random access), like the guide's."""
    folder = tmp_path_factory.mktemp("parquet")
    names = []
    for k in range(NUM_FILES):
        path = folder / f"train-{k:05d}-of-{NUM_FILES:05d}.parquet"
        ids = list(range(k * ROWS_PER_FILE, (k + 1) * ROWS_PER_FILE))
        table = pa.table({"id": ids, "label": [i % 10 for i in ids]})
        pq.write_table(table, path, row_group_size=5)
        names.append(str(path))
    return names


def parquet_iter_dataset(path):
    """An `IterDataset` over one Parquet file (Grain's `ParquetIterDataset`)."""
    return chute.IterDataset(functools.partial(chute.ParquetStream, path))


def interleaved_file_order():
    """The order a round-robin over all files gives, before the window shuffle."""
    return [k * ROWS_PER_FILE + r for r in range(ROWS_PER_FILE) for k in range(NUM_FILES)]


def check_hierarchical_pass(ids):
    file_order = list(range(NUM_FILES * ROWS_PER_FILE))
    assert sorted(ids) == file_order  # Every record exactly once per pass.
    assert ids != file_order  # Not the file order...
    assert ids != interleaved_file_order()  # ...nor the plain interleave order:
    # the window shuffle permutes within each window of 10 interleaved elements.
    interleaved = interleaved_file_order()
    for start in range(0, len(ids), 10):
        assert sorted(ids[start : start + 10]) == sorted(interleaved[start : start + 10])


def test_hierarchical_shuffle_example(filenames):
    dataset = chute.MapDataset.source(filenames)
    dataset = dataset.map(parquet_iter_dataset)
    dataset = chute.IterDataset.interleave(dataset, cycle_length=len(filenames)).window_shuffle(
        window_size=10, seed=42
    )
    iter_ds = iter(dataset)
    head = [next(iter_ds) for _ in range(5)]
    assert all(sorted(row) == ["id", "label"] for row in head)

    ids = [row["id"] for row in dataset]
    check_hierarchical_pass(ids)
    assert [row["id"] for row in head] == ids[:5]
    assert [row["id"] for row in dataset] == ids  # Deterministic: same pass again.

    # Exactly resumable in the middle of a window.
    it = iter(dataset)
    for _ in range(23):
        next(it)
    state = json.loads(json.dumps(it.get_state()))
    resumed = iter(dataset)
    resumed.set_state(state)
    assert [row["id"] for row in resumed] == ids[23:]


def test_hierarchical_shuffle_pipeline_prints(filenames):
    dataset = chute.MapDataset.source(filenames).map(parquet_iter_dataset)
    dataset = chute.IterDataset.interleave(dataset, cycle_length=len(filenames)).window_shuffle(
        window_size=10, seed=42
    )
    text = repr(dataset)
    assert text.startswith("IterDataset\n")
    assert "interleave(cycle_length=5)" in text
    assert ".window_shuffle(window_size=10, seed=42)" in text


def test_hierarchical_shuffle_with_in_memory_streams():
    shards = {
        f"shard-{k}": [{"id": k * ROWS_PER_FILE + r} for r in range(ROWS_PER_FILE)]
        for k in range(NUM_FILES)
    }
    dataset = chute.MapDataset.source(sorted(shards)).map(
        lambda name: chute.MapDataset.source(shards[name]).to_iter_dataset()
    )
    unshuffled = chute.IterDataset.interleave(dataset, cycle_length=NUM_FILES)
    assert [row["id"] for row in unshuffled] == interleaved_file_order()

    shuffled = unshuffled.window_shuffle(window_size=10, seed=42)
    ids = [row["id"] for row in shuffled]
    check_hierarchical_pass(ids)
    assert [row["id"] for row in shuffled] == ids
    other_seed = [row["id"] for row in unshuffled.window_shuffle(window_size=10, seed=43)]
    assert sorted(other_seed) == sorted(ids) and other_seed != ids
