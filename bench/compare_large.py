"""Compare a 1x64x512x512 float32 pair with cmpx's full check and with Polygraphy's, in process and end to end.

In process: both compare the same arrays in this one process (cmpx's full tolerance check with every statistic
it prints, and for a failing case the histogram and worst elements; Polygraphy's CompareFunc.simple). The script
prints times, their ratio, and the peak extra memory each allocates (tracemalloc, which numpy reports to), as
multiples of one tensor. Two pairs: small random noise (1e-6), and a x1.0001 scale (a nearly constant relative
error, every element failing the default tolerances).

End to end: an identity model's run is saved by each tool in its own format (cmpx's run directory of .npy files,
Polygraphy's JSON), then a x1.0001 model runs on ONNX Runtime against it (--load-inputs/--load-outputs), failing
at the default tolerances and passing at --rtol 1e-3. Each command is a fresh process; the runs are interleaved
and each figure is the median of --repeat, with the load average before and after, so the ratios of one run can
be compared on a shared machine. Besides wall time, the CPU time of each command's processes (user + system,
workers included), which a loaded machine distorts less.

Small outputs: one output's full check at 128 to 16,384 elements, error statistics sorted and binned (forced),
against Polygraphy's; the fixed cost a small model pays per output and iteration.

    python bench/compare_large.py [--repeat 3] [--quick] [--skip-small] [--skip-in-process] [--skip-end-to-end]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc

import numpy as np

from cmpx.options.argtypes import PerOutput
from cmpx.comparison.compare import ComparisonSettings, compare_outputs
from cmpx.reports.text import format_output
from cmpx_comparators.metrics import ToleranceCheck

SHAPE = (1, 64, 512, 512)
SCALE = 1.0001  # model B's factor: a relative error of 1e-4 on every element
BIN = os.path.dirname(sys.executable)


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
    """Median wall and CPU time (this process's: numpy runs these on one thread), and the last result."""
    walls, cpus, value = [], [], None
    for _ in range(repeat):
        start, cpu = time.perf_counter(), time.process_time()
        value = function(*args)
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
    return (statistics.median(walls), statistics.median(cpus)), value


def peak_extra(function, *args):
    tracemalloc.start()
    function(*args)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def in_process(repeat: int) -> None:
    rng = np.random.default_rng(0)
    reference = rng.standard_normal(SHAPE, dtype=np.float32)
    noisy = reference + rng.standard_normal(SHAPE, dtype=np.float32) * np.float32(1e-6)
    scaled = rng.random(SHAPE, dtype=np.float32)
    cases = (("noise, passing (atol=rtol=1e-5)", noisy, reference, 1e-5, 1e-5),
             ("noise, failing (atol=rtol=0)", noisy, reference, 0.0, 0.0),
             (f"x{SCALE}, passing (rtol=1e-3)", scaled * np.float32(SCALE), scaled, 1e-5, 1e-3),
             (f"x{SCALE}, failing (1e-5)", scaled * np.float32(SCALE), scaled, 1e-5, 1e-5))
    tensor = reference.nbytes
    print(f"in process: {SHAPE} float32, {tensor / 2**20:.0f} MiB; median of {repeat}; load {_load()}")
    print(f"{'case':<34} {'cmpx s (CPU s)':>15} {'polygraphy s (CPU s)':>21} {'speed-up (CPU)':>15} "
          f"{'cmpx mem':>9} {'polygraphy mem':>15}")
    for label, actual, expected, atol, rtol in cases:
        (ours, ours_cpu), (ours_verdict, _) = timed(cmpx_compare, actual, expected, atol, rtol, repeat=repeat)
        (theirs, theirs_cpu), (theirs_verdict, _) = timed(polygraphy_compare, actual, expected, atol, rtol,
                                                          repeat=repeat)
        assert ours_verdict == theirs_verdict, (label, ours_verdict, theirs_verdict)
        ours_memory = peak_extra(cmpx_compare, actual, expected, atol, rtol)
        theirs_memory = peak_extra(polygraphy_compare, actual, expected, atol, rtol)
        print(f"{label:<34} {ours:6.3f} ({ours_cpu:6.3f}) {theirs:11.3f} ({theirs_cpu:6.3f}) "
              f"{theirs / ours:6.1f}x ({theirs_cpu / ours_cpu:4.1f}x) {ours_memory / tensor:8.2f}x "
              f"{theirs_memory / tensor:14.2f}x")


def small_outputs(repeat: int) -> None:
    """Small outputs, as a small model gives on every iteration: the fixed cost of one output's full check, with
    error statistics sorted (up to cmpx_comparators.sorted_pass.SORT_ELEMENTS) and binned (the large-output path,
    forced), against Polygraphy's."""
    from cmpx_comparators import errors

    rng = np.random.default_rng(0)
    print(f"small outputs: float32 noise (1e-6), default tolerances; per output, median of {repeat} x 200 calls; "
          f"load {_load()}")
    print(f"{'elements':>9} {'cmpx sorted us':>15} {'cmpx binned us':>15} {'polygraphy us':>14} {'binned/sorted':>14} "
          f"{'polygraphy/sorted':>18}")
    for size in (128, 4096, errors.SORT_ELEMENTS):
        reference = rng.standard_normal(size, dtype=np.float32)
        actual = reference + rng.standard_normal(size, dtype=np.float32) * np.float32(1e-6)
        calls = 200

        def per_call(compare, *args):
            return lambda *_: [compare(*args) for _ in range(calls)][-1]

        (ours, _), _ = timed(per_call(cmpx_compare, actual, reference, 1e-5, 1e-5), repeat=repeat)
        sort = errors.SORT_ELEMENTS
        errors.SORT_ELEMENTS = 0
        try:
            (binned, _), _ = timed(per_call(cmpx_compare, actual, reference, 1e-5, 1e-5), repeat=repeat)
        finally:
            errors.SORT_ELEMENTS = sort
        (theirs, _), _ = timed(per_call(polygraphy_compare, actual, reference, 1e-5, 1e-5), repeat=repeat)
        ours, binned, theirs = (t / calls * 1e6 for t in (ours, binned, theirs))
        print(f"{size:9} {ours:15.0f} {binned:15.0f} {theirs:14.0f} {binned / ours:13.1f}x {theirs / ours:17.1f}x")


def _models(tmp: str) -> tuple[str, str]:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    def save(name, nodes, weights):
        shape = list(SHAPE)
        graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("X", TensorProto.FLOAT, shape)],
                                  [helper.make_tensor_value_info("Y", TensorProto.FLOAT, shape)], weights)
        path = os.path.join(tmp, f"{name}.onnx")
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
        return path

    identity = save("identity", [helper.make_node("Identity", ["X"], ["Y"])], [])
    scale = numpy_helper.from_array(np.array(SCALE, np.float32), "k")
    return identity, save("scale", [helper.make_node("Mul", ["X", "k"], ["Y"])], [scale])


def _run(command: list[str], expect: int) -> tuple[float, float]:
    """Wall time, and CPU time (user + system) of the command and the processes it waited for."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != expect:
        raise SystemExit(f"{' '.join(command)}: exit {done.returncode}, expected {expect}\n"
                         f"{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return seconds, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def end_to_end(repeat: int) -> None:
    cmpx, polygraphy = os.path.join(BIN, "cmpx"), os.path.join(BIN, "polygraphy")
    with tempfile.TemporaryDirectory(prefix="cmpx-bench-compare-") as tmp:
        identity, scale = _models(tmp)
        saved = {name: os.path.join(tmp, name) for name in ("in", "out", "in.json", "out.json")}
        _run([cmpx, "run", identity, "--backend", "onnxrt", "--save-inputs", saved["in"], "--save-outputs",
              saved["out"]], 0)
        _run([polygraphy, "run", identity, "--onnxrt", "--save-inputs", saved["in.json"], "--save-outputs",
              saved["out.json"]], 0)
        cmpx_load = [cmpx, "run", scale, "--backend", "onnxrt", "--load-inputs", saved["in"], "--load-outputs",
                     saved["out"]]
        poly_load = [polygraphy, "run", scale, "--onnxrt", "--load-inputs", saved["in.json"], "--load-outputs",
                     saved["out.json"]]
        cases = {"cmpx, failing (default tolerances)": (cmpx_load, 1),
                 "cmpx, passing (--rtol 1e-3)": (cmpx_load + ["--rtol", "1e-3"], 0),
                 "polygraphy, failing (default tolerances)": (poly_load, 1),
                 "polygraphy, passing (--rtol 1e-3)": (poly_load + ["--rtol", "1e-3"], 0)}
        for command, expect in cases.values():  # warm: page cache, bytecode, the verdicts checked
            _run(command, expect)
        load_before = _load()
        runs: dict[str, list[tuple[float, float]]] = {label: [] for label in cases}
        for _ in range(repeat):  # interleaved, so a change in the machine's load touches every case alike
            for label, (command, expect) in cases.items():
                runs[label].append(_run(command, expect))
        load_after = _load()
    print(f"end to end: load a saved {SHAPE} float32 run and compare (x{SCALE} model vs identity's saved run); "
          f"median of {repeat}, interleaved; load average before {load_before}, after {load_after}")
    print(f"  {'':<42} {'wall s':>7} {'CPU s':>7}   (each run's wall s)")
    wall = {label: statistics.median(w for w, _ in values) for label, values in runs.items()}
    cpu = {label: statistics.median(c for _, c in values) for label, values in runs.items()}
    for label, values in runs.items():
        print(f"  {label:<42} {wall[label]:7.3f} {cpu[label]:7.3f}   ({', '.join(f'{w:.2f}' for w, _ in values)})")
    for name, figures in (("wall", wall), ("CPU", cpu)):
        cmpx_fail, cmpx_pass = figures["cmpx, failing (default tolerances)"], figures["cmpx, passing (--rtol 1e-3)"]
        poly_fail = figures["polygraphy, failing (default tolerances)"]
        poly_pass = figures["polygraphy, passing (--rtol 1e-3)"]
        print(f"  {name}: failing, cmpx {poly_fail / cmpx_fail:.1f}x faster than polygraphy (goal >= 6x; passing "
              f"{poly_pass / cmpx_pass:.1f}x); cmpx failing / passing {cmpx_fail / cmpx_pass:.2f}x (goal <= 1.5x)")


def _load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one measurement per case (bounded time)")
    parser.add_argument("--skip-in-process", action="store_true")
    parser.add_argument("--skip-end-to-end", action="store_true")
    parser.add_argument("--skip-small", action="store_true")
    args = parser.parse_args()
    repeat = 1 if args.quick else args.repeat
    if not args.skip_small:
        small_outputs(repeat)
    if not args.skip_in_process:
        in_process(repeat)
    if not args.skip_end_to_end:
        end_to_end(repeat)


if __name__ == "__main__":
    main()
