"""`SpanSchedule`: the grid, restores inside a chunk, and units sized by measured cost."""

from chute_execution import _spans
from chute_execution._spans import SpanSchedule


def test_the_grid_and_a_restore_inside_a_chunk():
    grid = SpanSchedule(20, 8, adaptive=False, workers=2)
    assert [grid.span(n) for n in range(4)] == [(0, 8), (8, 16), (16, 20), None]
    assert grid.restart(11) == 1
    assert [grid.span(n) for n in (1, 2)] == [(11, 16), (16, 20)]
    assert not grid.is_grid_chunk((11, 16)) and grid.is_grid_chunk((16, 20))
    assert grid.restart(20) == 3 and grid.span(3) is None


def test_units_double_while_quick_and_follow_the_measured_cost():
    units = SpanSchedule(10_000, 64, adaptive=True, workers=2)
    sizes = [stop - start for start, stop in (units.span(n) for n in range(8))]
    assert sizes == [1, 2, 4, 8, 16, 32, 64, 64]
    units.observe(64, 64 * 0.01)  # 10 ms a position: 5 positions make TARGET_SECONDS.
    start, stop = units.span(8)
    assert stop - start == int(_spans.TARGET_SECONDS / 0.01)
    for _ in range(6):
        units.observe(5, 0.001)  # Quick: the limit doubles back up to 64.
    start, stop = units.span(9)
    assert stop - start == 64


def test_a_small_dataset_is_shared_between_the_workers():
    units = SpanSchedule(10, 64, adaptive=True, workers=2)
    spans = [units.span(n) for n in range(6)]
    assert spans == [(0, 1), (1, 3), (3, 5), (5, 7), (7, 9), (9, 10)]
    assert units.restart(4) == 0 and units.span(0) == (4, 5)


def test_after_a_restore_the_first_unit_goes_to_the_first_worker():
    from chute_execution import ChunkPlan, MultiprocessingOptions, MultiprocessPrefetchIter

    plan = ChunkPlan(range(100), [], chunk_size=10)
    it = MultiprocessPrefetchIter(plan, MultiprocessingOptions(num_workers=2))
    assert [it.worker_of(unit) for unit in range(4)] == [0, 1, 0, 1]
    it.set_state({"position": 50, "offset": 0})  # Grid chunk 5: the first unit now.
    assert [it.worker_of(unit) for unit in range(5, 9)] == [0, 1, 0, 1]
    assert list(it) == list(range(50, 100))
