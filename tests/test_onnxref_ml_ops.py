"""The ai.onnx.ml operators cmpx gives the reference evaluator (ZipMap, CastMap, CategoryMapper: onnx 1.23 has
none of them), checked against ONNX Runtime's on the same inputs, including maps and strings, which cmpx's own data
loaders never feed (issue 17: scikit-learn models need a CPU reference)."""

import numpy as np
import onnxruntime as ort
import pytest
from cmpx_onnxref.ml_ops import NEW_OPS
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator


def both(node, inputs, output_type, feed):
    """The single output of a one-node model on ONNX Runtime and on the reference evaluator with cmpx's ops."""
    graph = helper.make_graph([node], "ml", inputs, [helper.make_value_info("Y", output_type)])
    model = helper.make_model(graph, ir_version=8, opset_imports=[helper.make_opsetid("", 17),
                                                                  helper.make_opsetid("ai.onnx.ml", 1)])
    expected = ort.InferenceSession(model.SerializeToString()).run(None, {"X": feed})[0]
    return expected, ReferenceEvaluator(model, new_ops=NEW_OPS).run(None, {"X": feed})[0]


def tensor(elem):
    return helper.make_tensor_type_proto(elem, None)


@pytest.mark.parametrize("labels", [{"classlabels_int64s": [3, 1, 7]}, {"classlabels_strings": ["cat", "b", "a"]}])
def test_zipmap_gives_one_map_per_row_with_the_labels_as_keys(labels):
    rows = np.array([[0.2, 0.5, 0.3], [1.0, 0.0, -1.0]], np.float32)
    key = TensorProto.INT64 if "classlabels_int64s" in labels else TensorProto.STRING
    sequence = helper.make_sequence_type_proto(helper.make_map_type_proto(key, tensor(TensorProto.FLOAT)))
    expected, actual = both(helper.make_node("ZipMap", ["X"], ["Y"], domain="ai.onnx.ml", **labels),
                            [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 3])], sequence, rows)
    assert [sorted(m) for m in actual] == [sorted(m) for m in expected] and len(actual) == 2
    for got, want in zip(actual, expected):
        assert all(np.float32(got[k]) == np.float32(want[k]) for k in want)


@pytest.mark.parametrize("options", [{"cast_to": "TO_FLOAT"}, {"cast_to": "TO_INT64", "map_form": "SPARSE",
                                                                 "max_map": 6}, {"cast_to": "TO_STRING"}])
def test_castmap_orders_by_key_and_fills_sparse_slots(options):
    elem = {"TO_FLOAT": TensorProto.FLOAT, "TO_INT64": TensorProto.INT64, "TO_STRING": TensorProto.STRING}
    pairs = helper.make_map_type_proto(TensorProto.INT64, tensor(TensorProto.FLOAT))
    expected, actual = both(helper.make_node("CastMap", ["X"], ["Y"], domain="ai.onnx.ml", **options),
                            [helper.make_value_info("X", pairs)], tensor(elem[options["cast_to"]]),
                            {4: 2.5, 1: 7.0, 3: -1.0})
    assert actual.shape == expected.shape and actual.tolist() == expected.tolist()


@pytest.mark.parametrize("direction, feed", [((TensorProto.STRING, TensorProto.INT64),
                                              np.array(["b", "zz", "a"], dtype=object)),
                                             ((TensorProto.INT64, TensorProto.STRING),
                                              np.array([[2, 9], [1, 1]], np.int64))])
def test_category_mapper_maps_both_ways_with_defaults(direction, feed):
    node = helper.make_node("CategoryMapper", ["X"], ["Y"], domain="ai.onnx.ml", cats_int64s=[1, 2],
                            cats_strings=["a", "b"], default_int64=-7, default_string="none")
    expected, actual = both(node, [helper.make_tensor_value_info("X", direction[0], None)], tensor(direction[1]),
                            feed)
    assert actual.shape == expected.shape and actual.tolist() == expected.tolist()
    assert (actual.dtype == np.int64) == (direction[1] == TensorProto.INT64)
