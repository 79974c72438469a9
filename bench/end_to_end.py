"""`cmpx run` against `polygraphy run` with two ONNX Runtime backends (a small conv model, a 1x64x512x512 identity),
and `cmpx --help` against `polygraphy -h`; every figure measured in this one run, the two tools interleaved.

    python bench/end_to_end.py [--repeat 9] [--quick]

Each figure is a median over the repeats (one warm-up run of each command first, untimed). The two sides of a ratio
run alternately (which goes first alternates too), so a change in the machine's load reaches both; the load
average before and after is printed, with the CPU time each command took (all its processes), which a loaded
machine distorts less than the wall time. Goals (issue 34): small conv run <= 1.0x Polygraphy's wall time,
`cmpx --help` <= 0.7x `polygraphy -h`.

Bytecode: both tools run as installed. Polygraphy's site-packages ship compiled bytecode; an editable cmpx compiles
its modules on first import and caches them, unless PYTHONDONTWRITEBYTECODE is set, in which case every cmpx process
would compile its modules again (117 in the coordinator; ~0.25 s of CPU per run, measured): that variable is
removed from the commands' environment here, and the warm-up run writes the cache, as a user's first run does.

Memory (not with --quick): Polygraphy is one process (its peak RSS). For cmpx the coordinator's own peak is given,
and the total: the coordinator's peak plus twice the largest worker's (an upper bound: peaks at different times are
added, and shared memory mapped by several processes is counted in each).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import onnx
from onnx import TensorProto, helper

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
BIN = os.path.dirname(sys.executable)
CMPX, POLYGRAPHY = os.path.join(BIN, "cmpx"), os.path.join(BIN, "polygraphy")
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

# Runs cmpx; at exit prints the coordinator's peak RSS and the largest worker's (kB).
CMPX_PEAKS = ("import atexit, resource, sys\n"
              "def peaks():\n"
              "    line = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0]\n"
              "    child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
              "    print('PEAKS_KB', line.split()[1], child, file=sys.stderr)\n"
              "atexit.register(peaks)\n"
              "from cmpx.cli.launch import main\n"
              "main()\n")


def identity_model(path: str) -> str:
    shape = [1, 64, 512, 512]
    graph = helper.make_graph([helper.make_node("Identity", ["X"], ["Y"])], "identity",
                              [helper.make_tensor_value_info("X", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, shape)])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def timed(command: list[str]) -> tuple[float, float, subprocess.CompletedProcess]:
    """Wall seconds, CPU seconds of the command and every process it waited for, and the finished process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, env=ENV)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return wall, cpu, done


def side_by_side(ours: list[str], theirs: list[str], repeat: int, codes: tuple[int, ...] = (0,)) -> dict[str, float]:
    """Median wall and CPU seconds of both commands, run alternately after one warm-up run each."""
    for command in (ours, theirs):
        done = timed(command)[2]
        assert done.returncode in codes, (command, done.stdout[-1000:] + done.stderr[-1000:])
    walls: dict[str, list[float]] = {"ours": [], "theirs": []}
    cpus: dict[str, list[float]] = {"ours": [], "theirs": []}
    for i in range(repeat):
        order = [("ours", ours), ("theirs", theirs)]
        for side, command in (order if i % 2 == 0 else order[::-1]):
            wall, cpu, done = timed(command)
            assert done.returncode in codes, (command, done.stdout[-1000:] + done.stderr[-1000:])
            walls[side].append(wall)
            cpus[side].append(cpu)
    return {f"{kind}_{side}": statistics.median(values[side]) for kind, values in (("wall", walls), ("cpu", cpus))
            for side in ("ours", "theirs")}


def polygraphy_peak_mb(model: str) -> float:
    """Polygraphy's peak RSS, measured in a fresh child so that no other process is counted."""
    probe = ("import resource, subprocess, sys\n"
             f"subprocess.run({[POLYGRAPHY, 'run', model, '--onnxrt', '--onnxrt']!r}, capture_output=True)\n"
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=ENV)
    return int(done.stdout.split()[-1]) / 1024


def cmpx_peaks_mb(model: str) -> tuple[float, float]:
    """The coordinator's peak RSS, and the coordinator's plus twice the largest worker's."""
    done = timed([sys.executable, "-c", CMPX_PEAKS, "run", model, "--backend", "onnxrt", "--backend", "onnxrt"])[2]
    coordinator, worker = (int(v) for v in done.stderr.split("PEAKS_KB")[1].split()[:2])
    return coordinator / 1024, (coordinator + 2 * worker) / 1024


def load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def row(label: str, figures: dict[str, float], goal: str) -> str:
    return (f"  {label:<46} {figures['wall_ours']:7.3f} {figures['wall_theirs']:7.3f} "
            f"{figures['wall_ours'] / figures['wall_theirs']:6.2f}x {figures['cpu_ours']:7.3f} "
            f"{figures['cpu_theirs']:7.3f} {figures['cpu_ours'] / figures['cpu_theirs']:6.2f}x  {goal}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=9, help="timed runs of each command (median) [9]")
    parser.add_argument("--quick", action="store_true",
                        help="5 repeats, the small model and --help only, no memory figures (~15 s on an idle machine)")
    args = parser.parse_args()
    repeat = 5 if args.quick else args.repeat
    print(f"{os.cpu_count()} CPUs, load average before: {load()}; median of {repeat}, interleaved, after a warm-up")
    print(f"  {'':<46} {'cmpx s':>7} {'poly s':>7} {'wall':>7} {'cmpx':>7} {'poly':>7} {'CPU':>7}")
    print(f"  {'':<46} {'(wall)':>7} {'(wall)':>7} {'ratio':>7} {'CPU s':>7} {'CPU s':>7} {'ratio':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        models = {"small conv (examples/models/conv.onnx)": (os.path.join(REPO, "examples", "models", "conv.onnx"),
                                                              "goal <= 1.0x wall")}
        if not args.quick:
            models["1x64x512x512 identity"] = (identity_model(os.path.join(tmp, "identity.onnx")), "")
        memory = {}
        for label, (model, goal) in models.items():
            figures = side_by_side([CMPX, "run", model, "--backend", "onnxrt", "--backend", "onnxrt"],
                                   [POLYGRAPHY, "run", model, "--onnxrt", "--onnxrt"], repeat)
            print(row(label, figures, goal), flush=True)
            if not args.quick:
                memory[label] = (*cmpx_peaks_mb(model), polygraphy_peak_mb(model))
    help_figures = side_by_side([CMPX, "--help"], [POLYGRAPHY, "-h"], repeat)
    print(row("cmpx --help vs polygraphy -h", help_figures, "goal <= 0.7x wall"))
    for label, command, codes in (("cmpx plugins", [CMPX, "plugins"], (0,)),
                                  ("cmpx run (an option error)", [CMPX, "run", "m.onnx", "--backend", "nope"], (2,))):
        print(row(f"{label} vs polygraphy -h", side_by_side(command, [POLYGRAPHY, "-h"], repeat, codes + (0,)), ""))
    for label, (coordinator, total, theirs) in memory.items():
        print(f"  memory, {label}: cmpx {coordinator:.0f} MB coordinator / {total:.0f} MB total, Polygraphy "
              f"{theirs:.0f} MB ({coordinator / theirs:.2f}x / {total / theirs:.2f}x)")
    print(f"load average after: {load()}")


if __name__ == "__main__":
    main()
