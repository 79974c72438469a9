"""`cmpx run` against `polygraphy run` with two ONNX Runtime backends, on a small conv model and on a
1x64x512x512 identity, plus start-up times; every figure measured in this one run.

    python bench/end_to_end.py [--repeat 5]

Memory: Polygraphy is one process (its peak RSS). For cmpx the coordinator's own peak is given, and the total:
the coordinator's peak plus each worker's peak (an upper bound: peaks at different times are added, and shared
memory mapped by several processes is counted in each).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import onnx
from onnx import TensorProto, helper

from cmpx.transport.idle_threads import QUIET_IDLE_THREADS

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
BIN = os.path.dirname(sys.executable)

# Runs cmpx; at exit prints the coordinator's peak RSS and the largest worker's (kB).
CMPX = ("import atexit, resource, sys\n"
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


def run_once(command: list[str], env: dict[str, str] | None = None) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, env=env)
    return time.perf_counter() - start, done


def polygraphy_run(model: str, repeat: int, env: dict[str, str] | None = None) -> tuple[float, float]:
    """Best wall time, and peak RSS in MB (measured in a fresh child so no other process is counted)."""
    command = [os.path.join(BIN, "polygraphy"), "run", model, "--onnxrt", "--onnxrt"]
    times = []
    for _ in range(repeat):
        seconds, done = run_once(command, env)
        assert done.returncode == 0, done.stdout[-1000:] + done.stderr[-1000:]
        times.append(seconds)
    probe = ("import resource, subprocess, sys\n"
             f"subprocess.run({command!r}, capture_output=True)\n"
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")
    peak = int(subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).stdout.split()[-1])
    return min(times), peak / 1024


def cmpx_run(model: str, repeat: int) -> tuple[float, float, float]:
    """Best wall time, coordinator peak MB, and coordinator + 2 x largest worker peak MB."""
    command = [sys.executable, "-c", CMPX, "run", model, "--backend", "onnxrt", "--backend", "onnxrt"]
    times, peaks = [], None
    for _ in range(repeat):
        seconds, done = run_once(command)
        assert done.returncode == 0, done.stdout[-1000:] + done.stderr[-1000:]
        times.append(seconds)
        coordinator, worker = (int(v) for v in done.stderr.split("PEAKS_KB")[1].split()[:2])
        peaks = (coordinator / 1024, (coordinator + 2 * worker) / 1024)
    return min(times), peaks[0], peaks[1]


def startup(command: list[str], repeat: int) -> float:
    return min(run_once(command)[0] for _ in range(repeat))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        models = {"small conv (examples/models/conv.onnx)": os.path.join(REPO, "examples", "models", "conv.onnx"),
                  "1x64x512x512 identity": identity_model(os.path.join(tmp, "identity.onnx"))}
        print(f"best of {args.repeat}; two onnxrt backends each")
        print(f"{'model':<40} {'cmpx s':>7} {'poly s':>7} {'time':>6} {'cmpx MB (coord/total)':>22} "
              f"{'poly MB':>8} {'memory (coord/total)':>21}")
        tuned = {}
        for label, model in models.items():
            theirs_time, theirs_mb = polygraphy_run(model, args.repeat)
            ours_time, coordinator_mb, total_mb = cmpx_run(model, args.repeat)
            tuned[label] = (ours_time, polygraphy_run(model, args.repeat, dict(os.environ, **QUIET_IDLE_THREADS))[0])
            print(f"{label:<40} {ours_time:7.3f} {theirs_time:7.3f} {ours_time / theirs_time:5.2f}x "
                  f"{coordinator_mb:10.0f} / {total_mb:<9.0f} {theirs_mb:8.0f} "
                  f"{coordinator_mb / theirs_mb:9.2f}x / {total_mb / theirs_mb:.2f}x")
        print("polygraphy with the idle-thread setting cmpx makes for itself "
              f"({', '.join(f'{k}={v}' for k, v in QUIET_IDLE_THREADS.items())}):")
        for label, (ours_time, theirs_time) in tuned.items():
            print(f"  {label:<38} {ours_time:7.3f} {theirs_time:7.3f} {ours_time / theirs_time:5.2f}x")
    cmpx = os.path.join(BIN, "cmpx")
    polygraphy_help = startup([os.path.join(BIN, "polygraphy"), "-h"], args.repeat)
    print("start-up (best of %d):" % args.repeat)
    for label, command in (("cmpx --help", [cmpx, "--help"]), ("cmpx plugins", [cmpx, "plugins"]),
                           ("cmpx run (an option error)", [cmpx, "run", "m.onnx", "--backend", "nope"])):
        seconds = startup(command, args.repeat)
        print(f"  {label:<28} {seconds:6.3f} s  ({seconds / polygraphy_help:.2f}x polygraphy -h, target <= 0.15 s)")
    print(f"  {'polygraphy -h':<28} {polygraphy_help:6.3f} s")


if __name__ == "__main__":
    main()
