import time

import numpy as np
import pytest

from chute_execution import MultiprocessingOptions, pick_performance_config
from chute_samplers import SequentialIter
from chute_sources import RangeSource
from chute_transforms import MapMap


def test_cheap_elements_get_no_workers():
    config = pick_performance_config(SequentialIter(RangeSource(1000)), ram_budget_mb=64)
    assert config.multiprocessing_options.num_workers == 0
    assert config.elements_measured == 512
    assert config.seconds_per_element < 20e-6


def _slow(x):
    time.sleep(200e-6)
    return np.zeros(1024, np.uint8)


def test_expensive_elements_get_a_worker_per_cpu_within_the_limits(monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 8)
    ds = SequentialIter(MapMap(RangeSource(100), _slow))
    config = pick_performance_config(ds, ram_budget_mb=64, max_workers=3, max_elements=50)
    assert config.multiprocessing_options.num_workers == 3
    assert config.bytes_per_element == 1024
    assert config.elements_measured == 50
    assert isinstance(config.multiprocessing_options, MultiprocessingOptions)


def test_buffers_fit_half_the_memory_budget():
    elements = MapMap(RangeSource(20), lambda x: np.zeros(2**20, np.uint8))  # 1 MiB each
    big = SequentialIter(elements)
    config = pick_performance_config(big, ram_budget_mb=16, max_elements=5)
    assert config.read_options.prefetch_buffer_size * config.bytes_per_element <= 8 * 2**20
    assert config.multiprocessing_options.per_worker_buffer_size >= 1


def test_bad_budget():
    with pytest.raises(ValueError, match="ram_budget_mb must be >= 1"):
        pick_performance_config(range(3), ram_budget_mb=0)
