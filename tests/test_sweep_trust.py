"""What a sweep's results can be trusted for (issue 31, items 4-6), on the local executor: a cell checks where it
runs that it has the fingerprinted model, frameworks and cmpx; it computes with its run's threads, recorded with
the host; its fingerprint holds the plugins, the threads and the frameworks' versions; model files of the same
content run once. The two-node Ray case is tests/test_sweep_nodes.py."""

import json
import os
import shutil
import socket

from cmpx.errors import ExitCode
from cmpx.sweep.cell import run_cell
from cmpx.sweep.matrix import cells, check_runs, model_digest
from cmpx.sweep.node_check import node_problem
from cmpx.sweep.same_inputs import same_inputs
from cmpx.sweep.sweepfile import read_sweep_file
from cmpx.sweep.threads import THREAD_VARIABLES, thread_settings
from cmpx.testing import models as modelgen

from sweep_zoo import THREAD_PROBE, summary, write_zoo



def _cell_json(out, key):
    return json.loads((out / "cells" / key / "cell.json").read_text())


def test_model_files_of_the_same_content_run_once_with_the_runs_thread_settings(tmp_path, run_cli):
    sweep = write_zoo(tmp_path, names=("conv",), runs="""
[[runs]]
name = "two"
args = "--backend onnxrt --backend onnxref --data-loader-script probe.py"
threads = 2

[[runs]]
name = "one"
args = "--backend onnxrt --backend onnxref --data-loader-script probe.py"
""")
    (tmp_path / "probe.py").write_text(THREAD_PROBE)
    (tmp_path / "copy").mkdir()
    shutil.copy(tmp_path / "zoo" / "conv.onnx", tmp_path / "copy" / "conv.onnx")
    sweep.write_text(sweep.read_text().replace('models = ["zoo/*.onnx"]', 'models = ["zoo/*.onnx", "copy/*.onnx"]'))
    out = tmp_path / "out"
    done = run_cli("sweep", sweep, "--out", out, "--jobs", "2")
    assert done.exit_code == 0, done.output
    assert ("4 cells | 0 kept from an earlier sweep, 2 to run (2 more take the result of a model file of the same "
            "content)") in done.output
    # each run ran once, its cell's process (whose workers inherit them) with the run's threads: 2 as given, and
    # 1 by default (the CPU a cell reserves), however many CPUs the machine has
    assert sorted((tmp_path / "seen.txt").read_text().splitlines()) == ["1 1 1", "2 2 2"]
    entries = {(c["model"], c["run"]): c for c in summary(out)["cells"]}
    assert len(entries) == 4 and all(c["verdict"] == "passed" for c in entries.values())
    for run, threads in (("two", 2), ("one", 1)):
        ran, took = entries["zoo/conv.onnx", run], entries["copy/conv.onnx", run]
        assert (ran["same_as"], took["same_as"]) == (None, "zoo/conv.onnx")  # whose result, said clearly
        assert ran["threads"] == took["threads"] == threads and ran["host"] == socket.gethostname()
        record = _cell_json(out, f"copy__conv.onnx--{run}")
        assert (record["same_as"], record["threads"], record["model_path"]) == (
            "zoo/conv.onnx", threads, str(tmp_path / "copy" / "conv.onnx"))
        assert (out / took["report"]).is_file()

    # a third path of the same content takes the kept result: nothing runs
    (tmp_path / "more").mkdir()
    shutil.copy(tmp_path / "zoo" / "conv.onnx", tmp_path / "more" / "conv.onnx")
    sweep.write_text(sweep.read_text().replace('"copy/*.onnx"]', '"copy/*.onnx", "more/*.onnx"]'))
    again = run_cli("sweep", sweep, "--out", out)
    assert again.exit_code == 0 and "6 cells | 6 kept from an earlier sweep, 0 to run |" in again.output
    assert len((tmp_path / "seen.txt").read_text().splitlines()) == 2
    assert _cell_json(out, "more__conv.onnx--two")["same_as"] == "zoo/conv.onnx"


def test_models_of_the_same_bytes_with_external_weights_are_not_taken_for_one_another(tmp_path):
    # Two checkpoints of one architecture, exported with external weights: the same .onnx bytes, other weights.
    for seed, folder in ((0, "a"), (1, "b")):
        (tmp_path / "zoo" / folder).mkdir(parents=True)
        modelgen.save_with_external_data(modelgen.conv_model(seed=seed), tmp_path / "zoo" / folder)
    (tmp_path / "copy").mkdir()
    modelgen.save(modelgen.conv_model(), tmp_path / "copy" / "one.onnx")
    shutil.copy(tmp_path / "copy" / "one.onnx", tmp_path / "copy" / "two.onnx")
    sweep = tmp_path / "sweep.toml"
    sweep.write_text('models = ["zoo/*/model.onnx", "copy/*.onnx"]\n'
                     '[[runs]]\nname = "ref"\nargs = "--backend onnxrt"\n')
    read = read_sweep_file(str(sweep))
    matrix = cells(read, check_runs(read))
    fingerprints = {cell.key: cell.fingerprint(model_digest(cell.model), read.base) for cell in matrix}
    a, b, one, two = matrix
    assert fingerprints[a.key] == fingerprints[b.key]  # the weights are not part of it (docs/sweep.md says so)
    assert [[cell.label for cell in group] for group in same_inputs(matrix, fingerprints)] == [
        ["zoo/a/model.onnx"], ["zoo/b/model.onnx"], ["copy/one.onnx", "copy/two.onnx"]]


def test_a_resumed_sweep_runs_again_what_other_plugins_or_framework_versions_gave(tmp_path, run_cli):
    sweep = write_zoo(tmp_path, names=("conv",), runs='[[runs]]\nname = "ref"\nargs = "--backend onnxrt '
                                                      '--backend onnxref"\n')
    out = tmp_path / "out"
    assert run_cli("sweep", sweep, "--out", out).exit_code == 0
    fingerprint = _cell_json(out, "zoo__conv.onnx--ref")["fingerprint"]
    assert fingerprint["plugins"] == [] and fingerprint["threads"] == 1
    assert fingerprint["frameworks"]["onnxrt"][0] == "onnxruntime" and fingerprint["frameworks"]["onnxref"][0] == "onnx"

    plugged = run_cli("sweep", sweep, "--out", out, "-p", "cmpx_test_faulty")  # the sweep's own -p
    assert plugged.exit_code == 0 and "0 kept from an earlier sweep, 1 to run" in plugged.output
    assert _cell_json(out, "zoo__conv.onnx--ref")["fingerprint"]["plugins"] == ["cmpx_test_faulty"]
    same = run_cli("sweep", sweep, "--out", out, "-p", "cmpx_test_faulty")
    assert same.exit_code == 0 and "1 kept from an earlier sweep, 0 to run" in same.output

    # a result an earlier onnxruntime gave (its record says so) is not this one's
    path = out / "cells" / "zoo__conv.onnx--ref" / "cell.json"
    record = json.loads(path.read_text())
    record["fingerprint"]["frameworks"]["onnxrt"][1] = "1.0.0"
    path.write_text(json.dumps(record))
    (out / "index.jsonl").unlink()  # resume reads the index first; without it, the cells' own files
    upgraded = run_cli("sweep", sweep, "--out", out, "-p", "cmpx_test_faulty")
    assert upgraded.exit_code == 0 and "0 kept from an earlier sweep, 1 to run" in upgraded.output


def test_a_cell_checks_where_it_runs_that_it_has_what_was_fingerprinted(tmp_path):
    sweep_file = read_sweep_file(str(write_zoo(tmp_path, names=("conv",), runs='[[runs]]\nname = "ref"\nargs = '
                                               '"--backend onnxrt --backend onnxref"\n')))
    cell, = cells(sweep_file, check_runs(sweep_file))
    model, host, here = cell.model, socket.gethostname(), os.getcwd()
    task = cell.task(sweep_file.base, model_digest(model))

    def failure(**changed):
        outcome = run_cell(dict(task, **changed))
        assert outcome.exit_code == ExitCode.USAGE and outcome.report is None and outcome.threads is None
        assert os.getcwd() == here
        return outcome.failure

    assert failure(model_sha256="0" * 64).startswith(
        f"model file {model} on {host} is not the one the sweep fingerprinted (SHA-256 {task['model_sha256'][:16]}"
        "... there, 0000000000000000... where cmpx sweep runs): cmpx sweep assumes every node sees the sweep's "
        "files at the same path (a shared file system), with the same content")
    assert failure(model=str(tmp_path / "gone.onnx")) == (
        f"model file {tmp_path / 'gone.onnx'} not found on {host}: cmpx sweep assumes every node sees the sweep's "
        "files at the same path (a shared file system)")
    older = dict(task["frameworks"], onnxrt=["onnxruntime", "1.0.0"])
    assert failure(frameworks=older).startswith(f"{host} has onnxruntime {task['frameworks']['onnxrt'][1]} for "
                                                "backend onnxrt, the sweep fingerprinted onnxruntime 1.0.0")
    missing = dict(task["framework_names"], onnxrt=["onnxruntime-nowhere"])
    assert failure(framework_names=missing).startswith(f"{host} has no onnxruntime-nowhere for backend onnxrt, the "
                                                       "sweep fingerprinted onnxruntime")
    # the same version of another of the backend's distributions (onnxruntime-gpu where the sweep ran) is fine
    gpu = dict(task["frameworks"], onnxrt=["onnxruntime-gpu", task["frameworks"]["onnxrt"][1]])
    assert node_problem(dict(task, frameworks=gpu), host) is None
    assert failure(cmpx_version="0.0.1").startswith(f"{host} has cmpx {task['cmpx_version']}, the sweep "
                                                    "fingerprinted cmpx 0.0.1")


def test_thread_settings_hold_for_the_cell_and_onnx_runtime_takes_them(tmp_path, monkeypatch):
    from cmpx_onnxrt.backend import OnnxrtBackend

    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    with thread_settings(3):
        assert [os.environ[name] for name in THREAD_VARIABLES] == ["3", "3", "3"]
        backend = OnnxrtBackend()
        backend.load(modelgen.save(modelgen.conv_model(), tmp_path / "conv.onnx"))
    assert os.environ["OMP_NUM_THREADS"] == "7" and "MKL_NUM_THREADS" not in os.environ  # as they were
    assert backend.session.get_session_options().intra_op_num_threads == 3
