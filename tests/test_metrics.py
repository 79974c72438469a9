"""Verdicts of every built-in metric against plain numpy formulas, and the metric plumbing."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from cmpx.options.argtypes import PerOutput
from cmpx.comparison.compare import ComparisonSettings, compare_outputs
from cmpx_comparators.diffs import EPSILON
from cmpx_comparators.metrics import SimilarityMetric, ToleranceCheck, builtin_metrics

METRICS = {m.name: m for m in builtin_metrics()}


def settings_for(*names, **kwargs):
    return ComparisonSettings([METRICS[n] for n in names], **kwargs)


def plain_verdict(a, b, stat, atol, rtol, q):
    with np.errstate(all="ignore"):
        absdiff = np.abs(a.astype(np.float64) - b.astype(np.float64))
        den = np.abs(b.astype(np.float64))
        den[den == 0] = EPSILON
        rel = absdiff / den
    if stat == "elemwise":
        return not np.any(((absdiff > atol) | np.isnan(absdiff)) & ((rel > rtol) | np.isnan(rel)))
    reduce = {"max": np.max, "mean": np.mean, "median": np.median,
              "quantile": lambda x: np.quantile(x, q)}[stat]
    abs_stat, rel_stat = float(reduce(absdiff)), float(reduce(rel))
    return not ((math.isnan(abs_stat) or abs_stat > atol) and (math.isnan(rel_stat) or rel_stat > rtol))


finite = st.floats(-1e3, 1e3)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["elemwise", "max", "mean", "median", "quantile"]), st.integers(1, 30), st.data(),
       st.sampled_from([0.0, 1e-3, 0.1, 1.0, 10.0]), st.sampled_from([0.0, 1e-3, 0.1, 1.0, 10.0]),
       st.sampled_from([0.0, 0.5, 0.9, 0.99, 1.0]))
def test_every_check_stat_follows_polygraphys_rule(stat, size, data, atol, rtol, q):
    a = data.draw(hnp.arrays(np.float64, size, elements=st.one_of(finite, st.just(np.nan))))
    b = data.draw(hnp.arrays(np.float64, size, elements=finite))
    comparison = settings_for("simple", atol=PerOutput(atol), rtol=PerOutput(rtol), check_stat=PerOutput(stat),
                              quantile=PerOutput(q))
    pair = compare_outputs("x", "ref", 0, {"out": a}, {"out": b}, comparison)
    assert pair.passed == plain_verdict(a, b, stat, atol, rtol, q)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 30), st.data())
def test_similarity_metrics_match_their_formulas(size, data):
    a = data.draw(hnp.arrays(np.float64, size, elements=finite))
    b = data.draw(hnp.arrays(np.float64, size, elements=finite))
    pair = compare_outputs("x", "ref", 0, {"o": a}, {"o": b}, settings_for("cosine", "l2", "snr", "psnr"))
    values = {m.metric: m.value for m in pair.outputs[0].metrics}
    diff2 = float(np.sum((a - b) ** 2))
    assert values["l2"] == pytest.approx(math.sqrt(diff2), rel=1e-9, abs=1e-12)
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    expected_cos = 1.0 if na == nb == 0 else 0.0 if na == 0 or nb == 0 else float(np.dot(a, b) / (na * nb))
    assert values["cosine"] == pytest.approx(max(-1, min(1, expected_cos)), abs=1e-9)
    if diff2 == 0:
        assert values["snr"] == math.inf and values["psnr"] == math.inf
    else:
        if np.sum(b ** 2) > 0:
            assert values["snr"] == pytest.approx(10 * math.log10(np.sum(b ** 2) / diff2), rel=1e-9, abs=1e-9)
        peak = b.max() if b.max() > 0 else 1.0
        assert values["psnr"] == pytest.approx(20 * math.log10(peak) - 10 * math.log10(diff2 / size), rel=1e-9,
                                               abs=1e-9)


def test_thresholds_apply_per_output_and_direction_matters():
    a, b = np.array([1.0, 0.0]), np.array([0.0, 1.0])  # orthogonal: cosine 0
    comparison = settings_for("cosine", "l2", thresholds={"cosine": PerOutput(0.997, {"o2": -1.0}),
                                                          "l2": PerOutput(10.0)})
    pair = compare_outputs("x", "ref", 0, {"o": a, "o2": a}, {"o": b, "o2": b}, comparison)
    verdicts = {(o.output, m.metric): m.passed for o in pair.outputs for m in o.metrics}
    assert verdicts == {("o", "cosine"): False, ("o", "l2"): True, ("o2", "cosine"): True, ("o2", "l2"): True}


def test_nan_and_infinity_switches():
    nan, inf = np.array([np.nan, 1.0]), np.array([np.inf, 1.0])
    for a, flag in ((nan, "nan_equal"), (inf, "inf_equal")):
        assert not compare_outputs("x", "r", 0, {"o": a}, {"o": a.copy()}, settings_for("simple")).passed
        assert compare_outputs("x", "r", 0, {"o": a}, {"o": a.copy()}, settings_for("simple", **{flag: True})).passed
    opposite = compare_outputs("x", "r", 0, {"o": inf}, {"o": -inf}, settings_for("simple", inf_equal=True))
    assert not opposite.passed


def test_shape_mismatch_missing_outputs_and_fail_fast():
    comparison = settings_for("simple")
    pair = compare_outputs("x", "r", 0, {"a": np.zeros((2, 3)), "b": np.zeros(1)},
                           {"a": np.zeros((3, 2)), "c": np.zeros(1)}, comparison)
    notes = {o.output: o.note for o in pair.outputs}
    assert notes == {"a": "shape mismatch: [2, 3] vs reference [3, 2]", "c": "missing in x", "b": "missing in r"}
    fast = compare_outputs("x", "r", 0, {"a": np.zeros(2), "b": np.ones(2), "c": np.ones(2)},
                           {"a": np.zeros(2), "b": np.zeros(2), "c": np.zeros(2)},
                           settings_for("simple", fail_fast=True))
    assert [o.output for o in fast.outputs] == ["a", "b"]


def test_error_statistics_are_computed_once_for_several_checks(monkeypatch):
    from cmpx_comparators import errors

    calls = []
    original = errors.error_stats
    monkeypatch.setattr(errors, "error_stats", lambda *a, **k: calls.append(1) or original(*a, **k))
    compare_outputs("x", "r", 0, {"o": np.ones(3)}, {"o": np.ones(3)}, settings_for("max", "mean", "median"))
    assert len(calls) == 1


def test_metric_objects_are_light():
    assert isinstance(METRICS["simple"], ToleranceCheck) and isinstance(METRICS["psnr"], SimilarityMetric)
    assert {m.name for m in builtin_metrics()} == {"simple", "elemwise", "max", "mean", "median", "quantile",
                                                   "cosine", "l2", "snr", "psnr", "indices"}
