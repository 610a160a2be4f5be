"""The data-source examples of the seeds (Grain's guides), with `import chute`."""

import re

import chute


def test_range_data_source_example():
    range_data_source = chute.RangeDataSource(start=1, stop=10, step=2)
    assert list(range_data_source) == [1, 3, 5, 7, 9]


def test_in_memory_data_source_example():
    in_memory_datasource = chute.InMemoryDataSource(range(5))
    assert re.fullmatch(
        r"SharedMemorySource\(name='chute-[\w-]+', len=5, nbytes=\d+\)", repr(in_memory_datasource)
    )
    assert in_memory_datasource[0] == 0
    in_memory_datasource.close()


def test_array_record_data_source_with_file_instructions(tmp_path):
    paths = chute.write_array_record(
        [{"label": i} for i in range(10)], tmp_path / "d", num_shards=2
    )
    instruction = chute.FileInstruction(paths[1], skip=1, take=2, examples_in_shard=5)
    source = chute.ArrayRecordDataSource([paths[0], instruction])
    assert len(source) == 7
    assert [r["label"] for r in source] == [0, 1, 2, 3, 4, 6, 7]


def test_custom_source_protocol():
    class Squares:
        def __len__(self):
            return 4

        def __getitem__(self, record_key):
            return int(record_key) ** 2

    assert isinstance(Squares(), chute.RandomAccessDataSource)
