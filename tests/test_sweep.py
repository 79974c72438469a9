"""cmpx sweep on the local executor: every model with every run in runner processes, the results directory,
exit codes, resuming, and Ctrl-C."""

import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
import xml.etree.ElementTree as ET

from cmpx.errors import ExitCode
from cmpx.reports.json_report import FailureSummary, PairSummary, RunSummary
from cmpx.reports.terminal import Progress
from cmpx.sweep.cell import run_cell_task
from cmpx.sweep.progress import SweepProgress
from cmpx.sweep.summary import CellEntry, CellFailure
from cmpx.testing import models as modelgen
from cmpx.testing.leaks import orphaned_workers, runner_processes, settled, worker_processes

from conftest import REPO, interruptible
from sweep_zoo import VERDICTS, processes_marked, summary, verdicts, write_zoo


def no_runner_left():
    """No runner is left, and no worker of one: a worker dies with its runner (the kernel kills it when its parent
    exits), a moment after it, not at once; what is still there after the settling time the fixtures allow a
    killed process is a leak (CI saw a refused cell's workers for that moment on a busy machine)."""
    assert runner_processes() == [], "a sweep left runner processes behind"
    assert settled(orphaned_workers) == [], "a cell's workers outlived their runner"


def test_a_local_sweep_runs_every_model_with_every_run(tmp_path, run_cli):
    out = tmp_path / "out"
    result = run_cli("sweep", write_zoo(tmp_path), "--out", out, "--jobs", "2")
    no_runner_left()
    assert result.exit_code == 1, result.output  # two cells mismatch, none failed
    assert "3 model(s) x 2 run(s) = 6 cells" in result.output and "[6/6]" in result.output
    assert verdicts(out) == VERDICTS
    document = summary(out)
    assert document["exit_code"] == 1 and document["counts"] == {"passed": 4, "mismatch": 2}
    for cell in document["cells"]:  # each cell's own --report-json document, and its text report
        report = json.loads((out / cell["report"]).read_text())
        assert report["exit_code"] == cell["exit_code"] and report["model"].endswith(cell["model"])
        assert ("FAILED" if cell["verdict"] == "mismatch" else "PASSED") in (out / cell["log"]).read_text()
        assert set(cell["timings"]["backends"]) == {p["backend"] for p in cell["pairs"]} | {
            p["reference"] for p in cell["pairs"]}
    conv = next(c for c in document["cells"] if c["model"] == "zoo/conv.onnx" and c["run"] == "fp16")
    assert conv["worst_abs"] > 1e-5 and conv["pairs"][0]["backend"] == "onnxrt:fp16"
    assert conv["first_divergence"]["node"] == "conv0"  # marked: the error enters at the Conv
    suite = ET.parse(out / "junit.xml").getroot().find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("6", "2", "0")
    assert {(c.get("file"), c.get("name")) for c in suite.iter("testcase")} == set(VERDICTS)
    assert {c.get("classname") for c in suite.iter("testcase")} == {"zoo.conv", "zoo.gather", "zoo.matmul"}
    table = (out / "summary.md").read_text()
    assert "| model | ref | fp16 |" in table and "\x1b" not in table
    assert "| zoo/conv.onnx | passed | mismatch (abs" in table and "| zoo/gather.onnx | passed | passed |" in table


def test_a_failed_backend_or_a_model_a_run_cannot_take_exit_3_and_say_why(tmp_path, run_cli):
    runs = """
[[runs]]
name = "broken"
args = "--backend onnxrt --backend faulty -p cmpx_test_faulty --faulty-fault load:raise --val-range X:[0,1]"
"""
    out = tmp_path / "out"
    result = run_cli("sweep", write_zoo(tmp_path, runs, names=("conv", "gather")), "--out", out)
    no_runner_left()
    assert result.exit_code == 3, result.output
    cells = {c["model"]: c for c in summary(out)["cells"]}
    conv, gather = cells["zoo/conv.onnx"], cells["zoo/gather.onnx"]
    assert (conv["verdict"], conv["exit_code"]) == ("backend failed", 3)
    assert conv["failure"]["backends"][0]["backend"] == "faulty" and conv["failure"]["backends"][0]["phase"] == "load"
    assert (gather["verdict"], gather["exit_code"], gather["report"]) == ("usage error", 2, None)
    assert "'X' is not one of the model inputs" in gather["failure"]["message"]
    assert "'X' is not one of the model inputs" in (out / gather["log"]).read_text()
    suite = ET.parse(out / "junit.xml").getroot().find("testsuite")
    assert (suite.get("failures"), suite.get("errors")) == ("0", "2")


def test_a_cell_whose_process_dies_is_that_cells_failure_and_the_others_go_on(tmp_path, run_cli):
    # The data loader script runs in the cell's own process (the run's coordinator): a crash there kills it.
    (tmp_path / "crash.py").write_text("import os, signal\n\ndef load_data():\n"
                                       "    os.kill(os.getpid(), signal.SIGKILL)\n")
    runs = """
[[runs]]
name = "crash"
args = "--backend onnxrt --backend onnxref --data-loader-script crash.py"

[[runs]]
name = "ref"
args = "--backend onnxrt --backend onnxref"
"""
    out = tmp_path / "out"
    result = run_cli("sweep", write_zoo(tmp_path, runs, names=("conv",)), "--out", out, "--jobs", "1")
    no_runner_left()
    assert result.exit_code == 3, result.output
    assert verdicts(out) == {("zoo/conv.onnx", "crash"): "internal error", ("zoo/conv.onnx", "ref"): "passed"}
    crashed = summary(out)["cells"][0]
    assert crashed["failure"]["message"] == "the process running this cell killed by SIGKILL"


def _finished_at(out):
    return {path.parent.name: path.stat().st_mtime_ns for path in (out / "cells").glob("*/cell.json")}


def test_a_second_sweep_runs_only_the_cells_whose_inputs_changed(tmp_path, run_cli):
    sweep = write_zoo(tmp_path, names=("conv",))
    out = tmp_path / "out"
    assert run_cli("sweep", sweep, "--out", out).exit_code == 1
    first = _finished_at(out)
    assert set(first) == {"zoo__conv.onnx--ref", "zoo__conv.onnx--fp16"}

    again = run_cli("sweep", sweep, "--out", out)  # nothing changed: nothing runs, same verdict
    assert again.exit_code == 1 and "2 kept from an earlier sweep, 0 to run" in again.output
    assert _finished_at(out) == first and all(c["reused"] for c in summary(out)["cells"])

    failed = run_cli("sweep", sweep, "--out", out, "--rerun", "failed")  # only the mismatching cell
    assert failed.exit_code == 1 and "1 kept from an earlier sweep, 1 to run" in failed.output
    now = _finished_at(out)
    assert now["zoo__conv.onnx--ref"] == first["zoo__conv.onnx--ref"]
    assert now["zoo__conv.onnx--fp16"] != first["zoo__conv.onnx--fp16"]

    sweep.write_text(sweep.read_text().replace("--mark-all", "--mark-all --atol 1e-2 --rtol 1e-2"))
    changed = run_cli("sweep", sweep, "--out", out)  # the fp16 run's args changed: only its cell runs
    assert changed.exit_code == 0 and "1 kept from an earlier sweep, 1 to run" in changed.output
    assert _finished_at(out)["zoo__conv.onnx--ref"] == first["zoo__conv.onnx--ref"]

    modelgen.save(modelgen.conv_model(seed=1), tmp_path / "zoo" / "conv.onnx")  # new weights, same path
    retrained = run_cli("sweep", sweep, "--out", out)
    assert retrained.exit_code == 0 and "0 kept from an earlier sweep, 2 to run" in retrained.output
    no_runner_left()


def test_ctrl_c_stops_the_cells_under_way_and_keeps_the_finished_ones(tmp_path, run_cli, no_leaks):
    runs = """
[[runs]]
name = "ref"
args = "--backend onnxrt --backend onnxref"

[[runs]]
name = "hang"
args = "--backend onnxrt --backend faulty -p cmpx_test_faulty --faulty-fault infer:hang"
"""
    sweep = write_zoo(tmp_path, runs, names=("conv", "gather"))
    out = tmp_path / "out"
    marker = uuid.uuid4().hex
    process = subprocess.Popen([sys.executable, "-m", "cmpx", "sweep", str(sweep), "--out", str(out), "--jobs", "1"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO,
                               env=dict(os.environ, PYTHONUNBUFFERED="1", CMPX_TEST_MARK=marker, PYTHONFAULTHANDLER="1"),
                               preexec_fn=interruptible)
    deadline = time.monotonic() + 60
    # conv/ref finishes, then conv/hang starts: wait until its run's two workers are up
    while time.monotonic() < deadline and not (
            (out / "cells" / "zoo__conv.onnx--ref" / "cell.json").exists()
            and any(len(worker_processes(r)) == 2 for r in runner_processes(process.pid))):
        time.sleep(0.1)
    time.sleep(1.0)  # loading, then hanging in inference
    process.send_signal(signal.SIGINT)
    started = time.monotonic()
    try:  # read while waiting: a sweep blocked on a full pipe would look like a hang
        printed, _ = process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        where = subprocess.run(["ps", "-o", "pid,ppid,stat,wchan:24,etime,args", "-e"], capture_output=True,
                               text=True).stdout
        where = "\n".join(line[:200] for line in where.splitlines() if marker in line or "cmpx" in line)
        with open(f"/proc/{process.pid}/status") as status:  # how it holds SIGINT (bit 2 of each mask)
            where += "\n" + " ".join(line.strip() for line in status if line.startswith(("SigBlk", "SigIgn", "SigCgt")))
        process.send_signal(signal.SIGABRT)  # PYTHONFAULTHANDLER: its threads' stacks, in what it printed
        printed, _ = process.communicate()
        raise AssertionError(f"the sweep did not stop within 30 s of Ctrl-C; it printed:\n{printed}\n"
                             f"processes then:\n{where}") from None
    assert process.returncode == 130, printed
    assert time.monotonic() - started < 10, printed
    assert "Interrupted: 1 of 4 cells have results" in printed
    wait_gone = time.monotonic() + 5
    while processes_marked(marker) and time.monotonic() < wait_gone:
        time.sleep(0.1)
    assert processes_marked(marker) == [], "a runner or a worker outlived the interrupted sweep"
    document = summary(out)
    assert document["interrupted"] and document["exit_code"] == 130
    assert verdicts(out) == {("zoo/conv.onnx", "ref"): "passed", ("zoo/conv.onnx", "hang"): "not run",
                             ("zoo/gather.onnx", "ref"): "not run", ("zoo/gather.onnx", "hang"): "not run"}

    sweep.write_text(sweep.read_text().replace("infer:hang", "none"))  # resume without the hang
    resumed = run_cli("sweep", sweep, "--out", out)
    no_runner_left()
    assert "1 kept from an earlier sweep, 3 to run" in resumed.output
    assert resumed.exit_code == 0, resumed.output


def test_a_sweep_whose_reader_goes_away_still_finishes_with_its_verdict(tmp_path):
    """``cmpx sweep ... | head -1``: the lines after the reader closed the pipe are dropped; every cell still runs,
    the summaries are written and the exit code is the sweep's (it was 1, a "mismatch", after a cell or two)."""
    sweep = write_zoo(tmp_path)
    out = tmp_path / "out"
    process = subprocess.Popen([sys.executable, "-m", "cmpx", "sweep", str(sweep), "--out", str(out)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)
    assert process.stdout.readline().startswith(b"cmpx sweep | ")
    process.stdout.close()  # as head -1 does
    errors = process.communicate(timeout=120)[1].decode()
    assert process.returncode == 1, errors
    assert "rror" not in errors, errors
    assert verdicts(out) == VERDICTS
    assert summary(out)["exit_code"] == 1 and (out / "junit.xml").is_file()


def test_a_run_of_one_backend_is_not_compared_not_passed(tmp_path, run_cli):
    """A golden run (one backend, its outputs saved) compares nothing: its cells say so, as cmpx run does (NOT
    COMPARED), in the lines, the summaries and a resumed sweep, and count as clean (exit 0), never as passed."""
    runs = ('[[runs]]\nname = "ref"\nargs = "--backend onnxrt --backend onnxref"\n'
            '[[runs]]\nname = "gold"\nargs = "--backend onnxrt --save-outputs gold/{model}.json"\n')
    sweep = write_zoo(tmp_path, runs, names=("conv",))
    out = tmp_path / "out"
    first = run_cli("sweep", sweep, "--out", out)
    assert first.exit_code == 0, first.output
    assert "zoo/conv.onnx | gold: not compared" in first.output
    assert "2 cells: 1 passed, 1 not compared | exit 0" in first.output
    assert verdicts(out) == {("zoo/conv.onnx", "ref"): "passed", ("zoo/conv.onnx", "gold"): "not compared"}
    assert "| zoo/conv.onnx | passed | not compared |" in (out / "summary.md").read_text()
    again = run_cli("sweep", sweep, "--out", out)
    assert "2 kept from an earlier sweep" in again.output and "1 passed, 1 not compared" in again.output
    assert verdicts(out)[("zoo/conv.onnx", "gold")] == "not compared"
    same = run_cli("sweep", "diff", out, out)
    assert same.exit_code == 0, same.output


def test_the_ray_executor_without_ray_names_the_extra(tmp_path):
    code = ("import sys; sys.modules['ray'] = None  # as if Ray were not installed\n"
            "from cmpx.cli.main import cli; cli.main(sys.argv[1:], prog_name='cmpx')")
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-c", code, "sweep", str(write_zoo(tmp_path, names=("conv",))), "--out",
                           str(out), "--executor", "ray"], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip() == "Error: --executor ray needs Ray: pip install 'cmpx[ray]'"
    assert not out.exists()  # nothing ran


def test_the_status_line_counts_cells_and_estimates_the_time_left():
    stream, lines = io.StringIO(), []
    progress = SweepProgress(4, lines.append, Progress(stream, enabled=True))
    progress.cell_started()
    progress.cell_started()
    pair = PairSummary("onnxrt", "onnxref", 1, 0, 1, 0, 1e-3, 2e-2, None)
    entry = CellEntry("zoo/conv.onnx", "fp16", ExitCode.MISMATCH, run_summary=RunSummary(1, (pair,)), seconds=1.5)
    progress.cell_finished(entry)
    assert lines == ["[1/4] zoo/conv.onnx | fp16: mismatch (abs 0.001, rel 0.02) (1.5 s)"]
    status = stream.getvalue().split("\r\x1b[2K")[-1]
    assert status.startswith("sweep: 1/4 cells done, 1 under way, 1 not passed | ") and "s left" in status
    progress.clear()
    assert stream.getvalue().endswith("\r\x1b[2K")
    quiet = io.StringIO()
    SweepProgress(1, lines.append, Progress(quiet, enabled=False)).cell_started()  # not a terminal: nothing
    assert quiet.getvalue() == ""
    failure = CellFailure("onnxrt failed during infer: shapes\nmore",
                          (FailureSummary("onnxrt", "infer", "error", "shapes\nmore"),))
    failed = CellEntry("zoo/conv.onnx", "x", ExitCode.BACKEND_FAILED, failure=failure, seconds=2.0)
    progress.cell_finished(failed)
    assert lines[-2:] == ["[2/4] zoo/conv.onnx | x: backend failed: onnxrt infer (2.0 s)",
                          "        onnxrt failed during infer: shapes"]  # its own line, never an escaped \n


def test_a_cell_asked_for_off_the_main_thread_runs_in_a_runner_process(tmp_path):
    # A Ray task runs on its worker's main thread (Ray 2.60, checked by the Ray tests); should one not, the cell
    # must not start workers from that thread (they would die with it): it runs in a runner process instead.
    model = modelgen.save(modelgen.conv_model(), tmp_path / "conv.onnx")
    task = {"model": model, "words": ["--backend", "onnxrt", "--backend", "onnxref"], "cwd": str(tmp_path),
            "plugins": [], "key": "conv"}
    outcome = {}
    thread = threading.Thread(target=lambda: outcome.update(run_cell_task(task).to_dict()))
    thread.start()
    thread.join(timeout=120)
    no_runner_left()
    assert outcome["exit_code"] == 0 and outcome["report"]["passed"], outcome.get("log")
    assert outcome["pid"] != os.getpid()  # it ran in another process


def _one_cell_sweep(tmp_path):
    model = modelgen.save(modelgen.conv_model(), tmp_path / "conv.onnx")
    sweep = tmp_path / "one.toml"
    sweep.write_text(f'models = ["{os.path.basename(model)}"]\n[[runs]]\nname = "ref"\n'
                     'args = ["--backend", "onnxrt", "--backend", "onnxref"]\n')
    return sweep


def test_an_out_directory_of_other_files_is_refused_and_links_at_the_results_names_are_not_followed(tmp_path,
                                                                                                   run_cli):
    """Issue #28, item 3: --out overwrote summary.md, summary.json, junit.xml in any directory, and wrote through
    symbolic links planted at its fixed '*.partial' names (a file outside the results was overwritten)."""
    sweep = _one_cell_sweep(tmp_path)
    foreign = tmp_path / "project"
    foreign.mkdir()
    (foreign / "summary.md").write_text("my own notes\n")
    refused = run_cli("sweep", sweep, "--out", foreign)
    assert refused.exit_code == 2, refused.output
    assert "a directory holding other files (summary.md), not a cmpx sweep's results" in refused.output
    assert (foreign / "summary.md").read_text() == "my own notes\n" and not (foreign / "cells").exists()
    forced = run_cli("sweep", sweep, "--out", foreign, "--force-out")
    assert forced.exit_code == 0, forced.output
    assert "| model | ref |" in (foreign / "summary.md").read_text()
    # links planted where an older cmpx wrote its temporaries, and at the results' own names
    out = tmp_path / "out"
    assert run_cli("sweep", sweep, "--out", out).exit_code == 0
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    for name in ("summary.md.partial", "junit.xml.partial", "summary.json.partial", "summary.md"):
        (out / name).unlink(missing_ok=True)
        os.symlink(victim, out / name)
    again = run_cli("sweep", sweep, "--out", out, "--rerun", "all")
    assert again.exit_code == 0, again.output
    assert victim.read_text() == "precious\n"
    assert not (out / "summary.md").is_symlink() and "| model | ref |" in (out / "summary.md").read_text()
    assert (out / ".cmpx-sweep").is_file()


def test_a_list_file_a_run_names_is_part_of_its_cells_inputs(tmp_path, run_cli):
    # the workflow of docs/precision.md: cmpx precision writes kept.txt, a sweep runs with --keep-fp32 @kept.txt;
    # when the list is written again, the cell must run again, not keep the verdict of the old list
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    big = numpy_helper.from_array(np.array([65504.0], np.float32), "big")
    graph = helper.make_graph([helper.make_node("Add", ["X", "big"], ["a"], name="add"),
                               helper.make_node("Sub", ["a", "big"], ["Y"], name="sub")], "x+65504-65504",
                              [helper.make_tensor_value_info("X", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [4])], [big])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "big.onnx"))
    (tmp_path / "kept.txt").write_text("# cmpx precision\nadd\nsub\n")
    sweep = tmp_path / "sweep.toml"
    sweep.write_text('models = ["big.onnx"]\n[[runs]]\nname = "fp16"\n'
                     'args = "--backend onnxref:fp16 --backend onnxref --val-range X:[1,2] --keep-fp32 @kept.txt"\n')
    out = tmp_path / "out"
    assert run_cli("sweep", sweep, "--out", out).exit_code == 0
    (tmp_path / "kept.txt").write_text("# cmpx precision\nadd\n")
    again = run_cli("sweep", sweep, "--out", out)
    assert again.exit_code == 1 and "0 kept from an earlier sweep, 1 to run" in again.output, again.output
    same = run_cli("sweep", sweep, "--out", out)  # the list unchanged since: kept
    assert same.exit_code == 1 and "1 kept from an earlier sweep, 0 to run" in same.output, same.output
