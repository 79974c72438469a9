"""What computing the reference once saves ``cmpx precision``: the same search with the reference's outputs saved
once (the default) and with the reference backend run live on every candidate (``--live-reference``, as it ran
before), alternated in one invocation so that a busy machine slows both alike.

    python bench/precision_reference.py [--quick] [--repeats 3]

Cases: the planted fp16 model (cmpx.testing.models.fp16_islands, onnxref:fp16 against onnxref, as the tests run
it), the planted int8 model (int8_outlier, onnxrt:int8 against onnxrt) and the corpus ViT at fp16 (onnxrt:fp16
against onnxrt, bench/precision.py's tolerances). Reported: candidates (the same both ways, else the script
stops), the median of each candidate's own run time (its progress line), the command's wall time, and the CPU
time of the command and its workers (what a candidate costs a shared machine), medians over the repeats, with the
ratios live / saved. ``--quick``: the planted models only, one repeat.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "..", "tests", "models", "real")
SECONDS = re.compile(r"^candidate \d+ \(\w+\): .* \((\d+\.\d) s\) \| best: ", re.M)
COUNT = re.compile(r"^(\d+) candidate\(s\) in", re.M)


def planted(directory: str) -> list[tuple[str, str, list[str]]]:
    from cmpx.testing import models

    islands = str(models.save(models.fp16_islands(), os.path.join(directory, "islands.onnx")))
    outlier = str(models.save(models.int8_outlier(), os.path.join(directory, "outlier.onnx")))
    return [(islands, "onnxref:fp16", ["--reference", "onnxref", "--val-range", "X:[1,2.5]", "--atol", "1e-2",
                                        "--rtol", "2e-2"]),
            (outlier, "onnxrt:int8", ["--reference", "onnxrt", "--atol", "1e-2", "--rtol", "5e-2"])]


def run(model: str, backend: str, options: list[str], live: bool, directory: str
        ) -> tuple[int, float, float, float]:
    """(candidates, median candidate seconds, wall seconds, CPU seconds of the command and its workers) of one cmpx
    precision."""
    command = [sys.executable, "-m", "cmpx", "precision", model, "--backend", backend, *options,
               "-o", os.path.join(directory, "kept.txt"), *(["--live-reference"] if live else [])]
    started, before = time.perf_counter(), _cpu()
    done = subprocess.run(command, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - started, _cpu() - before
    count = COUNT.search(done.stdout)
    if done.returncode != 0 or count is None:
        raise SystemExit(f"{' '.join(command)} exited {done.returncode}:\n{done.stdout[-3000:]}{done.stderr[-2000:]}")
    return int(count.group(1)), statistics.median(float(s) for s in SECONDS.findall(done.stdout)), wall, cpu


def _cpu() -> float:
    """CPU seconds of the processes this one has waited for, and of theirs (cmpx waits for its workers)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _ratio(live: float, saved: float) -> str:
    """live / saved; "n/a" where the saved figure is 0 (a candidate under the progress line's 0.05 s)."""
    return f"{live / saved:.2f}" if saved > 0 else "n/a"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the planted models only, one repeat")
    parser.add_argument("--repeats", type=int, default=3)
    arguments = parser.parse_args()
    repeats = 1 if arguments.quick else arguments.repeats
    print(f"load before: {open('/proc/loadavg').read().split()[:3]}")
    print("| model | backend | candidates | candidate s saved / live (ratio) | wall s saved / live (ratio) | "
          "CPU s saved / live (ratio) |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="cmpx-bench-reference-") as directory:
        cases = planted(directory)
        if not arguments.quick:
            cases.append((os.path.join(CORPUS, "vit.onnx"), "onnxrt:fp16",
                          ["--reference", "onnxrt", "--atol", "5e-4", "--rtol", "5e-3"]))
        for model, backend, options in cases:
            seen: dict[bool, list[tuple[int, float, float, float]]] = {False: [], True: []}
            for _ in range(repeats):
                for live in (False, True):  # alternated
                    seen[live].append(run(model, backend, options, live, directory))
            counts = {run[0] for runs in seen.values() for run in runs}
            if len(counts) != 1:
                raise SystemExit(f"{model}: the candidates differ between the two ways: {seen}")
            each, wall, cpu = ({live: statistics.median(run[column] for run in runs) for live, runs in seen.items()}
                               for column in (1, 2, 3))
            print(f"| {os.path.basename(model)} | {backend} | {counts.pop()} | {each[False]:.2f} / {each[True]:.2f} "
                  f"({_ratio(each[True], each[False])}) | {wall[False]:.1f} / {wall[True]:.1f} "
                  f"({_ratio(wall[True], wall[False])}) | {cpu[False]:.1f} / {cpu[True]:.1f} "
                  f"({_ratio(cpu[True], cpu[False])}) |")
    print(f"load after: {open('/proc/loadavg').read().split()[:3]}")


if __name__ == "__main__":
    main()
