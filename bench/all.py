"""Every benchmark of this directory, one after the other, in one run: the figures of bench/README.md re-measured
together, each with the machine's load average just before and just after it.

    python bench/all.py [--logs DIR] [--only NAME ...] [--quick]

Each script runs in its own process with its default (full) arguments, or its `--quick` ones with --quick, its
standard output and error kept in DIR/NAME.log (default: a new temporary directory, printed first). At the end a
markdown table gives, per script: its wall time, the load average (1-minute) before and after, and its exit
status; it is also written to DIR/summary.md. Nothing else runs in parallel: the machine's other users are what
the load columns show. differential.py writes its own table into bench/README.md, as it does when run alone.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# (script, full arguments, --quick arguments); cheap ones first, so a stopped run has measured the most.
SCRIPTS: tuple[tuple[str, list[str], list[str]], ...] = (
    ("end_to_end.py", [], ["--quick"]),
    ("compare_large.py", [], ["--quick"]),
    ("transport.py", [], ["--repeat", "2"]),
    ("reduce.py", [], []),
    ("precision_reference.py", [], ["--quick"]),
    ("oracle.py", [], ["--iterations", "2"]),
    ("fuzz_readers.py", [], ["1000"]),
    ("mark_all.py", [], ["--case", "small"]),
    ("precision.py", [], ["--quick"]),
    ("sweep.py", [], ["--quick"]),
    ("transforms.py", ["--clean"], ["--quick", "--repeat", "1", "--clean"]),
    ("differential.py", [], ["--no-readme", "--backend", "onnxref"]),
)


def load_average() -> float:
    with open("/proc/loadavg", encoding="ascii") as f:
        return float(f.read().split()[0])


def commit() -> str:
    found = subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return found.stdout.strip() or "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--logs", help="where each script's output goes (default: a new temporary directory)")
    parser.add_argument("--only", nargs="*", help="only these scripts (e.g. end_to_end.py reduce.py)")
    parser.add_argument("--quick", action="store_true", help="each script's --quick arguments (bounded time)")
    args = parser.parse_args(argv)
    logs = args.logs or tempfile.mkdtemp(prefix="cmpx-bench-")
    os.makedirs(logs, exist_ok=True)
    chosen = [s for s in SCRIPTS if not args.only or s[0] in args.only]
    print(f"logs in {logs}; commit {commit()}, {os.cpu_count()} CPUs, {time.strftime('%Y-%m-%d %H:%M %Z')}",
          flush=True)
    rows = [f"Commit {commit()}, {os.cpu_count()} CPUs, started {time.strftime('%Y-%m-%d %H:%M %Z')}"
            f"{' (--quick)' if args.quick else ''}.", "",
            "| script | arguments | wall s | load before | load after | exit |", "|---|---|---|---|---|---|"]
    failed = 0
    for script, full, quick in chosen:
        words = quick if args.quick else full
        before, started = load_average(), time.monotonic()
        print(f"{script} {' '.join(words)} ...", flush=True)
        with open(os.path.join(logs, script.replace(".py", ".log")), "w", encoding="utf-8") as log:
            code = subprocess.run([sys.executable, os.path.join(HERE, script), *words], stdout=log,
                                  stderr=subprocess.STDOUT, cwd=os.path.dirname(HERE)).returncode
        wall, after = time.monotonic() - started, load_average()
        failed += code != 0
        print(f"  {wall:.0f} s, load {before:.2f} -> {after:.2f}, exit {code}", flush=True)
        rows.append(f"| {script} | {' '.join(words)} | {wall:.0f} | {before:.2f} | {after:.2f} | {code} |")
    summary = "\n".join(rows) + "\n"
    with open(os.path.join(logs, "summary.md"), "w", encoding="utf-8") as f:
        f.write(summary)
    print(summary)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
