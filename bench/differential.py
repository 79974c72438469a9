"""Differential self-check, the whole set (issue 26, items 10 and 11): cmpx against each framework's own API, bit for
bit, and every backend against itself, over every ONNX operator test case and the corpus of real architectures.
The CI tests (tests/test_differential.py, and the OpenVINO plugin's tests/test_differential_openvino.py) run a
stratified sample of the same checks; CMPX_TEST_ALL_NODE_CASES=1 makes them take every case too.

    python bench/differential.py [--backend NAME ...] [--twice-all NAME ...] [--no-readme]

For each backend (default: onnxrt, onnxref, and openvino where its plugin is installed):
  node cases     every case of onnx.backend.test.case.node on two kept workers (X and X#2) against the framework's
                 plain API (cmpx.testing.differential): identical, skipped (why), or a defect
  whole runs     the case of every trait (dtypes, 0-d, empty, NaN, inf, no inputs) through cmpx.run: X twice at
                 --atol 0, saved and read back as a cmpx run, Polygraphy JSON, a Polygraphy directory and ONNX test
                 data (cmpx.testing.through_runs.check_saved_formats); --twice-all: X twice on every case
  corpus         tests/models/real: X twice, --mark-all against the framework running the marked model, and sliced
                 against unsliced (cmpx.testing.through_runs.check_model)
The counts go to bench/differential.json and, unless --no-readme, into bench/README.md between its markers.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from importlib.util import find_spec

from cmpx.testing import node_cases
from cmpx.testing.differential import NodeCaseCheck
from cmpx.testing.through_runs import check_model, check_saved_formats, check_twice

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "..", "tests", "models", "real")
MODELS = ["cnn", "bert", "gpt2", "vit", "skl_pipeline", "external/model"]
SLICE_OPTIONS = {"onnxrt": {"onnxrt_optimization": "extended"}}  # at "all" slices differ: tests/test_differential.py
BEGIN, END = "<!-- differential.py: begin -->", "<!-- differential.py: end -->"


def node_case_counts(backend: str, cases: list, twice_all: bool) -> dict:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="cmpx-bench-differential-") as scratch:
        with NodeCaseCheck(backend, os.path.join(scratch, "cases")) as check:
            for case in cases:
                check.check(case)
            counts = check.tally.counts()
            counts["seconds"] = round(time.monotonic() - started, 1)
            counts["workers_replaced"] = check.workers.replaced
            started = time.monotonic()
            sample = node_cases.stratified(cases, check.usable, tries=40, strata=lambda case: case.traits)
            counts["whole_runs"] = _whole_runs(backend, sample, check, scratch, check_saved_formats)
            counts["whole_runs"]["traits"] = sorted({t for case in sample for t in case.traits})
            counts["whole_runs"]["seconds"] = round(time.monotonic() - started, 1)
            if twice_all:
                started = time.monotonic()
                runnable = [case for case in cases if check.usable(case)]
                counts["twice_every_case"] = _whole_runs(backend, runnable, check, scratch, check_twice)
                counts["twice_every_case"]["seconds"] = round(time.monotonic() - started, 1)
    return counts


def _whole_runs(backend: str, cases: list, check: NodeCaseCheck, scratch: str, how) -> dict:
    """``how`` (a check of cmpx.testing.through_runs) on each case; a case whose problem is that the framework's own
    API returns other values each time (random operators; OpenVINO's Tile of test_tile, whose output is mostly
    uninitialized memory in its own API too) is counted as unstable, not as a problem."""
    problems, unstable = {}, []
    for case in cases:
        directory = os.path.join(scratch, how.__name__, case.name)
        model, data = node_cases.write_case(case, os.path.join(directory, "case"))
        try:
            found = how(backend, model, data, case.inputs, check.plain(case), directory)
        except Exception as exc:  # a cmpx error on a case the framework runs is a defect: recorded, not raised
            found = [f"raised {type(exc).__name__}: {exc}"[:500]]
        if found and check.unstable(case, check.plain(case)):
            unstable.append(case.name)
        elif found:
            problems[case.name] = found[:3]
    return {"cases": len(cases), "identical": len(cases) - len(problems) - len(unstable), "problems": problems,
            "unstable": unstable}


def corpus_counts(backend: str) -> dict:
    results = {}
    for name in MODELS:
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="cmpx-bench-differential-") as scratch:
            try:
                problems, counts = check_model(backend, os.path.join(CORPUS, f"{name}.onnx"), scratch,
                                               sliced=name != "skl_pipeline", slice_options=SLICE_OPTIONS.get(backend))
            except Exception as exc:  # the framework's own API refuses the model
                results[name] = {"skipped": f"the framework's own API fails: {type(exc).__name__}: "
                                            f"{_first_line(str(exc))}"}
                continue
        sliced = [p for p in problems if p.startswith("sliced against unsliced")]
        results[name] = dict(counts, problems=[p for p in problems if p not in sliced][:5],
                             sliced_differing=len(sliced), first_sliced_difference=(sliced or [None])[0],
                             seconds=round(time.monotonic() - started, 1))
    return results


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    telling = [line for line in lines if not line.startswith(("Exception from", "Check '"))]
    return (telling or lines or [""])[0][:200]


def markdown(results: dict, environment: str) -> str:
    lines = [BEGIN, "", environment, "", "| backend | node cases | run | identical (outputs) | skipped | defects | "
             "operators compared | time | whole runs: cases identical | X twice on every case |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for backend, r in results.items():
        n = r["node_cases"]
        twice = n.get("twice_every_case")
        lines.append(f"| {backend} | {n['total']} | {n['cases_run']} | {n['identical']} ({n['outputs_identical']}) | "
                     f"{n['skipped']} | {len(n['defects'])} | {n['operators_covered']} of {n['operators_total']} | "
                     f"{n['seconds']:.0f} s | {n['whole_runs']['identical']} of {n['whole_runs']['cases']} | "
                     + (f"{twice['identical']} of {twice['cases']}" + (f" ({len(twice['unstable'])} unstable in the "
                        f"framework's own API: {', '.join(twice['unstable'])})" if twice["unstable"] else "")
                        + f", {twice['seconds']:.0f} s" if twice else "not run")
                     + " |")
    lines += ["", "Skipped, by reason (the first case of each, with the framework's message):", ""]
    for backend, r in results.items():
        n = r["node_cases"]
        for reason, count in n["skipped_by_reason"].items():
            lines.append(f"- {backend}: {count} × {reason} (e.g. `{n['skip_examples'][reason][:160]}`)")
    lines += ["", "Corpus (tests/models/real), each model on each backend: X twice (outputs identical to the "
              "framework's), --mark-all (marked tensors identical to the framework running the marked model), "
              "sliced against unsliced (tensors that differ):", "",
              "| backend | " + " | ".join(MODELS) + " |", "|---|" + "---|" * len(MODELS)]
    for backend, r in results.items():
        cells = []
        for name in MODELS:
            c = r["corpus"][name]
            if "skipped" in c:
                cells.append("skipped: own API fails")
            else:
                bad = f", {len(c['problems'])} problem(s)" if c["problems"] else ""
                cut = f"{c['slices']} slices, {c['sliced_differing']} differ" if c["slices"] else "not sliced"
                cells.append(f"{c['outputs']} + {c['marked']} marked identical; {cut}{bad}")
        lines.append(f"| {backend} | " + " | ".join(cells) + " |")
    return "\n".join(lines + ["", END])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", action="append", help="a backend to check (default: every built-in one)")
    parser.add_argument("--twice-all", action="append", default=[], help="also run X twice on every case")
    parser.add_argument("--no-readme", action="store_true", help="do not write the counts into bench/README.md")
    args = parser.parse_args(argv)
    backends = args.backend or ["onnxrt", "onnxref"] + (["openvino"] if find_spec("cmpx_openvino") else [])
    started = time.monotonic()
    cases = node_cases.collect()
    collected = time.monotonic() - started
    operators = {op for case in cases for op in case.operators}
    results = {}
    for backend in backends:
        print(f"{backend}: {len(cases)} node cases...", file=sys.stderr, flush=True)
        counts = node_case_counts(backend, cases, backend in args.twice_all)
        counts.update(total=len(cases), operators_total=len(operators))
        print(f"{backend}: the corpus...", file=sys.stderr, flush=True)
        results[backend] = {"node_cases": counts, "corpus": corpus_counts(backend)}
    import numpy
    import onnx
    import onnxruntime

    versions = [f"onnx {onnx.__version__}", f"onnxruntime {onnxruntime.__version__}", f"numpy {numpy.__version__}"]
    if "openvino" in backends:
        import openvino

        versions.append(f"openvino {openvino.__version__.split('-')[0]}")
    environment = (f"Measured by `python bench/differential.py {' '.join(sys.argv[1:])}`".rstrip() +
                   f" on {time.strftime('%Y-%m-%d')}, {os.cpu_count()} CPUs, {', '.join(versions)}; the cases "
                   f"were collected in {collected:.0f} s, the whole script took {time.monotonic() - started:.0f} s.")
    with open(os.path.join(HERE, "differential.json"), "w", encoding="utf-8") as f:
        json.dump({"environment": environment, "results": results}, f, indent=1, sort_keys=True)
    text = markdown(results, environment)
    print(text)
    if not args.no_readme:
        readme = os.path.join(HERE, "README.md")
        with open(readme, encoding="utf-8") as f:
            current = f.read()
        if BEGIN not in current or END not in current:
            print(f"{readme} has no {BEGIN} ... {END} markers: not written", file=sys.stderr)
            return 1
        head, rest = current.split(BEGIN, 1)
        with open(readme, "w", encoding="utf-8") as f:
            f.write(head + text + rest.split(END, 1)[1])
    defects = sum(len(r["node_cases"]["defects"]) + len(r["node_cases"]["whole_runs"]["problems"])
                  + len((r["node_cases"].get("twice_every_case") or {}).get("problems", {})) for r in results.values())
    return 1 if defects else 0


if __name__ == "__main__":
    sys.exit(main())
