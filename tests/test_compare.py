import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from cmpx.compare import Tolerance
from cmpx_comparators.elementwise import EPSILON, check_elementwise


def reference_rule(a, b, atol, rtol):
    """Polygraphy's rule written out plainly, element by element."""
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    with np.errstate(all="ignore"):
        return sum(_fails(x, y, atol, rtol) for x, y in zip(a, b))


def _fails(x, y, atol, rtol):
    absdiff = abs(x - y)
    rel = absdiff / (abs(y) if y != 0 else EPSILON)
    return bool((absdiff > atol or np.isnan(absdiff)) and (rel > rtol or np.isnan(rel)))


values = st.one_of(st.floats(-1e6, 1e6), st.sampled_from([np.nan, np.inf, -np.inf, 0.0]))
floats = hnp.arrays(np.float64, st.integers(1, 20), elements=values)


@given(floats, st.data(), st.floats(0, 10), st.floats(0, 10))
def test_the_elementwise_check_matches_the_plain_rule(a, data, atol, rtol):
    b = data.draw(hnp.arrays(np.float64, a.shape, elements=values))
    result = check_elementwise(a, b, Tolerance(atol, rtol))
    expected = reference_rule(a, b, atol, rtol)
    assert result.mismatches == expected and result.passed == (expected == 0)


def test_either_tolerance_is_enough_and_the_comparison_is_strict():
    a, b = np.array([1.1], np.float32), np.array([1.0], np.float32)
    assert check_elementwise(a, b, Tolerance(0.2, 0)).passed
    assert check_elementwise(a, b, Tolerance(0, 0.2)).passed
    assert not check_elementwise(a, b, Tolerance(0.05, 0.05)).passed
    assert check_elementwise(np.array([3.0]), np.array([1.0]), Tolerance(2.0, 0)).passed  # 2 > 2 is false


def test_nan_and_equal_infinities_fail_by_default():
    assert not check_elementwise(np.array([np.nan]), np.array([np.nan]), Tolerance(1, 1)).passed
    assert not check_elementwise(np.array([np.inf]), np.array([np.inf]), Tolerance(1, 1)).passed


def test_integers_do_not_wrap_around():
    big = np.array([np.iinfo(np.int64).max], np.int64)
    small = np.array([np.iinfo(np.int64).min], np.int64)
    result = check_elementwise(big, small, Tolerance(0, 0))
    assert not result.passed and result.max_abs > 1e18


def test_half_precision_is_compared_in_float32_and_shapes_must_match():
    import ml_dtypes

    a = np.array([1.0, 2.0], ml_dtypes.bfloat16)
    assert check_elementwise(a, np.array([1.0, 2.0], np.float16), Tolerance(0, 0)).passed
    shape = check_elementwise(np.zeros((2, 3)), np.zeros((3, 2)), Tolerance(1, 1))
    assert not shape.passed and shape.note == "shape mismatch: [2, 3] vs reference [3, 2]"


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
def test_empty_tensors_pass(dtype):
    assert check_elementwise(np.zeros((0, 3), dtype), np.zeros((0, 3), dtype), Tolerance(0, 0)).passed
