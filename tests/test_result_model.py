"""One result model (issue #27, items 3 and 4): the kind of a backend failure is the failure's own, made where it
happens and read alike by the JSON report and by reduce; the --report-json document is read back through one
typed reader, next to its writer (and its sum, which a sweep's index keeps, read back alike); a sweep cell's record is written and read by one type; and exit codes are
written by name, never as numbers, outside cmpx.errors."""

import ast
import json
import math
import os

import pytest

from cmpx.errors import (BackendCrashed, BackendFailed, BackendProtocolError, BackendTimeout, ExitCode,
                         RemoteTraceback)
from cmpx.reduce.observe import Observation
from cmpx.report import Report
from cmpx.reports.json_report import FailureSummary, RunSummary
from cmpx.outcome.results import MetricResult, OutputResult, PairResult, RunResult
from cmpx.sweep.store import CellRecord
from conftest import REPO


def test_a_failure_says_its_kind_where_it_is_made():
    error = BackendFailed("ort", "load", "RuntimeError: no")
    error.__cause__ = RemoteTraceback("Traceback ...")
    assert (error.kind, error.how) == ("error", "error")
    assert error.record() == {"phase": "load", "message": "RuntimeError: no", "kind": "error",
                              "remote_traceback": "Traceback ..."}
    protocol = BackendProtocolError("ort", "infer", "undecodable frame")
    assert protocol.kind == "protocol" and str(protocol) == "ort failed during infer: protocol error: undecodable frame"
    assert protocol.record() == {"phase": "infer", "message": "protocol error: undecodable frame", "kind": "protocol"}
    crash = BackendCrashed("ort", "infer", exit_code=-11, signal_name="SIGSEGV", stderr_tail="boom")
    assert (crash.kind, crash.how) == ("crash", "signal SIGSEGV")
    assert crash.record() == {"phase": "infer", "message": "worker killed by SIGSEGV", "kind": "crash",
                              "exit_code": -11, "signal": "SIGSEGV", "stderr_tail": "boom"}
    assert BackendCrashed("ort", "load", exit_code=7, signal_name=None, stderr_tail="").how == "crash"
    timeout = BackendTimeout("ort", "infer", 3.0)
    assert (timeout.kind, timeout.record()["seconds"]) == ("timeout", 3.0)


def _report(failures, pairs):
    result = RunResult()
    for pair in pairs:
        result.add_pair(pair)
    result.failures.update(failures)
    return Report(plan=None, result=result)


def _pair(backend, passed, *outputs):
    return PairResult(backend, "ref", 0, [OutputResult(name, [MetricResult("tolerance", passed)], elements=1)
                                          for name in outputs])


def test_reduce_reads_each_failure_and_mismatch_from_the_report():
    """The kind reduce compares between the full model and a candidate is the failure's own: a protocol error is
    'protocol' here as in the JSON report (reduce called it 'error' before)."""
    report = _report({"a": BackendProtocolError("a", "infer", "bad frame"),
                      "b": BackendCrashed("b", "load", exit_code=-6, signal_name="SIGABRT", stderr_tail="")},
                     [_pair("c", False, "y", "z"), _pair("d", True, "y"), PairResult("e", "ref", 0)])
    seen = Observation.of(report, 1.5, [])
    assert seen.failures == {"a": ("infer", "protocol"), "b": ("load", "crash")}
    assert seen.mismatch and seen.seconds == 1.5 and seen.report is report
    assert seen.details == ["a protocol during infer", "b signal SIGABRT during load", "c vs ref: y, z"]
    assert seen.messages == ["a failed during infer: protocol error: bad frame", "b failed during load: worker "
                             "killed by SIGABRT"]
    assert seen.verdict().startswith("FAILED (mismatch, crash, protocol: ")
    nothing_compared = Observation.of(_report({}, [PairResult("e", "ref", 0)]), 0.1, [])
    assert nothing_compared.passed  # a candidate that compared nothing shows no mismatch


def test_the_json_document_is_read_back_as_it_was_written(run_cli, models, tmp_path):
    path = tmp_path / "report.json"
    result = run_cli("run", models.matmul_chain, "--backend", "onnxrt", "--backend", "faulty", "--backend", "onnxref",
                     "-p", "cmpx_test_faulty", "--faulty-fault", "infer:garbage", "--iterations", "2",
                     "--report-json", path)
    assert result.exit_code == ExitCode.BACKEND_FAILED, result.output
    document = json.loads(path.read_text())
    summary = RunSummary.from_document(document)
    assert summary.exit_code == ExitCode.BACKEND_FAILED
    assert [(p.backend, p.reference, p.iterations, p.iterations_passed, p.passed) for p in summary.pairs] == [
        ("onnxrt", "onnxref", 2, 2, True)]
    assert summary.pairs[0].worst_abs == document["pairs"][0]["worst_abs"]
    message = next(b["failure"]["message"] for b in document["backends"] if b["name"] == "faulty")
    assert message.startswith("protocol error: undecodable frame")
    assert summary.failures == (FailureSummary("faulty", "infer", "protocol", message),)
    assert [b.name for b in summary.backends] == ["onnxrt", "faulty", "onnxref"]
    assert summary.backends[0].mean_infer_seconds > 0
    assert RunSummary.from_document(json.loads(json.dumps(summary.to_document(), allow_nan=False))) == summary


def test_the_reader_refuses_what_is_not_a_report_and_reads_non_finite_numbers():
    with pytest.raises(ValueError, match="not a cmpx report"):
        RunSummary.from_document({"format": "cmpx-sweep-summary"})
    with pytest.raises(ValueError, match="not a cmpx report"):
        RunSummary.from_document({"format": "cmpx-report", "exit_code": 0})
    pair = {"backend": "a", "reference": "b", "iterations": 1, "iterations_passed": 0, "outputs": 1,
            "outputs_passed": 0, "worst_abs": "NaN", "worst_rel": "Infinity",
            "first_divergence": {"iteration": 0, "tensor": "t", "node": "n", "op_type": "Add"}}
    summary = RunSummary.from_document({"format": "cmpx-report", "exit_code": 1, "pairs": [pair], "backends": []})
    assert math.isnan(summary.pairs[0].worst_abs) and summary.pairs[0].worst_rel == math.inf
    assert summary.pairs[0].first_divergence.tensor == "t" and not summary.pairs[0].passed
    again = RunSummary.from_document(json.loads(json.dumps(summary.to_document(), allow_nan=False)))
    assert math.isnan(again.pairs[0].worst_abs) and again.pairs[0].worst_rel == math.inf
    assert again.pairs[0].first_divergence == summary.pairs[0].first_divergence


def test_a_cell_record_is_read_back_whole_or_not_at_all():
    record = CellRecord(model="m", model_path="/m.onnx", run="r", exit_code=1, failure=None, seconds=1.0, host="h",
                        finished="now", fingerprint={"cmpx": "1"}, report="report.json", log="log.txt", threads=1,
                        same_as=None)
    assert CellRecord.from_dict(json.loads(json.dumps(record.to_dict()))) == record
    partial = record.to_dict()
    del partial["fingerprint"]
    assert CellRecord.from_dict(partial) is None and CellRecord.from_dict([1]) is None


# Exit codes by name (item 4): where a number would stand for one of cmpx's exit codes.
EXIT_CALLS = {"sys.exit", "os._exit", "exit", "SystemExit", "ctx.exit", "click.exceptions.Exit", "Exit"}
EXIT_NAMES = {code.name for code in ExitCode}


def literal_exit_codes(source):
    """(line, code) of each exit code written as a number: an argument of sys.exit and the like, an
    ``exit_code=`` argument or ``"exit_code":`` entry, a comparison with an exit code or return code, a name of
    ExitCode (``INTERNAL = 4``) or a name holding exit codes set to numbers."""
    def numbers(node):
        return [n for n in ast.walk(node) if isinstance(n, ast.Constant) and type(n.value) is int]

    found = []
    for node in ast.walk(ast.parse(source)):
        places = []
        if isinstance(node, ast.Call) and ast.unparse(node.func) in EXIT_CALLS:
            places = node.args
        elif isinstance(node, ast.Call):
            places = [k.value for k in node.keywords if k.arg == "exit_code"]
        elif isinstance(node, ast.Dict):
            places = [value for key, value in zip(node.keys, node.values)
                      if isinstance(key, ast.Constant) and key.value == "exit_code"]
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(word in ast.unparse(side) for side in sides for word in ("exit_code", "returncode")):
                places = sides
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            if any(name in EXIT_NAMES or "EXIT_CODE" in name for name in names) and node.value is not None:
                places = [node.value]
        found += [(n.lineno, n.value) for place in places for n in numbers(place)]
    return sorted(found)


def test_the_finder_finds_exit_codes_written_as_numbers():
    source = ("import sys\nsys.exit(130)\nINTERNAL = 4\nVERDICT_EXIT_CODES = (0, 1, 3)\nx = {'exit_code': 4}\n"
              "f(exit_code=2)\nif outcome['exit_code'] == 3: pass\nsys.exit(code)\nsize = 4\n")
    assert literal_exit_codes(source) == [(2, 130), (3, 4), (4, 0), (4, 1), (4, 3), (5, 4), (6, 2), (7, 3)]


# The worker package imports nothing of cmpx (it runs under other Pythons too, cmpx.transport.worker): its exit
# statuses are its own (CANNOT_START, 0 when its coordinator is gone), not cmpx's exit codes.
OWN_EXIT_STATUSES = REPO / "core" / "transport" / "worker"


def test_exit_codes_are_written_by_name_outside_cmpx_errors():
    wrong = []
    for directory in ("core", "backends", "comparators"):
        for folder, _, files in os.walk(REPO / directory):
            for file in files:
                path = os.path.join(folder, file)
                if file.endswith(".py") and path != str(REPO / "core" / "errors.py") and \
                        not path.startswith(str(OWN_EXIT_STATUSES) + os.sep):
                    with open(path, encoding="utf-8") as f:
                        wrong += [f"{os.path.relpath(path, REPO)}:{line}: {code}"
                                  for line, code in literal_exit_codes(f.read())]
    assert wrong == [], "exit codes written as numbers (use cmpx.errors.ExitCode): " + "; ".join(wrong)


def test_every_exit_code_is_in_the_readmes_table_and_in_no_other_meaning():
    table = (REPO / "README.md").read_text().split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    listed = [int(line.split("|")[1]) for line in table.splitlines() if line.startswith("| ") and
              line.split("|")[1].strip().isdigit()]
    assert listed == sorted(int(code) for code in ExitCode)
    assert len(ExitCode.__members__) == len(ExitCode)  # no alias: each code has one name
