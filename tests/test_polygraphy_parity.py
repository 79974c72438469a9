"""The same saved arrays through Polygraphy's comparator and cmpx's: equal verdicts over a grid of checks."""

import itertools

import numpy as np
import pytest

from cmpx.options.argtypes import PerOutput
from cmpx.comparison.compare import ComparisonSettings, compare_outputs
from cmpx_comparators.metrics import ToleranceCheck

polygraphy = pytest.importorskip("polygraphy")
from polygraphy.comparator import IterationResult, SimpleCompareFunc  # noqa: E402
from polygraphy.logger import G_LOGGER  # noqa: E402

G_LOGGER.module_severity = G_LOGGER.ERROR


def saved_pair(tmp_path, name, a, b):
    """Arrays written to disk and read back with pickle disabled, as a saved run would be."""
    np.save(tmp_path / f"{name}_a.npy", a)
    np.save(tmp_path / f"{name}_b.npy", b)
    return (np.load(tmp_path / f"{name}_a.npy", allow_pickle=False),
            np.load(tmp_path / f"{name}_b.npy", allow_pickle=False))


def cases(rng):
    base = rng.standard_normal((4, 64)).astype(np.float32)
    noisy = base + rng.standard_normal(base.shape).astype(np.float32) * 1e-3
    sparse = base.copy()
    sparse[0, :3] += 0.5
    zeros = np.zeros_like(base)
    zeros[1, 1] = 1e-4
    with_nan = noisy.copy()
    with_nan[2, 5] = np.nan
    half = base.astype(np.float16)
    return {"noisy": (noisy, base), "sparse": (sparse, base), "zero_reference": (base * 1e-3, zeros),
            "nan": (with_nan, base), "fp16": ((noisy).astype(np.float16), half),
            "float64": (noisy.astype(np.float64), base.astype(np.float64))}


STATS = ["elemwise", "max", "mean", "median", "quantile"]
TOLERANCES = [0.0, 1e-5, 1e-3, 1e-2, 0.3]


@pytest.mark.parametrize("case", ["noisy", "sparse", "zero_reference", "nan", "fp16", "float64"])
def test_verdicts_agree_with_polygraphy(tmp_path, case):
    a, b = saved_pair(tmp_path, case, *cases(np.random.default_rng(3))[case])
    disagreements, checked = [], 0
    for stat, atol, rtol, q in itertools.product(STATS, TOLERANCES, TOLERANCES, [0.5, 0.99]):
        if stat != "quantile" and q != 0.99:
            continue
        theirs = SimpleCompareFunc(atol=atol, rtol=rtol, check_error_stat=stat, error_quantile=q)(
            IterationResult({"out": a}, runner_name="a"), IterationResult({"out": b}, runner_name="b"))
        their_verdict = bool(theirs["out"])
        settings = ComparisonSettings([ToleranceCheck(None)], PerOutput(atol), PerOutput(rtol), PerOutput(stat),
                                      PerOutput(q))
        ours = compare_outputs("a", "b", 0, {"out": a}, {"out": b}, settings).passed
        checked += 1
        if ours != their_verdict:
            disagreements.append((stat, atol, rtol, q, ours, their_verdict))
    assert checked >= 100
    assert disagreements == []
