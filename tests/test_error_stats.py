"""The streaming error statistics against plain numpy, on every dtype family and across chunk boundaries."""

import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from cmpx_comparators import errors
from cmpx_comparators.diffs import EPSILON
from cmpx_comparators.errors import error_stats

QUANTILES = (0.5, 0.9, 0.95, 0.99, 0.25, 0.0, 1.0)


@pytest.fixture(autouse=True)
def tiny_chunks(monkeypatch):
    monkeypatch.setattr(errors, "CHUNK_ELEMENTS", 7)  # every test crosses chunk boundaries


def plain_errors(a, b, nan_equal=False, inf_equal=False):
    """The errors as one would write them by hand: floats up to 32 bits in float32 (as Polygraphy), the rest in
    float64, integers exactly."""
    if a.dtype.kind in "iu" and b.dtype.kind in "iu":
        absdiff = np.array([abs(int(x) - int(y)) for x, y in zip(a.ravel(), b.ravel())], np.float64)
        denominator = np.abs(b.astype(np.float64).ravel())
        with np.errstate(all="ignore"):  # from an exact zero: inf if different, 0 if equal
            return absdiff, np.where(denominator == 0, np.where(absdiff > 0, np.inf, 0.0), absdiff / denominator)
    work = np.float32 if max(a.dtype.itemsize, b.dtype.itemsize) <= 4 else np.float64
    with np.errstate(all="ignore"):
        x, y = a.astype(work).ravel(), b.astype(work).ravel()
        same = (nan_equal & np.isnan(x) & np.isnan(y)) | (inf_equal & np.isinf(x) & (x == y))
        absdiff = np.where(same, work(0), np.abs(x - y))
        magnitude = np.where(same, work(1), np.abs(y))
        reldiff = absdiff / np.where(magnitude == 0, work(EPSILON), magnitude)
    return absdiff.astype(np.float64), reldiff.astype(np.float64)


def assert_close(ours, expected, rtol):
    if math.isnan(expected):
        assert math.isnan(ours)
    else:
        assert ours == pytest.approx(expected, rel=rtol, abs=1e-300)


def plain_quantile(values, q):
    """numpy's linear quantile, with equal neighbours giving their value (numpy makes NaN of inf and inf)."""
    if np.isnan(values).any():
        return math.nan
    ordered = np.sort(values)
    position = q * (len(ordered) - 1)
    low = int(math.floor(position))
    high = min(low + 1, len(ordered) - 1)
    if ordered[low] == ordered[high]:
        return float(ordered[low])
    return float(np.quantile(values, q))


def check_summary(summary, values, rtol):
    assert summary.count == values.size
    assert summary.nan_count == np.count_nonzero(np.isnan(values))
    assert_close(summary.max, np.max(values), rtol)
    assert summary.max_index == int(np.argmax(values))
    assert_close(summary.min, np.min(values), rtol)
    with np.errstate(all="ignore"):
        assert_close(summary.mean, np.mean(values), max(rtol, 1e-9))  # float32 errors: a few ulps
        expected_std = np.std(values)
        scale = float(np.max(np.abs(values))) if np.isfinite(values).all() else 0.0
        if math.isfinite(expected_std):
            assert summary.std == pytest.approx(expected_std, rel=1e-6, abs=1e-12 * scale + 1e-300)
        else:
            assert_close(summary.std, expected_std, 1e-6)
    for q in QUANTILES:
        assert_close(summary.quantiles[q], plain_quantile(values, q), rtol)


special = st.sampled_from([np.nan, np.inf, -np.inf, 0.0, -0.0])
float_values = st.one_of(st.floats(-1e30, 1e30), special)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from([np.float64, np.float32, np.float16]), st.integers(1, 40), st.data(),
       st.booleans(), st.booleans())
def test_float_statistics_match_numpy(dtype, size, data, nan_equal, inf_equal):
    elements = float_values if dtype != np.float16 else st.one_of(st.floats(-6e4, 6e4, width=16), special)
    a = data.draw(hnp.arrays(dtype, size, elements=elements))
    b = data.draw(hnp.arrays(dtype, size, elements=elements))
    atol, rtol = data.draw(st.floats(0, 10)), data.draw(st.floats(0, 10))
    stats = error_stats(a, b, atol=atol, rtol=rtol, quantiles=QUANTILES, nan_equal=nan_equal, inf_equal=inf_equal)
    absdiff, reldiff = plain_errors(a, b, nan_equal, inf_equal)
    tolerance = 1e-5 if dtype != np.float64 else 1e-12
    check_summary(stats.abs, absdiff, tolerance)
    check_summary(stats.rel, reldiff, tolerance)
    if dtype != np.float64:  # numpy compares float32 errors with tolerances rounded to float32 (as Polygraphy)
        atol, rtol = float(np.float32(atol)), float(np.float32(rtol))
    with np.errstate(invalid="ignore"):
        abs_fails = (absdiff > atol) | np.isnan(absdiff)
        rel_fails = (reldiff > rtol) | np.isnan(reldiff)
    assert stats.mismatches == np.count_nonzero(abs_fails & rel_fails)
    if not stats.mismatches:
        return  # the smallest passing tolerances are only worked out for failing outputs
    assert_close(stats.min_atol, float(np.max(absdiff, where=rel_fails, initial=0.0)), tolerance)
    assert_close(stats.min_rtol, float(np.max(reldiff, where=abs_fails, initial=0.0)), tolerance)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from([np.int8, np.uint8, np.int32, np.int64, np.uint64]), st.integers(1, 30), st.data())
def test_integer_errors_are_exact_even_at_the_extremes(dtype, size, data):
    info = np.iinfo(dtype)
    elements = st.one_of(st.integers(int(info.min), int(info.max)), st.sampled_from([int(info.min), int(info.max)]))
    a = data.draw(hnp.arrays(dtype, size, elements=elements))
    b = data.draw(hnp.arrays(dtype, size, elements=elements))
    stats = error_stats(a, b, atol=0, rtol=0, quantiles=QUANTILES)
    absdiff, reldiff = plain_errors(a, b)
    check_summary(stats.abs, absdiff, 1e-15)
    check_summary(stats.rel, reldiff, 1e-12)
    assert stats.mismatches == np.count_nonzero(absdiff > 0)


def test_int64_extremes_do_not_wrap():
    a = np.array([np.iinfo(np.int64).max], np.int64)
    b = np.array([np.iinfo(np.int64).min], np.int64)
    assert error_stats(a, b, atol=0, rtol=0).abs.max == float(2**64 - 1)


def test_bool_differs_by_inequality():
    stats = error_stats(np.array([True, False, True]), np.array([True, True, False]), atol=0.5, rtol=0)
    assert stats.mismatches == 2 and stats.abs.max == 1.0


def test_bfloat16_and_mixed_dtypes_are_promoted_and_reported():
    a = np.array([1.0, 2.0, 3.0], ml_dtypes.bfloat16)
    b = np.array([1.0, 2.0, 3.5], np.float32)
    stats = error_stats(a, b, atol=0, rtol=0)
    assert stats.plan.work == np.float32 and stats.abs.max == 0.5
    assert stats.plan.note == "dtypes differ: bfloat16 vs reference float32 (compared as float32)"
    assert error_stats(np.arange(3, dtype=np.int32), np.arange(3.0), atol=0, rtol=0).plan.work == np.float64


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
def test_empty_tensors_have_zero_statistics(dtype):
    stats = error_stats(np.zeros((0, 3), dtype), np.zeros((0, 3), dtype), atol=0, rtol=0, quantiles=(0.99,))
    assert stats.size == 0 and stats.mismatches == 0 and stats.abs.statistic("quantile", 0.99) == 0.0
    assert stats.abs.statistic("mean") == 0.0 and stats.worst == []


def test_the_smallest_passing_tolerances_look_past_larger_errors_that_pass(monkeypatch):
    """The largest abs error (10) passes by rtol and the largest rel error (4.5e8, against a zero) passes by atol:
    neither tells the tolerance that would pass, which only the one mismatch (abs 1, rel 1) does."""
    reference = np.array([1e6, 0.0, 1.0], np.float32)
    actual = np.array([1e6 + 10, 1e-7, 2.0], np.float32)
    for chunk in (1, 3):
        monkeypatch.setattr(errors, "CHUNK_ELEMENTS", chunk)
        stats = error_stats(actual, reference, atol=0.5, rtol=1e-3)
        assert stats.mismatches == 1 and stats.abs.max == 10 and stats.rel.max > 1e8
        assert (stats.min_atol, stats.min_rtol) == (1.0, 1.0)


def test_worst_elements_are_the_largest_errors_with_their_values():
    a = np.zeros((4, 5), np.float32)
    b = np.zeros((4, 5), np.float32)
    a[1, 2], a[3, 4], a[0, 0] = 5, -7, np.nan
    stats = error_stats(a, b, atol=0, rtol=0)
    assert [w.index for w in stats.worst[:3]] == [(0, 0), (3, 4), (1, 2)]
    assert stats.worst[1].actual == -7 and stats.worst[1].reference == 0 and stats.worst[1].absdiff == 7


def test_quantiles_stay_exact_when_one_bin_holds_most_elements(monkeypatch):
    monkeypatch.setattr(errors, "CHUNK_ELEMENTS", 1000)
    rng = np.random.default_rng(0)
    a = (1.0 + rng.random(100_000) * 1e-6).astype(np.float64)  # nearly all errors share a top-bits bin
    b = np.zeros_like(a)
    stats = error_stats(a, b, atol=0, rtol=0, quantiles=(0.3, 0.77))
    for q in (0.3, 0.5, 0.77, 0.99):
        assert stats.abs.quantiles[q] == float(np.quantile(a, q))


def test_float32_quantiles_are_exact_from_the_second_level_counts(monkeypatch):
    """float32 quantiles come from counting the wanted bins' elements by their low bits: exact, with the counts
    buffered (the buffer flushed when full, and a chunk larger than it counted at once)."""
    from cmpx_comparators.fine_ranks import FineRanks

    monkeypatch.setattr(errors, "CHUNK_ELEMENTS", 1000)
    monkeypatch.setattr(FineRanks, "PENDING", 700)
    rng = np.random.default_rng(1)
    reference = rng.random(50_000, dtype=np.float32) + np.float32(0.5)
    actual = reference * np.float32(1.0001)  # a nearly constant relative error: one or two bins hold them all
    stats = error_stats(actual, reference, atol=0, rtol=0, quantiles=(0.0, 0.3, 0.77, 1.0))
    absdiff, reldiff = plain_errors(actual, reference)
    for q in (0.0, 0.3, 0.5, 0.77, 0.9, 0.95, 0.99, 1.0):
        assert stats.abs.quantiles[q] == float(np.quantile(absdiff, q))
        assert stats.rel.quantiles[q] == float(np.quantile(reldiff, q))


@settings(max_examples=80, deadline=None)
@given(st.data(), st.integers(1, 50), st.integers(8, 60), st.sampled_from([1, 16, 1000]))
def test_fine_ranks_are_the_sorted_values_at_those_ranks(data, chunk, pending, spread):
    """FineRanks on its own: any non-negative float32 values (infinities too), any ranks, either way of counting
    (a contiguous range of bins, or a lookup when the wanted bins lie far apart), chunks cut anywhere."""
    from cmpx_comparators.fine_ranks import FineRanks
    from cmpx_comparators.order_stats import BINS, bin_keys

    base = float(np.float32(data.draw(st.floats(1e-30, 1e30))))
    top = float(np.float32(base * spread))
    elements = st.one_of(st.floats(base, top, width=32), st.floats(0, 3.0000000054977558e+38, width=32),
                         st.just(np.inf), st.just(0.0))
    values = data.draw(hnp.arrays(np.float32, data.draw(st.integers(1, 200)), elements=elements))
    ranks = data.draw(st.lists(st.integers(0, values.size - 1), min_size=1, max_size=8))
    counts = np.bincount(bin_keys(values), minlength=BINS)
    selector = FineRanks(counts, ranks)
    selector.PENDING = pending
    buffer = np.empty(chunk, bool)
    for start in range(0, values.size, chunk):
        part = values[start:start + chunk]
        selector.gather(part, bin_keys(part), buffer)
    ordered = np.sort(values)
    assert selector.values() == {rank: float(ordered[rank]) for rank in ranks}


@settings(max_examples=80, deadline=None)
@given(st.data(), st.integers(1, 40), st.integers(1, 12), st.sampled_from([np.float32, np.float64]))
def test_top_k_are_the_largest_elements_the_earliest_of_equal_ones(data, chunk, k, dtype):
    """TopK on its own, on few distinct values (ties everywhere) with NaN and infinities: the k largest, NaN
    first, largest first and the earliest first among equal ones, whatever the chunks."""
    from cmpx_comparators.order_stats import BINS, TopK, bin_keys

    elements = st.sampled_from([0.0, 1e-3, 0.5, 0.5000001, 2.0, np.inf, np.nan])
    values = data.draw(hnp.arrays(dtype, data.draw(st.integers(1, 120)), elements=elements))
    k = min(k, values.size)
    top = TopK(k, np.bincount(bin_keys(values), minlength=BINS))
    for start in range(0, values.size, chunk):
        part = values[start:start + chunk]
        top.add(part, bin_keys(part), start)
    ranked = np.where(np.isnan(values), np.inf, values.astype(np.float64))  # NaN above infinity
    rank = np.where(np.isnan(values), 1, 0)
    assert list(top.indices()) == list(np.lexsort((np.arange(values.size), -ranked, -rank))[:k])


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16, np.float64, np.int64, np.uint8])
def test_the_relative_error_where_the_reference_exceeds_atol_is_plain_numpys(dtype):
    """Against exact-zero references the relative error explodes (1 / 2.2e-16): the statistic beside it is the
    largest relative error over the elements whose |reference| > atol, exact, first index of the largest."""
    rng = np.random.default_rng(3)
    reference = (rng.standard_normal(500) * 4).astype(dtype)
    reference[::5] = 0  # exact zeros, which the statistic leaves out
    actual = (reference.astype(np.float64) + rng.standard_normal(500) * 0.1 + 0.05).astype(dtype)
    atol = 1.0
    stats = error_stats(actual, reference, atol=atol, rtol=0.0)
    _, rel = plain_errors(actual, reference)
    wide = reference.astype(np.float64)
    counted = np.abs(wide) > atol  # in float64: a float16 reference is not compared with a rounded atol
    beyond = stats.beyond_atol
    assert beyond.count == int(counted.sum()) > 0 and beyond.atol == atol
    assert beyond.max == rel[counted].max() < stats.rel.max  # the zeros made the overall one explode
    assert beyond.max_index == int(np.flatnonzero(counted & (rel == beyond.max))[0])


def test_the_relative_error_beyond_atol_without_such_elements_nan_and_the_smallest_integer():
    none = error_stats(np.ones(10, np.float32), np.zeros(10, np.float32), atol=1e-3, rtol=0.0).beyond_atol
    assert (none.count, none.max, none.max_index) == (0, None, -1)
    reference = np.array([0.5, np.nan, 2.0, 3.0, 4.0], np.float32)  # a NaN reference is not counted
    actual = np.array([0.5, 1.0, np.nan, 3.0, 5.0], np.float32)  # a NaN error is (and wins, as in numpy)
    nan = error_stats(actual, reference, atol=1.0, rtol=0.0).beyond_atol
    assert nan.count == 3 and math.isnan(nan.max) and nan.max_index == 2
    smallest = np.array([np.iinfo(np.int64).min, 0, 5], np.int64)  # abs() would wrap it negative
    wide = error_stats(smallest + 1, smallest, atol=0.0, rtol=0.0).beyond_atol
    assert wide.count == 2 and wide.max == 0.2 and wide.max_index == 2
    just = np.array([1e-3, 1.0001e-3], np.float16)  # float16 1e-3 is 0.0010004: above atol 1e-3 in float64
    assert error_stats(just * 2, just, atol=1e-3, rtol=0.0).beyond_atol.count == 2
    assert error_stats(np.float32(2) * np.ones(3, np.float32), np.ones(3, np.float32), atol=1.0,
                       rtol=0.0).beyond_atol.count == 0  # exactly atol is not above it


def _everything(stats):
    """An ErrorStats as comparable text (NaN equal to NaN), its sample included."""
    return repr(stats)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from([np.float64, np.float32, np.float16, np.int32, np.uint8]), st.integers(0, 300), st.data(),
       st.booleans(), st.sampled_from([0, 7, 5000]))
def test_a_small_output_sorted_gives_every_statistic_of_the_binned_pass(dtype, size, data, specials, samples):
    # Up to SORT_ELEMENTS in one chunk, pass 2 sorts the errors kept from pass 1 (cmpx_comparators.sorted_pass);
    # it must agree with the 65,536-bin pass on everything, ties, -0.0, NaN and infinities included
    if np.dtype(dtype).kind == "f":
        elements = st.floats(width=np.dtype(dtype).itemsize * 8, allow_nan=specials, allow_infinity=specials)
        small = st.sampled_from([0.0, -0.0, 1.0, 1.5, 1e-3, 2.0])  # ties
        pick = st.one_of(elements, small)
    else:
        pick = st.integers(np.iinfo(dtype).min, np.iinfo(dtype).max)
    a = data.draw(hnp.arrays(dtype, size, elements=pick))
    b = data.draw(hnp.arrays(dtype, size, elements=pick))
    options = dict(atol=1e-3, rtol=1e-2, quantiles=(0.0, 0.25, 0.999, 1.0), samples=samples)
    chunk, sort = errors.CHUNK_ELEMENTS, errors.SORT_ELEMENTS
    try:
        errors.CHUNK_ELEMENTS = 1 << 17  # one chunk (the module's fixture makes them tiny)
        sorted_stats = error_stats(a, b, **options)
        errors.SORT_ELEMENTS = 0
        binned = error_stats(a, b, **options)
    finally:
        errors.CHUNK_ELEMENTS, errors.SORT_ELEMENTS = chunk, sort
    assert _everything(sorted_stats) == _everything(binned)


def test_an_output_over_the_sorted_size_or_over_one_chunk_takes_the_binned_pass(monkeypatch):
    calls = []
    monkeypatch.setattr(errors, "_pass2", lambda *args: calls.append(args[0].size) or [])
    monkeypatch.setattr(errors, "CHUNK_ELEMENTS", 1 << 17)
    for size in (errors.SORT_ELEMENTS, errors.SORT_ELEMENTS + 1):
        error_stats(np.zeros(size, np.float32), np.ones(size, np.float32), atol=0, rtol=0)
    monkeypatch.setattr(errors, "CHUNK_ELEMENTS", 7)
    error_stats(np.zeros(8, np.float32), np.ones(8, np.float32), atol=0, rtol=0)
    assert calls == [errors.SORT_ELEMENTS + 1, 8]
