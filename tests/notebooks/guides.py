"""The seeds' DataLoader and Dataset guides as notebook cells, with chute's names.

Each guide is a list of code cells, as a user types them into Jupyter: Grain's names
changed to chute's, TFDS replaced by data made on the spot (records shaped like
`imagenet_a` and `mnist`), `cv2.resize` by NumPy, and the worker counts of the guides
(2 and 5). Transforms are defined in cells: a `MapTransform` subclass, a lambda, a
closure over a local variable, a `random_map`. `tests/notebooks/test_notebooks.py` runs them in a
real Jupyter kernel, and as a script, `python -c` and stdin.
"""

DATALOADER_GUIDE = [
    """\
import os

import numpy as np
import orbax.checkpoint as ocp

import chute

rng = np.random.default_rng(7)
records = [
    {
        "file_name": f"{number:06d}_bee.jpg".encode(),
        "image": rng.integers(0, 256, size=(int(rng.integers(40, 90)), 64, 3), dtype=np.uint8),
        "label": int(rng.integers(1000)),
    }
    for number in range(6)
]
source = chute.ArrayRecordDataSource(chute.write_array_record(records, "imagenet_a/test"))
print(f"# records: {len(source)}")""",
    """\
index_sampler = chute.IndexSampler(
    num_records=5,
    num_epochs=2,
    shard_options=chute.ShardOptions(shard_index=0, shard_count=1, drop_remainder=True),
    shuffle=True,
    seed=0,
)
for record_metadata in index_sampler:
    print(record_metadata)""",
    """\
def resize(image, size):  # cv2.resize(image, dsize=size), nearest pixel, in NumPy.
    rows = np.arange(size[1]) * image.shape[0] // size[1]
    cols = np.arange(size[0]) * image.shape[1] // size[0]
    return image[rows][:, cols]


class ResizeAndCrop(chute.MapTransform):
    def map(self, element: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        image = element["image"]
        image = resize(image, (256, 256))
        image = image[:224, :224]
        element["image"] = image
        return element


transformations = [ResizeAndCrop()]""",
    """\
data_loader = chute.DataLoader(
    data_source=source,
    operations=transformations,
    sampler=index_sampler,
    worker_count=2,
)
for element in data_loader:
    print(element["image"].shape, element["label"])""",
    """\
data_iter = iter(data_loader)
num_steps = 5
for i in range(num_steps):
    x = next(data_iter)
    print(i, x["file_name"], x["label"])
mngr = ocp.CheckpointManager(os.path.abspath("orbax"))
assert mngr.save(step=num_steps, args=chute.PyGrainCheckpointSave(data_iter), force=True)
mngr.wait_until_finished()""",
    """\
for i in range(5, 10):
    x = next(data_iter)
    print(i, x["file_name"], x["label"])""",
    """\
mngr.restore(num_steps, args=chute.PyGrainCheckpointRestore(data_iter))
for i in range(5, 10):
    x = next(data_iter)
    print(i, x["file_name"], x["label"])
mngr.close()""",
    """\
in_memory_datasource = chute.InMemoryDataSource(range(5))
data_loader = chute.DataLoader(
    data_source=in_memory_datasource,
    sampler=chute.IndexSampler(
        num_records=len(in_memory_datasource),
        num_epochs=2,
        shard_options=chute.NoSharding(),
        shuffle=True,
        seed=0,
    ),
    worker_count=5,
)
data_iter = iter(data_loader)
print([next(data_iter) for i in range(len(in_memory_datasource) * 2)])
del data_iter, data_loader
in_memory_datasource.close()""",
    """\
class Fussy(chute.MapTransform):
    def map(self, element):
        if element["label"] == records[3]["label"]:
            raise ValueError(f"label {element['label']} is not allowed")
        return element["label"]


seen = []
try:
    for label in chute.DataLoader(
        data_source=source,
        operations=[Fussy()],
        sampler=chute.IndexSampler(
            num_records=6, num_epochs=1, shard_options=chute.NoSharding(), shuffle=False
        ),
        worker_count=2,
        chunk_size=2,
    ):
        seen.append(label)
except ValueError as error:
    print("ValueError:", error, "after", seen == [r["label"] for r in records[:3]])""",
]
"""The DataLoader guide (seeds 000 and 001): sampler, source, a transform class,
`DataLoader` with 2 workers, Orbax checkpoint and restore with workers, the in-memory
source with 5 workers, and an error raised in a worker."""

DATASET_GUIDE = [
    """\
import os

import numpy as np
import orbax.checkpoint as ocp

import chute

rng = np.random.default_rng(3)
mnist = [
    {"image": rng.integers(0, 256, size=(28, 28), dtype=np.uint8), "label": i % 10}
    for i in range(60)
]""",
    """\
ds = chute.MapDataset.source(mnist).seed(seed=45).shuffle().to_iter_dataset()
ds = ds.mp_prefetch(chute.MultiprocessingOptions(num_workers=2))
num_steps = 4
ds_iter = iter(ds)
for i in range(num_steps):
    x = next(ds_iter)
    print(i, x["label"])
mngr = ocp.CheckpointManager(os.path.abspath("orbax-dataset"))
assert mngr.save(step=num_steps, args=chute.checkpoint.CheckpointSave(ds_iter), force=True)
mngr.wait_until_finished()
for i in range(4, 8):
    x = next(ds_iter)
    print(i, x["label"])
mngr.restore(num_steps, args=chute.checkpoint.CheckpointRestore(ds_iter))
for i in range(4, 8):
    x = next(ds_iter)
    print(i, x["label"])
mngr.close()""",
    """\
threshold = 5  # A local variable the filter closes over.
ds1 = chute.MapDataset.source(mnist).filter(lambda features: features["label"] < threshold)
ds2 = chute.MapDataset.source(mnist).filter(lambda features: features["label"] >= threshold)
ds = chute.IterDataset.mix(
    [ds1.to_iter_dataset(), ds2.to_iter_dataset()], weights=[0.7, 0.3]
).map(lambda features: features["label"])
print(list(ds)[:10])""",
    """\
def brighten(features, rng):
    return int(features["image"].sum()) % 97 + int(rng.integers(0, 3))


ds = chute.MapDataset.source(mnist).seed(0).to_iter_dataset().random_map(brighten)
in_process = list(ds)
with_workers = list(ds.mp_prefetch(chute.MultiprocessingOptions(num_workers=2)))
print(with_workers == in_process, len(with_workers))""",
]
"""The Dataset guide (seeds 002 and 003): a shuffled dataset with workers checkpointed
with Orbax, a mix of filtered datasets whose filters close over a local variable, and a
`random_map` defined in a cell run by workers."""
