"""The coordinator reads a model's inputs and outputs from the protobuf wire format itself (no onnx import, weights
skipped). The oracle here is the protobuf library through onnx: on every model, and on every truncation of one,
both readers must agree on the inputs, the outputs, and whether the file is a valid model at all."""

from pathlib import Path

import numpy as np
import onnx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from cmpx.dtypes import ONNX_STRING, ONNX_TO_NUMPY
from cmpx.errors import ModelError
from cmpx.model.info import ModelInfo, TensorSpec, read_model
from cmpx.model.wire import WireError, fields

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "models"


def oracle(path: Path) -> ModelInfo | str:
    """What onnx's own protobuf parser says the model's inputs and outputs are, or the reason it is refused."""
    try:
        model = onnx.load_from_string(path.read_bytes())
    except Exception:  # noqa: BLE001 - any refusal by protobuf is "not a valid ONNX model"
        return "not a valid ONNX model"
    if model.ir_version <= 0 or not model.graph.output:
        return "not a valid ONNX model"
    graph = model.graph
    initialized = {t.name for t in graph.initializer} | {s.values.name for s in graph.sparse_initializer}
    try:
        inputs = tuple(_spec(v, "input") for v in graph.input if v.name not in initialized)
        outputs, unsupported = [], []
        for value in graph.output:
            try:
                outputs.append(_spec(value, "output"))
            except Unsupported as exc:
                unsupported.append((value.name, str(exc)))
    except ValueError as exc:
        return str(exc)
    return ModelInfo(str(path), inputs, tuple(outputs), tuple(unsupported))


class Unsupported(Exception):
    """An output cmpx cannot compare, which a run may leave out (string tensors)."""


def _spec(value, role: str) -> TensorSpec:
    kind = value.type.WhichOneof("value")
    if kind == "sequence_type" and role == "output":  # the only non-tensor the strategies below make
        elem = value.type.sequence_type.elem_type.tensor_type.elem_type
        return TensorSpec(value.name, ONNX_TO_NUMPY[elem], None, f"seq(tensor({ONNX_TO_NUMPY[elem]}))")
    if kind == "sequence_type":
        raise ValueError("is a sequence")
    if kind != "tensor_type":
        raise ValueError("is a value of no type")
    elem = value.type.tensor_type.elem_type
    if elem == ONNX_STRING:
        if role == "output":
            raise Unsupported("is a string tensor, and cmpx compares numbers")
        raise ValueError("is a string tensor")
    if elem not in ONNX_TO_NUMPY:
        raise ValueError(f"has ONNX element type {elem}")
    shape = None
    if value.type.tensor_type.HasField("shape"):
        shape = tuple((d.dim_value if d.dim_value >= 0 else None) if d.WhichOneof("value") == "dim_value"
                      else d.dim_param if d.WhichOneof("value") == "dim_param" else None
                      for d in value.type.tensor_type.shape.dim)
    return TensorSpec(value.name, ONNX_TO_NUMPY[elem], shape)


def ours(path: Path) -> ModelInfo | str:
    try:
        return read_model(str(path))
    except ModelError as exc:
        return str(exc)


def agree(path: Path) -> None:
    expected, got = oracle(path), ours(path)
    if isinstance(expected, ModelInfo):
        assert got == expected
    else:
        assert isinstance(got, str) and expected in got, (expected, got)


names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
dims = st.one_of(st.integers(-3, 8), st.integers(0, 1 << 40), names.filter(bool), st.none())
valid_types = st.sampled_from([TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.INT64,
                               TensorProto.BOOL, TensorProto.UINT8, TensorProto.FLOAT8E4M3FN])
faults = ["none"] * 12 + ["string", "undefined type", "unknown type", "sequence", "untyped", "no outputs",
                          "no IR version"]


@st.composite
def value_infos(draw, fault=None):
    name = draw(names)
    if fault == "sequence":
        return helper.make_value_info(name, helper.make_sequence_type_proto(
            helper.make_tensor_type_proto(TensorProto.FLOAT, None)))
    if fault == "untyped":
        return onnx.ValueInfoProto(name=name)
    elem = {"string": TensorProto.STRING, "undefined type": 0, "unknown type": 77}.get(fault) or draw(valid_types)
    shape = draw(st.one_of(st.none(), st.lists(dims, max_size=5)))
    value = helper.make_tensor_value_info(name, elem, shape)
    if shape is not None:
        for dim, wanted in zip(value.type.tensor_type.shape.dim, shape):
            if wanted is None:  # a dimension with neither a size nor a name
                dim.Clear()
    return value


def _weight(name: str, values: list[float]) -> onnx.TensorProto:
    return helper.make_tensor(name, TensorProto.FLOAT, [len(values)], values)


@st.composite
def models(draw):
    """Mostly valid models; some with one fault that makes the file, or one tensor in it, unusable."""
    fault = draw(st.sampled_from(faults))
    inputs = draw(st.lists(value_infos(), max_size=4))
    outputs = [] if fault == "no outputs" else draw(st.lists(value_infos(), min_size=1, max_size=3))
    if fault in ("string", "undefined type", "unknown type", "sequence", "untyped"):
        faulty = draw(value_infos(fault))
        (inputs if draw(st.booleans()) else outputs).insert(draw(st.integers(0, 3)), faulty)
    weights = [_weight(v.name, [1.0, 2.0]) for v in inputs if draw(st.booleans())]
    graph = helper.make_graph([], "g", inputs, outputs, weights)
    if inputs and draw(st.booleans()):  # a sparse initializer: the input it names is a weight too
        index = helper.make_tensor("i", TensorProto.INT64, [1], [0])
        graph.sparse_initializer.append(helper.make_sparse_tensor(_weight(inputs[-1].name, [3.0]), index, [4]))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    if fault == "no IR version":
        model.ir_version = draw(st.sampled_from([0, -1]))
    return model


@given(model=models())
def test_reads_what_protobuf_reads(tmp_path_factory, model):
    path = tmp_path_factory.mktemp("m") / "model.onnx"
    path.write_bytes(model.SerializeToString())
    agree(path)


@pytest.mark.parametrize("example", ["conv.onnx", "dynamic_identity.onnx"])
def test_every_truncation_is_refused_exactly_when_protobuf_refuses_it(tmp_path, example):
    data = (EXAMPLES / example).read_bytes()
    refused = 0
    for size in range(1, len(data) + 1):
        path = tmp_path / f"cut{size}.onnx"
        path.write_bytes(data[:size])
        agree(path)
        refused += isinstance(ours(path), str)
        path.unlink()
    assert refused > len(data) // 2  # most cuts land inside the graph


def test_weights_are_skipped_without_being_decoded(tmp_path):
    """A 64 MiB initializer that is also listed as an input is a weight, not something to feed."""
    model = onnx.load(EXAMPLES / "conv.onnx")
    big = numpy_helper.from_array(np.zeros(1 << 24, np.float32), "B")
    model.graph.initializer.append(big)
    model.graph.input.append(helper.make_tensor_value_info("B", TensorProto.FLOAT, [1 << 24]))
    path = tmp_path / "big.onnx"
    path.write_bytes(model.SerializeToString())
    info = read_model(str(path))
    assert [spec.name for spec in info.inputs] == ["X"]
    assert [spec.name for spec in info.outputs] == ["Y", "Z"]


def test_invalid_utf8_in_a_name_is_an_invalid_model(tmp_path):
    data = (EXAMPLES / "conv.onnx").read_bytes()
    assert data.count(b"\x0a\x01X") >= 1  # ValueInfoProto.name = "X"
    path = tmp_path / "bad.onnx"
    path.write_bytes(data.replace(b"\x0a\x01X", b"\x0a\x01\xff"))
    with pytest.raises(ModelError, match="not a valid ONNX model.*not valid UTF-8"):
        read_model(str(path))


@pytest.mark.parametrize("data, problem", [
    (b"\x08", "truncated varint"),
    (b"\x08" + b"\xff" * 10 + b"\x01", "varint longer than 10 bytes"),
    (b"\x00\x01", "field number 0"),
    (b"\x0b", "unsupported wire type 3"),
    (b"\x3a\x05abc", r"field 7 runs 2 byte\(s\) past the end"),
])
def test_malformed_wire_data(data, problem):
    with pytest.raises(WireError, match=problem):
        list(fields(memoryview(data)))


def test_wire_fields_are_views_of_the_buffer():
    data = bytearray(b"\x08\x96\x01\x12\x03abc\x1d\x01\x02\x03\x04")
    parsed = list(fields(memoryview(data)))
    assert [(n, w) for n, w, _ in parsed] == [(1, 0), (2, 2), (3, 5)]
    assert parsed[0][2] == 150
    assert bytes(parsed[1][2]) == b"abc"
    data[5] = ord("x")  # a view, not a copy
    assert bytes(parsed[1][2]) == b"xbc"


def test_a_plain_run_never_imports_onnx_in_the_coordinator():
    """Reading the model's interface is the coordinator's only need of it on a plain run (bench/README.md: onnx
    cost ~45 ms of CPU there); marking and transforms still use onnx."""
    import subprocess
    import sys

    probe = ("import atexit, sys\n"
             "atexit.register(lambda: print('ONNX_IMPORTED', 'onnx' in sys.modules, file=sys.stderr))\n"
             f"sys.argv[1:] = ['run', {str(EXAMPLES / 'conv.onnx')!r}, '--backend', 'onnxrt', '--backend', 'onnxref']\n"
             "from cmpx.cli.launch import main\n"
             "main()\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ONNX_IMPORTED False" in done.stderr
