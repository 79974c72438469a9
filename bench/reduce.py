"""cmpx reduce against `polygraphy debug reduce --mode bisect` on a 200-node model with one faulty node, measured side
by side in one run: candidate runs, wall time, and what each kept.

    python bench/reduce.py [--nodes 200] [--fault 137]

The model is an opset-9 chain (cmpx.testing.models.two_faults with only its BatchNormalization, at --fault), the
pair ONNX Runtime against onnx.reference, which computes that one node wrongly. Polygraphy has no onnx.reference
runner, so its side follows Polygraphy's own debug-reduce example with onnx.reference's values as the golden run:
`polygraphy run --onnxrt --save-inputs` makes the inputs (the same seed-1 values cmpx generates), this script runs
onnx.reference on them with every tensor marked and saves the result with Polygraphy's own RunResults JSON writer
(what `polygraphy run --save-outputs` writes), `polygraphy data merge` makes the layerwise inputs, and
`polygraphy debug reduce` bisects with `--check polygraphy run polygraphy_debug.onnx --onnxrt --load-inputs
layerwise_inputs.json --load-outputs golden.json`: ONNX Runtime on each candidate against onnx.reference's values,
the same pair. Its time includes making the golden run, as cmpx's includes its own.

Needs onnx_graphsurgeon for Polygraphy (`pip install onnx-graphsurgeon` where you run this; not a cmpx
dependency).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import onnx


def timed(command: list[str], cwd: str) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=cwd)
    return time.perf_counter() - start, done


def onnxref_golden(model_path: str, inputs_path: str, golden_path: str) -> None:
    """onnx.reference's value of every tensor, for the inputs Polygraphy saved, in Polygraphy's RunResults JSON."""
    from onnx import helper
    from onnx.reference import ReferenceEvaluator
    from polygraphy.comparator import IterationResult, RunResults
    from polygraphy.json import load_json

    model = onnx.load(model_path)
    model = onnx.shape_inference.infer_shapes(model)
    typed = {value.name: value for value in model.graph.value_info}
    present = {o.name for o in model.graph.output}
    for node in model.graph.node:
        for name in node.output:
            if name in typed and name not in present:
                model.graph.output.append(helper.make_value_info(name, typed[name].type))
    evaluator = ReferenceEvaluator(model)
    results = RunResults()
    iterations = []
    for feed in load_json(inputs_path):
        values = evaluator.run(None, dict(feed))
        iterations.append(IterationResult(dict(zip(evaluator.output_names, values)), runner_name="onnxref"))
    results.append(("onnxref", iterations))
    results.save(golden_path)


def polygraphy_side(model: str, work: str) -> dict:
    polygraphy = os.path.join(os.path.dirname(sys.executable), "polygraphy")
    started = time.perf_counter()
    _, made = timed([polygraphy, "run", model, "--onnxrt", "--save-inputs", "inputs.json"], work)
    assert made.returncode == 0, made.stdout[-2000:] + made.stderr[-2000:]
    onnxref_golden(model, os.path.join(work, "inputs.json"), os.path.join(work, "golden.json"))
    _, merged = timed([polygraphy, "data", "merge", "inputs.json", "golden.json", "-o", "layerwise_inputs.json"], work)
    assert merged.returncode == 0, merged.stdout[-2000:] + merged.stderr[-2000:]
    seconds, done = timed([polygraphy, "debug", "reduce", model, "-o", "reduced.onnx", "--mode", "bisect",
                           "--load-inputs", "layerwise_inputs.json", "--check", polygraphy, "run",
                           "polygraphy_debug.onnx", "--onnxrt", "--load-inputs", "layerwise_inputs.json",
                           "--load-outputs", "golden.json"], work)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    log = done.stdout + done.stderr
    checks = log.count("Running check command")
    kept = [n.name for n in onnx.load(os.path.join(work, "reduced.onnx")).graph.node]
    return {"seconds": time.perf_counter() - started, "reduce_seconds": seconds, "candidates": checks,
            "runs": checks + 1, "kept": kept}


def cmpx_side(model: str, work: str) -> dict:
    started = time.perf_counter()
    seconds, done = timed([sys.executable, "-m", "cmpx", "reduce", model, "--backend", "onnxrt", "--backend",
                           "onnxref", "-o", os.path.join(work, "reduced.onnx")], work)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    candidates = sum(1 for line in done.stdout.splitlines() if line.startswith("candidate "))
    kept = [n.name for n in onnx.load(os.path.join(work, "reduced.onnx")).graph.node]
    # the full model, the reference's values, the candidates, the check of the written run
    return {"seconds": time.perf_counter() - started, "candidates": candidates, "runs": candidates + 3,
            "kept": kept, "last_line": done.stdout.strip().splitlines()[-1]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--fault", type=int, default=137)
    args = parser.parse_args()
    try:
        import onnx_graphsurgeon  # noqa: F401
    except ImportError:
        sys.exit("polygraphy debug reduce needs onnx_graphsurgeon: pip install onnx-graphsurgeon (bench only)")
    from cmpx.testing.models import save, two_faults

    target = 2 * math.log2(args.nodes) + 10
    with tempfile.TemporaryDirectory() as tmp:
        model = save(two_faults(args.nodes, batchnorm_at=args.fault, softmax_at=None), os.path.join(tmp, "chain.onnx"))
        sides = {}
        for name, side in (("cmpx", cmpx_side), ("polygraphy", polygraphy_side)):
            work = os.path.join(tmp, name)
            os.makedirs(work)
            sides[name] = side(model, work)
    print(f"model: {args.nodes}-node opset-9 chain, node{args.fault}_BatchNormalization faulty (onnxrt vs onnxref); "
          f"target: <= 2*log2(N)+10 = {target:.1f} candidate runs")
    print(f"{'tool':<12} {'candidates':>10} {'runs':>5} {'wall s':>8}  kept")
    for name, side in sides.items():
        kept = ", ".join(side["kept"])
        print(f"{name:<12} {side['candidates']:>10} {side['runs']:>5} {side['seconds']:8.1f}  {kept}")
    print(f"cmpx / polygraphy wall time: {sides['cmpx']['seconds'] / sides['polygraphy']['seconds']:.2f}")
    print(json.dumps(sides))


if __name__ == "__main__":
    main()
