"""Issue 17, finding 1: synthetic integers are bounded by how the graph uses them, so that default data is valid
data: indices stay inside their table, masks are 0 or 1, and --val-range always wins."""

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from cmpx.options.argtypes import ValueRange
from cmpx.loaders.options import DataOptions
from cmpx.loaders.synthetic import DEFAULT_INT_RANGE, SyntheticDataLoader
from cmpx.model.info import TensorSpec
from cmpx.model.value_ranges import data_ranges, integer_ranges
from conftest import REPO

BERT = str(REPO / "tests" / "models" / "real" / "bert.onnx")
GPT2 = str(REPO / "tests" / "models" / "real" / "gpt2.onnx")
LIMITS = (-(2**63), 2**63 - 1)


def table(name, rows, cols=2, dtype=np.float32):
    return numpy_helper.from_array(np.zeros((rows, cols), dtype), name)


def ranges_of(nodes, inputs, initializers=(), outputs=("Y",)):
    """The chosen range of every integer input of a graph made of ``nodes``."""
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, TensorProto.INT64, ["N"])
                                           for n in inputs],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
                              list(initializers))
    model = onnx.shape_inference.infer_shapes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))
    specs = [TensorSpec(name, "int64", ("N",)) for name in inputs]
    return {r.input: (r.low, r.high, r.reason) for r in
            integer_ranges(model, specs, DEFAULT_INT_RANGE, {name: LIMITS for name in inputs})}


def test_an_index_into_a_table_is_bounded_by_the_smallest_table_through_pass_through_ops():
    nodes = [helper.make_node("Unsqueeze", ["ids", "axes"], ["u"]),
             helper.make_node("Cast", ["u"], ["c"], to=TensorProto.INT32),
             helper.make_node("Reshape", ["c", "flat"], ["r"]),
             helper.make_node("Gather", ["big", "r"], ["g1"]),  # 100 rows
             helper.make_node("Gather", ["small", "ids"], ["g2"]),  # 2 rows: the smallest wins
             helper.make_node("Concat", ["g1", "g2"], ["Y"], axis=0)]
    inits = [table("big", 100), table("small", 2), numpy_helper.from_array(np.array([0], np.int64), "axes"),
             numpy_helper.from_array(np.array([-1], np.int64), "flat")]
    assert ranges_of(nodes, ["ids"], inits) == {"ids": (0, 1, "Gather index into a 2-row table")}


@pytest.mark.parametrize("node, extra, expected", [
    (helper.make_node("GatherElements", ["t", "ids"], ["Y"], axis=1), [table("t", 3, 7)],
     (0, 6, "GatherElements index into a table of 7 along axis 1")),
    (helper.make_node("GatherND", ["t", "ids"], ["Y"]), [table("t", 5, 3)],
     (0, 2, "GatherND index into a table of shape [5, 3]")),
    (helper.make_node("OneHot", ["ids", "depth", "values"], ["Y"]),
     [numpy_helper.from_array(np.array(4, np.int64), "depth"), numpy_helper.from_array(np.array([0, 1], np.float32),
                                                                                          "values")],
     (0, 3, "OneHot index of depth 4")),
    (helper.make_node("Gather", ["t", "ids"], ["Y"], axis=-1), [table("t", 3, 5)],
     (0, 4, "Gather index into a table of 5 along axis 1")),
])
def test_each_indexing_op_bounds_by_its_own_axis(node, extra, expected):
    assert ranges_of([node], ["ids"], extra)["ids"] == expected


def test_masks_get_0_and_1_only_when_every_use_is_a_mask():
    zero = numpy_helper.from_array(np.array(0, np.int64), "zero")
    one = numpy_helper.from_array(np.array(1.0, np.float32), "one")
    x = numpy_helper.from_array(np.ones(3, np.float32), "x")
    nodes = [helper.make_node("Cast", ["bool_mask"], ["b"], to=TensorProto.BOOL),
             helper.make_node("Not", ["b"], ["nb"]),
             helper.make_node("Equal", ["cmp_mask", "zero"], ["e"]),
             helper.make_node("Cast", ["mul_mask"], ["f"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["f", "x"], ["m"]),
             helper.make_node("Cast", ["inv_mask"], ["fi"], to=TensorProto.FLOAT),
             helper.make_node("Sub", ["one", "fi"], ["inv"]),
             helper.make_node("Cast", ["counts"], ["fc"], to=TensorProto.FLOAT),
             helper.make_node("Add", ["fc", "x"], ["a"]),  # arithmetic: no bound
             helper.make_node("Cast", ["mixed"], ["fm"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["fm", "x"], ["mm"]),
             helper.make_node("Add", ["fm", "x"], ["ma"]),  # also used as a number: not a mask
             helper.make_node("Shape", ["shaped"], ["s"])]  # reads only the shape: says nothing
    found = ranges_of(nodes, ["bool_mask", "cmp_mask", "mul_mask", "inv_mask", "counts", "mixed", "shaped"],
                      [zero, one, x], outputs=("nb", "e", "m", "inv", "a", "mm", "ma", "s"))
    assert found["bool_mask"] == (0, 1, "cast to bool")
    assert found["cmp_mask"] == (0, 1, "compared to zero")
    assert found["mul_mask"] == (0, 9, "the default: multiplied by a constant (a scale, not a mask), which does "
                                       "not bound it")
    assert found["inv_mask"] == (0, 1, "a 0/1 multiplier (1 - mask)")
    assert found["counts"] == (0, 9, "the default: an input of Add, which does not bound it")
    assert found["mixed"][:2] == (0, 9)
    assert found["shaped"] == (0, 9, "the default: no use in the graph bounds it")


def test_positions_scaled_into_a_cos_are_not_a_mask(tmp_path):
    """An LLM's position_ids reach Cos/Sin through Cast -> Mul by inv_freq (expanded: not an initializer itself):
    a scale, so positions above 1 are exercised (issue #26, item 5)."""
    inv_freq = numpy_helper.from_array(np.linspace(1, 1e-4, 8, dtype=np.float32).reshape(1, 8), "inv_freq")
    shape = numpy_helper.from_array(np.array([4, 8], np.int64), "shape")
    nodes = [helper.make_node("Expand", ["inv_freq", "shape"], ["freq"]),
             helper.make_node("Unsqueeze", ["position_ids", "axis"], ["p"]),
             helper.make_node("Cast", ["p"], ["pf"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["pf", "freq"], ["angles"]),
             helper.make_node("Cos", ["angles"], ["Y"]),
             # a mask multiplying the hidden state, and also used as 1 - mask: a mask, by the second use
             helper.make_node("Cast", ["attention_mask"], ["mf"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["hidden", "mf"], ["pooled"]),
             helper.make_node("Sub", ["one", "mf"], ["inverted"]),
             # a product with a tensor alone says nothing
             helper.make_node("Cast", ["weights"], ["wf"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["wf", "hidden"], ["weighted"])]
    constants = [inv_freq, shape, numpy_helper.from_array(np.array([1], np.int64), "axis"),
                 numpy_helper.from_array(np.array(1.0, np.float32), "one")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, TensorProto.INT64, [4])
                                           for n in ("position_ids", "attention_mask", "weights")]
                              + [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, None)
                               for n in ("Y", "pooled", "inverted", "weighted")], constants)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    specs = [TensorSpec(n, "int64", (4,)) for n in ("position_ids", "attention_mask", "weights")]
    found = {r.input: (r.low, r.high, r.reason) for r in
             integer_ranges(model, specs, DEFAULT_INT_RANGE, {s.name: LIMITS for s in specs})}
    assert found["position_ids"] == (0, 9, "the default: multiplied by a constant (a scale, not a mask), which "
                                           "does not bound it")
    assert found["attention_mask"] == (0, 1, "a 0/1 multiplier (1 - mask)")
    assert found["weights"] == (0, 9, "the default: multiplied by another tensor, which does not bound it")
    path = tmp_path / "positions.onnx"
    onnx.save(model, path)
    ranges = {r.input: r for r in data_ranges(str(path), specs, None, {}, DEFAULT_INT_RANGE)}
    assert ranges["position_ids"].high == 9


def test_the_dtype_still_bounds_a_table_range():
    graph = helper.make_graph([helper.make_node("Gather", ["t", "ids"], ["Y"])], "g",
                              [helper.make_tensor_value_info("ids", TensorProto.INT8, [4])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)], [table("t", 1000)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    (found,) = integer_ranges(model, [TensorSpec("ids", "int8", (4,))], DEFAULT_INT_RANGE, {"ids": (-128, 127)})
    assert (found.low, found.high) == (0, 127)


def test_bert_and_gpt2_inputs_get_their_tables_and_masks():
    specs = [TensorSpec(n, "int64", ("batch", "sequence")) for n in ("input_ids", "attention_mask",
                                                                     "token_type_ids")]
    found = {str(r) for r in data_ranges(BERT, specs, None, {}, DEFAULT_INT_RANGE)}
    assert found == {"input_ids: [0, 99] (Gather index into a 100-row table)", "attention_mask: [0, 1] (cast to bool)",
                     "token_type_ids: [0, 1] (Gather index into a 2-row table)"}
    found = {str(r) for r in data_ranges(GPT2, specs[:2], None, {}, DEFAULT_INT_RANGE)}
    assert found == {"input_ids: [0, 99] (Gather index into a 100-row table)", "attention_mask: [0, 1] (cast to bool)"}


def test_a_given_range_always_wins():
    specs = [TensorSpec(n, "int64", ("batch", "sequence")) for n in ("input_ids", "token_type_ids")]
    found = data_ranges(BERT, specs, None, {"token_type_ids": ValueRange(0, 5)}, DEFAULT_INT_RANGE)
    assert [str(r) for r in found] == ["input_ids: [0, 99] (Gather index into a 100-row table)",
                                       "token_type_ids: [0, 5] (given: --val-range token_type_ids:[0,5])"]
    found = data_ranges(BERT, specs, ValueRange(2, 3), {}, DEFAULT_INT_RANGE)
    assert {(r.low, r.high) for r in found} == {(2, 3)}


def test_graph_ranges_come_from_the_side_stream_and_leave_polygraphys_floats_alone():
    """The floats after an integer input are the same whatever the integer's range (they match Polygraphy's:
    tests/test_synthetic.py), and the integers stay inside the graph's range."""
    inputs = [TensorSpec("ids", "int64", (64,)), TensorSpec("x", "float32", (8,))]
    plain = next(SyntheticDataLoader(DataOptions(seed=3)).feeds(inputs))
    narrowed = next(SyntheticDataLoader(DataOptions(seed=3, integer_ranges={"ids": ValueRange(0, 1)})).feeds(inputs))
    assert np.array_equal(plain["x"], narrowed["x"])
    assert set(np.unique(narrowed["ids"])) == {0, 1} and plain["ids"].max() > 1


def test_bert_passes_with_default_data_and_says_why_each_range(run_cli, tmp_path):
    report = tmp_path / "report.json"
    result = run_cli("run", BERT, "--backend", "onnxrt", "--backend", "onnxref", "-v", "--input-shapes", "batch=2",
                     "sequence=16", "--report-json", report)
    assert result.exit_code == 0, result.output
    assert "  data: token_type_ids: [0, 1] (Gather index into a 2-row table)" in result.output
    assert "  data: attention_mask: [0, 1] (cast to bool)" in result.output
    document = json.loads(report.read_text())
    assert {r["input"]: (r["low"], r["high"]) for r in document["data_ranges"]} == {
        "input_ids": (0, 99), "attention_mask": (0, 1), "token_type_ids": (0, 1)}
    given = run_cli("run", BERT, "--backend", "onnxrt", "--val-range", "token_type_ids:[0,5]", "--input-shapes",
                    "batch=2", "sequence=16")
    assert given.exit_code == 3  # what the user asked for: the index is out of the table, and the backend says so
    assert "indices element out of data bounds" in given.output


def test_a_graph_onnx_cannot_read_gets_the_default_range_and_the_backends_say_why(run_cli, tmp_path):
    """cmpx reads a model's inputs from the wire itself, and onnx only for the ranges: a node that onnx refuses
    leaves the integers at the default, said so, and the run goes on to let the backends report the model."""
    node = helper.make_node("Gather", ["table", "ids"], ["Y"], doc_string="Q" * 11)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("ids", TensorProto.INT64, [2])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2, 2])], [table("table", 3)])
    wire = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]).SerializeToString()
    # the node's doc_string re-tagged as an attribute (field 5) whose bytes are an endless varint
    corrupt = wire.replace(b"\x32\x0b" + b"Q" * 11, b"\x2a\x0b" + b"\xff" * 11)
    assert corrupt != wire
    path = tmp_path / "corrupt.onnx"
    path.write_bytes(corrupt)
    with pytest.raises(Exception, match="Error parsing message"):
        onnx.load(str(path))
    result = run_cli("run", path, "--backend", "onnxrt", "--backend", "onnxref", "-v")
    assert result.exit_code == 3, result.output
    assert "  data: ids: [0, 9] (the default: onnx cannot read the graph (DecodeError))" in result.output
    assert "onnxref: FAILED during load: google.protobuf.message.DecodeError" in result.output
