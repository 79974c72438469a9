"""Cutting subgraphs out of models (cmpx.model.subgraph): what a set of nodes needs, reads and hands on, and models
made of them that ONNX Runtime runs with the same results as the whole model."""

import numpy as np
import onnx
import onnxruntime
from onnx import TensorProto, helper

from cmpx.model.graph import load_structure
from cmpx.model.subgraph import boundary, closure, index_graph, write_subgraph
from cmpx.testing import models as modelgen


def _run(path, feeds):
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))


def _all_tensors(model, feeds, names):
    """Every tensor of ``names``, from the whole model with them exposed."""
    model = onnx.shape_inference.infer_shapes(model)
    typed = {v.name: v for v in model.graph.value_info}
    model.graph.output.extend(typed[n] for n in names if n in typed)
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))


def test_a_window_of_a_chain_reads_its_first_input_and_hands_on_its_last_output(tmp_path):
    model = modelgen.matmul_chain(layers=4)
    path = modelgen.save(model, tmp_path / "chain.onnx")
    index = index_graph(load_structure(path))
    window = [index.producer["mm1"], index.producer["t1"], index.producer["mm2"]]
    inputs, outputs = boundary(index, window)
    assert inputs == ["t0"] and outputs == ["mm2"]
    assert boundary(index, range(len(index.nodes))) == (["X"], ["Y", "S"])
    x = np.random.default_rng(0).standard_normal((1, 8)).astype(np.float32)
    values = _all_tensors(model, {"X": x}, ["t0", "mm2"])
    sub = tmp_path / "window.onnx"
    write_subgraph(index, path, window, {"t0": (np.dtype("float32"), (1, 8))}, outputs, str(sub))
    np.testing.assert_allclose(_run(sub, {"t0": values["t0"]})["mm2"], values["mm2"], rtol=1e-6)
    assert [n.name for n in onnx.load(str(sub)).graph.node] == ["MatMul_1", "Tanh_1", "MatMul_2"]
    assert {i.name for i in onnx.load(str(sub)).graph.initializer} == {"W1", "W2"}


def test_a_node_whose_branches_read_the_outer_scope_brings_what_they_read(tmp_path):
    """An If whose branches use ``r`` without naming it as an input: the closure finds r's producer, and a subgraph
    fed r runs."""
    then_branch = helper.make_graph([helper.make_node("Identity", ["r"], ["a"])], "then", [],
                                    [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2])])
    else_branch = helper.make_graph([helper.make_node("Neg", ["r"], ["b"])], "else", [],
                                    [helper.make_tensor_value_info("b", TensorProto.FLOAT, [2])])
    graph = helper.make_graph(
        [helper.make_node("Relu", ["X"], ["r"], name="relu"),
         helper.make_node("If", ["cond"], ["Y"], name="if", then_branch=then_branch, else_branch=else_branch)],
        "outer", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2]),
                  helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2])])
    path = tmp_path / "if.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))
    index = index_graph(load_structure(str(path)))
    assert closure(index, [1], available={"X", "cond"}) == [0, 1]
    assert closure(index, [1], available={"r", "cond"}) == [1]
    assert boundary(index, [1]) == (["cond", "r"], ["Y"])
    sub = tmp_path / "if-alone.onnx"
    write_subgraph(index, str(path), [1], {"cond": (np.dtype(bool), ()), "r": (np.dtype("float32"), (2,))}, ["Y"],
                   str(sub))
    r = np.array([0.5, 2.0], np.float32)
    np.testing.assert_array_equal(_run(sub, {"cond": np.array(False), "r": r})["Y"], -r)


def test_external_weights_are_read_only_where_used_and_copied_when_large(tmp_path):
    model = modelgen.matmul_chain(layers=3)
    source = tmp_path / "source"
    source.mkdir()
    path = modelgen.save_with_external_data(model, source)
    original = (source / "weights.bin").read_bytes()
    index = index_graph(load_structure(path))
    node = [index.producer["mm1"]]
    t0 = _all_tensors(modelgen.matmul_chain(layers=3), {"X": np.ones((1, 8), np.float32)}, ["t0", "mm1"])
    out = tmp_path / "out"
    out.mkdir()
    inline, external = out / "inline.onnx", out / "external.onnx"
    for target, limit in ((inline, 1 << 30), (external, 0)):
        write_subgraph(index, path, node, {"t0": (np.dtype("float32"), (1, 8))}, ["mm1"], str(target),
                       inline_limit=limit)
        np.testing.assert_allclose(_run(target, {"t0": t0["t0"]})["mm1"], t0["mm1"], rtol=1e-6)
    assert not (out / "inline.onnx.data").exists()
    assert (out / "external.onnx.data").stat().st_size == 8 * 8 * 4  # W1 alone
    assert (source / "weights.bin").read_bytes() == original
