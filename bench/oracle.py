"""What the fp64 oracle costs, measured in one run: per model of the real corpus (tests/models/real; and ``mlp``, a generated
8-layer 2048-wide MLP of 128 MiB of weights, to show the cost growing with the weights), the mean
inference of onnxref:fp64 against onnxref (float32) and onnxrt, and the wall time of a whole `cmpx run` with
--oracle against the same run without it (outputs only, and with --mark-all).

    python bench/oracle.py [--iterations N] [--models bert gpt2 ...]

Prints one table of ratios (and the seconds they come from); see bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

REAL = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "tests", "models", "real")
MODELS = ("cnn", "vit", "bert", "gpt2", "skl_pipeline", "external/model", "mlp")


def mlp(path: str, layers: int = 8, size: int = 2048, batch: int = 64) -> str:
    """Out of the corpus, to show the cost growing with the weights: X[batch,size] -> (MatMul, Tanh) x layers,
    ``layers * size * size`` float32 weights (128 MiB by default; 256 MiB in float64)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes, inits, current = [], [], "X"
    for i in range(layers):
        inits.append(numpy_helper.from_array((rng.standard_normal((size, size)) / np.sqrt(size)).astype(np.float32),
                                             f"w{i}"))
        nodes += [helper.make_node("MatMul", [current, f"w{i}"], [f"m{i}"]),
                  helper.make_node("Tanh", [f"m{i}"], ["Y" if i == layers - 1 else f"t{i}"])]
        current = f"t{i}"
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [batch, size])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [batch, size])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def run(model: str, iterations: int, *extra: str) -> tuple[float, dict]:
    """Wall time of one `cmpx run` and its JSON report."""
    with tempfile.TemporaryDirectory() as scratch:
        report = os.path.join(scratch, "r.json")
        command = [sys.executable, "-m", "cmpx", "run", model, "--iterations", str(iterations), "--warm-up", "1",
                   "--report-json", report, "-q", *extra]
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True)
        wall = time.perf_counter() - started
        if done.returncode not in (0, 1):
            raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
        with open(report) as f:
            return wall, json.load(f)


def mean_infer(document: dict, backend: str) -> float | None:
    for entry in document["backends"]:
        if entry["name"] == backend and entry.get("infer_seconds"):
            return entry["infer_seconds"]["mean"]
    return None


def measure(name: str, scratch: str, iterations: int, backends: list[str]) -> tuple:
    """One model's row: the oracle's mean inference, the other two's, and the four runs' wall times."""
    model = (mlp(os.path.join(scratch, "mlp.onnx")) if name == "mlp"
             else os.path.normpath(os.path.join(REAL, name + ".onnx")))
    plain_wall, _ = run(model, iterations, *backends)
    oracle_wall, document = run(model, iterations, *backends, "--oracle")
    marked_wall, _ = run(model, iterations, *backends, "--mark-all")
    marked_oracle_wall, _ = run(model, iterations, *backends, "--mark-all", "--oracle")
    fp64, ref, ort = (mean_infer(document, b) for b in ("onnxref:fp64", "onnxref", "onnxrt"))
    failure = next((b["failure"]["message"] for b in document["backends"]
                    if b["name"] == "onnxref:fp64" and b.get("failure")), None)
    return name, fp64, ref, ort, plain_wall, oracle_wall, marked_wall, marked_oracle_wall, failure


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--models", nargs="*", default=list(MODELS))
    args = parser.parse_args()
    backends = ["--backend", "onnxrt", "--backend", "onnxref"]
    with tempfile.TemporaryDirectory() as scratch:
        rows = [measure(name, scratch, args.iterations, backends) for name in args.models]
    print(f"{'model':<16} {'fp64 infer s':>12} {'/onnxref':>9} {'/onnxrt':>9} {'run s':>7} {'+oracle':>8} "
          f"{'mark-all s':>10} {'+oracle':>8}")
    for name, fp64, ref, ort, plain, oracle, marked, marked_oracle, failure in rows:
        if fp64 is None:
            print(f"{name:<16} the oracle failed: {failure}")
            continue
        print(f"{name:<16} {fp64:12.4f} {fp64 / ref:8.2f}x {fp64 / ort:8.1f}x {plain:7.2f} {oracle / plain:7.2f}x "
              f"{marked:10.2f} {marked_oracle / marked:7.2f}x")


if __name__ == "__main__":
    main()
