"""Differential checks of cmpx against each framework's own API (issue 26, items 10 and 11).

For one backend and one model with its feeds: the framework's plain API runs in this process
(cmpx.testing.framework_api), cmpx's worker runs the same file with the same feeds twice (as ``--backend X
--backend X`` would: two workers, cmpx.testing.kept_workers), and each of the two must return, through shared
memory, exactly the bytes the framework returned. ``NodeCaseCheck`` does this over ONNX's operator test cases
and tallies every case: identical, skipped (and why), or a defect (cmpx failed where the framework did not, or
returned something else).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cmpx.errors import BackendFailed, telling_line
from cmpx.testing.framework_api import difference, rebuilt, run_plain, unwrap_optionals
from cmpx.testing.node_cases import NodeCase, write_case

NOT_FED = "a sequence, optional or string input (cmpx feeds numeric tensors only)"
PLAIN_FAILS = "the framework's own API fails"
UNSTABLE = "the framework's own API returns other values each run (random operators)"
STRINGS = "string outputs only (cmpx compares numbers; it reports them as not comparable)"


@dataclass
class Tally:
    """One backend's outcome over many cases. ``skipped``: reason -> cases; ``defects``: case -> what differed
    or failed in cmpx while the framework's API ran it; ``outputs``: outputs compared bit for bit."""

    backend: str
    run: int = 0
    identical: int = 0
    outputs: int = 0
    skipped: dict[str, list[str]] = field(default_factory=dict)
    defects: dict[str, str] = field(default_factory=dict)
    operators: set[str] = field(default_factory=set)  # operators of the cases found identical
    examples: dict[str, str] = field(default_factory=dict)  # reason -> its first case, with the error's first line

    def skip(self, reason: str, case: str, detail: str = "") -> None:
        self.skipped.setdefault(reason, []).append(case)
        self.examples.setdefault(reason, f"{case}: {detail}" if detail else case)

    @property
    def skipped_count(self) -> int:
        return sum(len(cases) for cases in self.skipped.values())

    def counts(self) -> dict[str, Any]:
        """The tally as JSON-able counts (what bench/README.md states)."""
        return {"backend": self.backend, "cases_run": self.run, "identical": self.identical,
                "outputs_identical": self.outputs, "defects": dict(sorted(self.defects.items())),
                "skipped": self.skipped_count,
                "skipped_by_reason": {reason: len(cases) for reason, cases in
                                      sorted(self.skipped.items(), key=lambda item: -len(item[1]))},
                "skip_examples": dict(sorted(self.examples.items())),
                "operators_covered": len(self.operators)}


def optional_outputs(model: Any) -> list[str]:
    return [o.name for o in model.graph.output if o.type.HasField("optional_type")]


def compare_outputs(expected: Mapping[str, Any], actual: Mapping[str, Any]) -> tuple[int, list[str], list[str]]:
    """(outputs identical, the differences in words, the outputs cmpx could not carry) of one backend's outputs
    as cmpx returned them (``actual``: arrays, Structured, NotComparable) against the framework's."""
    from cmpx.structured import NotComparable, Structured

    same, differences, not_carried = 0, [], []
    for name, value in expected.items():
        if name not in actual:
            differences.append(f"{name}: not returned by cmpx")
            continue
        got = actual[name]
        if isinstance(got, NotComparable):
            not_carried.append(name)
            continue
        found = difference(value, rebuilt(got) if isinstance(got, Structured) else got)
        if found is None:
            same += 1
        else:
            differences.append(f"{name}: {found}")
    return same, differences, not_carried


class NodeCaseCheck:
    """Checks node cases on ``backend`` through kept workers (two of it: the item 11 pair ``X``, ``X#2``) against
    the plain API of ``reference`` (the same framework unless given: another one shows what the check reports
    when the bytes differ)."""

    def __init__(self, backend: str, directory: str | None = None, plugins: Sequence[str] = (),
                 reference: str | None = None):
        from cmpx.testing.kept_workers import KeptWorkers

        self.backend = backend
        self.api = reference or backend
        self.tally = Tally(backend)
        self._scratch: tempfile.TemporaryDirectory[str] | None = None
        if directory is None:
            self._scratch = tempfile.TemporaryDirectory(prefix="cmpx-differential-")
            directory = self._scratch.name
        self.directory = directory
        self._plain: dict[str, Any] = {}
        self.workers = KeptWorkers([backend, backend], plugins=plugins)

    def model_path(self, case: NodeCase) -> str:
        path = os.path.join(self.directory, case.name, "model.onnx")
        if not os.path.exists(path):
            write_case(case, os.path.dirname(path))
        return path

    def plain(self, case: NodeCase) -> dict[str, Any] | BaseException:
        """The framework's outputs for the case (computed once), or what it raised."""
        if case.name not in self._plain:
            try:
                outputs = run_plain(self.api, self.model_path(case), case.inputs)
                if self.api == "onnxref":
                    outputs = unwrap_optionals(outputs, optional_outputs(case.model))
                self._plain[case.name] = outputs
            except Exception as exc:  # every framework raises its own types: the case is skipped, saying which
                self._plain[case.name] = exc
        return self._plain[case.name]

    def usable(self, case: NodeCase) -> bool:
        """Whether cmpx can feed the case and the framework's API runs it (for cmpx.testing.node_cases.stratified)."""
        return case.tensor_inputs and not isinstance(self.plain(case), BaseException)

    def check(self, case: NodeCase) -> str:
        """Check one case, record it in the tally; return its outcome: "identical", "skipped: ..." or
        "defect: ..."."""
        tally = self.tally
        if not case.tensor_inputs:
            tally.skip(NOT_FED, case.name)
            return f"skipped: {NOT_FED}"
        expected = self.plain(case)
        if isinstance(expected, BaseException):
            reason = f"{PLAIN_FAILS}: {type(expected).__name__}"
            tally.skip(reason, case.name, _first_line(expected))
            return f"skipped: {reason}"
        results = self.workers.run(self.model_path(case), case.inputs)
        self._plain.pop(case.name, None)
        tally.run += 1
        problems, compared, carried = [], 0, set()
        for name, result in results.items():
            if isinstance(result, BackendFailed):
                problems.append(f"{name} failed where the framework's API did not: {result}")
                continue
            same, differences, not_carried = compare_outputs(expected, result)
            compared = same
            carried.update(not_carried)
            problems += [f"{name}: {d}" for d in differences]
        if problems and self.unstable(case, expected):
            tally.run -= 1
            tally.skip(UNSTABLE, case.name)
            return f"skipped: {UNSTABLE}"
        if problems:
            tally.defects[case.name] = "; ".join(problems)[:2000]
            return f"defect: {tally.defects[case.name]}"
        if not compared:
            tally.run -= 1
            tally.skip(STRINGS, case.name)
            return f"skipped: {STRINGS}"
        tally.identical += 1
        tally.outputs += compared
        tally.operators |= case.operators
        return "identical"

    def unstable(self, case: NodeCase, expected: Mapping[str, Any]) -> bool:
        """Whether the framework's API, run again, returns something else than it did."""
        try:
            again = run_plain(self.api, self.model_path(case), case.inputs)
        except Exception:
            return True
        if self.api == "onnxref":
            again = unwrap_optionals(again, optional_outputs(case.model))
        return set(again) != set(expected) or any(difference(expected[n], again[n]) is not None for n in expected)

    def close(self) -> None:
        self.workers.close()
        if self._scratch is not None:
            self._scratch.cleanup()

    def __enter__(self) -> NodeCaseCheck:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _first_line(error: BaseException) -> str:
    """The line of a framework's error message that says what failed (cmpx.errors.telling_line: ONNX Runtime's
    and OpenVINO's messages start with their source locations), cut to 300 characters."""
    return telling_line(str(error))[:300] or type(error).__name__