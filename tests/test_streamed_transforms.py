"""fp16, bf16 and fp64 stream external float32 weights (cmpx.transforms.streamed): the result must be the very
model the in-memory conversion makes from the same model with its weights inside (the old path), bit for bit."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from cmpx.transforms import streamed as streaming
from cmpx.transforms.double import DoublePrecision
from cmpx.transforms.half import BFLOAT16, FLOAT16, HalfPrecision, half_chunk
from cmpx.transforms.options import TransformOptions

# values the converter clamps or keeps specially: below float16's smallest subnormal, beyond its range, inf, NaN
EDGES = np.array([0, -0.0, 1e-9, -1e-9, 2**-25, 3e-8, 5.9602e-8, 65504, 65519.9, 65520, -1e9, np.inf, -np.inf,
                  np.nan, 1.0 / 3], np.float32)


def model_with(directory, external: bool, edges: bool = True, inside=("W2",)) -> str:
    """X[2,16] -> MatMul(W1) + B -> Relu -> MatMul(W2) -> Sub(C, kept in float32) -> Reshape(shape) -> Y, with
    W1, B and C (float32) and shape (int64) external when ``external``, except those named ``inside``; W1 holds
    EDGES when ``edges``."""
    rng = np.random.default_rng(3)
    w1 = rng.standard_normal((16, 16)).astype(np.float32)
    if edges:
        w1.ravel()[: EDGES.size] = EDGES
    weights = [numpy_helper.from_array(w1, "W1"), numpy_helper.from_array(rng.standard_normal(16, np.float32), "B"),
               numpy_helper.from_array(rng.standard_normal((16, 4), np.float32), "W2"),
               numpy_helper.from_array(np.full(4, 1e-9, np.float32), "C"),
               numpy_helper.from_array(np.array([8], np.int64), "shape")]
    nodes = [helper.make_node("MatMul", ["X", "W1"], ["m"], name="mm1"),
             helper.make_node("Add", ["m", "B"], ["a"], name="add"),
             helper.make_node("Relu", ["a"], ["r"], name="relu"),
             helper.make_node("MatMul", ["r", "W2"], ["m2"], name="mm2"),
             helper.make_node("Sub", ["m2", "C"], ["s"], name="sub"),
             helper.make_node("Reshape", ["s", "shape"], ["Y"], name="reshape")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 16])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [8])], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = directory / "model.onnx"
    directory.mkdir()
    if external:
        onnx.save(model, path, save_as_external_data=True, all_tensors_to_one_file=True, location="weights.bin",
                  size_threshold=0)
        structure = onnx.load(path, load_external_data=False)
        for tensor in structure.graph.initializer:  # a float32 weight inside: converted the old way
            if tensor.name in inside:
                tensor.CopyFrom(next(w for w in weights if w.name == tensor.name))
        onnx.save(structure, path)
    else:
        onnx.save(model, path)
    return str(path)


def transform(kind: str):
    options = TransformOptions(keep_fp32=("sub",)) if kind != "fp64" else TransformOptions()
    return DoublePrecision(options) if kind == "fp64" else HalfPrecision(options, kind)


@pytest.mark.parametrize("kind", ["fp16", "bf16", "fp64"])
def test_streamed_weights_equal_the_in_memory_conversion_bit_for_bit(tmp_path, monkeypatch, kind):
    monkeypatch.setattr(streaming, "CHUNK", 7)  # many chunks, an odd last one, both buffers and the writer thread
    results = {}
    for external in (True, False):
        source = model_with(tmp_path / f"source-{external}", external)
        output = tmp_path / f"out-{external}" / f"model.{kind}.onnx"
        output.parent.mkdir()
        transform(kind).apply(source, str(output), lambda n: iter(()))
        results[external] = (onnx.load(str(output)), onnx.load(str(output), load_external_data=False))
    (streamed, streamed_refs), (in_memory, _) = results[True], results[False]
    locations = {t.name: {e.key: e.value for e in t.external_data}.get("location")
                 for t in streamed_refs.graph.initializer}
    assert locations == {"W1": f"model.{kind}.onnx.data", "B": f"model.{kind}.onnx.data", "W2": None,
                         "C": f"model.{kind}.onnx.data", "shape": "weights.bin"}  # streamed; kept inside; copied
    new = {"fp16": TensorProto.FLOAT16, "bf16": TensorProto.BFLOAT16, "fp64": TensorProto.DOUBLE}[kind]
    kept = TensorProto.FLOAT if kind != "fp64" else new  # C: --keep-fp32 sub, for the 16-bit kinds
    types = {t.name: t.data_type for t in streamed.graph.initializer}
    assert types == {"W1": new, "B": new, "W2": new, "C": kept, "shape": TensorProto.INT64}
    for tensor in streamed.graph.initializer:
        expected = next(t for t in in_memory.graph.initializer if t.name == tensor.name)
        assert (tensor.data_type, list(tensor.dims)) == (expected.data_type, list(expected.dims)), tensor.name
        ours, theirs = numpy_helper.to_array(tensor), numpy_helper.to_array(expected)
        assert ours.tobytes() == theirs.tobytes(), tensor.name  # bit for bit, NaN and clamped values included
    assert streamed.graph.node == in_memory.graph.node
    assert sorted(v.SerializeToString() for v in streamed.graph.value_info) == sorted(
        v.SerializeToString() for v in in_memory.graph.value_info)
    assert streamed.graph.input == in_memory.graph.input and streamed.graph.output == in_memory.graph.output


def test_a_chunk_converts_as_onnx_runtimes_converter_does_over_every_exponent():
    import ml_dtypes
    from onnxruntime.transformers.float16 import convert_np_to_float16

    rng = np.random.default_rng(5)
    with np.errstate(over="ignore"):  # some overflow to infinities, also wanted
        values = rng.standard_normal(20_000).astype(np.float32) * np.exp2(rng.integers(-150, 128, 20_000)).astype(
            np.float32)
    values = np.concatenate([values, EDGES, np.nextafter(EDGES, np.float32(np.inf))])
    expected = convert_np_to_float16(values)
    scratch = np.empty(values.size * streaming.SCRATCH, np.uint8)
    assert half_chunk(values, FLOAT16, scratch).tobytes() == expected.tobytes()
    assert half_chunk(values, BFLOAT16, scratch).tobytes() == expected.astype(np.float32).astype(
        ml_dtypes.bfloat16).tobytes()
    small = rng.standard_normal(1000).astype(np.float32)  # nothing to clamp: the masks are skipped
    assert half_chunk(small, FLOAT16, scratch).tobytes() == convert_np_to_float16(small).tobytes()


def test_a_streamed_fp16_model_runs_against_the_original_end_to_end(run_cli, tmp_path):
    source = model_with(tmp_path / "source", external=True, edges=False,
                         inside=("W2", "shape"))  # ONNX Runtime reads a Reshape's shape before external data
    result = run_cli("run", source, "--backend", "onnxrt:fp16", "--backend", "onnxrt", "--keep-fp32", "sub",
                     "--atol", "1e-2", "--rtol", "1e-2", "--save-transformed",
                     tmp_path / "saved")
    assert result.exit_code == 0, result.output
    assert "1/1 outputs passed" in result.output
