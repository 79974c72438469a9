"""cmpx in Jupyter (issue #30 item 10): a Report renders as HTML in a cell, gives its results as records, shows
its progress in the cell without echo=print; and Ctrl-C in a run's first seconds raises RunInterrupted with a
report, as later ones do. The notebook is executed by a real kernel (nbclient, ipykernel: the test extra)."""

import json
import os
import signal
import sys

import pytest

import cmpx
from cmpx.testing.leaks import settled, worker_processes
from conftest import PLUGIN_DIR, REPO

EXAMPLE = str(REPO / "examples" / "models" / "conv.onnx")
SLOW = {"plugins": ["cmpx_test_faulty"], "faulty_fault": "infer:sleep"}  # each inference of faulty takes a second


def test_a_report_in_a_notebook(tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat", reason="the notebook test needs nbformat (the test extra)")
    nbclient = pytest.importorskip("nbclient", reason="the notebook test needs nbclient (the test extra)")
    pytest.importorskip("ipykernel", reason="the notebook test needs ipykernel (the test extra)")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(PLUGIN_DIR), os.environ.get("PYTHONPATH")])))
    cells = [
        # every display the cell shows, as the kernel publishes it (the progress line is one, updated in place)
        "import json, cmpx\nshown = []\nshell = get_ipython()\npublish = shell.display_pub.publish\n"
        "def kept(data, *args, **kwargs):\n    shown.append(data.get('text/plain'))\n"
        "    return publish(data, *args, **kwargs)\nshell.display_pub.publish = kept",
        f"report = cmpx.run({EXAMPLE!r}, ['onnxrt', 'faulty'], iterations=3, plugins=['cmpx_test_faulty'], "
        "faulty_fault='infer:sleep')",
        "print(json.dumps(shown))",
        "report",
        "rows = report.records()\nprint(json.dumps([len(rows), sorted(rows[0]), rows[0]['output'], rows[0]['passed']]))",
    ]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in cells])
    nbclient.NotebookClient(notebook, timeout=180, kernel_name="python3", resources={"metadata": {"path": REPO}}
                            ).execute()
    outputs = [cell.outputs for cell in notebook.cells]
    shown = json.loads(outputs[2][0]["text"])
    assert any(line and line.startswith("iteration 1 (2/3): faulty") and "elapsed" in line for line in shown), shown
    final = outputs[1][0]["data"]["text/plain"]  # the progress display, ended with the verdict
    assert final == "PASSED | 3 iteration(s) | exit 0", outputs[1]
    rendered = outputs[3][0]["data"]["text/html"]
    assert rendered.startswith('<div class="cmpx-report"><p><b style="color:#1a7f37">PASSED</b> | 1 pair(s) over 3 '
                               "iteration(s) | exit 0</p><table>"), rendered
    assert "<td>onnxrt " in rendered and "3/3 iterations passed (100%)" in rendered
    assert json.loads(outputs[4][0]["text"]) == [6, ["backend", "elements", "failed", "iteration", "max_abs",
                                                     "max_rel", "metrics", "note", "output", "passed", "reference"],
                                                 "Y", True]


def test_the_html_of_a_report_names_its_verdict_first_divergence_and_failures(models):
    failing = cmpx.run(models.matmul_chain, ["onnxrt:fp16", "onnxrt"], mark_all=True)
    html = failing._repr_html_()
    assert '<b style="color:#cf222e">FAILED (mismatch)</b>' in html
    assert "first divergence: <code>mm0</code> (MatMul_0, MatMul): max abs" in html
    alone = cmpx.run(EXAMPLE, ["onnxrt"])._repr_html_()
    assert '<b style="color:#9a6700">NOT COMPARED</b> | 1 iteration(s) of onnxrt described | exit 0' in alone
    broken = cmpx.run(EXAMPLE, ["onnxrt", "faulty"], plugins=["cmpx_test_faulty"], faulty_fault="load:raise")
    assert "<p>faulty failed during load: RuntimeError: injected failure during load</p>" in broken._repr_html_()
    rows = failing.records()
    assert {row["output"] for row in rows if not row["passed"]} >= {"Y", "mm0"}
    try:
        import pandas  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match=r"needs pandas \(pip install pandas\); Report.records\(\)"):
            failing.to_pandas()
    else:
        frame = failing.to_pandas()
        assert len(frame) == len(rows) and list(frame.columns) == list(rows[0])


@pytest.mark.parametrize("delay", [0.001, 0.02, 0.1, 0.4, 1.5])
def test_ctrl_c_in_the_first_seconds_raises_run_interrupted_with_a_report(delay, monkeypatch):
    """Before: a bare KeyboardInterrupt from the plugin loading, the checks or the workers' start. Each delay lands
    somewhere in a run of 3 slow iterations (a real SIGINT, sent by a timer's signal, armed once cmpx.run is
    entered: armed before the call, on a busy machine it fired in this test's own code, and a KeyboardInterrupt
    there ends the whole test process); each raises RunInterrupted, leaving no worker."""
    from cmpx import api

    run, interrupted = cmpx.run, cmpx.RunInterrupted  # imported now (lazy attributes), not while the timer runs
    inner = api._run

    def armed(*args, **kwargs):  # called inside run's handling of Ctrl-C
        signal.setitimer(signal.ITIMER_REAL, delay)
        return inner(*args, **kwargs)

    monkeypatch.setattr(api, "_run", armed)
    before = signal.signal(signal.SIGALRM, lambda *_: os.kill(os.getpid(), signal.SIGINT))
    swallowed: list[BaseException] = []  # CPython ignores an exception raised inside a finalizer (__del__)
    hook = sys.unraisablehook
    sys.unraisablehook = lambda unraisable: swallowed.append(unraisable.exc_value)
    try:
        try:
            run(EXAMPLE, ["onnxrt", "faulty"], iterations=3, **SLOW)
        except interrupted as exc:
            raised = exc
        else:
            if any(isinstance(exc, KeyboardInterrupt) for exc in swallowed):
                pytest.xfail("the SIGINT came while a finalizer (__del__) ran, where CPython swallows the "
                             "KeyboardInterrupt: no program sees that Ctrl-C")
            pytest.fail("the run finished: the interrupt did not raise RunInterrupted")
    except KeyboardInterrupt:  # not in cmpx.run: a failure of this test, not the end of the test process
        pytest.fail("the SIGINT came after cmpx.run had returned: the run was faster than the delay")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)
        sys.unraisablehook = hook
    report = raised.report
    assert report is not None and report.interrupted and report.exit_code == cmpx.ExitCode.INTERRUPTED
    assert report.verdict == "INTERRUPTED" and "Summary (interrupted: what finished)" in report.text()
    assert settled(worker_processes) == []  # a worker killed with its group is gone a moment later, not at once
