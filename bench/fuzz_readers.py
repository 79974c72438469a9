"""Fuzz every reader of user files and words (cmpx.testing.fuzzing) with N hypothesis examples each (default
10,000) and print how each input ended: read, refused (a one-line usage error, exit 2), or a defect (anything
else; the first is printed with its input). Run: python bench/fuzz_readers.py [N]. The counts go in
bench/README.md."""

from __future__ import annotations

import collections
import shutil
import sys
import tempfile
import time

from hypothesis import HealthCheck, Phase, given, settings

from cmpx.testing.fuzzing import READERS, mutations, outcome


def fuzz(reader, examples: int) -> tuple[collections.Counter, str | None, float]:
    counts: collections.Counter = collections.Counter()
    first_defect: list[str] = []

    @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), database=None,
              phases=[Phase.generate])  # count every generated input; no shrinking
    @given(mutations(reader.seed()))
    def run(data: bytes) -> None:
        directory = tempfile.mkdtemp(prefix="cmpx-fuzz-")
        try:
            counts[outcome(reader, data, directory)] += 1
        except AssertionError as exc:
            counts["defect"] += 1
            if not first_defect:
                first_defect.append(f"{exc} (input {data[:120]!r})")
        finally:
            shutil.rmtree(directory, ignore_errors=True)

    started = time.perf_counter()
    run()
    return counts, (first_defect or [None])[0], time.perf_counter() - started


def main() -> None:
    examples = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    print(f"| reader | inputs | read | refused (exit 2) | defects | seconds |\n|---|---|---|---|---|---|")
    defects = []
    for reader in READERS:
        counts, defect, seconds = fuzz(reader, examples)
        total = sum(counts.values())
        print(f"| {reader.name} | {total:,} | {counts['read']:,} | {counts['refused']:,} | {counts['defect']} | "
              f"{seconds:.0f} |", flush=True)
        if defect:
            defects.append(f"{reader.name}: {defect}")
    for line in defects:
        print(line)


if __name__ == "__main__":
    main()
