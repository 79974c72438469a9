"""cmpx sweep on 24 small cells (12 tiny models x 2 runs), side by side in one run: a shell loop of `cmpx run`
(what a sweep replaces), the local executor with --jobs 1 and with its default, and Ray with 1 CPU and with the
same number of CPUs as the local default. Ray is started before its sweeps (its start-up is timed on its own), so
the Ray figures are what each cell costs on a running cluster.

    python bench/sweep.py [--rounds 2]

Needs the ray extra (pip install -e '.[test,ray]'); without it the Ray rows are left out.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from cmpx.sweep.capacity import default_jobs
from cmpx.sweep.driver import SweepOptions, run_sweep
from cmpx.testing import models as modelgen

SWEEP = """models = ["zoo/*.onnx"]

[[runs]]
name = "ref"
args = "--backend onnxrt --backend onnxref"

[[runs]]
name = "fp16"
args = "--backend onnxrt:fp16 --backend onnxrt --atol 1e-2 --rtol 1e-2"
"""


def make_zoo(root: str) -> str:
    os.makedirs(os.path.join(root, "zoo"))
    for seed in range(6):
        modelgen.save(modelgen.conv_model(seed), os.path.join(root, "zoo", f"conv{seed}.onnx"))
        modelgen.save(modelgen.matmul_chain(layers=3 + seed, seed=seed), os.path.join(root, "zoo", f"mm{seed}.onnx"))
    path = os.path.join(root, "sweep.toml")
    with open(path, "w") as f:
        f.write(SWEEP)
    return path


def sweep(path: str, out: str, **options) -> tuple[float, dict]:
    shutil.rmtree(out, ignore_errors=True)
    start = time.perf_counter()
    code = run_sweep(SweepOptions(path, out, **options), echo=lambda line: None)
    wall = time.perf_counter() - start
    with open(os.path.join(out, "summary.json")) as f:
        summary = json.load(f)
    assert code == 0 and len(summary["cells"]) == 24, (code, summary["counts"])
    return wall, summary


def shell_loop(root: str) -> float:
    """Each cell as its own `cmpx run` process, one after the other."""
    start = time.perf_counter()
    for model in sorted(os.listdir(os.path.join(root, "zoo"))):
        for args in (["--backend", "onnxrt", "--backend", "onnxref"],
                     ["--backend", "onnxrt:fp16", "--backend", "onnxrt", "--atol", "1e-2", "--rtol", "1e-2"]):
            subprocess.run([sys.executable, "-m", "cmpx", "run", os.path.join(root, "zoo", model), *args],
                           check=True, capture_output=True)
    return time.perf_counter() - start


def cell_seconds(summary: dict) -> float:
    """The cells' own time, measured inside each cell (parse, workers, load, infer, compare, report)."""
    return sum(c["timings"]["seconds"] for c in summary["cells"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2, help="rounds of every variant, interleaved; best kept")
    rounds = parser.parse_args().rounds
    try:
        import ray
    except ImportError:
        ray = None
    root = tempfile.mkdtemp(prefix="cmpx-bench-sweep-")
    path = make_zoo(root)
    jobs = default_jobs([os.path.join(root, "zoo", m) for m in os.listdir(os.path.join(root, "zoo"))])
    rows: dict[str, list[tuple[float, float]]] = {}
    ray_start = []
    try:
        rows["shell loop of cmpx run"] = [(shell_loop(root), float("nan"))]  # once: it is the slow baseline
        for _ in range(rounds):
            for label, n in (("local --jobs 1", 1), (f"local default (--jobs {jobs})", None)):
                wall, summary = sweep(path, os.path.join(root, "out"), jobs=n)
                rows.setdefault(label, []).append((wall, cell_seconds(summary)))
            if ray is None:
                continue
            for cpus in (1, jobs):
                start = time.perf_counter()
                ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False)
                ray_start.append(time.perf_counter() - start)
                try:
                    wall, summary = sweep(path, os.path.join(root, "out"), executor="ray")
                finally:
                    ray.shutdown()
                rows.setdefault(f"ray, {cpus} CPU(s)", []).append((wall, cell_seconds(summary)))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    best = {label: min(runs) for label, runs in rows.items()}
    print(f"24 cells (12 models x 2 runs), {os.cpu_count()} CPUs, default --jobs {jobs}, best of {rounds} by wall")
    print(f"{'variant':30} {'wall s':>7} {'wall/cell s':>11} {'in-cell s':>9} {'outside cells, per cell':>24}")
    for label, (wall, inside) in best.items():
        # One cell at a time: what the wall time holds beyond the cells' own runs is the executor's cost.
        outside = f"{(wall - inside) / 24 * 1000:.0f} ms" if label.startswith(("local --jobs 1", "ray, 1")) else ""
        print(f"{label:30} {wall:7.2f} {wall / 24:11.3f} {inside / 24:9.3f} {outside:>24}")
    if ray is not None:
        local_one, ray_one = best["local --jobs 1"], best["ray, 1 CPU(s)"]
        added = ((ray_one[0] - ray_one[1]) - (local_one[0] - local_one[1])) / 24
        many = best[f"ray, {jobs} CPU(s)"][0] - best[f"local default (--jobs {jobs})"][0]
        print(f"Ray adds per cell, one at a time (outside the cells' own runs): {added * 1000:.0f} ms; wall time "
              f"at {jobs} at once: {many / 24 * 1000:+.0f} ms per cell; starting a local Ray: "
              f"{min(ray_start):.1f}-{max(ray_start):.1f} s")


if __name__ == "__main__":
    main()
