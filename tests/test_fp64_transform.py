"""The fp64 transform: the float graph in float64, integer paths, fed inputs and Q/DQ pairs as they were."""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from cmpx.testing import models as modelgen
from cmpx.transforms.double import DoublePrecision
from cmpx.transforms.options import TransformOptions


def transformed(model: onnx.ModelProto, tmp_path) -> onnx.ModelProto:
    source, target = tmp_path / "model.onnx", tmp_path / "fp64.onnx"
    onnx.save(model, source)
    DoublePrecision(TransformOptions()).apply(str(source), str(target), lambda n: iter(()))
    result = onnx.load(target)
    onnx.checker.check_model(result, full_check=True)
    return result


def mixed_model() -> onnx.ModelProto:
    """X (float) -> Mul by a weight -> Cast to float16 -> Cast to float -> Add Constant(value_float) -> Y, with
    an integer path Shape -> Gather -> ConstantOfShape (float) -> added too, and a shape output kept int64."""
    nodes = [
        helper.make_node("Mul", ["X", "w"], ["m"]),
        helper.make_node("Cast", ["m"], ["h"], to=TensorProto.FLOAT16),
        helper.make_node("Cast", ["h"], ["f"], to=TensorProto.FLOAT),
        helper.make_node("Constant", [], ["c"], value_float=1e-8),
        helper.make_node("Add", ["f", "c"], ["a"]),
        helper.make_node("Shape", ["X"], ["s"]),
        helper.make_node("ConstantOfShape", ["s"], ["z"],
                         value=numpy_helper.from_array(np.array([1e-9], np.float32))),
        helper.make_node("Add", ["a", "z"], ["Y"]),
    ]
    w = numpy_helper.from_array(np.array([1.0 / 3.0, 2.0 / 3.0, 0.1], np.float32), "w")
    return modelgen._model(nodes, [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 3])],
                           [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2, 3]),
                            helper.make_tensor_value_info("s", TensorProto.INT64, [2])], [w], opset=17)


def test_the_float_graph_runs_in_float64_with_inputs_and_integer_paths_kept(tmp_path):
    result = transformed(mixed_model(), tmp_path)
    assert [i.type.tensor_type.elem_type for i in result.graph.input] == [TensorProto.FLOAT]
    assert {o.name: o.type.tensor_type.elem_type for o in result.graph.output} == {
        "Y": TensorProto.DOUBLE, "s": TensorProto.INT64}
    assert {t.name: t.data_type for t in result.graph.initializer} == {"w": TensorProto.DOUBLE}
    assert result.opset_import[0].version == 19  # raised where the converter can
    x = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
    y, s = ReferenceEvaluator(result).run(None, {"X": x})
    assert y.dtype == np.float64 and s.dtype == np.int64 and list(s) == [2, 3]
    # the casts to float16 and float are widened too: no rounding anywhere, the float32 input read exactly
    expected = x.astype(np.float64) * np.array([1 / 3, 2 / 3, 0.1], np.float32).astype(np.float64) + 1e-8 + 1e-9
    np.testing.assert_allclose(y, expected, rtol=1e-15, atol=0)
    float32_y = ReferenceEvaluator(mixed_model()).run(None, {"X": x})[0]
    assert np.abs(float32_y - expected).max() > 1e-4  # the original rounds through float16


def test_quantized_qdq_pairs_are_kept_and_their_output_keeps_its_name(tmp_path):
    scale = numpy_helper.from_array(np.array(0.05, np.float32), "scale")
    zero = numpy_helper.from_array(np.array(0, np.int8), "zero")
    nodes = [helper.make_node("Tanh", ["X"], ["t"]),
             helper.make_node("QuantizeLinear", ["t", "scale", "zero"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "scale", "zero"], ["dq"]),
             helper.make_node("Mul", ["dq", "dq"], ["Y"])]
    model = modelgen._model(nodes, [helper.make_tensor_value_info("X", TensorProto.FLOAT, [4])],
                            [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [4])], [scale, zero], opset=19)
    result = transformed(model, tmp_path)
    types = {t.name: t.data_type for t in result.graph.initializer}
    assert types == {"scale": TensorProto.FLOAT, "zero": TensorProto.INT8}  # read by Q/DQ only: kept
    ops = [n.op_type for n in result.graph.node]
    assert ops.count("QuantizeLinear") == 1 and ops.count("DequantizeLinear") == 1
    assert any(n.op_type == "Cast" and list(n.output) == ["dq"] for n in result.graph.node)  # widened, same name
    x = np.array([0.1, -0.7, 0.33, 2.0], np.float32)
    y = ReferenceEvaluator(result).run(None, {"X": x})[0]
    dq = ReferenceEvaluator(model).run(["dq"], {"X": x})[0].astype(np.float64)
    assert y.dtype == np.float64
    np.testing.assert_array_equal(y, dq * dq)  # the same quantization steps, squared in float64


def test_a_subgraph_is_widened_and_reads_the_widened_input(tmp_path):
    branch = helper.make_graph([helper.make_node("Mul", ["X", "k"], ["b"])], "then", [],
                               [helper.make_tensor_value_info("b", TensorProto.FLOAT, [3])],
                               [numpy_helper.from_array(np.array(0.1, np.float32), "k")])
    other = helper.make_graph([helper.make_node("Neg", ["X"], ["n"])], "else", [],
                              [helper.make_tensor_value_info("n", TensorProto.FLOAT, [3])])
    nodes = [helper.make_node("ReduceSum", ["X"], ["sum"], keepdims=0),
             helper.make_node("Greater", ["sum", "zero"], ["positive"]),
             helper.make_node("If", ["positive"], ["Y"], then_branch=branch, else_branch=other)]
    model = modelgen._model(nodes, [helper.make_tensor_value_info("X", TensorProto.FLOAT, [3])],
                            [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [3])],
                            [numpy_helper.from_array(np.array(0, np.float32), "zero")], opset=17)
    result = transformed(model, tmp_path)
    x = np.array([1, 2, 3], np.float32)
    y = ReferenceEvaluator(result).run(None, {"X": x})[0]
    assert y.dtype == np.float64
    np.testing.assert_allclose(y, x.astype(np.float64) * np.float64(np.float32(0.1)), rtol=1e-15)


def test_the_reference_evaluators_opset_9_mistakes_are_out_of_the_oracle(tmp_path):
    model = modelgen.two_faults()
    result = transformed(model, tmp_path)
    assert result.opset_import[0].version == 19
    x = np.random.default_rng(0).uniform(0, 1, (1, 4, 3, 3)).astype(np.float32)
    import onnxruntime

    ort = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    right = ort.run(None, {"X": x})[0]
    oracle = ReferenceEvaluator(result).run(None, {"X": x})[0]
    wrong = ReferenceEvaluator(model).run(None, {"X": x})[0]
    assert np.abs(oracle - right).max() < 1e-5 < np.abs(wrong - right).max()
