"""Regenerate the example models in examples/models/ (they are committed; run this only to change them).

    python examples/make_models.py
"""

from __future__ import annotations

import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
OPSET = 17


def _model(graph: onnx.GraphProto) -> onnx.ModelProto:
    """The model with the oldest IR version its opset allows, not this onnx's newest: older ONNX Runtimes refuse
    newer IR versions, and the examples should load on them too (compare versions: see docs/versions.md)."""
    opsets = [helper.make_opsetid("", OPSET)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=helper.find_min_ir_version_for(opsets))


def conv_model() -> onnx.ModelProto:
    """X[1,3,8,8] -> Conv(3->4, 3x3, pad 1) -> Relu -> Y, plus a global average pool output Z."""
    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "W")
    bias = numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "B")
    nodes = [
        helper.make_node("Conv", ["X", "W", "B"], ["conv"], name="conv0", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv"], ["Y"], name="relu0"),
        helper.make_node("GlobalAveragePool", ["Y"], ["Z"], name="pool0"),
    ]
    graph = helper.make_graph(
        nodes, "conv",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 4, 8, 8]),
         helper.make_tensor_value_info("Z", TensorProto.FLOAT, [1, 4, 1, 1])],
        [weight, bias])
    return _model(graph)


def dynamic_identity_model() -> onnx.ModelProto:
    """X[N,2,H,W] -> Identity -> Y, with dynamic N, H and W (set them with --input-shapes)."""
    graph = helper.make_graph(
        [helper.make_node("Identity", ["X"], ["Y"], name="identity0")], "dynamic_identity",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 2, "H", "W"])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["N", 2, "H", "W"])])
    return _model(graph)


def two_faults_model() -> onnx.ModelProto:
    """A 60-node opset-9 chain X[1,4,3,3] -> Y whose BatchNormalization (node 20) and axis-less Softmax (node 45)
    onnx.reference computes wrongly (cmpx.testing.models.two_faults): for --local-error and cmpx reduce."""
    from cmpx.testing.models import two_faults

    return two_faults()


def fp16_islands_model() -> onnx.ModelProto:
    """14 named nodes that float16 computes well but for two planted pairs (x + 65504 - 65504, x**16 / 1e5) that
    must stay in float32 (cmpx.testing.models.fp16_islands): for cmpx precision."""
    from cmpx.testing.models import fp16_islands

    return fp16_islands()


def main() -> None:
    os.makedirs(os.path.join(HERE, "models"), exist_ok=True)
    for name, model in [("conv", conv_model()), ("dynamic_identity", dynamic_identity_model()),
                        ("two_faults", two_faults_model()), ("fp16_islands", fp16_islands_model())]:
        onnx.checker.check_model(model)
        onnx.save(model, os.path.join(HERE, "models", f"{name}.onnx"))


if __name__ == "__main__":
    main()
