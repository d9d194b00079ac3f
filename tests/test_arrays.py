"""topo.arrays.unique is np.unique by another method (sorting instead of NumPy 2.3+'s hash
table, which is much slower on large arrays)."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from topo.arrays import union1d, unique

DTYPES = st.sampled_from([np.int8, np.int32, np.int64, np.uint16, np.float64, np.bool_])


@settings(max_examples=200, deadline=None)
@given(DTYPES.flatmap(lambda dt: arrays(dt, st.integers(0, 3).flatmap(
    lambda nd: st.tuples(*[st.integers(0, 6)] * nd)))))
def test_unique_equals_numpy(a):
    got, want = unique(a), np.unique(a)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)  # NaN positions compare equal here


def test_unique_of_lists_and_strings():
    np.testing.assert_array_equal(unique([3, 1, 3, 2]), [1, 2, 3])
    np.testing.assert_array_equal(unique(np.array(["b", "a", "b"])), ["a", "b"])
    assert unique([]).size == 0


@settings(max_examples=100, deadline=None)
@given(arrays(np.int64, st.integers(0, 8)), arrays(np.int64, st.integers(0, 8)))
def test_union1d_equals_numpy(a, b):
    np.testing.assert_array_equal(union1d(a, b), np.union1d(a, b))
