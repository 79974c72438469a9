"""Compare a 1x64x512x512 float32 pair with cmpx's full check and with Polygraphy's CompareFunc.simple.

Both run in this one process on the same arrays; the script prints times, their ratio, and the peak extra
memory each allocates (tracemalloc, which numpy reports to), as multiples of one tensor. cmpx's side includes
every statistic it prints (and, for the failing case, the histogram and worst elements).

    python bench/compare_large.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import time
import tracemalloc

import numpy as np

from cmpx.options.argtypes import PerOutput
from cmpx.comparison.compare import ComparisonSettings, compare_outputs
from cmpx.reports.text import format_output
from cmpx_comparators.metrics import ToleranceCheck

SHAPE = (1, 64, 512, 512)


def cmpx_compare(a, b, atol, rtol):
    settings = ComparisonSettings([ToleranceCheck(None)], PerOutput(atol), PerOutput(rtol))
    pair = compare_outputs("a", "b", 0, {"out": a}, {"out": b}, settings)
    lines = format_output(pair.outputs[0])
    return pair.passed, lines


def polygraphy_compare(a, b, atol, rtol):
    from polygraphy.comparator import IterationResult, SimpleCompareFunc

    with contextlib.redirect_stdout(io.StringIO()):
        result = SimpleCompareFunc(atol=atol, rtol=rtol)(IterationResult({"out": a}, runner_name="a"),
                                                         IterationResult({"out": b}, runner_name="b"))
    return bool(result["out"]), None


def timed(function, *args, repeat):
    best, value = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        value = function(*args)
        best = min(best, time.perf_counter() - start)
    return best, value


def peak_extra(function, *args):
    tracemalloc.start()
    function(*args)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    reference = rng.standard_normal(SHAPE, dtype=np.float32)
    actual = reference + rng.standard_normal(SHAPE, dtype=np.float32) * np.float32(1e-6)
    tensor = reference.nbytes
    print(f"tensor: {SHAPE} float32, {tensor / 2**20:.0f} MiB; best of {args.repeat}")
    print(f"{'case':<28} {'cmpx s':>8} {'polygraphy s':>13} {'speed-up':>9} {'cmpx mem':>9} {'polygraphy mem':>15}")
    for label, atol, rtol in (("passing (atol=rtol=1e-5)", 1e-5, 1e-5), ("failing (atol=rtol=0)", 0.0, 0.0)):
        ours_time, (ours_verdict, _) = timed(cmpx_compare, actual, reference, atol, rtol, repeat=args.repeat)
        theirs_time, (theirs_verdict, _) = timed(polygraphy_compare, actual, reference, atol, rtol,
                                                 repeat=args.repeat)
        assert ours_verdict == theirs_verdict, (label, ours_verdict, theirs_verdict)
        ours_memory = peak_extra(cmpx_compare, actual, reference, atol, rtol)
        theirs_memory = peak_extra(polygraphy_compare, actual, reference, atol, rtol)
        print(f"{label:<28} {ours_time:8.3f} {theirs_time:13.3f} {theirs_time / ours_time:8.1f}x "
              f"{ours_memory / tensor:8.2f}x {theirs_memory / tensor:14.2f}x")


if __name__ == "__main__":
    main()
