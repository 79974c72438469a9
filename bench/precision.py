"""cmpx precision's search against a plain bisection over the same local-error ranking, on the real corpus
(tests/models/real: random-weight BERT, GPT-2 and ViT at fp16, the CNN at int8), measured side by side in one run:
candidates run, nodes kept (of those the transform changes), share of the float weights kept, wall time.

    python bench/precision.py [--quick] [--repeats 1]

Both sides are ``cmpx precision`` with the same tolerances (each tighter than the transform passes, looser than
float32): ``--strategy search`` (grow along the ranking, shrink by QuickXplain, check each kept node) and
``--strategy bisect`` (the shortest passing prefix of the ranking, as Polygraphy's ``debug precision`` bisects,
unshrunk). The two runs of a case alternate, so a busy machine slows both alike; each kept list is checked by the
command's own final run (exit 0) and again by an independent ``cmpx run ... --keep-fp32 @LIST`` (``--no-quantize``
at int8), which must pass. ``--quick``: the CNN at int8 and BERT at fp16 only; ``--models vit gpt2``: those only.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "..", "tests", "models", "real")
LOGS = os.environ.get("CMPX_BENCH_LOGS", tempfile.gettempdir())  # each run's output, CMPX_BENCH_LOGS=DIR to keep
CASES = [  # (model, backend, tolerances and options); the CNN's int8 error is spread over most of its nodes (random
    # weights: 68 of its 69 measured nodes fail on their own), so its search shrinks from all kept
    ("cnn.onnx", "onnxrt:int8", ["--atol", "5e-4", "--rtol", "0.1"]),
    ("bert.onnx", "onnxrt:fp16", ["--atol", "5e-4", "--rtol", "5e-3"]),
    ("gpt2.onnx", "onnxrt:fp16", ["--atol", "5e-5", "--rtol", "5e-3"]),
    ("vit.onnx", "onnxrt:fp16", ["--atol", "5e-4", "--rtol", "5e-3"]),
]
KEPT = re.compile(r"^(?:in float32|unquantized): (\d+) of (\d+) node\(s\).*\((\d+\.\d)%\)$", re.M)
MACS = re.compile(r"^(?:in float32|unquantized): (?:\d+ of \d+ multiply-accumulates.*\((\d+\.\d)%\)|no multiply|"
                  r"multiply-accumulates unknown)", re.M)
STOPPED = "stopped by --max-candidates"
CANDIDATES = re.compile(r"^(\d+) candidate\(s\) in", re.M)


def run(model: str, backend: str, tolerances: list[str], strategy: str, directory: str) -> dict:
    output = os.path.join(directory, f"{model}.{strategy}.txt")
    command = [sys.executable, "-m", "cmpx", "precision", os.path.join(CORPUS, model), "--backend", backend,
               "--reference", "onnxrt", *tolerances, "--strategy", strategy, "-o", output]
    log = os.path.join(LOGS, f"{model}.{strategy}.log")  # what it printed, line by line, to follow it
    started = time.perf_counter()
    with open(log, "w") as f:
        code = subprocess.run(command, stdout=f, stderr=subprocess.STDOUT, text=True).returncode
    seconds = time.perf_counter() - started
    printed = open(log).read()
    kept, candidates = KEPT.search(printed), CANDIDATES.search(printed)
    if code != 0 or kept is None or candidates is None:
        raise SystemExit(f"{' '.join(command)} exited {code}:\n{printed[-4000:]}")
    option = "--keep-fp32" if backend.endswith(("fp16", "bf16")) else "--no-quantize"
    check = subprocess.run([sys.executable, "-m", "cmpx", "run", os.path.join(CORPUS, model), "--backend", backend,
                            "--backend", "onnxrt", "--reference", "onnxrt", *tolerances[:4], option, f"@{output}"],
                           capture_output=True, text=True)  # the list, checked by an independent cmpx run
    if check.returncode != 0:
        raise SystemExit(f"cmpx run with {option} @{output} exited {check.returncode}:\n{check.stdout[-3000:]}")
    return {"candidates": int(candidates.group(1)), "kept": int(kept.group(1)), "of": int(kept.group(2)),
            "weights": float(kept.group(3)), "seconds": seconds, "stopped": STOPPED in printed,
            "macs": _mac_share(printed)}


def _mac_share(printed: str) -> str:
    """The share of the multiply-accumulates kept, as printed; "-" for a model without them or of unknown shapes."""
    found = MACS.search(printed)
    return f"{found.group(1)}%" if found is not None and found.group(1) else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the CNN (int8) and BERT (fp16) only")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each side per case (medians reported)")
    parser.add_argument("--models", nargs="*", help="only these corpus models (cnn, bert, gpt2, vit)")
    arguments = parser.parse_args()
    cases = CASES[:2] if arguments.quick else CASES
    if arguments.models:
        cases = [case for case in cases if case[0].removesuffix(".onnx") in arguments.models]
    print(f"load before: {open('/proc/loadavg').read().split()[:3]}")
    print("| model | transform | strategy | candidates | nodes kept | float weights kept | MACs kept | wall s |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="cmpx-bench-precision-") as directory:
        for model, backend, tolerances in cases:
            results: dict[str, list[dict]] = {"search": [], "bisect": []}
            for _ in range(arguments.repeats):
                for strategy in ("search", "bisect"):  # alternated: a busy machine slows both alike
                    results[strategy].append(run(model, backend, tolerances, strategy, directory))
            for strategy, runs in results.items():
                first = runs[0]
                print(f"| {model} | {backend.split(':')[1]} {' '.join(tolerances[:4])} | {strategy} | "
                      f"{first['candidates']}{' (cap)' if first['stopped'] else ''} | {first['kept']} of {first['of']} | "
                      f"{first['weights']}% | {first['macs']} | "
                      f"{statistics.median(r['seconds'] for r in runs):.1f} |")
    print(f"load after: {open('/proc/loadavg').read().split()[:3]}")


if __name__ == "__main__":
    main()
