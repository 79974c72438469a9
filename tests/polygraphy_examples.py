"""Polygraphy's own CLI examples, rebuilt so that both tools run them (issue #29): every command line of TensorRT's
``tools/Polygraphy/examples/cli/run/*/README.md`` and ``examples/cli/debug/*/README.md`` that runs without a GPU,
as ``polygraphy`` runs it here and as ``cmpx run`` takes it, with the verdict the example expects.

The examples' models are not used: each is an equivalent graph built here with ``onnx.helper`` (same input and
output names, dtypes, shapes and ops), and their helper scripts are equivalents written for this test:

- ``identity.onnx`` (run 02, 03, 06; debug 01): ``x`` float32 [1,1,2,2] -> Identity -> ``y``.
- ``dynamic_identity.onnx`` (run 01, 05): ``X`` float32 [1,2,height,width] -> Identity -> ``intermediate`` ->
  Identity -> ``Y`` (run 05's model has one Identity; the second changes nothing there).
- ``add_infinity.onnx`` (run 07): ``A`` float32 [1] + ``inf`` (an initializer that is also a graph input, holding
  +inf) -> Add -> ``B``.
- ``needs_constraints.onnx`` (run 08): ``x`` float32 [1,1,256,256] -> MatMul(rot90 of the identity) -> Add 65504
  -> Sub 65504 -> MatMul(rot90 of the identity) -> ``matmul_out_3``.
- ``folded.onnx`` (debug 02, ``model.onnx`` after ``surgeon sanitize``): ``x0``, ``x1`` float32 [1,3,224,224];
  Mul(a, x1) -> ``mul_out``, Add(mul_out, b) -> ``add_out``, Add(x0, add_out) -> ``Y`` (a, b: constant tensors).
- ``data_loader.py`` (run 05): ``load_data()`` yields 5 feeds of ones [1,2,28,28] named ``x`` (the example's name,
  for an input named ``X``); run as a script it saves them to ``custom_inputs.json`` with Polygraphy's
  ``save_json``. ``generate_data.py`` (run 06): ones [1,1,2,2] as ``custom_inputs.json`` and, with Polygraphy's
  ``RunResults``, the same values as output ``y`` of runner ``custom_runner`` in ``custom_outputs.json``.

Stand-ins: where an example runs ``--trt --onnxrt``, both tools run ``--onnxrt --onnxrt`` here (Polygraphy has no
other CPU runner), the same words for both, except that cmpx compares two frameworks (``--onnxrt --onnxref``) on
run 01's first line, the example's point (importing onnx.reference costs a second or more, so only there). A
``--trt`` run against saved outputs (run 06; the ``--check`` commands of debug 01 and 02) runs ``--onnxrt`` on the
ONNX model. TensorRT-only options (``--trt-outputs``, ``--trt-min/opt/max-shapes``) go with ``--trt``: cmpx
refuses them without a trt backend, Polygraphy ignores them. Files one tool saves are read by the other (``swap``).
Each step's ``note`` says what differs from the example's line.

Not runnable here, and why:

- run 01 ``polygraphy run dynamic_identity.onnx --trt --fp16 --onnxrt --input-shapes X:[1,2,4,4]``: TensorRT's fp16
  builder flag; Polygraphy has no reduced-precision CPU runner to compare with. (Its ``--atol 0.001 --rtol 0.001
  --check-error-stat median`` variant runs, without ``--fp16``: the point there is the tolerances.)
- run 01 ``--fail-fast`` ("to find the first mismatched output more easily", in the text, no command line): it
  changes nothing on a run that passes, which every live run of these models is.
- run 02 ``polygraphy convert identity.onnx -o identity.engine`` and ``polygraphy run --trt identity.engine
  --model-type=engine --load-inputs inputs.json --load-outputs run_0_outputs.json``: TensorRT engines.
- run 04 (``polygraphy template trt-network/trt-config``, ``polygraphy run --trt define_network.py
  --model-type=trt-network-script [--trt-config-script=create_config.py]``): TensorRT network and builder-config
  scripts in TensorRT's Python API; cmpx refuses both with what it does instead (tests/test_polygraphy_workflows.py).
- run 06 ``polygraphy inspect data custom_inputs.json`` / ``custom_outputs.json``: no ``run`` command (cmpx names
  ``inspect`` as Polygraphy's, tests/test_polygraphy_workflows.py).
- run 08 ``--trt --fp16 --onnxrt --val-range x:[1,2] --layer-precisions Add:float16 Sub:float32
  --precision-constraints prefer --check-error-stat median``, the ``--trt-network-postprocess-script
  ./add_constraints.py`` and ``constrained_network.py --precision-constraints obey|prefer`` runs: TensorRT fp16
  engines with per-layer precision constraints; Polygraphy has no CPU equivalent. cmpx's own answer
  (``--backend onnxref:fp16`` fails, ``--keep-fp32 Add Sub`` passes) is tested in tests/test_wrong_results.py. The
  golden run before them runs here.
- debug 01 ``polygraphy debug build identity.onnx --fp16 --save-tactics replay.json ... --check polygraphy run
  polygraphy_debug.engine --trt --load-outputs golden.json`` and ``polygraphy inspect diff-tactics --dir replays``:
  TensorRT builds and tactic replays. Its ``--check`` command runs here, on the ONNX model with ONNX Runtime.
- debug 02 ``polygraphy surgeon sanitize model.onnx -o folded.onnx --fold-constants --override-input-shapes ...``:
  no ``run`` command; the model built here is already static and folded. ``polygraphy debug reduce folded.onnx
  ... --check polygraphy run polygraphy_debug.onnx --trt ...`` (bisect, then linear): TensorRT, and cmpx's
  counterpart is ``cmpx reduce`` with another interface (measured against ``debug reduce`` in bench/reduce.py). Its
  ``--check`` command runs here on candidate subgraphs as ``debug reduce`` writes them to ``polygraphy_debug.onnx``,
  one of them computing its Mul wrongly (the example's simulated failure "whenever there's a Mul"; the example
  simulates it with ``--fail-regex "Op: Mul" --check polygraphy inspect model``, which only Polygraphy has).
  ``polygraphy data to-input`` (Polygraphy 0.53: ``data merge``) runs for both workspaces, as Polygraphy's tool.
- debug 02 ``polygraphy inspect model initial_reduced.onnx --show layers``: no ``run`` command.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET, IR_VERSION = 17, 8  # the oldest IR version opset 17 allows, as cmpx's other test models


def _model(nodes, inputs, outputs, initializers=(), name="example") -> onnx.ModelProto:
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
    onnx.checker.check_model(model)
    return model


def _float(name: str, shape) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def identity_model() -> onnx.ModelProto:
    return _model([helper.make_node("Identity", ["x"], ["y"])], [_float("x", [1, 1, 2, 2])],
                  [_float("y", [1, 1, 2, 2])], name="identity")


def dynamic_identity_model() -> onnx.ModelProto:
    shape = [1, 2, "height", "width"]
    return _model([helper.make_node("Identity", ["X"], ["intermediate"]),
                   helper.make_node("Identity", ["intermediate"], ["Y"])], [_float("X", shape)], [_float("Y", shape)],
                  name="dynamic_identity")


def add_infinity_model() -> onnx.ModelProto:
    infinity = numpy_helper.from_array(np.array([np.inf], np.float32), "inf")
    return _model([helper.make_node("Add", ["A", "inf"], ["B"])], [_float("A", [1]), _float("inf", [1])],
                  [_float("B", [1])], [infinity], name="add_infinity")


def needs_constraints_model(size: int = 256) -> onnx.ModelProto:
    flip = numpy_helper.from_array(np.rot90(np.eye(size, dtype=np.float32)).copy().reshape(1, 1, size, size),
                                   "I_rot90")
    fp16_max = numpy_helper.from_array(np.full((1, 1, 1, 1), 65504, np.float32), "fp16_max")
    return _model([helper.make_node("MatMul", ["x", "I_rot90"], ["matmul_out_0"]),
                   helper.make_node("Add", ["matmul_out_0", "fp16_max"], ["add_out_1"]),
                   helper.make_node("Sub", ["add_out_1", "fp16_max"], ["sub_out_2"]),
                   helper.make_node("MatMul", ["sub_out_2", "I_rot90"], ["matmul_out_3"])],
                  [_float("x", [1, 1, size, size])], [_float("matmul_out_3", [1, 1, size, size])], [flip, fp16_max],
                  name="needs_constraints")


REDUCE_SHAPE = [1, 3, 224, 224]


def _reduce_constants(mul_error: float = 0.0) -> dict[str, onnx.TensorProto]:
    rng = np.random.default_rng(29)
    a, b = (rng.random(REDUCE_SHAPE, dtype=np.float32) for _ in range(2))
    return {"a": numpy_helper.from_array(a * np.float32(1 + mul_error), "a"), "b": numpy_helper.from_array(b, "b")}


_REDUCE_NODES = {"mul": helper.make_node("Mul", ["a", "x1"], ["mul_out"]),
                 "add": helper.make_node("Add", ["mul_out", "b"], ["add_out"]),
                 "sum": helper.make_node("Add", ["x0", "add_out"], ["Y"])}


def reduce_model(nodes=("mul", "add", "sum"), inputs=("x0", "x1"), outputs=("Y",),
                 mul_error: float = 0.0) -> onnx.ModelProto:
    """Debug 02's model, or one of the subgraphs ``debug reduce`` checks (``mul_error``: a Mul computed that much
    off, as a faulty backend would)."""
    constants = _reduce_constants(mul_error)
    used = {name for key in nodes for name in _REDUCE_NODES[key].input}
    return _model([_REDUCE_NODES[key] for key in nodes], [_float(n, REDUCE_SHAPE) for n in inputs],
                  [_float(n, REDUCE_SHAPE) for n in outputs], [constants[n] for n in sorted(used & set(constants))],
                  name="reduce")


REDUCE_CANDIDATES: dict[str, Callable[[], onnx.ModelProto]] = {  # as debug reduce writes them
    "tail": lambda: reduce_model(("add", "sum"), ("x0", "mul_out")),
    "mul_only": lambda: reduce_model(("mul",), ("x1",), ("mul_out",)),
    "faulty_mul": lambda: reduce_model(("mul",), ("x1",), ("mul_out",), mul_error=1e-3),
}

DATA_LOADER = '''\
"""Run 05's data loader, as the example describes it: 5 feeds of ones named 'x'; as a script, saves them."""
import numpy as np

SHAPE = (1, 2, 28, 28)


def load_data():
    for _ in range(5):
        yield {"x": np.ones(SHAPE, dtype=np.float32)}


if __name__ == "__main__":
    from polygraphy.json import save_json

    save_json(list(load_data()), "custom_inputs.json", description="custom input data")
'''

GENERATE_DATA = '''\
"""Run 06's data made outside Polygraphy's run: inputs of ones, and the identity's outputs as a RunResults."""
import numpy as np
from polygraphy.comparator import RunResults
from polygraphy.json import save_json

feed = {"x": np.ones((1, 1, 2, 2), dtype=np.float32)}
save_json([feed], "custom_inputs.json", description="custom input data")
results = RunResults()
results.add([{"y": feed["x"].copy()}], runner_name="custom_runner")
results.save("custom_outputs.json")
'''

CMPX_SCRIPT = '''\
"""What 'cmpx run identity.onnx --onnxrt --onnxrt' does, through cmpx's Python API (cmpx's answer to
--gen-script): a starting point to edit."""
import sys

import cmpx

report = cmpx.run("identity.onnx", ["onnxrt", "onnxrt"], echo=print)
sys.exit(int(report.exit_code))
'''


def write_model(model: onnx.ModelProto, path: Path) -> None:
    onnx.save(model, str(path))


def perturb_outputs(source: Path, target: Path, delta: float) -> None:
    """``target``: the saved outputs of ``source`` with ``delta`` added to the first element of every output of the
    first iteration (Polygraphy's RunResults, read and written with Polygraphy)."""
    from polygraphy.comparator import RunResults

    results = RunResults.load(str(source))
    for _, iterations in results.items():
        for name in list(iterations[0].keys()):
            values = np.array(iterations[0][name], copy=True)
            values.flat[0] += delta
            iterations[0][name] = values
    results.save(str(target))


def saved_arrays(path: Path) -> list[dict[str, np.ndarray]]:
    """The arrays of a saved Polygraphy JSON file, iteration by iteration: an inputs list, or the only runner's
    outputs of a RunResults."""
    from polygraphy.comparator import RunResults
    from polygraphy.json import load_json

    document = load_json(str(path))
    if isinstance(document, RunResults):
        (iterations,) = [its for _, its in document.items()]
        return [{name: np.asarray(it[name]) for name in it.keys()} for it in iterations]
    return [dict(feed) for feed in document]


@dataclass(frozen=True)
class Step:
    """One command line of an example, for both tools. ``example``: the line as the example writes it;
    ``polygraphy`` and ``cmpx``: what runs here (in a workspace of each tool's own); ``expect``: the exit status
    the example expects (0 passes, 1 fails), ``cmpx_expect`` where cmpx answers otherwise on purpose."""

    id: str
    example: str
    polygraphy: str
    cmpx: str
    expect: int = 0
    cmpx_expect: int | None = None
    note: str = ""
    polygraphy_says: tuple[str, ...] = ()
    cmpx_says: tuple[str, ...] = ()
    same_data: tuple[str, ...] = ()  # files both tools wrote that must hold the same arrays
    swap: tuple[str, ...] = ()  # files exchanged after the step: each tool reads on what the other wrote
    prepare: Callable[[Path], None] | None = None  # run in both workspaces before the commands
    xfail: str = ""


@dataclass(frozen=True)
class Workflow:
    """One example: the files it starts from, and its command lines in order (a step may read what an earlier one
    wrote)."""

    name: str
    files: Callable[[Path], None]
    steps: tuple[Step, ...] = field(default_factory=tuple)
    independent: bool = False  # no step reads what another wrote


def _files(models: dict[str, Callable[[], onnx.ModelProto]], scripts: dict[str, str] | None = None
           ) -> Callable[[Path], None]:
    """Writes the example's models (by file stem) and scripts (by file name) into a workspace."""

    def write(directory: Path) -> None:
        for stem, build in models.items():
            write_model(build(), directory / f"{stem}.onnx")
        for filename, text in (scripts or {}).items():
            (directory / filename).write_text(text)

    return write


def _candidate(name: str) -> Callable[[Path], None]:
    def prepare(directory: Path) -> None:
        write_model(REDUCE_CANDIDATES[name](), directory / "polygraphy_debug.onnx")

    return prepare


def _perturbed(directory: Path) -> None:
    perturb_outputs(directory / "run_0_outputs.json", directory / "perturbed_outputs.json", 0.5)


DYN = "dynamic_identity.onnx"
ONE_PASS = ("Passed: 1/1 iterations",)

WORKFLOWS: tuple[Workflow, ...] = (
    Workflow("run01_comparing_frameworks", _files({"dynamic_identity": dynamic_identity_model}), independent=True,
             steps=(
        Step("run01-trt-onnxrt", "polygraphy run dynamic_identity.onnx --trt --onnxrt",
             f"polygraphy run {DYN} --onnxrt --onnxrt", f"cmpx run {DYN} --onnxrt --onnxref",
             note="--trt: a second CPU runner (cmpx: a second framework); the dynamic dims get a size, with a "
                  "warning naming X",
             polygraphy_says=("Input tensor: X", "Will generate data of shape: [1, 2, 1, 1]"),
             cmpx_says=("warning: input X has dynamic shape [1,2,height,width]; using [1, 2, ",)),
        Step("run01-input-shapes", "polygraphy run dynamic_identity.onnx --trt --onnxrt --input-shapes X:[1,2,4,4]",
             f"polygraphy run {DYN} --onnxrt --onnxrt --input-shapes X:[1,2,4,4]",
             f"cmpx run {DYN} --onnxrt --onnxrt --input-shapes X:[1,2,4,4]",
             polygraphy_says=("shape=(1, 2, 4, 4)",), cmpx_says=("32 element(s) compared",)),
        Step("run01-tolerances-median",
             "polygraphy run dynamic_identity.onnx --trt --fp16 --onnxrt --input-shapes X:[1,2,4,4] "
             "--atol 0.001 --rtol 0.001 --check-error-stat median",
             f"polygraphy run {DYN} --onnxrt --onnxrt --input-shapes X:[1,2,4,4] --atol 0.001 --rtol 0.001 "
             "--check-error-stat median",
             f"cmpx run {DYN} --onnxrt --onnxrt --input-shapes X:[1,2,4,4] --atol 0.001 --rtol 0.001 "
             "--check-error-stat median",
             note="without --fp16 (TensorRT's); the tolerances and the statistic are the point",
             polygraphy_says=("Checking median error",), cmpx_says=("[median: atol 0.001, rtol 0.001]",)),
        Step("run01-mark-all", "polygraphy run dynamic_identity.onnx --trt --onnxrt --trt-outputs mark all "
             "--onnx-outputs mark all",
             f"polygraphy run {DYN} --onnxrt --onnxrt --onnx-outputs mark all",
             f"cmpx run {DYN} --onnxrt --onnxrt --onnx-outputs mark all -v",
             note="--trt-outputs goes with --trt; -v lists each passing tensor (by default they are counted)", polygraphy_says=("Comparing Output: 'intermediate'",),
             cmpx_says=("PASSED  intermediate:", "2 output(s)")),
    )),
    Workflow("run02_comparing_across_runs", _files({"identity": identity_model}), (
        Step("run02-save", "polygraphy run identity.onnx --onnxrt --save-inputs inputs.json --save-outputs "
             "run_0_outputs.json",
             "polygraphy run identity.onnx --onnxrt --save-inputs inputs.json --save-outputs run_0_outputs.json",
             "cmpx run identity.onnx --onnxrt --save-inputs inputs.json --save-outputs run_0_outputs.json",
             same_data=("inputs.json", "run_0_outputs.json"), swap=("inputs.json", "run_0_outputs.json")),
        Step("run02-load", "polygraphy run identity.onnx --onnxrt --load-inputs inputs.json --load-outputs "
             "run_0_outputs.json",
             "polygraphy run identity.onnx --onnxrt --load-inputs inputs.json --load-outputs run_0_outputs.json",
             "cmpx run identity.onnx --onnxrt --load-inputs inputs.json --load-outputs run_0_outputs.json",
             note="each tool reads the files the other wrote", polygraphy_says=ONE_PASS,
             cmpx_says=("1 comparison(s) over 1 iteration(s), 1 output(s), 4 element(s) compared",)),
        Step("run02-load-median", "polygraphy run identity.onnx --onnxrt --load-inputs inputs.json --load-outputs "
             "run_0_outputs.json --atol 0.001 --rtol 0.001 --check-error-stat median",
             "polygraphy run identity.onnx --onnxrt --load-inputs inputs.json --load-outputs run_0_outputs.json "
             "--atol 0.001 --rtol 0.001 --check-error-stat median",
             "cmpx run identity.onnx --onnxrt --load-inputs inputs.json --load-outputs run_0_outputs.json "
             "--atol 0.001 --rtol 0.001 --check-error-stat median", polygraphy_says=ONE_PASS),
        Step("run02-load-perturbed", "(not in the example) run02-load against outputs with one element 0.5 off",
             "polygraphy run identity.onnx --onnxrt --load-inputs inputs.json --load-outputs perturbed_outputs.json",
             "cmpx run identity.onnx --onnxrt --load-inputs inputs.json --load-outputs perturbed_outputs.json",
             expect=1, prepare=_perturbed, note="elemwise: the one element fails the output",
             polygraphy_says=("Passed: 0/1 iterations",), cmpx_says=("FAILED (mismatch)",)),
        Step("run02-load-median-perturbed", "(not in the example) run02-load-median against those outputs",
             "polygraphy run identity.onnx --onnxrt --load-inputs inputs.json --load-outputs perturbed_outputs.json "
             "--atol 0.001 --rtol 0.001 --check-error-stat median",
             "cmpx run identity.onnx --onnxrt --load-inputs inputs.json --load-outputs perturbed_outputs.json "
             "--atol 0.001 --rtol 0.001 --check-error-stat median",
             note="median: one element of four off leaves the median error 0, so it passes",
             polygraphy_says=ONE_PASS),
    )),
    Workflow("run03_generating_a_comparison_script",
             _files({"identity": identity_model}, {"compare_cmpx.py": CMPX_SCRIPT}), (
        Step("run03-gen-script", "polygraphy run identity.onnx --trt --onnxrt --gen-script=compare_trt_onnxrt.py",
             "polygraphy run identity.onnx --onnxrt --onnxrt --gen-script=compare_trt_onnxrt.py",
             "cmpx run identity.onnx --onnxrt --onnxrt --gen-script=compare_trt_onnxrt.py", cmpx_expect=2,
             note="on purpose: cmpx generates no script and names its Python API instead",
             cmpx_says=("--gen-script is a Polygraphy option that cmpx does not have", "cmpx.run(...)")),
        Step("run03-run-script", "python3 compare_trt_onnxrt.py", "python3 compare_trt_onnxrt.py",
             "python3 compare_cmpx.py", note="cmpx's side: the same run through cmpx.run(), as its error advises",
             polygraphy_says=ONE_PASS, cmpx_says=("PASSED | 1 comparison(s)",)),
    )),
    Workflow("run05_comparing_with_custom_input_data",
             _files({"dynamic_identity": dynamic_identity_model}, {"data_loader.py": DATA_LOADER}), (
        Step("run05-data-loader-script", "polygraphy run dynamic_identity.onnx --trt --onnxrt --trt-min-shapes "
             "X:[1,2,28,28] --trt-opt-shapes X:[1,2,28,28] --trt-max-shapes X:[1,2,28,28] --data-loader-script "
             "data_loader.py",
             f"polygraphy run {DYN} --onnxrt --onnxrt --data-loader-script data_loader.py",
             f"cmpx run {DYN} --onnxrt --onnxrt --data-loader-script data_loader.py --input-map X=x",
             note="the example feeds 'x' to input 'X': Polygraphy pairs them by position, cmpx by name only (on "
                  "purpose; docs/polygraphy.md, 'What differs on purpose'), so --input-map X=x says it; "
                  "--trt-*-shapes go with --trt",
             polygraphy_says=("Passed: 5/5 iterations",), cmpx_says=("5 comparison(s) over 5 iteration(s)",)),
        Step("run05-save-custom-inputs", "python3 data_loader.py", "python3 data_loader.py",
             "python3 data_loader.py"),
        Step("run05-load-inputs", "polygraphy run dynamic_identity.onnx --trt --onnxrt --trt-min-shapes "
             "X:[1,2,28,28] --trt-opt-shapes X:[1,2,28,28] --trt-max-shapes X:[1,2,28,28] --load-inputs "
             "custom_inputs.json",
             f"polygraphy run {DYN} --onnxrt --onnxrt --load-inputs custom_inputs.json",
             f"cmpx run {DYN} --onnxrt --onnxrt --load-inputs custom_inputs.json --input-map X=x",
             note="as run05-data-loader-script", polygraphy_says=("Passed: 5/5 iterations",),
             cmpx_says=("5 comparison(s) over 5 iteration(s)",)),
    )),
    Workflow("run06_comparing_with_custom_output_data",
             _files({"identity": identity_model}, {"generate_data.py": GENERATE_DATA}), (
        Step("run06-generate-data", "python3 generate_data.py", "python3 generate_data.py",
             "python3 generate_data.py"),
        Step("run06-load-custom-outputs", "polygraphy run identity.onnx --trt --load-inputs custom_inputs.json "
             "--load-outputs custom_outputs.json",
             "polygraphy run identity.onnx --onnxrt --load-inputs custom_inputs.json --load-outputs "
             "custom_outputs.json",
             "cmpx run identity.onnx --onnxrt --load-inputs custom_inputs.json --load-outputs custom_outputs.json",
             note="--trt: ONNX Runtime", polygraphy_says=("vs. custom_runner | Passed: 1/1 iterations",),
             cmpx_says=("onnxrt vs custom_runner@custom_outputs: 1/1 iterations passed",)),
    )),
    Workflow("run07_checking_nan_inf", _files({"add_infinity": add_infinity_model}), (
        Step("run07-validate", "polygraphy run add_infinity.onnx --onnx-outputs mark all --onnxrt --validate",
             "polygraphy run add_infinity.onnx --onnx-outputs mark all --onnxrt --validate",
             "cmpx run add_infinity.onnx --onnx-outputs mark all --onnxrt --validate", expect=1,
             note="as written; the example expects the failure (XFAIL)",
             polygraphy_says=("Inf Detected", "Errors detected in output: B"),
             cmpx_says=("INVALID onnxrt output B has 0 NaN and 1 Inf",)),
    )),
    Workflow("run08_adding_precision_constraints", _files({"needs_constraints": needs_constraints_model}), (
        Step("run08-golden", "polygraphy run needs_constraints.onnx --onnxrt --val-range x:[1,2] --save-inputs "
             "inputs.json --save-outputs golden_outputs.json",
             "polygraphy run needs_constraints.onnx --onnxrt --val-range x:[1,2] --save-inputs inputs.json "
             "--save-outputs golden_outputs.json",
             "cmpx run needs_constraints.onnx --onnxrt --val-range x:[1,2] --save-inputs inputs.json "
             "--save-outputs golden_outputs.json", note="as written; the same inputs drawn from [1,2]",
             same_data=("inputs.json", "golden_outputs.json")),
    )),
    Workflow("debug01_debugging_flaky_trt_tactics", _files({"identity": identity_model}), (
        Step("debug01-golden", "polygraphy run identity.onnx --onnxrt --save-outputs golden.json",
             "polygraphy run identity.onnx --onnxrt --save-outputs golden.json",
             "cmpx run identity.onnx --onnxrt --save-outputs golden.json", same_data=("golden.json",),
             swap=("golden.json",)),
        Step("debug01-check", "(debug build's --check) polygraphy run polygraphy_debug.engine --trt --load-outputs "
             "golden.json",
             "polygraphy run identity.onnx --onnxrt --load-outputs golden.json",
             "cmpx run identity.onnx --onnxrt --load-outputs golden.json",
             note="the engine: the ONNX model on ONNX Runtime; fresh inputs of the default seed, read against the "
                  "other tool's golden outputs", polygraphy_says=ONE_PASS,
             cmpx_says=("1 comparison(s) over 1 iteration(s)",)),
    )),
    Workflow("debug02_reducing_failing_onnx_models", _files({"folded": reduce_model}), (
        Step("debug02-layerwise-golden", "polygraphy run folded.onnx --onnxrt --save-inputs inputs.json "
             "--onnx-outputs mark all --save-outputs layerwise_golden.json",
             "polygraphy run folded.onnx --onnxrt --save-inputs inputs.json --onnx-outputs mark all "
             "--save-outputs layerwise_golden.json",
             "cmpx run folded.onnx --onnxrt --save-inputs inputs.json --onnx-outputs mark all --save-outputs "
             "layerwise_golden.json", same_data=("inputs.json", "layerwise_golden.json"),
             swap=("inputs.json", "layerwise_golden.json")),
        Step("debug02-to-input", "polygraphy data to-input inputs.json layerwise_golden.json -o "
             "layerwise_inputs.json",
             "polygraphy data merge inputs.json layerwise_golden.json -o layerwise_inputs.json",
             "polygraphy data merge inputs.json layerwise_golden.json -o layerwise_inputs.json",
             note="Polygraphy's tool in both workspaces (0.53 renamed to-input merge): cmpx has no such command"),
        *(Step(f"debug02-check-{name}", "(debug reduce's --check) polygraphy run polygraphy_debug.onnx --trt "
               "--load-inputs layerwise_inputs.json --load-outputs layerwise_golden.json",
               "polygraphy run polygraphy_debug.onnx --onnxrt --load-inputs layerwise_inputs.json --load-outputs "
               "layerwise_golden.json",
               "cmpx run polygraphy_debug.onnx --onnxrt --load-inputs layerwise_inputs.json --load-outputs "
               "layerwise_golden.json", expect=int(name == "faulty_mul"), prepare=_candidate(name),
               note=f"--trt: ONNX Runtime; candidate {name}: extra tensors of the layer-wise files are left out",
               polygraphy_says=("Passed: 0/1" if name == "faulty_mul" else "Passed: 1/1",),
               cmpx_says=("1 comparison(s) over 1 iteration(s), 1 output(s), 150528 element(s) compared",))
          for name in REDUCE_CANDIDATES),
    )),
)


def exchange(first: Path, second: Path, names: tuple[str, ...]) -> None:
    """Swaps the files ``names`` between two directories."""
    for name in names:
        parked = first / f"{name}.swapping"
        shutil.move(first / name, parked)
        shutil.move(second / name, first / name)
        shutil.move(parked, second / name)
