"""Mark all, measured side by side in one run: wall time and the peak memory of all processes together (the
coordinator, every worker and the shared memory they fill, from the accounting of a memory cgroup made for each
command), for cmpx sliced and unsliced and for Polygraphy, with two ONNX Runtime backends.

    python bench/mark_all.py [--case small|verdicts|large|all]

small:    a 60-layer chain, every tensor 16 MiB (0.94 GiB per backend): Polygraphy, cmpx unsliced, cmpx sliced
          (--memory-budget 512MiB). Targets: sliced cmpx <= 0.5x Polygraphy's peak and wall time.
verdicts: a 40-layer chain of 32 MiB tensors, where both fit: cmpx sliced (default budget in a 1 GiB cgroup) and
          unsliced give the same verdict on every tensor; sliced wall time within 1.5x of unsliced.
large:    a 40-layer chain of 256 MiB tensors (10 GiB per backend) in a 6 GiB cgroup, cmpx with its default budget.
          Unsliced it needs about 20 GiB: not run here (see bench/README.md).
Needs root and memory cgroups (cmpx.testing.memlimit); run on an otherwise quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

import onnx
from onnx import TensorProto, helper

from cmpx.testing import memlimit

MiB, GiB = 1 << 20, 1 << 30


def chain_model(layers: int, elements: int) -> onnx.ModelProto:
    """X[1,elements] -> Mul, Add, Mul... (a scalar constant each) -> Y: every tensor ``4 * elements`` bytes."""
    nodes, inits, current = [], [], "X"
    for i in range(layers):
        op = "Mul" if i % 2 == 0 else "Add"
        inits.append(helper.make_tensor(f"c{i}", TensorProto.FLOAT, [], [1.0001 if op == "Mul" else 0.001]))
        output = "Y" if i == layers - 1 else f"h{i}"
        nodes.append(helper.make_node(op, [current, f"c{i}"], [output], name=f"{op}_{i}"))
        current = output
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, elements])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, elements])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def measured(command: list[str], limit: int | None = None) -> dict:
    """Run ``command`` in a fresh memory cgroup: exit code, wall time, peak bytes of all its processes."""
    with memlimit.MemoryCgroup(limit) as cgroup:
        started = time.perf_counter()
        done = cgroup.run(command, capture_output=True, text=True)
        wall = time.perf_counter() - started
        return {"code": done.returncode, "wall": wall, "peak": cgroup.peak(), "output": done.stdout + done.stderr}


def cmpx(model: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "cmpx", "run", model, "--backend", "onnxrt", "--backend", "onnxrt", "--mark-all",
            *extra]


def verdicts(path: str) -> list[tuple[str, bool]]:
    with open(path) as f:
        report = json.load(f)
    return sorted((o["name"], o["passed"]) for r in report["results"] if r["kind"] == "pair" for o in r["outputs"])


def show(name: str, result: dict) -> None:
    header = next((line for line in result["output"].splitlines() if line.startswith("cmpx ")), "")
    sliced = header.split("| sliced: ")[1] if "| sliced: " in header else "unsliced"
    print(f"  {name:<22} exit {result['code']}  wall {result['wall']:7.2f} s  all-process peak "
          f"{result['peak'] / MiB:7.0f} MiB  ({sliced})")


def small(tmp: str) -> None:
    model = os.path.join(tmp, "small.onnx")
    onnx.save(chain_model(60, 4 * MiB), model)  # 4 Mi floats: 16 MiB
    print("60 layers x 16 MiB, two ONNX Runtime backends")
    polygraphy = os.path.join(os.path.dirname(sys.executable), "polygraphy")
    theirs = measured([polygraphy, "run", model, "--onnxrt", "--onnxrt", "--onnx-outputs", "mark", "all"])
    whole = measured(cmpx(model, "--memory-budget", "1TiB"))
    sliced = measured(cmpx(model, "--memory-budget", "512MiB"))
    for name, result in (("Polygraphy", theirs), ("cmpx unsliced", whole), ("cmpx sliced (512 MiB)", sliced)):
        show(name, result)
        assert result["code"] == 0, result["output"][-3000:]
    print(f"  sliced cmpx / Polygraphy: peak {sliced['peak'] / theirs['peak']:.2f}x (target <= 0.5), wall "
          f"{sliced['wall'] / theirs['wall']:.2f}x (target <= 0.5); unsliced cmpx / Polygraphy: peak "
          f"{whole['peak'] / theirs['peak']:.2f}x, wall {whole['wall'] / theirs['wall']:.2f}x")


def same_verdicts(tmp: str) -> None:
    model = os.path.join(tmp, "verdicts.onnx")
    onnx.save(chain_model(40, 8 * MiB), model)
    print("40 layers x 32 MiB, two ONNX Runtime backends: sliced (default budget, 1 GiB cgroup) against unsliced")
    whole = measured(cmpx(model, "--memory-budget", "1TiB", "--report-json", os.path.join(tmp, "whole.json")))
    sliced = measured(cmpx(model, "--report-json", os.path.join(tmp, "sliced.json")), limit=GiB)
    show("cmpx unsliced", whole)
    show("cmpx sliced (1 GiB)", sliced)
    same = verdicts(os.path.join(tmp, "whole.json")) == verdicts(os.path.join(tmp, "sliced.json"))
    print(f"  same verdict on all {len(verdicts(os.path.join(tmp, 'whole.json')))} tensors: {same}; sliced / unsliced "
          f"wall {sliced['wall'] / whole['wall']:.2f}x (target <= 1.5)")


def large(tmp: str) -> None:
    model = os.path.join(tmp, "large.onnx")
    onnx.save(chain_model(40, 64 * MiB), model)
    print("40 layers x 256 MiB (10 GiB per backend), two ONNX Runtime backends, in a 6 GiB cgroup")
    sliced = measured(cmpx(model, "--report-json", os.path.join(tmp, "large.json"), "-v"), limit=6 * GiB)
    show("cmpx sliced (default)", sliced)
    print("  " + "\n  ".join(line for line in sliced["output"].splitlines()[-5:]))
    if sliced["code"] == 0:
        found = verdicts(os.path.join(tmp, "large.json"))
        print(f"  {sum(passed for _, passed in found)}/{len(found)} tensors passed")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--case", choices=("small", "verdicts", "large", "all"), default="all")
    args = parser.parse_args()
    problem = memlimit.unavailable()
    if problem:
        sys.exit(f"bench/mark_all.py measures each command in a memory cgroup: {problem}")
    with tempfile.TemporaryDirectory() as tmp:
        for case, run in (("small", small), ("verdicts", same_verdicts), ("large", large)):
            if args.case in (case, "all"):
                run(tmp)


if __name__ == "__main__":
    main()
