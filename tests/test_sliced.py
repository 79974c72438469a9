"""Sliced execution of marked runs (--memory-budget): the same statistics, verdicts and first divergence as an
unsliced run, tensors crossing a cut kept exactly as long as a later slice reads them, and memory bounded."""

import json
import re
import sys

import pytest

from cmpx.model.info import read_model
from cmpx.slicing.cuts import cut, group_nodes
from cmpx.slicing.planning import tensor_sizes, typed_index
from cmpx.testing import models as modelgen
from conftest import REPO, run_cmpx

UNSLICED = ("--memory-budget", "1TiB")
LIMIT = 300 << 20


def budget_for(model: str, slices: int, backends: int = 2) -> int:
    """The smallest --memory-budget (bytes) for which the planner cuts ``model`` (every tensor marked) into
    ``slices`` slices."""
    index = typed_index(model, read_model(model).inputs)
    sizes = tensor_sizes(index)
    returned = set(index.producer)
    for capacity in range(1, 1 << 20):
        if len(group_nodes(index, sizes, returned, capacity)) == slices:
            return capacity * backends
    raise AssertionError(f"no budget cuts {model} into {slices} slices")


def comparable(report: dict) -> dict:
    """What a sliced run must reproduce exactly: every per-iteration result and each pair's summary."""
    pairs = [{k: v for k, v in pair.items() if k != "local_error_seconds"} for pair in report["pairs"]]
    results = [record for record in report["results"] if record["kind"] == "pair"]  # -v adds value statistics
    return {"results": results, "pairs": pairs, "exit_code": report["exit_code"]}


# One test process runs this module: its module's runs are made once per test process.
pytestmark = pytest.mark.xdist_group("sliced")

@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    """A 13-layer chain whose layer 6 is perturbed, the base chain's mark-all outputs saved, and the unsliced
    comparison of the perturbed chain on two live backends with the saved run."""
    directory = tmp_path_factory.mktemp("chain")
    base = modelgen.save(modelgen.matmul_chain(layers=13, size=16), directory / "base.onnx")
    perturbed = modelgen.save(modelgen.matmul_chain(layers=13, size=16, perturb=6), directory / "perturbed.onnx")
    saved = run_cmpx("run", base, "--backend", "onnxrt", "--mark-all", "--save-outputs", directory / "golden")
    assert saved.returncode == 0, saved.stdout + saved.stderr
    whole = run_cmpx("run", perturbed, "--backend", "onnxrt", "--backend", "onnxref", "--mark-all", "--load-outputs",
                     directory / "golden", *UNSLICED, "--report-json", directory / "whole.json")
    assert whole.returncode == 1, whole.stdout + whole.stderr
    assert "sliced" not in whole.stdout
    return perturbed, directory, json.loads((directory / "whole.json").read_text())


@pytest.mark.parametrize("slices", [2, 3, 7])
def test_slicing_gives_the_statistics_verdicts_and_first_divergence_of_an_unsliced_run(run_cli, chain, tmp_path,
                                                                                       slices):
    perturbed, directory, whole = chain
    budget = budget_for(perturbed, slices)
    result = run_cli("run", perturbed, "--backend", "onnxrt", "--backend", "onnxref", "--mark-all", "--load-outputs",
                     directory / "golden", "--memory-budget", budget, "--report-json", tmp_path / "sliced.json", "-v")
    assert result.exit_code == 1, result.output
    assert re.search(rf"\| sliced: {slices} slices \(memory budget [0-9.]+ K?i?B; 3.2\d KiB unsliced\)\n", result.output)
    assert len(re.findall(r"\[iteration 0\] slice \d+/\d+ ran and was compared in [0-9.]+ s", result.output)) == slices
    sliced = json.loads((tmp_path / "sliced.json").read_text())
    assert comparable(sliced) == comparable(whole)
    assert [p["first_divergence"] and p["first_divergence"]["tensor"] for p in sliced["pairs"]] == [None, "mm6"]
    assert sliced["slicing"]["slices"] == slices and sliced["slicing"]["memory_budget"] == budget
    assert sliced["slicing"]["sliced_backends"] == ["onnxref", "onnxrt"]
    assert [s["slice"] for s in sliced["slices"]] == list(range(slices))
    assert whole["slicing"] is None and whole["slices"] == []


def test_the_planner_keeps_tensors_crossing_a_cut_until_their_last_reader(tmp_path):
    model = modelgen.save(modelgen.residual_block(), tmp_path / "residual.onnx")
    index = typed_index(model, read_model(model).inputs)
    sizes = tensor_sizes(index)
    assert set(sizes.values()) == {64}  # float32 [1, 16]
    returned = set(index.producer)
    # One node per slice: a (the residual) crosses into the next two slices, far into the last one.
    slices = cut(index, [[name] for name in ("a", "b", "c", "far", "d", "e", "f", "Y")], returned)
    assert [s.inputs for s in slices] == [(), ("a",), ("b", "a"), ("c",), ("c",), ("d",), ("e",), ("f", "far")]
    assert [set(s.freed) for s in slices] == [set(), set(), {"a", "b"}, set(), {"c"}, {"d"}, {"e"}, {"f", "far"}]
    assert [s.feeds for s in slices] == [("X",)] + [()] * 7
    # What a slice holds counts what waits for a later reader: far, alive until the last node, makes the
    # slices after it smaller. Live into node s: 1: a; 2: a, b; 3: c; 4: c, far; 5-7: far and one more.
    assert group_nodes(index, sizes, returned, 3 * 64) == [[0, 1, 2], [3, 4], [5], [6], [7]]
    # Cut there, a slice returns what a later one reads even when it is not compared.
    slices = cut(index, [["a", "b", "c"], ["far", "d"], ["e"], ["f"], ["Y"]], {"Y"})
    assert [s.outputs for s in slices] == [("c",), ("far", "d"), ("e",), ("f",), ("Y",)]
    assert [set(s.freed) for s in slices] == [set(), {"c"}, {"d"}, {"e"}, {"f", "far"}]


def test_a_residual_block_sliced_node_by_node_frees_each_crossing_tensor_after_its_last_reader(run_cli, tmp_path):
    model = modelgen.save(modelgen.residual_block(), tmp_path / "residual.onnx")
    common = (model, "--backend", "onnxrt", "--backend", "onnxref", "--mark-all", "--atol", "0", "--rtol", "0")
    whole = run_cli("run", *common, *UNSLICED, "--report-json", tmp_path / "whole.json")
    sliced = run_cli("run", *common, "--memory-budget", "1", "--report-json", tmp_path / "sliced.json")
    assert "sliced: 8 slices" in sliced.output and sliced.exit_code == whole.exit_code, sliced.output
    report = json.loads((tmp_path / "sliced.json").read_text())
    assert comparable(report) == comparable(json.loads((tmp_path / "whole.json").read_text()))
    freed = {record["slice"]: set(record["freed"]) for record in report["slices"]}
    assert freed == {0: set(), 1: set(), 2: {"a", "b"}, 3: set(), 4: {"c"}, 5: {"d"}, 6: {"e"}, 7: {"f", "far"}}


def test_a_backend_that_cannot_run_subgraphs_runs_whole_with_a_warning(run_cli, chain, tmp_path):
    perturbed, directory, _ = chain
    args = (perturbed, "--backend", "onnxrt", "--backend", "wholert", "--mark-all", "--report-json")
    whole = run_cli("run", *args, tmp_path / "whole.json", *UNSLICED, plugins=["cmpx_test_whole"])
    sliced = run_cli("run", *args, tmp_path / "sliced.json", "--memory-budget", budget_for(perturbed, 3),
                     plugins=["cmpx_test_whole"])
    assert sliced.exit_code == 0 == whole.exit_code, sliced.output
    assert "sliced: 3 slices" in sliced.output
    assert re.search(r"warning: wholert cannot run subgraphs: it runs the whole model and holds its [0-9.]+ KiB of "
                     r"marked tensors at once, over this run's memory budget", sliced.output)
    report = json.loads((tmp_path / "sliced.json").read_text())
    assert report["slicing"]["whole_backends"] == ["wholert"] and report["slicing"]["sliced_backends"] == ["onnxrt"]
    assert comparable(report) == comparable(json.loads((tmp_path / "whole.json").read_text()))
    assert report["results"][0]["outputs"][2]["name"] == "mm0" and len(report["results"][0]["outputs"]) == 27


@pytest.mark.parametrize("budget, problem", [("6 parsecs", "cannot read '6 parsecs'"), ("0MB", "less than one byte"),
                                             ("-1GiB", "cannot read '-1GiB'")])
def test_a_bad_memory_budget_is_a_usage_error(run_cli, models, budget, problem):
    result = run_cli("run", models.matmul_chain, "--backend", "onnxrt", "--mark-all", "--memory-budget", budget)
    assert result.exit_code == 2
    assert result.output.strip().count("\n") == 0 and problem in result.output and "6GiB" in result.output


def test_sizes_read_binary_and_decimal_units():
    from cmpx.options.argtypes import byte_size

    assert [byte_size("--memory-budget", text) for text in ("6GiB", "500MB", "1.5k", "2048", "1 MiB", "3gb")] == \
        [6 << 30, 500_000_000, 1500, 2048, 1 << 20, 3_000_000_000]


def test_the_python_api_takes_a_budget_in_bytes(tmp_path):
    import cmpx

    model = modelgen.save(modelgen.residual_block(), tmp_path / "residual.onnx")
    report = cmpx.run(model, ["onnxrt", "onnxref"], mark_all=True, memory_budget=1)
    assert report.exit_code == 0 and report.plan.slicing.count == 8


def test_a_run_that_its_memory_cannot_hold_unsliced_completes_sliced(tmp_path):
    """40 tensors of 4 MiB on two backends: 320 MiB of marked tensors, about 440 MiB for the whole run unsliced
    (measured: the processes take about 120 MiB); in a 300 MiB cgroup the unsliced run fails, and the default
    budget (half the cgroup's headroom when the run plans) slices it."""
    from cmpx.testing import memlimit

    problem = memlimit.unavailable()
    if problem:
        pytest.skip(problem)
    sys.path.insert(0, str(REPO / "bench"))
    from mark_all import chain_model

    model = modelgen.save(chain_model(40, 1 << 20), tmp_path / "chain.onnx")
    command = [sys.executable, "-m", "cmpx", "run", model, "--backend", "onnxrt", "--backend", "onnxrt", "--mark-all"]
    outcomes = {}
    for name, extra in (("unsliced", UNSLICED), ("sliced", ())):
        with memlimit.MemoryCgroup(LIMIT) as cgroup:
            done = cgroup.run([*command, *extra], capture_output=True, text=True, timeout=300, cwd=REPO)
            outcomes[name] = (done.returncode, done.stdout + done.stderr, cgroup.peak())
    assert outcomes["unsliced"][0] != 0, outcomes["unsliced"][1]
    code, output, peak = outcomes["sliced"]
    assert code == 0, output
    assert re.search(r"\| sliced: \d+ slices \(memory budget [0-9.]+ MiB \(default\); 320 MiB unsliced\)", output)
    assert "40/40 outputs passed" in output and "slice" not in outcomes["unsliced"][1]
    assert peak < LIMIT


def _sin_cos_chain(path) -> str:
    """x -> Sin -> Cos -> Sin -> Cos: ops ONNX Runtime's CPU provider has no float16 kernels for."""
    import onnx
    from onnx import TensorProto, helper

    names = ["x", "s1", "c1", "s2", "y"]
    nodes = [helper.make_node(op, [names[i]], [names[i + 1]], name=f"n{i}")
             for i, op in enumerate(["Sin", "Cos", "Sin", "Cos"])]
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4096])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4096])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    return str(path)


def test_onnx_runtime_skips_the_float16_rounding_of_a_tensor_read_within_its_session():
    """The fact behind the warning below (docs/per-layer.md): if ONNX Runtime ever rounds such a
    tensor when it is also an output, sliced and unsliced fp16 runs agree and the warning must go."""
    import numpy as np
    import onnxruntime
    from onnx import TensorProto, helper

    def session(nodes, inputs, outputs):
        value = lambda name: helper.make_tensor_value_info(name, TensorProto.FLOAT16, [512])  # noqa: E731
        graph = helper.make_graph(nodes, "g", [value(n) for n in inputs], [value(n) for n in outputs])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
        return onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])

    x = (np.random.default_rng(0).random(512) * 10).astype(np.float16)
    whole_y, whole_e = session([helper.make_node("Sin", ["x"], ["e"]), helper.make_node("Cos", ["e"], ["y"])],
                               ["x"], ["y", "e"]).run(None, {"x": x})
    first, = session([helper.make_node("Sin", ["x"], ["e"])], ["x"], ["e"]).run(None, {"x": x})
    second, = session([helper.make_node("Cos", ["e"], ["y"])], ["e"], ["y"]).run(None, {"e": first})
    assert np.array_equal(whole_e, first)  # the output e is rounded...
    assert not np.array_equal(whole_y, second)  # ...but Cos read it unrounded within the session
    assert np.array_equal(whole_y, np.cos(np.sin(x.astype(np.float32))).astype(np.float16))


def test_a_sliced_float16_run_warns_that_crossing_tensors_are_rounded_as_the_graph_says(run_cli, tmp_path):
    model = _sin_cos_chain(tmp_path / "chain.onnx")
    words = ["run", model, "--backend", "onnxrt:fp16", "--backend", "onnxrt", "--mark-all", "--atol", "1",
             "--report-json"]
    sliced = run_cli(*words, tmp_path / "sliced.json", "--memory-budget", budget_for(model, 4))
    assert sliced.exit_code == 0, sliced.output
    assert "onnxrt:fp16 run(s) a 16-bit float graph in slices: each tensor crossing a cut is rounded" in sliced.output
    whole = run_cli(*words, tmp_path / "whole.json", *UNSLICED)
    assert whole.exit_code == 0 and "16-bit float graph in slices" not in whole.output
    # what the warning says happens: the crossing tensors' float16 rounding changes later errors, not the first
    errors = {}
    for name in ("sliced", "whole"):
        report = json.loads((tmp_path / f"{name}.json").read_text())
        errors[name] = {o["name"]: o["metrics"][0]["data"]["abs"]["max"] for r in report["results"]
                        if r["kind"] == "pair" for o in r["outputs"]}
    assert errors["sliced"]["s1"] == errors["whole"]["s1"]
    assert errors["sliced"] != errors["whole"]
    # and float32 slices stay bit-identical to the unsliced run
    f32 = ["run", model, "--backend", "onnxrt", "--backend", "onnxref", "--mark-all", "--report-json"]
    assert run_cli(*f32, tmp_path / "a.json", "--memory-budget", budget_for(model, 4)).exit_code == 0
    assert run_cli(*f32, tmp_path / "b.json", *UNSLICED).exit_code == 0
    assert comparable(json.loads((tmp_path / "a.json").read_text())) == \
        comparable(json.loads((tmp_path / "b.json").read_text()))


def test_a_lone_constant_node_is_computed_in_the_slice_that_reads_it(run_cli, tmp_path):
    """Exporters write shapes as Constant nodes, whose outputs are never compared: a group of such nodes alone
    became a slice with no outputs, which no backend can load (ONNX Runtime: exit 3; found on a torch ViT)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes = [helper.make_node("Relu", ["X"], ["a"], name="relu"),
             helper.make_node("Constant", [], ["shape"], name="const",
                              value=numpy_helper.from_array(np.array([16, 16], np.int64))),
             helper.make_node("Reshape", ["a", "shape"], ["r"], name="reshape"),
             helper.make_node("Neg", ["r"], ["Y"], name="neg")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [256])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [16, 16])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "constant.onnx")
    result = run_cli("run", tmp_path / "constant.onnx", "--backend", "onnxrt", "--backend", "onnxref", "--mark-all",
                     "--memory-budget", "1100B", "--report-json", tmp_path / "r.json")
    assert result.exit_code == 0, result.output
    assert re.search(r"sliced: [2-9] slices", result.output), result.output
    slicing = json.loads((tmp_path / "r.json").read_text())["slicing"]
    assert all(slicing["tensors"]), slicing  # every slice computes something compared
