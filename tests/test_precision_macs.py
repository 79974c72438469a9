"""cmpx.precision.macs on models whose multiply-accumulates are known by hand: a Conv, a transposed Gemm and a
batched MatMul counted from static shapes; a dynamic dimension makes the share unknown, not guessed."""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from cmpx.model.subgraph import index_graph
from cmpx.precision.macs import fed_index, mac_share, mac_words


def _index(batch):
    weights = [numpy_helper.from_array(np.zeros(shape, np.float32), name)
               for name, shape in (("W", [4, 3, 3, 3]), ("G", [10, 144]), ("M", [2, 5, 7]))]
    nodes = [helper.make_node("Conv", ["X", "W"], ["C"], name="conv"),  # [b,3,8,8] -> [b,4,6,6]: 144 x 27 each
             helper.make_node("Flatten", ["C"], ["F"], name="flatten"),  # [b, 144]
             helper.make_node("Transpose", ["F"], ["T"], name="transpose", perm=[1, 0]),  # [144, b]
             helper.make_node("Gemm", ["T", "G"], ["Y"], name="gemm", transA=1, transB=1),  # [b,10]: K = 144
             helper.make_node("MatMul", ["A", "M"], ["Z"], name="matmul")]  # [2,3,5] x [2,5,7]: 2*3*7 x 5
    graph = helper.make_graph(nodes, "macs", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [batch, 3, 8, 8]),
                                              helper.make_tensor_value_info("A", TensorProto.FLOAT, [2, 3, 5])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("Z", TensorProto.FLOAT, None)], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return index_graph(onnx.shape_inference.infer_shapes(model))


def test_conv_gemm_and_matmul_count_their_multiply_accumulates_from_static_shapes():
    index = _index(2)
    conv, gemm, matmul = 2 * 4 * 6 * 6 * 27, 2 * 10 * 144, 2 * 3 * 7 * 5
    assert mac_share(index, ["conv"]) == (conv, conv + gemm + matmul)
    assert mac_share(index, ["gemm", "matmul", "flatten"]) == (gemm + matmul, conv + gemm + matmul)
    assert mac_words(mac_share(index, ["conv"])) == \
        f"{conv} of {conv + gemm + matmul} multiply-accumulates of MatMul, Gemm and Conv (71.6%)"


def test_a_dynamic_dimension_makes_the_share_unknown_unless_the_fed_shape_sets_it():
    index = _index("batch")
    assert mac_share(index, ["matmul"]) is None
    assert mac_words(None).startswith("multiply-accumulates unknown")
    assert mac_share(fed_index(index, {"X": (2, 3, 8, 8)}), ["conv"]) == mac_share(_index(2), ["conv"])
