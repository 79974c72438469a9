"""Tolerances from the noise floor (issue #32, items 2 and 3): ``cmpx tolerances`` measures A against B on the
real exported architectures (tests/models/real) and writes a tolerance file; ``cmpx run --tolerances FILE`` reads
it, the command line winning. The proof that it is useful: a healthy model that fails Polygraphy's default 1e-5
passes at the measured tolerances on other seeds, while the same model with one weight mutated, or one op's result
perturbed, still fails them. Everything through the real CLI with real workers."""

import json
import math

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from cmpx.tolerances.noise_floor import EPSILON_32, RTOL_GRID, Measured, NaNOnBothSides, NotFinite, epsilon_floor, measure, pairs_of, \
    round_up, tolerances
from cmpx.tolerances.tolerance_file import read_tolerance_file
from conftest import REPO

REAL = REPO / "tests" / "models" / "real"
MODELS = ("bert", "gpt2", "vit", "cnn")
FP32 = ("--backend", "onnxrt", "--backend", "onnxref")
FP16 = ("--backend", "onnxrt:fp16", "--backend", "onnxrt")
OTHER_SEED = ("--seed", "1000")  # the tolerances were measured on seeds 1..32: these inputs are new to them


run_cmpx = None  # cmpx in this process (conftest's cmpx_here): dozens of runs of the real models, each its own Session


# One test process runs this module: each tolerance file is measured (32 iterations) once.
pytestmark = pytest.mark.xdist_group("tolerances")

@pytest.fixture(scope="module", autouse=True)
def _in_process(cmpx_here):
    global run_cmpx
    run_cmpx = cmpx_here


@pytest.fixture(scope="module")
def measured(tmp_path_factory, _in_process):
    """{(model, pair): tolerance file}, each measured once with the defaults (32 iterations from seed 1)."""
    root, files = tmp_path_factory.mktemp("tolerances"), {}

    def get(model: str, pair: tuple[str, ...]) -> str:
        key = (model, pair)
        if key not in files:
            path = root / f"{model}-{pair[1].replace(':', '-')}.toml"
            result = run_cmpx("tolerances", REAL / f"{model}.onnx", *pair, "-o", path, timeout=300)
            assert result.returncode == 0, result.stderr
            assert "32 iteration(s)" in path.read_text()
            files[key] = str(path)
        return files[key]

    return get


def _weighted(model: onnx.ModelProto) -> tuple[onnx.NodeProto, onnx.TensorProto]:
    """The first MatMul, Gemm or Conv whose weight is an initializer, and that weight."""
    weights = {w.name: w for w in model.graph.initializer if w.data_type == TensorProto.FLOAT and len(w.dims) >= 2}
    node = next(n for n in model.graph.node if n.op_type in ("MatMul", "Gemm", "Conv")
                and any(x in weights for x in n.input))
    return node, next(weights[x] for x in node.input if x in weights)


def mutate_weight(name: str, path) -> str:
    """The model with one weight mutated: the largest element of the first layer's weight, its sign flipped."""
    model = onnx.load(REAL / f"{name}.onnx")
    _, weight = _weighted(model)
    values = numpy_helper.to_array(weight).copy()
    index = np.unravel_index(np.argmax(np.abs(values)), values.shape)
    values[index] = -values[index]
    weight.CopyFrom(numpy_helper.from_array(values, weight.name))
    onnx.save(model, path)
    return str(path)


def perturb_op(name: str, path, delta: float) -> str:
    """The model with one op's result perturbed: the first layer's output times 1 +- delta, the sign fixed per
    channel (a pattern no normalisation after it can take out)."""
    model = onnx.load(REAL / f"{name}.onnx")
    node, weight = _weighted(model)
    if node.op_type == "Conv":
        shape = [weight.dims[0], 1, 1]
    elif node.op_type == "Gemm" and any(a.name == "transB" and a.i for a in node.attribute):
        shape = [weight.dims[0]]
    else:
        shape = [weight.dims[-1]]
    signs = np.random.RandomState(0).choice([-1.0, 1.0], size=shape).astype(np.float32)
    result = node.output[0]
    node.output[0] = f"{result}_unperturbed"
    model.graph.initializer.append(numpy_helper.from_array(1 + delta * signs, f"{result}_perturbation"))
    position = list(model.graph.node).index(node) + 1
    model.graph.node.insert(position, helper.make_node("Mul", [node.output[0], f"{result}_perturbation"],
                                                       [result], name=f"{node.name}_perturbed"))
    onnx.save(model, path)
    return str(path)


def run(model, *words, iterations: int = 8) -> int:
    result = run_cmpx("run", model, *words, *OTHER_SEED, "--iterations", str(iterations), "-q", timeout=300)
    assert result.returncode in (0, 1), result.stderr
    return result.returncode


# -- the proof -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", MODELS)
def test_a_healthy_model_failing_polygraphys_default_passes_at_the_measured_tolerances(name, measured):
    model = REAL / f"{name}.onnx"
    assert run(model, *FP16) == 1  # onnxrt:fp16 against onnxrt fails atol = rtol = 1e-5
    assert run(model, *FP16, "--tolerances", measured(name, FP16), iterations=32) == 0


# (reference, backend, the pair measured, model): fp32 on every model; fp16 on the two models whose first layer's
# sign flip exceeds fp16's far larger noise (in bert and gpt2 it stays within it: measured, not a test)
BROKEN_CASES = [("onnxref", "onnxrt", FP32, name) for name in MODELS] + \
    [("onnxrt", "onnxrt:fp16", FP16, name) for name in ("vit", "cnn")]


@pytest.mark.parametrize("reference, backend, pair, name", BROKEN_CASES,
                         ids=[f"{b}-{name}" for _, b, _, name in BROKEN_CASES])
def test_a_mutated_weight_or_a_perturbed_op_still_fails_the_measured_tolerances(reference, backend, pair, name,
                                                                                 measured, tmp_path):
    """The tolerances of ``backend`` against ``reference``; the broken models run on ``backend`` against the healthy
    model's outputs on ``reference`` (golden outputs), which the healthy model on ``backend`` passes."""
    tolerance = measured(name, pair)
    golden = tmp_path / "golden"
    assert run(REAL / f"{name}.onnx", "--backend", reference, "--save-outputs", golden, iterations=4) == 0
    against = ("--backend", backend, "--load-outputs", golden, "--tolerances", tolerance)
    assert run(REAL / f"{name}.onnx", *against, iterations=4) == 0
    assert run(mutate_weight(name, tmp_path / "weight.onnx"), *against, iterations=4) == 1
    assert run(perturb_op(name, tmp_path / "op.onnx", 0.1), *against, iterations=4) == 1


# -- the file and the command line ------------------------------------------------------------------------------


def test_the_file_says_the_method_and_the_numbers_and_every_measured_element_passes(measured):
    path = measured("bert", FP16)
    text = open(path).read()
    assert "A = onnxrt:fp16 measured against B = onnxrt, 32 iteration(s), seeds 1..32" in text
    assert "safety factor S = 4" in text and "docs/tolerances.md" in text
    entries = read_tolerance_file(path)
    assert set(entries) == {"last_hidden_state", "pooler_output"}
    for name, entry in entries.items():
        assert entry["check"] == "elemwise" and entry["atol"] > 1e-5  # fp16's noise is above the default
        section = text.split(f'[outputs."{name}"]')[1].split("[outputs.")[0]
        atol0 = float(section.split("atol0 ")[1].split(",")[0])
        assert entry["atol"] >= 4 * atol0 and "atol = 4 x" in section
    # the measured seeds themselves pass (each element by a factor of 4)
    assert run(REAL / "bert.onnx", *FP16, "--tolerances", path, "--seed", "1", iterations=32) == 0


def test_the_command_line_wins_over_the_file(measured, tmp_path):
    path, model = measured("cnn", FP16), REAL / "cnn.onnx"
    report = tmp_path / "report.json"
    result = run_cmpx("run", model, *FP16, "--tolerances", path, "--rtol", "logits:0.5", "--report-json", report)
    assert result.returncode == 0, result.stderr
    check = json.loads(report.read_text())
    criteria = json.dumps(check)
    atol = read_tolerance_file(path)["logits"]["atol"]
    assert f"atol {atol:g}, rtol 0.5" in criteria  # the file's atol, the command line's rtol for logits
    # a bare value is for every output: it drops the file's values of that option
    assert run(model, *FP16, "--tolerances", path, "--atol", "1e-9", "--rtol", "1e-9") == 1
    assert run(model, *FP16, "--tolerances", path, "--atol", "logits:1e-9", "--rtol", "logits:1e-9") == 1
    assert run(model, *FP16, "--tolerances", path) == 0


@pytest.mark.parametrize("text, says", [
    ("format = [", "invalid TOML"),
    ('format = "other"\nversion = 1\n[outputs.logits]\natol = 1\n', "not a tolerance file"),
    ('format = "cmpx-tolerances"\nversion = 1\n', "no [outputs"),
    ('format = "cmpx-tolerances"\nversion = 1\nextra = 2\n', "unknown key 'extra'"),
    ('format = "cmpx-tolerances"\nversion = 1\n[outputs.logits]\natol = -1\n', "outputs.\"logits\".atol"),
    ('format = "cmpx-tolerances"\nversion = 1\n[outputs.logits]\ncheck = "worst"\n', "not a check"),
    ('format = "cmpx-tolerances"\nversion = 1\n[outputs.logits]\nslack = 1\n', "unknown key 'slack'"),
    ('format = "cmpx-tolerances"\nversion = 1\n[outputs.logits]\natol = true\n', "is not a value"),
    ('format = "cmpx-tolerances"\nversion = 1\n[outputs.nope]\natol = 1\n', "'nope' is not one of the model outputs"),
])
def test_a_bad_tolerance_file_is_one_line_and_exit_2_before_any_inference(text, says, tmp_path, run_cli):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    result = run_cli("run", REAL / "cnn.onnx", *FP16, "--tolerances", path)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert lines[-1].startswith(f"Error: --tolerances {path}") and says in lines[-1], result.output
    assert "Traceback" not in result.output and "PASSED" not in result.output and "FAILED" not in result.output


def test_a_missing_tolerance_file_is_exit_2(tmp_path, run_cli):
    result = run_cli("run", REAL / "cnn.onnx", *FP16, "--tolerances", tmp_path / "none.toml")
    assert result.exit_code == 2 and "not found" in result.output and "Traceback" not in result.output


def test_a_sweep_run_takes_a_tolerance_file_relative_to_the_sweep_file(measured, tmp_path, run_cli):
    (tmp_path / "cnn.onnx").write_bytes((REAL / "cnn.onnx").read_bytes())
    (tmp_path / "fp16.toml").write_text(open(measured("cnn", FP16)).read())
    (tmp_path / "per-model").mkdir()
    (tmp_path / "per-model" / "cnn.toml").write_text(open(measured("cnn", FP16)).read())
    sweep = tmp_path / "sweep.toml"
    sweep.write_text('models = ["cnn.onnx"]\n'
                     '[[runs]]\nname = "measured"\nargs = "--backend onnxrt:fp16 --backend onnxrt --tolerances '
                     'fp16.toml --seed 1000 --iterations 8"\n'
                     '[[runs]]\nname = "per-model"\nargs = "--backend onnxrt:fp16 --backend onnxrt --tolerances '
                     'per-model/{model}.toml --seed 1000"\n'
                     '[[runs]]\nname = "default"\nargs = "--backend onnxrt:fp16 --backend onnxrt --seed 1000"\n')
    out = tmp_path / "out"
    result = run_cli("sweep", sweep, "--out", out, "--jobs", "1")
    assert result.exit_code == 1, result.output
    cells = {c["run"]: c["verdict"] for c in json.loads((out / "summary.json").read_text())["cells"]}
    assert cells == {"measured": "passed", "per-model": "passed", "default": "mismatch"}
    (tmp_path / "fp16.toml").write_text("format = [")  # a bad file stops the sweep before any cell
    result = run_cli("sweep", sweep, "--out", tmp_path / "out2")
    assert result.exit_code == 2 and "runs[0] 'measured': --tolerances" in result.output, result.output
    assert "invalid TOML" in result.output


@pytest.mark.parametrize("words, says", [
    (("--backend", "onnxrt"), "give exactly two (got 1)"),
    ((*FP16, "--atol", "1e-3"), "--atol is not an option of cmpx tolerances"),
    ((*FP16, "--check-error-stat", "logits:max"), "give one bare value"),
    ((*FP16, "--safety-factor", "0.5"), "--safety-factor 0.5: give a number of 1 or more"),
])
def test_the_tolerances_command_refuses_what_it_cannot_measure(words, says, tmp_path, run_cli):
    result = run_cli("tolerances", REAL / "cnn.onnx", *words, "-o", tmp_path / "t.toml")
    assert result.exit_code == 2 and says in result.output and "Traceback" not in result.output, result.output
    assert not (tmp_path / "t.toml").exists()


def test_the_file_says_where_the_measured_inputs_came_from(tmp_path, run_cli):
    """Measured on a data loader script's inputs, the header named seeds that fed nothing."""
    script = tmp_path / "feeds.py"
    script.write_text("import numpy as np\n"
                      "def load_data():\n"
                      "    for i in range(2):\n"
                      "        yield {'X': np.full((1, 3, 8, 8), 0.25 * i, np.float32)}\n")
    path = tmp_path / "t.toml"
    result = run_cli("tolerances", "examples/models/conv.onnx", "--backend", "onnxrt:fp16", "--backend", "onnxrt",
                     "--data-loader-script", script, "-o", path)
    assert result.exit_code == 0, result.output
    header = path.read_text()
    assert f"2 iteration(s), the inputs of {script}" in header and "seeds" not in header


def test_another_check_statistic_is_measured_and_applied(tmp_path, run_cli):
    path = tmp_path / "max.toml"
    result = run_cli("tolerances", REAL / "cnn.onnx", *FP16, "--check-error-stat", "mean", "--iterations", "8",
                     "-o", path)
    assert result.exit_code == 0, result.output
    entry = read_tolerance_file(str(path))["logits"]
    assert entry["check"] == "mean" and entry["atol"] > 0
    assert run_cli("run", REAL / "cnn.onnx", *FP16, "--tolerances", path, *OTHER_SEED).exit_code == 0


# -- the method, on arrays ----------------------------------------------------------------------------------------


def _pairs(*arrays):
    return pairs_of(lambda pair=pair: pair for pair in arrays)


def test_the_method_passes_every_element_and_picks_the_least_allowed_error():
    rng = np.random.RandomState(0)
    b = rng.normal(size=(4, 1000)).astype(np.float32)
    a = b * (1 + rng.uniform(-1e-3, 1e-3, b.shape)) + rng.uniform(-1e-5, 1e-5, b.shape)  # relative + absolute
    found = measure(_pairs(*zip(a, b)))
    e, m = np.abs(a.astype(np.float64) - b), np.abs(b.astype(np.float64))
    assert np.all((e <= found.atol) | (e <= found.rtol * m))
    assert found.rtol in RTOL_GRID and 5e-4 < found.rtol < 2e-3  # the relative part is what the errors are
    assert found.atol == e[e > found.rtol * m].max(initial=0.0)
    allowed = lambda r: np.maximum(e[e > r * m].max(initial=0.0), r * m).sum()  # noqa: E731
    assert all(allowed(found.rtol) <= allowed(r) for r in RTOL_GRID)
    assert found.iterations == 4 and found.elements == 4000


def test_the_floor_and_the_rounding_never_tighten():
    exact = np.ones(10, np.float32)
    found = measure(_pairs((exact, exact)))
    assert (found.atol, found.rtol) == (0.0, 0.0)
    atol, rtol = tolerances(found, epsilon_floor(found), 4.0)
    assert rtol >= 4 * EPSILON_32 and atol >= 4 * EPSILON_32  # one ulp of a value of 1, with the margin
    for value in (1e-7, 1.2e-5, 0.00392, 3.0, 123456.0):
        assert value <= round_up(value) <= value * 1.1
    assert tolerances(Measured(1e-3, 0.0), Measured(1e-2, 1e-6), 2.0) == (0.02, 2e-6)


def test_a_nan_against_a_number_is_no_tolerance():
    with pytest.raises(NotFinite):
        measure(_pairs((np.array([np.nan], np.float32), np.array([1.0], np.float32))))
    same = np.array([-np.inf, 1.0], np.float32)
    assert measure(_pairs((same, same))).atol == 0.0 and math.isfinite(measure(_pairs((same, same))).rtol)


def test_a_nan_on_both_sides_is_a_match_only_with_nan_equal():
    a, b = np.array([np.nan, 1.0, 2.0], np.float32), np.array([np.nan, 1.0, 2.5], np.float32)
    with pytest.raises(NaNOnBothSides):
        measure(_pairs((a, b)))
    found = measure(_pairs((a, b)), nan_equal=True)
    assert found.elements == 2 and found.max_abs == 0.5  # the NaN is left out, the rest measured
    with pytest.raises(NotFinite):  # a NaN against a number is still no tolerance
        measure(_pairs((a, np.array([1.0, 1.0, 2.5], np.float32))), nan_equal=True)


def test_the_tolerances_command_takes_nan_equal_as_cmpx_run_does(tmp_path, run_cli):
    """Log of negative inputs is NaN on both backends: refused without --nan-equal (saying to give it), measured
    around the NaNs with it, and the file passes a run with --nan-equal on new seeds."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])
    graph = helper.make_graph([helper.make_node("Log", ["x"], ["y"])], "log", [x],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])])
    model = tmp_path / "log.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), model)
    words = ("tolerances", model, *FP32, "--val-range", "x:[-1,1]", "--iterations", "4", "--floor", "ulp", "-o",
             tmp_path / "t.toml")
    refused = run_cli(*words)
    assert refused.exit_code == 2 and "both NaN" in refused.output and "--nan-equal" in refused.output, \
        refused.output
    measured = run_cli(*words, "--nan-equal")
    assert measured.exit_code == 0, measured.output
    assert "--nan-equal" in (tmp_path / "t.toml").read_text()
    run = ("run", model, *FP32, "--val-range", "x:[-1,1]", "--tolerances", tmp_path / "t.toml", *OTHER_SEED)
    assert run_cli(*run, "--nan-equal").exit_code == 0
    assert run_cli(*run).exit_code == 1  # the NaNs are still a mismatch without --nan-equal


@pytest.mark.parametrize("floor, says", [("oracle", "B's own error against the fp64 oracle onnxref:fp64"),
                                         ("ulp", "one float32 ulp")])
def test_backends_that_agree_exactly_get_the_floor_float32_cannot_beat(floor, says, tmp_path, run_cli):
    """onnxrt against itself differs by nothing: the tolerances are the floor's, times the safety factor."""
    path = tmp_path / "same.toml"
    result = run_cli("tolerances", REAL / "cnn.onnx", "--backend", "onnxrt", "--backend", "onnxrt", "--iterations",
                     "4", "--floor", floor, "-o", path)
    assert result.exit_code == 0, result.output
    text, entry = path.read_text(), read_tolerance_file(str(path))["logits"]
    assert says in text and "atol0 0, rtol0 0" in text
    floor_atol, floor_rtol = (float(x.split(" ")[-1]) for x in text.split("# floor: ")[1].split("\n")[0].split(", "))
    assert entry["atol"] == round_up(4 * floor_atol) > 0 and entry["rtol"] == round_up(4 * floor_rtol)
    if floor == "ulp":
        assert floor_rtol == pytest.approx(EPSILON_32, rel=1e-2)


def test_a_reduce_candidate_keeps_the_files_values_of_the_outputs_it_has(tmp_path):
    """cmpx reduce --tolerances FILE: each candidate's run takes the file's values as words, those of the outputs
    it computes, the command line's after them (a candidate lacks the model's other outputs)."""
    from cmpx.model.subgraph import GraphIndex
    from cmpx.reduce.candidates import Candidate, candidate_request
    from cmpx.options.request import RunRequest

    path = tmp_path / "t.toml"
    path.write_text('format = "cmpx-tolerances"\nversion = 1\n[outputs.a]\natol = 0.1\nrtol = 0.2\n'
                    '[outputs.b]\natol = 0.3\ncheck = "max"\n')
    request = RunRequest(model="m.onnx", backends=("onnxrt", "onnxref"), tolerances=str(path), atol=("b:0.5",))
    got = candidate_request(request, Candidate(1, [], [], ["b"], "c.onnx", "run"),
                            GraphIndex(None, [], [], graph_outputs=("a", "b")))
    assert got.tolerances is None
    assert (got.atol, got.rtol, got.check_error_stat) == (("b:0.3", "b:0.5"), (), ("b:max",))


def test_the_python_api_takes_a_tolerance_file_too(measured):
    import cmpx

    path = measured("cnn", FP16)
    report = cmpx.run(REAL / "cnn.onnx", ["onnxrt:fp16", "onnxrt"], tolerances=path, seed=1000, iterations=4)
    assert report.exit_code == cmpx.ExitCode.PASSED, report.text()
    assert cmpx.run(REAL / "cnn.onnx", ["onnxrt:fp16", "onnxrt"], seed=1000).exit_code == cmpx.ExitCode.MISMATCH


def test_the_file_written_replaces_only_a_tolerance_file(measured, tmp_path, run_cli):
    """-o overwrote any file silently (and took /dev/null, which --tolerances then refuses): it replaces only a
    tolerance file cmpx wrote, and says so before any inference."""
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me\n")
    for path in (precious, "/dev/null"):
        result = run_cli("tolerances", REAL / "cnn.onnx", *FP16, "--iterations", "2", "-o", path)
        assert result.exit_code == 2, result.output
        assert result.output.count("\n") == 1 and "-o " in result.output, result.output
    assert precious.read_text() == "keep me\n"
    again = tmp_path / "again.toml"
    again.write_text(open(measured("cnn", FP16)).read())
    result = run_cli("tolerances", REAL / "cnn.onnx", *FP16, "--iterations", "2", "--floor", "ulp", "-o", again)
    assert result.exit_code == 0, result.output
    assert "--floor ulp" in again.read_text()


def test_an_output_that_overflows_float32_gets_tolerances_over_the_oracle_floor(tmp_path, run_cli):
    """Exp of 50..100 overflows float32 on both backends alike; the fp64 oracle holds the exact (finite) value,
    which the floor took for B's error ('onnxrt and onnxref disagree on an infinity', though they agree): what
    float32 cannot hold is its infinity, not an error."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Exp", ["X"], ["Y"])], "g",
                              [helper.make_tensor_value_info("X", TensorProto.FLOAT, [64])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [64])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "exp.onnx")
    result = run_cli("tolerances", tmp_path / "exp.onnx", "--backend", "onnxrt", "--backend", "onnxref",
                     "--val-range", "X:[50,100]", "--iterations", "4", "-o", tmp_path / "exp.toml")
    assert result.exit_code == 0, result.output
    assert "floor: B's own error against the fp64 oracle" in (tmp_path / "exp.toml").read_text()
    assert run_cli("run", tmp_path / "exp.onnx", "--backend", "onnxrt", "--backend", "onnxref", "--val-range",
                   "X:[50,100]", "--tolerances", tmp_path / "exp.toml").exit_code == 0
