"""`chute.grain.config` (Grain's flags on chute's counterparts) and `grain.DatasetIterator`
as the type of every iterator: the behaviours of issue 35, items 1 and 2."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

import chute
import chute.grain as grain
from chute import _debug
from chute.grain import python as pygrain


@pytest.fixture(autouse=True)
def defaults() -> Iterator[None]:
    """Every flag back to Grain's default after each test (the switches are global)."""
    yield
    grain.config.update("py_debug_mode", False)
    grain.config.update("py_dataset_visualization_output_dir", None)
    grain.config.update("tf_lookup_batch_size", 100)


def test_the_config_is_the_same_object_under_grain_and_grain_python() -> None:
    assert pygrain.config is grain.config
    assert "config" not in grain.NOT_PROVIDED


def test_every_flag_reads_its_default_until_updated() -> None:
    assert grain.config.py_debug_mode is False
    assert grain.config.get_or_default("py_dataset_visualization_output_dir") is None
    assert grain.config.tf_prefetch_buffer_size == -1
    grain.config.update("tf_lookup_batch_size", 7)
    assert grain.config.tf_lookup_batch_size == 7


def test_an_unknown_name_is_refused_naming_it_and_the_known_ones() -> None:
    known = (
        "py_debug_mode, py_dataset_visualization_output_dir, py_relay_sigterm_to_main, "
        "tf_interleaved_shuffle, tf_interleaved_shuffle_block_size, "
        "tf_interleaved_shuffle_parallel_blocks, tf_lookup_batch_size, "
        "tf_lookup_num_parallel_calls, tf_lookup_fast_warmup, tf_optimized_sequential_read, "
        "tf_prefetch_buffer_size"
    )
    with pytest.raises(ValueError) as raised:
        grain.config.update("py_debug", True)
    assert str(raised.value) == f"Unrecognized config option: py_debug (Grain's flags: {known})"
    with pytest.raises(ValueError, match=r"^Unrecognized config option: debug_mode \("):
        grain.config.get_or_default("debug_mode")
    with pytest.raises(ValueError, match=r"^Unrecognized config option: grain_py_debug_mode \("):
        _ = grain.config.grain_py_debug_mode


@pytest.mark.parametrize(
    ("name", "value", "wanted"),
    [
        ("py_debug_mode", 1, "a bool"),
        ("py_debug_mode", "True", "a bool"),
        ("tf_lookup_batch_size", True, "an int"),
        ("tf_lookup_batch_size", 2.0, "an int"),
        ("py_dataset_visualization_output_dir", Path("/tmp"), "a str (a folder, or '') or None"),
    ],
)
def test_a_value_of_the_wrong_type_is_refused_naming_flag_and_type(
    name: str, value: object, wanted: str
) -> None:
    with pytest.raises(TypeError) as raised:
        grain.config.update(name, value)
    assert str(raised.value) == (
        f"grain.config.update: {name} takes {wanted}, got {value!r} ({type(value).__name__})."
    )
    assert not _debug.SWITCHES.stats


def test_flags_are_set_only_through_update() -> None:
    with pytest.raises(ValueError, match=r"set flags with config.update\('py_debug_mode', value\)"):
        grain.config.py_debug_mode = True  # type: ignore[misc]


def test_debug_mode_times_every_new_iterator_and_logs_its_summary_at_the_end(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ds = grain.MapDataset.range(6).map(lambda x: x * 2).to_iter_dataset().batch(3)
    grain.config.update("py_debug_mode", True)
    with caplog.at_level(logging.INFO, logger="chute"):
        it = iter(ds)
        assert [b.tolist() for b in it] == [[0, 2, 4], [6, 8, 10]]
    stats = it.stats()  # type: ignore[attr-defined]
    assert [(s.name, s.elements) for s in stats.stages] == [
        ("to_iter_dataset()", 6),
        ("batch(batch_size=3, drop_remainder=False)", 2),
        ("map(fn=strings_as_arrays)", 2),  # Grain's batches hold strings as arrays.
    ]
    ends = [r.getMessage() for r in caplog.records if "chute pipeline statistics" in r.message]
    assert len(ends) == 1
    assert ends[0].startswith("chute pipeline statistics (end):\n")
    assert "bottleneck:" in ends[0]
    assert str(stats).splitlines()[0] in ends[0]
    grain.config.update("py_debug_mode", False)
    assert not hasattr(iter(ds), "stats")


def test_debug_mode_logs_a_running_iterator_every_log_every_seconds(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_debug, "LOG_EVERY", 0.0)  # Every element, then once at the end.
    grain.config.update("py_debug_mode", True)
    with caplog.at_level(logging.INFO, logger="chute"):
        assert list(grain.MapDataset.range(3).to_iter_dataset()) == [0, 1, 2]
    messages = [r.message.split(":")[0] for r in caplog.records]
    assert messages == ["chute pipeline statistics"] * 3 + ["chute pipeline statistics (end)"]


def test_visualization_to_empty_string_logs_each_new_pipeline(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ds = grain.MapDataset.range(20).seed(42).shuffle().batch(batch_size=2).to_iter_dataset()
    grain.config.update("py_dataset_visualization_output_dir", "")
    with caplog.at_level(logging.INFO, logger="chute"):
        it = iter(ds)
        next(it)
    assert [r.getMessage() for r in caplog.records] == [f"chute pipeline:\n{ds!r}"]


def test_visualization_to_a_folder_writes_each_new_pipeline_to_a_file_of_its_own(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "graphs"
    ds = grain.MapDataset.range(4).map(lambda x: x).to_iter_dataset()
    grain.config.update("py_dataset_visualization_output_dir", str(folder))
    iter(ds), iter(ds.batch(2))
    written = sorted(folder.iterdir(), key=lambda p: int(p.stem.rsplit("-", 1)[1]))
    assert [p.read_text() for p in written] == [f"{ds!r}\n", f"{ds.batch(2)!r}\n"]
    grain.config.update("py_dataset_visualization_output_dir", None)
    iter(ds)
    assert len(list(folder.iterdir())) == 2


def test_flags_for_grains_tensorflow_loaders_are_kept_and_change_nothing() -> None:
    ds = grain.MapDataset.range(5).shuffle(seed=3)
    before = list(ds)
    for name, value in [
        ("tf_interleaved_shuffle", True),
        ("tf_lookup_num_parallel_calls", 4),
        ("py_relay_sigterm_to_main", True),
    ]:
        grain.config.update(name, value)
        assert grain.config.get_or_default(name) == value
    assert list(ds) == before
    assert not _debug.SWITCHES.stats and _debug.SWITCHES.pipeline_to is None
    grain.config.update("tf_interleaved_shuffle", False)
    grain.config.update("tf_lookup_num_parallel_calls", -1)
    grain.config.update("py_relay_sigterm_to_main", False)


def test_every_chute_iterator_is_a_grain_dataset_iterator() -> None:
    made = [
        iter(grain.MapDataset.range(4)),
        iter(grain.MapDataset.range(4).to_iter_dataset().batch(2)),
        iter(grain.MapDataset.range(4).to_iter_dataset().prefetch(2)),
        iter(chute.MapDataset.range(4).to_iter_dataset().mp_prefetch(chute.MultiprocessingOptions(1))),
    ]  # fmt: skip
    try:
        for it in made:
            assert isinstance(it, grain.DatasetIterator), type(it)
            assert isinstance(it, pygrain.DatasetIterator)
    finally:
        made[-1].close()  # type: ignore[attr-defined]


def test_a_users_iterator_class_is_not_taken_for_every_iterator() -> None:
    class PlusOne(grain.DatasetIterator[int]):
        def __next__(self) -> int:
            return next(self._parent) + 1

        def get_state(self) -> dict[str, object]:
            return self._parent.get_state()

        def set_state(self, state: dict[str, object]) -> None:
            self._parent.set_state(state)

    inner = iter(grain.MapDataset.range(3))
    mine = PlusOne(inner)
    assert isinstance(mine, grain.DatasetIterator)
    assert not isinstance(inner, PlusOne)
    assert list(mine) == [1, 2, 3]
    assert grain.DatasetIterator[int].__origin__ is grain.DatasetIterator


def test_pythons_own_lookups_get_attribute_errors() -> None:
    import copy

    assert not hasattr(grain.config, "__wrapped__")
    assert copy.deepcopy(grain.config).py_debug_mode is False
