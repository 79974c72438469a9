"""fp16, bf16 and int8 transforms of a float32 model over 2 GB, against the disk-bound floor, in one run.

The model (generated once, cached under --directory) is a Gather from a ROWS×1024 float32 table of dense random
values, kept in an external data file, then a MatMul by a 1024×256 weight: 2.25 GB of weights (--quick: 300 MB).
The floor is plain numpy reading the same weights in chunks, converting them to float16 and writing them to a
file, which is what any transform must at least do. Each case runs interleaved with the floor, ``--repeat``
times, and the script prints medians and the median of each repeat's ratio to the floor measured just before it
(ratios of medians mislead when the machine's load changes during the run), plus the peak resident memory
(``ru_maxrss`` of the child processes) of each case.

Cases: ``transform`` is the model transform alone (what ``cmpx run`` does before its workers start), in a
subprocess of its own; ``run`` is the whole ``cmpx run MODEL --backend onnxrt --backend onnxrt:KIND``, whose
workers also load and run both models (not for bf16: ONNX Runtime's CPU provider has no bfloat16 kernels).

    python bench/transforms.py [--quick] [--repeat 3] [--kinds fp16,bf16,int8] [--cases transform,run] [--clean]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

COLS, OUT = 1024, 256
FULL_ROWS, QUICK_ROWS = 550_000, 73_000
CHUNK = 1 << 22  # elements per chunk, for generating and for the floor


def generate(directory: str, rows: int) -> str:
    """The cached model ``directory/table-ROWS.onnx`` with its external data ``table-ROWS.bin``."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    path = os.path.join(directory, f"table-{rows}.onnx")
    data = os.path.join(directory, f"table-{rows}.bin")
    if os.path.exists(path) and os.path.getsize(data) == rows * COLS * 4:
        return path
    os.makedirs(directory, exist_ok=True)
    rng = np.random.default_rng(0)
    with open(data, "wb") as out:
        left = rows * COLS
        while left:
            count = min(CHUNK, left)
            out.write(memoryview(rng.standard_normal(count, np.float32)))
            left -= count
    table = onnx.TensorProto(name="table", data_type=TensorProto.FLOAT, dims=[rows, COLS],
                             data_location=TensorProto.EXTERNAL)
    for key, value in (("location", os.path.basename(data)), ("offset", "0"), ("length", str(rows * COLS * 4))):
        entry = table.external_data.add()
        entry.key, entry.value = key, value
    weight = numpy_helper.from_array(rng.standard_normal((COLS, OUT), np.float32) / 32, "W")
    nodes = [helper.make_node("Gather", ["table", "ids"], ["rows"], axis=0, name="gather"),
             helper.make_node("MatMul", ["rows", "W"], ["Y"], name="matmul")]
    graph = helper.make_graph(nodes, "table", [helper.make_tensor_value_info("ids", TensorProto.INT64, [8])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [8, OUT])], [table, weight])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)
    return path


def floor(model: str, scratch: str) -> None:
    """numpy: read the weights chunk by chunk, convert to float16, write them out."""
    import onnx

    from cmpx.model.graph import model_directory

    proto = onnx.load(model, load_external_data=False)
    with open(os.path.join(scratch, "floor.bin"), "wb") as out:
        for tensor in proto.graph.initializer:
            if tensor.data_location == onnx.TensorProto.EXTERNAL:
                info = {entry.key: entry.value for entry in tensor.external_data}
                source = os.path.join(model_directory(model), info["location"])
                with open(source, "rb") as data:
                    data.seek(int(info.get("offset", 0)))
                    left = int(info["length"]) // 4
                    while left:
                        count = min(CHUNK, left)
                        out.write(memoryview(np.fromfile(data, np.float32, count).astype(np.float16)))
                        left -= count
            else:
                out.write(memoryview(onnx.numpy_helper.to_array(tensor).astype(np.float16)))


def apply(kind: str, model: str, output: str) -> None:
    """The built-in transform ``kind`` of ``model`` into ``output``, as ``cmpx run`` makes it (int8 calibrated
    on two feeds of rows spread over the table)."""
    from cmpx.transforms import plugin
    from cmpx.transforms.options import TransformOptions

    transform = getattr(plugin, kind)(TransformOptions(calibration_iterations=2))
    transform.apply(model, output, lambda n: iter([{"ids": np.arange(8, dtype=np.int64) * 997}] * n))


def measured(command: list[str]) -> tuple[float, int]:
    """Wall seconds and the peak resident memory (MiB) of the largest process ``command`` ran."""
    measure = ("import resource, subprocess, sys; code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL)"
               ".returncode; print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, code)")
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", measure, *command], capture_output=True, text=True)
    seconds = time.perf_counter() - start
    peak, code = done.stdout.split()[-2:] if done.stdout.split() else ("0", "?")
    if code not in ("0",):
        raise SystemExit(f"{command} failed ({code}): {done.stderr[-2000:]}")
    return seconds, int(peak) >> 10


def case_command(case: str, kind: str, model: str, scratch: str) -> list[str]:
    if case == "transform":
        return [sys.executable, __file__, "--apply", kind, model, os.path.join(scratch, f"model.{kind}.onnx")]
    return [sys.executable, "-m", "cmpx", "run", model, "--backend", "onnxrt", "--backend", f"onnxrt:{kind}",
            "--atol", "1", "--rtol", "1", "--calibration-iterations", "2", "--save-transformed", scratch]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_ROWS} rows (300 MB) instead of {FULL_ROWS}")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--kinds", default="fp16,bf16,int8")
    parser.add_argument("--cases", default="transform,run")
    parser.add_argument("--directory", default=os.path.join(tempfile.gettempdir(), "cmpx-bench-transforms"),
                        help="where the generated model is cached")
    parser.add_argument("--clean", action="store_true", help="delete the generated model afterwards")
    parser.add_argument("--apply", nargs=3, metavar=("KIND", "MODEL", "OUTPUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.apply:  # one transform case, in a process of its own
        apply(*args.apply)
        return
    start = time.perf_counter()
    model = generate(args.directory, QUICK_ROWS if args.quick else FULL_ROWS)
    weights = sum(os.path.getsize(os.path.join(args.directory, f)) for f in os.listdir(args.directory)
                  if f.startswith(os.path.basename(model)[:-5]))
    print(f"model {model}: {weights / 1e9:.2f} GB (ready in {time.perf_counter() - start:.1f} s); "
          f"load {open('/proc/loadavg').read().split()[:3]}", flush=True)
    scratch = tempfile.mkdtemp(prefix="cmpx-bench-", dir=args.directory)
    times: dict[str, list[float]] = {}
    ratios: dict[str, list[float]] = {}  # each case over the floor measured just before it
    peaks: dict[str, int] = {}
    try:
        for _ in range(args.repeat):
            for case in args.cases.split(","):
                for kind in args.kinds.split(","):
                    if case == "run" and kind == "bf16":
                        continue  # ONNX Runtime's CPU provider has no bfloat16 MatMul or Gather kernels
                    begin = time.perf_counter()
                    floor(model, scratch)
                    times.setdefault("floor", []).append(time.perf_counter() - begin)
                    os.unlink(os.path.join(scratch, "floor.bin"))
                    seconds, peak = measured(case_command(case, kind, model, scratch))
                    times.setdefault(f"{case} {kind}", []).append(seconds)
                    ratios.setdefault(f"{case} {kind}", []).append(seconds / times["floor"][-1])
                    peaks[f"{case} {kind}"] = max(peaks.get(f"{case} {kind}", 0), peak)
                    for name in os.listdir(scratch):
                        os.unlink(os.path.join(scratch, name))
                    print(f"  {case} {kind}: {seconds:.1f} s, peak {peak} MiB; floor {times['floor'][-1]:.1f} s",
                          flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        if args.clean:
            shutil.rmtree(args.directory, ignore_errors=True)
    base = statistics.median(times["floor"])
    print(f"\nload {open('/proc/loadavg').read().split()[:3]}; medians of {args.repeat}")
    print("| case | median | × floor (median of each repeat's ratio) | peak RSS |\n|---|---|---|---|\n"
          f"| numpy floor | {base:.1f} s | 1.00× | |")
    for name, values in times.items():
        if name != "floor":
            spread = "–".join(f"{r:.2f}" for r in (min(ratios[name]), max(ratios[name])))
            print(f"| {name} | {statistics.median(values):.1f} s | {statistics.median(ratios[name]):.2f}× "
                  f"({spread}) | {peaks[name]} MiB |")


if __name__ == "__main__":
    main()
