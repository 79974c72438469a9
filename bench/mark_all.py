"""Mark all on a 60-layer model whose every intermediate is 16 MiB (about 1 GiB per backend if all were kept):
cmpx's coordinator peak memory and wall time, and Polygraphy's, with two ONNX Runtime backends.

    python bench/mark_all.py [--layers 60] [--elements 4194304]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# Runs cmpx and, at exit, reports the coordinator's own peak resident memory (its workers are not counted).
CMPX = ("import atexit, sys\n"
        "def peak():\n"
        "    line = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0]\n"
        "    print('COORDINATOR_PEAK_KB', line.split()[1], file=sys.stderr)\n"
        "atexit.register(peak)\n"
        "from cmpx.cli.launch import main\n"
        "main()\n")


def chain_model(layers: int, elements: int) -> onnx.ModelProto:
    nodes, inits, current = [], [], "X"
    for i in range(layers):
        op = "Mul" if i % 2 == 0 else "Add"
        value = np.array(1.0001 if op == "Mul" else 0.001, np.float32)
        inits.append(numpy_helper.from_array(value, f"c{i}"))
        output = "Y" if i == layers - 1 else f"h{i}"
        nodes.append(helper.make_node(op, [current, f"c{i}"], [output], name=f"{op}_{i}"))
        current = output
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, elements])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, elements])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def timed(command: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    return time.perf_counter() - start, done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--layers", type=int, default=60)
    parser.add_argument("--elements", type=int, default=4 * 1024 * 1024)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "chain.onnx")
        onnx.save(chain_model(args.layers, args.elements), model)
        per_tensor = args.elements * 4 / 2**20
        print(f"model: {args.layers} layers, every tensor {per_tensor:.0f} MiB "
              f"({args.layers * per_tensor / 1024:.2f} GiB per backend if all were kept)")
        polygraphy = os.path.join(os.path.dirname(sys.executable), "polygraphy")
        theirs_time, theirs = timed([polygraphy, "run", model, "--onnxrt", "--onnxrt", "--onnx-outputs", "mark",
                                     "all"])
        theirs_peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # its only child so far
        assert theirs.returncode == 0, theirs.stdout[-2000:] + theirs.stderr[-2000:]
        ours_time, ours = timed([sys.executable, "-c", CMPX, "run", model, "--backend", "onnxrt", "--backend",
                                 "onnxrt", "--mark-all"])
        assert ours.returncode == 0, ours.stdout[-2000:] + ours.stderr[-2000:]
        ours_peak = int(ours.stderr.split("COORDINATOR_PEAK_KB")[1].split()[0]) / 1024

    print(f"{'tool':<12} {'wall s':>8} {'peak RSS MB':>12}")
    print(f"{'cmpx':<12} {ours_time:8.2f} {ours_peak:12.0f}   (coordinator only; target <= 400 MB)")
    print(f"{'polygraphy':<12} {theirs_time:8.2f} {theirs_peak:12.0f}   (one process)")
    print(f"cmpx / polygraphy wall time: {ours_time / theirs_time:.2f}")


if __name__ == "__main__":
    main()
