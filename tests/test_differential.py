"""Issue 26, items 10 and 11: what cmpx's workers return through shared memory is, bit for bit, what each
framework's own API returns for the same model and feeds (InferenceSession.run, ReferenceEvaluator.run), and a
backend compared with itself (--backend X --backend X) differs by exactly 0.

Over ONNX's operator test cases (onnx.backend.test.case.node) on kept workers: in CI a stratified sample, the
cheapest case of every operator the framework runs; with CMPX_TEST_ALL_NODE_CASES=1 every case (bench/README.md,
"Differential self-check", has the counts; bench/differential.py writes them). Through whole cmpx runs: a sample
covering every dtype, 0-d, empty, NaN and infinity trait of the cases ONNX Runtime runs, and the types numpy lacks
on the reference evaluator, saved and read back in every format cmpx writes and reads; and every model of tests/models/real, unmarked, with --mark-all and sliced. OpenVINO's part is in
examples/plugins/cmpx-openvino/tests/test_differential_openvino.py.
"""

import numpy as np
import pytest

from cmpx.structured import Structured
from cmpx.testing import node_cases
from cmpx.testing.differential import NodeCaseCheck
from cmpx.testing.framework_api import PythonNumber, difference, leaves, rebuilt
from cmpx.testing.through_runs import check_model, check_saved_formats
from conftest import REPO

FULL = node_cases.every_case_wanted()
CORPUS = ["cnn", "bert", "gpt2", "vit", "skl_pipeline", "external/model"]
SLICED, SLICED_FULL = ("cnn", "gpt2"), ("cnn", "bert", "gpt2", "vit", "external/model")  # skl_pipeline: 5 nodes
# What the sample covers at least, here (onnx 1.23, onnxruntime 1.32): cases found identical, operators among them
SAMPLE_FLOOR = {"onnxrt": (150, 170), "onnxref": (170, 185)}
FULL_FLOOR = {"onnxrt": (1500, 175), "onnxref": (1800, 190)}
# sliced against unsliced at ONNX Runtime's "extended" level: at "all" they differ (the xfail at the end)
SLICE_OPTIONS = {"onnxrt": {"onnxrt_optimization": "extended"}}


# One test process runs both differential modules: ONNX collects its node test cases (~11 s) once per process.
pytestmark = pytest.mark.xdist_group("onnx-node-cases")

@pytest.fixture(scope="module")
def cases():
    return node_cases.collect()


def test_the_comparison_is_bitwise():
    x = np.array([1.0, np.nan, -0.0], np.float32)
    assert difference(x, x.copy()) is None
    assert difference(x, np.array([1.0, np.nan, 0.0], np.float32)) == \
        "the tensor: 1 of 3 elements differ, first at flat index 2: np.float32(-0.0) vs np.float32(0.0)"
    quiet = x.copy()
    quiet.view(np.uint32)[1] ^= 1  # another NaN payload
    assert "1 of 3 elements differ, first at flat index 1" in difference(x, quiet)
    assert difference(x, np.nextafter(x, 2)).startswith("the tensor: 2 of 3")  # one ULP (NaN stays NaN)
    assert difference(x, x.astype(np.float64)) == "the tensor: dtype float32 vs float64"
    assert difference(x, x.reshape(1, 3)) == "the tensor: shape [3] vs [1, 3]"
    assert difference([x, {2: x}], [x, {2: x}]) is None
    assert difference([x, {2: x}], [x, {3: x}]).startswith("structure differs")
    assert difference([], []) is None and difference(None, None) is None
    assert difference([0.25], [np.array(0.25, np.float32)]) is None  # a Python float, exactly a float32 value
    assert difference([0.1], [np.array(0.1, np.float32)]) == "[0]: 0.1 vs np.float32(0.1)"
    assert [type(leaf) for _, leaf in leaves({"p": 1.0})] == [PythonNumber]


def test_a_structure_is_rebuilt_from_its_skeleton():
    value = rebuilt(Structured(["seq", [["t", [2]], ["map*", [3, 5], ["t", []]], ["none"]]],
                               np.arange(4, dtype=np.int64)))
    assert difference([np.array([0, 1]), {3: np.array(2), 5: np.array(3)}, None], value) is None


def test_the_check_reports_bytes_another_framework_computes_otherwise(cases, tmp_path, no_leaks):
    # ONNX Runtime's Exp is not numpy's in the last bit: against the reference evaluator's API it is a defect
    case = next(c for c in cases if c.name == "test_exp")
    with NodeCaseCheck("onnxrt", str(tmp_path / "same")) as same:
        assert same.check(case) == "identical"
    with NodeCaseCheck("onnxrt", str(tmp_path / "other"), reference="onnxref") as other:
        outcome = other.check(case)
    assert outcome.startswith("defect: ") and "elements differ, first at flat index" in outcome, outcome
    assert "onnxrt: y: " in outcome and "onnxrt#2: y: " in outcome
    assert (other.tally.run, other.tally.identical, list(other.tally.defects)) == (1, 0, ["test_exp"])


@pytest.mark.parametrize("backend", ["onnxrt", "onnxref"])
def test_node_cases_on_the_workers_are_the_frameworks_bits(backend, cases, tmp_path, no_leaks):
    with NodeCaseCheck(backend, str(tmp_path)) as check:
        chosen = cases if FULL else node_cases.stratified(cases, check.usable)
        for case in chosen:
            check.check(case)
    tally = check.tally
    assert tally.defects == {}, tally.defects  # both workers (X and X#2) returned the framework's bytes
    least_cases, least_operators = (FULL_FLOOR if FULL else SAMPLE_FLOOR)[backend]
    assert tally.identical >= least_cases and len(tally.operators) >= least_operators, tally.counts()
    assert tally.identical + tally.skipped_count == len(chosen)
    assert check.workers.replaced == 0  # no worker died on the way


def test_node_cases_through_whole_runs_and_every_saved_format(cases, tmp_path, no_leaks, fork_servers):
    """One case per trait (each dtype of inputs and outputs, 0-d, empty, NaN, infinities, no inputs), through
    --load-inputs and --save-outputs in every format, on ONNX Runtime twice (cmpx.testing.through_runs)."""
    checked = {}
    with NodeCaseCheck("onnxrt", str(tmp_path / "plain")) as check:
        chosen = node_cases.stratified(cases, check.usable, tries=40, strata=lambda case: case.traits)
        for case in chosen:
            model, data = node_cases.write_case(case, str(tmp_path / case.name / "case"))
            checked[case.name] = check_saved_formats("onnxrt", model, data, case.inputs, check.plain(case),
                                                     str(tmp_path / case.name), fork_servers=fork_servers)
    assert {name: problems for name, problems in checked.items() if problems} == {}
    traits = {trait for case in chosen for trait in case.traits}
    assert len(chosen) >= 15 and {"in:float16", "out:bool", "in:0-d", "out:empty", "out:float8_e4m3fn",
                                  "in:uint64"} <= traits, sorted(traits)


# Types numpy lacks, which ONNX Runtime's Python API does not take: through the reference evaluator. int4, float4
# and int2 are packed below a byte in a TensorProto (cmpx read them as damaged test data before: now fixed)
EXTENSION_CASES = ["test_celu_bfloat16", "test_cast_INT4_to_INT8", "test_cast_FLOAT16_to_FLOAT4E2M1",
                   "test_cast_UINT2_to_UINT8", "test_dequantizelinear_e4m3fn_float16"]


def test_types_numpy_lacks_through_whole_runs_and_every_saved_format(cases, tmp_path, no_leaks, fork_servers):
    by_name = {case.name: case for case in cases}
    checked = {}
    with NodeCaseCheck("onnxref", str(tmp_path / "plain")) as check:
        for name in EXTENSION_CASES:
            case = by_name[name]
            model, data = node_cases.write_case(case, str(tmp_path / name / "case"))
            checked[name] = check_saved_formats("onnxref", model, data, case.inputs, check.plain(case),
                                                str(tmp_path / name), fork_servers=fork_servers)
    assert checked == dict.fromkeys(EXTENSION_CASES, [])
    traits = {trait for name in EXTENSION_CASES for trait in by_name[name].traits}
    assert {"in:bfloat16", "out:bfloat16", "in:int4", "out:float4_e2m1fn", "in:uint2", "in:float8_e4m3fn"} <= traits


@pytest.mark.parametrize("backend", ["onnxrt", "onnxref"])
@pytest.mark.parametrize("name", CORPUS)
def test_the_corpus_unmarked_marked_and_sliced(backend, name, tmp_path, no_leaks, fork_servers):
    model = str(REPO / "tests" / "models" / "real" / f"{name}.onnx")
    sliced = name in (SLICED_FULL if FULL else SLICED)
    problems, counts = check_model(backend, model, str(tmp_path), sliced=sliced,
                                   slice_options=SLICE_OPTIONS.get(backend), fork_servers=fork_servers)
    assert problems == []
    assert counts["outputs"] == 2 if name in ("bert", "vit", "skl_pipeline") else 1
    assert counts["marked"] >= (2 if name == "skl_pipeline" else 90), counts
    assert counts["slices"] >= 2 if sliced else counts["slices"] == 0


def test_memory_budget_slices_a_dynamic_model_fed_from_saved_inputs(tmp_path, no_leaks):
    """Saved (or scripted) data leaves the model's dynamic dimensions open until the first feed: the slicing plan
    sizes the marked tensors from that feed's shapes (it counted them as 0 bytes, and never sliced)."""
    import cmpx

    model = str(REPO / "tests" / "models" / "real" / "cnn.onnx")
    cmpx.run(model, ["onnxrt"], save_inputs=tmp_path / "inputs")  # input [batch,3,32,32] made [1,3,32,32]
    synthetic = cmpx.run(model, ["onnxrt"], mark_all=True, memory_budget="64KB")
    assert synthetic.plan.slicing is not None and synthetic.plan.slicing.count == 6
    loaded = cmpx.run(model, ["onnxrt"], mark_all=True, memory_budget="64KB", load_inputs=tmp_path / "inputs")
    assert loaded.plan.slicing is not None and loaded.plan.slicing.count == 6


@pytest.mark.xfail(strict=False, reason="cmpx limitation, not fixed: ONNX Runtime's level-'all' optimizations (the "
                   "NCHWc layout of Conv/BatchNormalization chains) compute a node otherwise when a slice starts at "
                   "it, so a sliced --mark-all run differs from the unsliced one in the last bits (here 6 tensors, "
                   "from the first BatchNormalization after a cut); identical at 'extended' and on the other "
                   "backends. CPU-dependent, hence not strict")
def test_a_sliced_run_on_onnx_runtime_at_level_all_is_the_unsliced_run(tmp_path, no_leaks):
    import cmpx
    from cmpx.testing.through_runs import EXACT, differences, saved_iteration

    model = str(REPO / "tests" / "models" / "real" / "cnn.onnx")
    runs = {}
    for name, budget in (("whole", {}), ("sliced", {"memory_budget": 65674})):
        report = cmpx.run(model, ["onnxrt"], mark_all=True, input_shapes={"input": [1, 3, 32, 32]},
                          save_outputs=tmp_path / name, **budget, **EXACT)
        runs[name] = saved_iteration(str(tmp_path / name))["onnxrt"]
    assert report.plan.slicing.count == 6
    assert differences(runs["whole"], runs["sliced"], "sliced") == []


def test_polygraphy_json_inputs_of_a_model_without_inputs_keep_their_iterations(tmp_path, no_leaks):
    # Found by the saved-format round trips (test_constant): the file was "[]", and reading it back refused it
    import json

    import cmpx
    import onnx
    from onnx import TensorProto, helper

    value = helper.make_tensor("v", TensorProto.FLOAT, [2], [1.0, 2.0])
    graph = helper.make_graph([helper.make_node("Constant", [], ["y"], value=value)], "constant", [],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = tmp_path / "constant.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), model)
    saved = cmpx.run(model, ["onnxrt"], iterations=2, save_inputs=tmp_path / "inputs.json")
    assert saved.passed and json.loads((tmp_path / "inputs.json").read_text()) == [{}, {}]
    again = cmpx.run(model, ["onnxrt", "onnxrt"], load_inputs=tmp_path / "inputs.json", atol=0, rtol=0)
    assert again.passed and again.iterations == 2 and again.tallies[0].worst_abs == 0


def test_packed_test_data_is_read_and_a_truncated_one_still_refused(tmp_path):
    import ml_dtypes
    import onnx
    from onnx import numpy_helper

    from cmpx.saved.npy import SavedDataError
    from cmpx.saved.onnx_testdata import read_tensor_proto

    values = np.array([-8, -1, 0, 3, 7], dtype=ml_dtypes.int4)
    proto = numpy_helper.from_array(values, "x")
    assert len(proto.raw_data) == 3  # five 4-bit values in three bytes
    onnx.save_tensor(proto, tmp_path / "whole.pb")
    assert difference(values, read_tensor_proto(str(tmp_path / "whole.pb"))[1]) is None
    proto.raw_data = proto.raw_data[:2]
    onnx.save_tensor(proto, tmp_path / "cut.pb")
    with pytest.raises(SavedDataError, match=r"declares 5 elements \(3 bytes\) but its data holds 2 bytes"):
        read_tensor_proto(str(tmp_path / "cut.pb"))
