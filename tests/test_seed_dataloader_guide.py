"""The parts of Grain's DataLoader guide (seed 000) that exist before the DataLoader.

Sampler (`IndexSampler`, `ShardOptions`, `NoSharding`), a `MapTransform` subclass in
the style of the guide's `ResizeAndCrop` (a NumPy resize instead of cv2), and the
in-memory data source. The guide spells these `grain.X`; with the import changed they
are `chute.X`.
"""

import re

import numpy as np
import pytest

import chute
import chute_samplers
import chute_transforms

# --- The guide's names under `chute` ------------------------------------------------


@pytest.mark.parametrize(
    ("name", "defined_in"),
    [
        ("IndexSampler", chute_samplers),
        ("ShardOptions", chute_samplers),
        ("NoSharding", chute_samplers),
        ("MapTransform", chute_transforms),
        ("RandomMapTransform", chute_transforms),
        ("FilterTransform", chute_transforms),
        ("FlatMapTransform", chute_transforms),
        ("BatchTransform", chute_transforms),
    ],
)
def test_guide_names_are_available_from_chute(name, defined_in):
    """The guide's examples run with `grain` replaced by `chute`."""
    assert getattr(chute, name, None) is getattr(defined_in, name)


# --- Sampler ------------------------------------------------------------------------

METADATA_LINE = re.compile(
    r"RecordMetadata\(index=(\d+), record_key=(\d+), rng=Generator\(Philox\)\)"
)


def guide_sampler():
    # Setting `num_records` to 5 to limit results.
    # For full dataset, set to `len(data_source)`.
    return chute_samplers.IndexSampler(
        num_records=5,
        num_epochs=2,
        shard_options=chute_samplers.ShardOptions(
            shard_index=0, shard_count=1, drop_remainder=True
        ),
        shuffle=True,
        seed=0,
    )


def test_index_sampler_example():
    index_sampler_example = guide_sampler()

    # Iterator is consumed.
    printed = [str(record_metadata) for record_metadata in index_sampler_example]

    assert len(printed) == 10
    parsed = []
    for line in printed:
        match = METADATA_LINE.fullmatch(line)
        assert match, line
        parsed.append((int(match[1]), int(match[2])))
    assert [index for index, _ in parsed] == list(range(10))
    keys = [key for _, key in parsed]
    # Each epoch is a permutation of the 5 records, and the two epochs differ.
    assert sorted(keys[:5]) == sorted(keys[5:]) == [0, 1, 2, 3, 4]
    assert keys[:5] != keys[5:]
    # chute's permutation for seed 0 (Grain's differs: its own PRNG).
    assert keys == [0, 2, 3, 1, 4, 0, 1, 4, 3, 2]

    # Create new iterator: the same records, with the same per-record randomness.
    index_sampler = guide_sampler()
    again = list(index_sampler)
    assert [(m.index, m.record_key) for m in again] == parsed
    first_draws = [m.rng.integers(1 << 30) for m in guide_sampler()]
    assert [m.rng.integers(1 << 30) for m in again] == first_draws
    assert len(set(first_draws)) == 10  # Each record has its own generator.
    assert all(isinstance(m.rng.bit_generator, np.random.Philox) for m in again)
    assert all(isinstance(m, chute.RecordMetadata) for m in again)


def test_index_sampler_repr_matches_the_checkpoints_sampler_string():
    assert repr(guide_sampler()) == (
        "IndexSampler(num_records=5, shard_options=ShardOptions(shard_index=0, shard_count=1, "
        "drop_remainder=True), shuffle=True, num_epochs=2, seed=0)"
    )


def test_index_sampler_iterator_resumes_after_five_steps():
    """The guide checkpoints after 5 elements and reads 5..9 twice."""
    full = [(m.index, m.record_key) for m in guide_sampler()]
    data_iter = iter(guide_sampler())
    for _ in range(5):
        next(data_iter)
    state = data_iter.get_state()
    continuation = [(m.index, m.record_key) for m in data_iter]
    assert continuation == full[5:]
    restored = iter(guide_sampler())
    restored.set_state(state)
    assert [(m.index, m.record_key) for m in restored] == full[5:]


# --- Transformations ----------------------------------------------------------------


def resize_bilinear(image, size):
    """`cv2.resize(image, dsize=size, interpolation=cv2.INTER_LINEAR)` in NumPy."""
    height, width = image.shape[:2]
    out_w, out_h = size
    ys = np.clip((np.arange(out_h) + 0.5) * height / out_h - 0.5, 0, height - 1)
    xs = np.clip((np.arange(out_w) + 0.5) * width / out_w - 0.5, 0, width - 1)
    y0, x0 = np.floor(ys).astype(int), np.floor(xs).astype(int)
    y1, x1 = np.minimum(y0 + 1, height - 1), np.minimum(x0 + 1, width - 1)
    wy, wx = (ys - y0)[:, None, None], (xs - x0)[None, :, None]
    pixels = image.astype(np.float64)
    top = pixels[y0][:, x0] * (1 - wx) + pixels[y0][:, x1] * wx
    bottom = pixels[y1][:, x0] * (1 - wx) + pixels[y1][:, x1] * wx
    return np.rint(top * (1 - wy) + bottom * wy).astype(image.dtype)


class ResizeAndCrop(chute_transforms.MapTransform):
    def map(self, element: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        image = element["image"]
        image = resize_bilinear(image, (256, 256))
        image = image[:224, :224]
        element["image"] = image
        return element


def imagenet_a_like(count):
    """Records shaped like `tfds.data_source("imagenet_a", split="test")`'s."""
    rng = np.random.default_rng(7)
    out = []
    for number in range(count):
        height, width = int(rng.integers(40, 90)), int(rng.integers(40, 90))
        out.append(
            {
                "file_name": f"{number:06d}_bee _ bee_0.5.jpg".encode(),
                "image": rng.integers(0, 256, size=(height, width, 3), dtype=np.uint8),
                "label": int(rng.integers(1000)),
            }
        )
    return out


@pytest.fixture(scope="module")
def imagenet_records():
    return imagenet_a_like(6)


@pytest.fixture(scope="module")
def source(tmp_path_factory, imagenet_records):
    paths = chute.write_array_record(imagenet_records, tmp_path_factory.mktemp("ia") / "test")
    return chute.ArrayRecordDataSource(paths)


def test_resize_bilinear_matches_a_hand_computed_case():
    image = np.array([[0, 100], [200, 50]], dtype=np.uint8)[:, :, None]
    # Upscaling 2x2 to 4x4 (half-pixel centres): corners stay, middles interpolate
    # (e.g. row 1 is 0.75 * [0, 25, 75, 100] + 0.25 * [200, 162.5, 87.5, 50], rounded).
    out = resize_bilinear(image, (4, 4))[:, :, 0]
    assert out.tolist() == [
        [0, 25, 75, 100],
        [50, 59, 78, 88],
        [150, 128, 84, 62],
        [200, 162, 88, 50],
    ]


def test_resize_and_crop_transform_through_map(source, imagenet_records):
    transformations = [ResizeAndCrop()]
    ds = chute.MapDataset.source(source)
    for transform in transformations:
        ds = ds.map(transform)

    assert len(ds) == len(imagenet_records)
    elements = list(ds)
    for element, record in zip(elements, imagenet_records, strict=True):
        assert element["image"].shape == (224, 224, 3)
        assert element["image"].dtype == np.uint8
        expected = resize_bilinear(record["image"], (256, 256))[:224, :224]
        np.testing.assert_array_equal(element["image"], expected)
        assert element["file_name"] == record["file_name"]
        assert element["label"] == record["label"]
    # Random access and a second pass give the same elements.
    np.testing.assert_array_equal(ds[3]["image"], elements[3]["image"])
    for again, first in zip(ds, elements, strict=True):
        np.testing.assert_array_equal(again["image"], first["image"])


def test_resize_and_crop_in_sampler_order(source, imagenet_records):
    """What the guide's DataLoader(worker_count=0) reads: source[key] per sampler step."""
    sampler = chute_samplers.IndexSampler(
        num_records=len(source),
        num_epochs=2,
        shard_options=chute_samplers.NoSharding(),
        shuffle=True,
        seed=0,
    )
    transform = ResizeAndCrop()
    keys = [m.record_key for m in sampler]
    assert sorted(keys[:6]) == sorted(keys[6:]) == list(range(6))
    by_key = chute.MapDataset.source(source).map(transform)
    for key in keys:
        element = transform.map(source[key])
        assert element["file_name"] == imagenet_records[key]["file_name"]
        np.testing.assert_array_equal(element["image"], by_key[key]["image"])


# --- In-memory data source ----------------------------------------------------------


def test_in_memory_data_source_example():
    in_memory_datasource = chute.InMemoryDataSource(range(5))
    try:
        assert re.fullmatch(
            r"SharedMemorySource\(name='[\w-]+', len=5, nbytes=\d+\)", repr(in_memory_datasource)
        )
        assert in_memory_datasource[0] == 0
        assert list(in_memory_datasource) == [0, 1, 2, 3, 4]

        sampler = chute_samplers.IndexSampler(
            num_records=len(in_memory_datasource),
            num_epochs=2,
            shard_options=chute_samplers.NoSharding(),
            shuffle=True,
            seed=0,
        )
        data = [in_memory_datasource[m.record_key] for m in sampler]
        assert len(data) == len(in_memory_datasource) * 2
        assert data == [m.record_key for m in sampler]
        assert sorted(data[:5]) == sorted(data[5:]) == [0, 1, 2, 3, 4]

        ds = chute.MapDataset.source(in_memory_datasource).seed(0).shuffle().repeat(2)
        epochs = list(ds)
        assert sorted(epochs[:5]) == sorted(epochs[5:]) == [0, 1, 2, 3, 4]
        assert epochs == list(ds)
    finally:
        in_memory_datasource.close()


def test_in_memory_data_loader_with_five_workers_as_written():
    in_memory_datasource = chute.InMemoryDataSource(range(5))
    try:

        def loader(workers):
            return chute.DataLoader(
                data_source=in_memory_datasource,
                sampler=chute.IndexSampler(
                    num_records=len(in_memory_datasource),
                    num_epochs=2,
                    shard_options=chute.NoSharding(),
                    shuffle=True,
                    seed=0,
                ),
                worker_count=workers,
            )

        data_iter = iter(loader(5))
        got = [next(data_iter) for _ in range(len(in_memory_datasource) * 2)]
        # Each epoch is a shuffle of the five records, and the 5 workers change nothing.
        assert sorted(got[:5]) == sorted(got[5:]) == [0, 1, 2, 3, 4]
        assert got == list(loader(0))
        del data_iter
    finally:
        in_memory_datasource.close()


def test_per_worker_read_options_as_written(source):
    def loader(workers, read_options):
        return chute.DataLoader(
            data_source=source,
            sampler=chute.IndexSampler(
                num_records=len(source),
                num_epochs=2,
                shard_options=chute.NoSharding(),
                shuffle=True,
                seed=0,
            ),
            worker_count=workers,
            read_options=read_options,
        )

    # Following configuration makes 8*10=80 threads reading data.
    data_loader = loader(10, chute.ReadOptions(num_threads=8, prefetch_buffer_size=500))
    got = [element["file_name"] for element in data_loader]
    expected = [element["file_name"] for element in loader(0, None)]
    assert got == expected
    assert sorted(got[: len(source)]) == sorted(got[len(source) :])
