"""cmpx sweep, measured two ways in one run (both on the local and the Ray executor, side by side):

cells    24 real cells (12 tiny models x 2 runs): a shell loop of `cmpx run` (what a sweep replaces), the local
         executor with --jobs 1 and with its default, and Ray with 1 CPU and with the same number of CPUs as the
         local default. Ray is started before its sweeps (its start-up is timed on its own), so the Ray figures are
         what each cell costs on a running cluster.
driver   500, 1,000 and 5,000 trivial cells (50, 100, 500 models x 10 runs) through the whole driver: digests,
         resume, the executor's loop, each cell's files, the summaries. A trivial cell hands back the outcome of
         one real cell (captured first) at once: the bench puts a sitecustomize.py on the PYTHONPATH of the runner
         processes and Ray's workers that replaces cmpx.sweep.cell.run_cell (the product has no such hook). Per
         cell: wall time, the driver's own CPU time, the growth of its peak memory, and the same for a resume that
         keeps every cell.

    python bench/sweep.py [--section cells|driver] [--rounds 2] [--quick] [--cells 500,1000,5000]

--quick: the driver at 200 and 500 cells, one round of the real cells without the shell loop. Needs the ray
extra (pip install -e '.[test,ray]'); without it the Ray rows are left out.
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


def real_cells(rounds: int, with_shell_loop: bool, ray) -> None:
    root = tempfile.mkdtemp(prefix="cmpx-bench-sweep-")
    path = make_zoo(root)
    jobs = default_jobs([os.path.join(root, "zoo", m) for m in os.listdir(os.path.join(root, "zoo"))])
    rows: dict[str, list[tuple[float, float]]] = {}
    ray_start = []
    try:
        if with_shell_loop:
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


# The driver at scale ------------------------------------------------------------------------------------------

RUNS = 10
TRIVIAL_CELL = """import os
if os.environ.get("CMPX_BENCH_CELL_OUTCOME"):
    import json, socket
    import cmpx.sweep.cell
    from cmpx.sweep.outcome import CellOutcome
    with open(os.environ["CMPX_BENCH_CELL_OUTCOME"]) as f:
        _OUTCOME = json.load(f)

    def run_cell(task, servers=None):
        return CellOutcome.from_dict({**_OUTCOME, "host": socket.gethostname(), "pid": os.getpid()})

    cmpx.sweep.cell.run_cell = run_cell
"""


def make_scaled_zoo(root: str, models: int) -> str:
    """``models`` distinct tiny models (one conv model, each with its own doc string) and RUNS runs."""
    zoo = os.path.join(root, f"zoo{models}")
    os.makedirs(zoo)
    model = modelgen.conv_model(0)
    for index in range(models):
        model.doc_string = f"bench model {index}"
        modelgen.save(model, os.path.join(zoo, f"m{index:04d}.onnx"))
    path = os.path.join(root, f"sweep{models}.toml")
    with open(path, "w") as f:
        f.write(f'models = ["zoo{models}/*.onnx"]\n' + "".join(
            f'\n[[runs]]\nname = "r{k}"\nargs = "--backend onnxrt --backend onnxref --atol 1e-{k}"\n'
            for k in range(1, RUNS + 1)))
    return path


def capture_outcome(root: str) -> str:
    """One real cell's outcome, as the trivial cells hand it back."""
    from cmpx.sweep.cell import run_cell

    model = modelgen.save(modelgen.conv_model(0), os.path.join(root, "real.onnx"))
    outcome = run_cell({"model": model, "words": ["--backend", "onnxrt", "--backend", "onnxref"], "cwd": root,
                        "plugins": [], "key": "real"})
    assert outcome.exit_code == 0 and outcome.report, outcome.failure
    path = os.path.join(root, "outcome.json")
    with open(path, "w") as f:
        json.dump(outcome.to_dict(), f)
    return path


def _memory(field: str) -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field + ":"))


def driven(path: str, out: str, executor: str, cells: int) -> dict[str, float]:
    """One sweep of trivial cells: per cell, wall and driver CPU in ms; the growth of peak memory in MiB."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # the peak RSS (VmHWM) starts again from now
    before = _memory("VmRSS")
    wall, cpu = time.perf_counter(), time.process_time()
    code = run_sweep(SweepOptions(path, out, executor=executor), echo=lambda line: None)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert code == 0, code
    return {"wall": wall / cells * 1e3, "cpu": cpu / cells * 1e3, "memory": (_memory("VmHWM") - before) / 2**20}


def driver(sizes: list[int], ray) -> None:
    root = tempfile.mkdtemp(prefix="cmpx-bench-driver-")
    try:
        outcome = capture_outcome(root)
        paths = {cells: make_scaled_zoo(root, cells // RUNS) for cells in sizes}
        site = os.path.join(root, "site")
        os.makedirs(site)
        with open(os.path.join(site, "sitecustomize.py"), "w") as f:
            f.write(TRIVIAL_CELL)
        os.environ["CMPX_BENCH_CELL_OUTCOME"] = outcome  # before Ray starts: its workers inherit both
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [site, os.environ.get("PYTHONPATH")]))
        executors = ["local"]
        ray_start = None
        if ray is not None:
            start = time.perf_counter()
            ray.init(num_cpus=default_jobs([outcome]), include_dashboard=False, log_to_driver=False)
            ray_start = time.perf_counter() - start
            executors.append("ray")
        rows = []
        try:
            for cells in sizes:  # interleaved: both executors at one size, then the next size
                for executor in executors:
                    out = os.path.join(root, f"out-{executor}-{cells}")
                    first = driven(paths[cells], out, executor, cells)
                    again = driven(paths[cells], out, executor, cells)  # every cell kept
                    with open(os.path.join(out, "cells", f"zoo{cells // RUNS}__m0000.onnx--r1", "log.txt")) as f:
                        assert f.read() == json.load(open(outcome))["log"], "not a trivial cell"
                    rows.append((cells, executor, first, again))
        finally:
            if ray is not None:
                ray.shutdown()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"trivial cells ({RUNS} runs per model), {os.cpu_count()} CPUs, load {open('/proc/loadavg').read().strip()}"
          + (f", Ray started in {ray_start:.1f} s" if ray_start else ""))
    print(f"{'cells':>6} {'executor':8} {'wall ms/cell':>12} {'driver CPU ms/cell':>18} {'peak +MiB':>9} | "
          f"{'resume wall ms/cell':>19} {'resume CPU ms/cell':>18}")
    for cells, executor, first, again in rows:
        print(f"{cells:6} {executor:8} {first['wall']:12.2f} {first['cpu']:18.2f} {first['memory']:9.1f} | "
              f"{again['wall']:19.2f} {again['cpu']:18.2f}")
    if ray is not None:
        for cells in sizes:
            local, on_ray = (next(r[2] for r in rows if r[0] == cells and r[1] == e) for e in ("local", "ray"))
            print(f"{cells} cells: Ray/local wall per cell {on_ray['wall'] / local['wall']:.2f}x, "
                  f"Ray adds {on_ray['wall'] - local['wall']:+.2f} ms wall and {on_ray['cpu'] - local['cpu']:+.2f} ms "
                  "driver CPU per cell")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--section", choices=("cells", "driver"), help="only this part (default: both)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of every real-cell variant, interleaved; "
                        "best kept")
    parser.add_argument("--quick", action="store_true", help="fewer cells, one round, no shell loop")
    parser.add_argument("--cells", help="the driver's sizes, e.g. 500,5000 (a multiple of 10 each)")
    args = parser.parse_args()
    try:
        import ray
    except ImportError:
        ray = None
    if args.section in (None, "driver"):
        sizes = [int(n) for n in args.cells.split(",")] if args.cells else [200, 500] if args.quick else [500, 1000, 5000]
        driver(sizes, ray)
    if args.section in (None, "cells"):
        real_cells(1 if args.quick else args.rounds, not args.quick, ray)


if __name__ == "__main__":
    main()
