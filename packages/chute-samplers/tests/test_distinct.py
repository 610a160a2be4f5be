import subprocess
import sys

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from chute_core.internal import distinct


@given(st.lists(st.integers(-(2**40), 2**40), max_size=50))
def test_distinct_equals_numpy_unique(values):
    array = np.array(values, dtype=np.int64)
    got = distinct(array)
    assert got.dtype == array.dtype
    np.testing.assert_array_equal(got, np.unique(array))


def test_distinct_returns_a_copy():
    array = np.array([4, 4, 4])
    distinct(array)[0] = 9
    assert array.tolist() == [4, 4, 4]


def test_reading_shuffled_sampled_and_mixed_data_never_imports_numpy_ma():
    # np.unique imports numpy.ma on its first call: without bytecode caches that cost
    # every new worker 50-200 ms on its first chunk. The hot paths must not need it.
    code = """
import sys
import numpy as np
from chute_samplers import IndexSampler, MixMap, ShuffleMap, fetch
from chute_sources import RangeSource
a = ShuffleMap(RangeSource(100), seed=0)
positions = np.arange(0, 100, 7, dtype=np.int64)
fetch(a, positions, np.zeros(positions.size, np.uint64))
fetch(MixMap([a, RangeSource(50)], [1, 1]), positions, np.zeros(positions.size, np.uint64))
sampler = IndexSampler(100, num_epochs=2, shuffle=True, seed=1)
sampler.locate(np.arange(90, 110, dtype=np.int64))
print("numpy.ma" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
