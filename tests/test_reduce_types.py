"""cmpx reduce on models whose outputs are not all tensors (issue 26, item 8), through the real CLI and real workers:
candidates keep each output's real type (a ZipMap's sequence of maps, an optional), a written model that does not
fail by itself is no success (its own exit status, said plainly), and a candidate failing in a way that does not
count as failing is printed as what it is, not as FAILED."""

import re
import warnings

import numpy as np
import onnx
import pytest

from cmpx.errors import ExitCode
from cmpx.testing import models as modelgen


def _candidates(output):
    return [line for line in output.splitlines() if line.startswith("candidate ")]


def _kind(value_type):
    """A value's type without its shapes: tensor(1), seq(map(7,tensor(1))), optional(tensor(1))..."""
    which = value_type.WhichOneof("value")
    if which == "tensor_type":
        return f"tensor({value_type.tensor_type.elem_type})"
    if which == "sequence_type":
        return f"seq({_kind(value_type.sequence_type.elem_type)})"
    if which == "optional_type":
        return f"optional({_kind(value_type.optional_type.elem_type)})"
    if which == "map_type":
        return f"map({value_type.map_type.key_type},{_kind(value_type.map_type.value_type)})"
    return str(which)


# One test process runs this module: its module's model is made and reduced once per test process.
pytestmark = pytest.mark.xdist_group("reduce-types")

@pytest.fixture(scope="module")
def svc(tmp_path_factory):
    """A scikit-learn SVC with probabilities, exported by skl2onnx as users do: its output_probability is the
    ZipMap's seq(map(int64,tensor(float))). ONNX Runtime and the reference evaluator compute the SVM's
    probabilities differently (by a few hundredths), so the two disagree on it."""
    pytest.importorskip("skl2onnx", reason="needs skl2onnx and scikit-learn (pip install -e '.[test]')")
    from skl2onnx import convert_sklearn
    from skl2onnx.common.data_types import FloatTensorType
    from sklearn.datasets import make_classification
    from sklearn.svm import SVC

    features, labels = make_classification(n_samples=120, n_features=6, n_informative=4, n_classes=3,
                                           random_state=0)
    with warnings.catch_warnings():  # scikit-learn 1.9 deprecates probability=True, which exporters still take
        warnings.simplefilter("ignore", FutureWarning)
        classifier = SVC(probability=True, random_state=0).fit(features.astype(np.float32), labels)
        exported = convert_sklearn(classifier, "svc", initial_types=[("input", FloatTensorType([None, 6]))],
                                   target_opset={"": 17, "ai.onnx.ml": 3})
    path = tmp_path_factory.mktemp("svc") / "svc.onnx"
    onnx.save(exported, str(path))
    return path


def test_an_svc_whose_failure_shows_at_its_zipmap_reduces_to_a_subgraph_that_fails_by_itself(run_cli, svc, tmp_path):
    """The tolerance is tight on the model's output only, so the failure shows at the ZipMap's sequence of maps and
    not at the tensor before it: every failing candidate holds the ZipMap. Before, candidates declared that output
    a tensor(float); ONNX Runtime refused every one of them (the whole graph included), everything was kept, the
    written model did not reproduce, and still the exit was 1."""
    out = tmp_path / "r.onnx"
    tolerances = ("--atol", "0.5", "output_probability:1e-4")
    # Polygraphy's JSON cannot hold the ZipMap's maps, which only the reduced model shows: a directory instead
    result = run_cli("reduce", svc, "--backend", "onnxrt", "--backend", "onnxref", "--input-shapes", "input:[5,6]",
                     *tolerances, "-o", out, "--save-outputs", tmp_path / "golden.json")
    assert result.exit_code == 1, result.output
    assert (f"warning: --save-outputs {tmp_path / 'golden.json'}: Polygraphy's JSON holds tensors only, and the "
            f"reduced model's output output_probability is not one; its outputs go to {tmp_path / 'r.outputs'} (a "
            "cmpx run) instead") in result.output
    assert not (tmp_path / "golden.json").exists()
    assert "error during load" not in result.output, result.output
    assert re.search(r"reproduce: cmpx run \S+ --backend onnxrt --load-inputs \S+ --load-outputs \S+ --atol 0\.5 "
                     r"output_probability:1e-4  -> FAILED \(mismatch: onnxrt vs onnxref@r: output_probability\)",
                     result.output), result.output
    written = onnx.load(str(out))
    assert [node.op_type for node in written.graph.node] == ["SVMClassifier", "Cast", "ZipMap"]
    assert result.output.strip().splitlines()[-1].endswith(
        "kept 3 of 4 node(s): " + ", ".join(f"{n.name} ({n.op_type})" for n in written.graph.node))
    outputs = {o.name: _kind(o.type) for o in written.graph.output}
    assert outputs["output_probability"] == "seq(map(7,tensor(1)))"  # int64 keys, float values, as in the model
    again = run_cli("run", out, "--backend", "onnxrt", "--load-inputs", tmp_path / "r.inputs", "--load-outputs",
                    tmp_path / "r.outputs", *tolerances)
    assert again.exit_code == 1, again.output
    assert "FAILED  output_probability" in again.output, again.output


def test_a_cut_keeps_sequence_and_optional_outputs_as_they_are_typed(tmp_path):
    """The subgraph's outputs are declared with the model's own types, whatever they are (sequences, optionals),
    never as tensors of the values' dtype; ONNX Runtime loads the cut as it loads the model."""
    import onnxruntime

    from cmpx.model.graph import load_structure
    from cmpx.model.subgraph import index_graph, write_subgraph

    for name, model in (("sequence", modelgen.sequence_model()), ("optional", modelgen.optional_model())):
        path = modelgen.save(model, tmp_path / f"{name}.onnx")
        index = index_graph(load_structure(str(path)))
        cut = str(tmp_path / f"{name}-cut.onnx")
        outputs = list(index.graph_outputs)
        write_subgraph(index, str(path), range(len(index.nodes)), {"X": (np.dtype(np.float32), (3, 4) if name ==
                       "sequence" else (3,))}, outputs, cut, output_types={o: np.dtype(np.float32) for o in outputs})
        assert [(o.name, _kind(o.type)) for o in onnx.load(cut).graph.output] == \
            [(o.name, _kind(o.type)) for o in model.graph.output], name
        onnxruntime.InferenceSession(cut, providers=["CPUExecutionProvider"])


def test_a_written_model_that_does_not_fail_by_itself_has_its_own_exit_status(run_cli, tmp_path):
    """The reference gives the candidates' values with every tensor marked, and marking changes what this one
    computes (as TensorRT's layer fusion does): it fails every candidate live, yet its saved values match. What is
    written does not reproduce the failure: not exit 1 ("a failing subgraph was written"), but its own, said in
    words."""
    model = modelgen.save(modelgen.two_faults(8, batchnorm_at=None, softmax_at=None), tmp_path / "chain.onnx")
    out = tmp_path / "r.onnx"
    result = run_cli("reduce", model, "--backend", "onnxrt", "--backend", "fusing", "-o", out,
                     plugins=["cmpx_test_fusing"])
    assert result.exit_code == ExitCode.NOT_REPRODUCED != ExitCode.MISMATCH, result.output
    assert int(ExitCode.NOT_REPRODUCED) not in {0, 1, 2, 3, 4, 130}
    lines = result.output.strip().splitlines()
    assert lines[-1] == (f"the written model does not reproduce the failure by itself (exit "
                         f"{int(ExitCode.NOT_REPRODUCED)})"), result.output
    assert "reproduce: " not in result.output and "a failing subgraph was written" not in result.output
    assert re.search(r"not reproduced: against fusing's saved outputs, \S+ passes, though it failed with every "
                     r"backend live", result.output), result.output
    # why, where the values backend says marking changes what it computes
    assert "fusing computed its saved values with every tensor marked, which changes what it computes" in \
        result.output, result.output
    assert "cmpx run " + str(out) + " --backend onnxrt --backend fusing --load-inputs " in result.output
    assert out.exists() and (tmp_path / "r.inputs").exists() and (tmp_path / "r.outputs").exists()


def test_a_candidate_failing_by_an_error_that_does_not_count_is_not_printed_as_failed(run_cli, tmp_path):
    """--fail-on mismatch while a third backend fails to load any model: the candidates without the mismatching
    node show only that load error, which is not failing here. They are printed as what they are, with the error's
    message, not 'FAILED'."""
    model = modelgen.save(modelgen.two_faults(16, batchnorm_at=12, softmax_at=None), tmp_path / "chain.onnx")
    result = run_cli("reduce", model, "--backend", "faulty", "--faulty-fault", "load:raise", "--backend", "onnxrt",
                     "--backend", "onnxref", "--fail-on", "mismatch", "-o", tmp_path / "r.onnx",
                     plugins=["cmpx_test_faulty"])
    assert result.exit_code == 1, result.output
    assert result.output.strip().splitlines()[-1].endswith("kept 1 of 16 node(s): node12_BatchNormalization "
                                                            "(BatchNormalization)")
    lines = _candidates(result.output)
    uncounted = [line for line in lines if "FAILED (mismatch" not in line]
    assert uncounted, result.output
    for line in uncounted:
        assert "FAILED" not in line, line
        assert re.search(r": does not count \(failing means a mismatch\): faulty error during load \(\d+\.\d s\) \| "
                         r"nodes left: \d+$", line), line
    # the error itself, under the candidate it failed
    following = result.output.splitlines()[result.output.splitlines().index(uncounted[0]) + 1]
    assert following.startswith("  faulty failed during load: ") and "injected failure during load" in following
