"""Tiny ONNX models for tests, built in code (no files shipped). Imports onnx and numpy when imported."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


def _model(nodes, inputs, outputs, initializers=(), opset: int = OPSET):
    """The model, with the oldest IR version its opset allows (older ONNX Runtimes refuse newer ones)."""
    graph = helper.make_graph(nodes, "test", inputs, outputs, list(initializers))
    opsets = [helper.make_opsetid("", opset)]
    model = helper.make_model(graph, opset_imports=opsets, ir_version=helper.find_min_ir_version_for(opsets))
    onnx.checker.check_model(model)
    return model


def matmul_chain(layers: int = 3, size: int = 8, seed: int = 0, perturb: int | None = None) -> onnx.ModelProto:
    """X[1,size] -> (MatMul, Tanh) x layers -> Y, plus a second output S = ReduceSum(Y).

    Weights are scaled so that activations keep their magnitude through the layers. ``perturb`` shifts one
    weight of layer ``perturb``: a twin that diverges exactly at MatMul_<perturb>.
    """
    rng = np.random.default_rng(seed)
    nodes, inits, current = [], [], "X"
    for i in range(layers):
        weight = (rng.standard_normal((size, size)) * 1.5 / np.sqrt(size)).astype(np.float32)
        if i == perturb:
            weight[0, 0] += 0.25
        inits.append(numpy_helper.from_array(weight, f"W{i}"))
        nodes.append(helper.make_node("MatMul", [current, f"W{i}"], [f"mm{i}"], name=f"MatMul_{i}"))
        current = f"t{i}" if i < layers - 1 else "Y"
        nodes.append(helper.make_node("Tanh", [f"mm{i}"], [current], name=f"Tanh_{i}"))
    nodes.append(helper.make_node("ReduceSum", ["Y"], ["S"], name="sum", keepdims=1))
    return _model(nodes, [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, size])],
                  [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, size]),
                   helper.make_tensor_value_info("S", TensorProto.FLOAT, [1, 1])], inits)


def dynamic_add() -> onnx.ModelProto:
    """A[N,3] + B[N,3] -> C, with a named dynamic batch dimension."""
    return _model([helper.make_node("Add", ["A", "B"], ["C"], name="add")],
                  [helper.make_tensor_value_info("A", TensorProto.FLOAT, ["N", 3]),
                   helper.make_tensor_value_info("B", TensorProto.FLOAT, ["N", 3])],
                  [helper.make_tensor_value_info("C", TensorProto.FLOAT, ["N", 3])])


def gather_model(rows: int = 10) -> onnx.ModelProto:
    """Gather rows of a constant table with int64 indices I[4] -> G[4,2]."""
    table = numpy_helper.from_array(np.arange(rows * 2, dtype=np.float32).reshape(rows, 2), "T")
    return _model([helper.make_node("Gather", ["T", "I"], ["G"], name="gather", axis=0)],
                  [helper.make_tensor_value_info("I", TensorProto.INT64, [4])],
                  [helper.make_tensor_value_info("G", TensorProto.FLOAT, [4, 2])], [table])


def save(model: onnx.ModelProto, path) -> str:
    onnx.save(model, str(path))
    return str(path)


def unary(op: str) -> onnx.ModelProto:
    """X[2,3] -> op -> Y, e.g. Log (NaN for negative inputs) or Reciprocal (inf for zeros)."""
    return _model([helper.make_node(op, ["X"], ["Y"], name=op.lower())],
                  [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 3])],
                  [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2, 3])])


def log_model() -> onnx.ModelProto:
    return unary("Log")


def reciprocal_model() -> onnx.ModelProto:
    return unary("Reciprocal")


def save_with_external_data(model: onnx.ModelProto, directory) -> str:
    """Save with every weight in weights.bin beside the model (as models over 2 GB must be)."""
    path = str(directory / "model.onnx")
    onnx.save(model, path, save_as_external_data=True, all_tensors_to_one_file=True, location="weights.bin",
              size_threshold=0)
    return path


def conv_model(seed: int = 0) -> onnx.ModelProto:
    """X[1,3,8,8] -> Conv(3->4, 3x3, pad 1) -> Relu -> Y, and GlobalAveragePool(Y) -> Z."""
    rng = np.random.default_rng(seed)
    weight = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "W")
    bias = numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "B")
    return _model([helper.make_node("Conv", ["X", "W", "B"], ["conv"], name="conv0", pads=[1, 1, 1, 1]),
                   helper.make_node("Relu", ["conv"], ["Y"], name="relu0"),
                   helper.make_node("GlobalAveragePool", ["Y"], ["Z"], name="pool0")],
                  [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 3, 8, 8])],
                  [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 4, 8, 8]),
                   helper.make_tensor_value_info("Z", TensorProto.FLOAT, [1, 4, 1, 1])], [weight, bias])


def named_outputs(names, intermediate: str = "hidden") -> onnx.ModelProto:
    """X[2,3] -> Mul(X, 1.5) -> ``intermediate`` (node "mul <intermediate>"); then one model output per name in
    ``names``, each a unary op (Tanh, Neg, Abs, Relu in turn) of the intermediate, in a node named after it. For
    tensor and node names that file systems or HTML treat specially."""
    ops = ("Tanh", "Neg", "Abs", "Relu")
    scale = numpy_helper.from_array(np.array(1.5, np.float32), "scale")
    nodes = [helper.make_node("Mul", ["X", "scale"], [intermediate], name=f"mul {intermediate}")]
    nodes += [helper.make_node(ops[i % len(ops)], [intermediate], [name], name=f"node {name}")
              for i, name in enumerate(names)]
    return _model(nodes, [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 3])],
                  [helper.make_tensor_value_info(name, TensorProto.FLOAT, [2, 3]) for name in names], [scale])


def two_faults(nodes: int = 60, batchnorm_at: int | None = 20, softmax_at: int | None = 45) -> onnx.ModelProto:
    """An opset-9 chain X[1,4,3,3] -> ``nodes`` nodes -> Y (every intermediate named t<i>, nodes node<i>_<Op>) of
    Add, Mul, Neg, Tanh and Sin, with a BatchNormalization at ``batchnorm_at`` and an axis-less Softmax at
    ``softmax_at``: the two ops onnx.reference (1.23) computes wrongly at opset 9, where ONNX Runtime and OpenVINO
    agree. Every other node agrees to float32 rounding, and an error once made reaches the output."""
    rng = np.random.default_rng(0)
    channels, chain, inits, current = 4, [], [], "X"
    ops = ("Add", "Mul", "Neg", "Tanh", "Add", "Mul", "Sin")
    for i in range(nodes):
        output = "Y" if i == nodes - 1 else f"t{i}"
        if i == batchnorm_at:
            for part, (low, high) in (("scale", (0.5, 1.5)), ("bias", (-0.5, 0.5)), ("mean", (-0.2, 0.2)),
                                      ("var", (0.5, 1.5))):
                inits.append(numpy_helper.from_array(rng.uniform(low, high, channels).astype(np.float32),
                                                     f"bn_{part}"))
            chain.append(helper.make_node("BatchNormalization", [current, "bn_scale", "bn_bias", "bn_mean", "bn_var"],
                                          [output], name=f"node{i}_BatchNormalization"))
        elif i == softmax_at:
            chain.append(helper.make_node("Softmax", [current], [output], name=f"node{i}_Softmax"))
        else:
            op = ops[i % len(ops)]
            inputs = [current]
            if op in ("Add", "Mul"):
                inits.append(numpy_helper.from_array(np.array(1.2 if op == "Mul" else 0.1, np.float32), f"c{i}"))
                inputs.append(f"c{i}")
            chain.append(helper.make_node(op, inputs, [output], name=f"node{i}_{op}"))
        current = output
    shape = [1, channels, 3, 3]
    return _model(chain, [helper.make_tensor_value_info("X", TensorProto.FLOAT, shape)],
                  [helper.make_tensor_value_info("Y", TensorProto.FLOAT, shape)], inits, opset=9)


def sequence_model() -> onnx.ModelProto:
    """X[3,4] -> Y = Relu(X) (a tensor) and S = SplitToSequence(X) (a sequence of 3 tensors [4]), with standard ops
    only, so that every backend runs it, yet one without sequences (OpenVINO) cannot produce S."""
    sequence = helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, None))
    return _model([helper.make_node("Relu", ["X"], ["Y"], name="relu"),
                   helper.make_node("SplitToSequence", ["X"], ["S"], name="split", axis=0, keepdims=0)],
                  [helper.make_tensor_value_info("X", TensorProto.FLOAT, [3, 4])],
                  [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [3, 4]),
                   helper.make_value_info("S", sequence)])


def optional_model() -> onnx.ModelProto:
    """X[3] -> Y = Relu(X), O = Optional(X) (an optional holding X) and E = an empty optional of float tensors:
    the reference evaluator holds optionals as one-element lists, ONNX Runtime as the value or None."""
    element = helper.make_tensor_type_proto(TensorProto.FLOAT, [3])
    optional = helper.make_optional_type_proto(element)
    return _model([helper.make_node("Relu", ["X"], ["Y"], name="relu"),
                   helper.make_node("Optional", ["X"], ["O"], name="holding"),
                   helper.make_node("Optional", [], ["E"], name="empty", type=element)],
                  [helper.make_tensor_value_info("X", TensorProto.FLOAT, [3])],
                  [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [3]), helper.make_value_info("O", optional),
                   helper.make_value_info("E", optional)])


def residual_block(size: int = 16, seed: int = 0) -> onnx.ModelProto:
    """X[1,size] -> a = Relu(X); b = a*W; c = b + a (a residual connection: a is read two nodes later);
    far = Sigmoid(c), read only by the last node; d = Tanh(c); e = d*W2; f = Tanh(e); Y = f + far."""
    rng = np.random.default_rng(seed)
    weights = [numpy_helper.from_array((rng.standard_normal(size) * 0.5).astype(np.float32), f"W{i}")
               for i in (1, 2)]
    nodes = [helper.make_node("Relu", ["X"], ["a"], name="relu"),
             helper.make_node("Mul", ["a", "W1"], ["b"], name="scale"),
             helper.make_node("Add", ["b", "a"], ["c"], name="residual"),
             helper.make_node("Sigmoid", ["c"], ["far"], name="gate"),
             helper.make_node("Tanh", ["c"], ["d"], name="tanh_1"),
             helper.make_node("Mul", ["d", "W2"], ["e"], name="scale_2"),
             helper.make_node("Tanh", ["e"], ["f"], name="tanh_2"),
             helper.make_node("Add", ["f", "far"], ["Y"], name="join")]
    return _model(nodes, [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, size])],
                  [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, size])], weights)


FP16_SENSITIVE = ("add_big", "sub_big", "power16", "scale_down")  # what fp16_islands needs kept in float32


def fp16_islands() -> onnx.ModelProto:
    """X[1,16] (feed it [1,2.5]) -> two branches of 14 named nodes that float16 computes well except at two planted
    places: Polygraphy's x + 65504 - 65504 (``add_big``, ``sub_big``: the sum rounds in float16) and x**16 / 1e5
    (``power16`` overflows float16, ``scale_down`` reads it): kept in float32 together (FP16_SENSITIVE), the model
    passes at --atol 1e-2 --rtol 2e-2; each pair needs both of its nodes, since the tensor between them would be
    rounded to float16 otherwise. For cmpx precision."""
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 16])
    consts = [numpy_helper.from_array(np.array(value, np.float32), name)
              for name, value in (("half", 0.5), ("two", 2.0), ("big", 65504.0), ("tiny", 1e-5), ("one", 1.0))]
    nodes = [
        helper.make_node("Mul", ["X", "half"], ["a0"], name="halve"),
        helper.make_node("Mul", ["a0", "two"], ["a1"], name="double"),
        helper.make_node("Add", ["a1", "big"], ["a2"], name="add_big"),
        helper.make_node("Sub", ["a2", "big"], ["a3"], name="sub_big"),
        helper.make_node("Relu", ["a3"], ["a4"], name="relu_a"),
        helper.make_node("Add", ["a4", "one"], ["YA"], name="shift_a"),
        helper.make_node("Abs", ["X"], ["b0"], name="abs_b"),
        helper.make_node("Mul", ["b0", "b0"], ["b1"], name="square"),
        helper.make_node("Mul", ["b1", "b1"], ["b2"], name="power4"),
        helper.make_node("Mul", ["b2", "b2"], ["b3"], name="power8"),
        helper.make_node("Mul", ["b3", "b3"], ["b4"], name="power16"),
        helper.make_node("Mul", ["b4", "tiny"], ["b5"], name="scale_down"),
        helper.make_node("Sqrt", ["b5"], ["b6"], name="root_b"),
        helper.make_node("Neg", ["b6"], ["YB"], name="negate_b"),
    ]
    outputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, 16]) for name in ("YA", "YB")]
    return _model(nodes, [x], outputs, consts)


INT8_SENSITIVE = ("outlier_matmul",)  # what int8_outlier needs left unquantized


def int8_outlier(size: int = 16) -> onnx.ModelProto:
    """X[4,16] -> MatMul -> Relu -> MatMul -> Relu -> MatMul -> Y, all named; the weights of ``outlier_matmul`` are
    small but for one outlier, so per-tensor int8 rounds all its other weights to zero (INT8_SENSITIVE); the
    others quantize well. With --atol 1e-2 --rtol 5e-2 int8 fails, and passes with outlier_matmul unquantized."""
    rng = np.random.default_rng(0)
    w1 = rng.uniform(0.5, 1.0, (size, size)).astype(np.float32) / size
    w2 = rng.uniform(0.5, 1.0, (size, size)).astype(np.float32) / size
    w2[0, 0] = 50.0
    w3 = rng.uniform(0.5, 1.0, (size, size)).astype(np.float32) / size
    weights = [numpy_helper.from_array(w, name) for w, name in ((w1, "W1"), (w2, "W2"), (w3, "W3"))]
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, [4, size])
    nodes = [helper.make_node("MatMul", ["X", "W1"], ["h1"], name="first_matmul"),
             helper.make_node("Relu", ["h1"], ["r1"], name="first_relu"),
             helper.make_node("MatMul", ["r1", "W2"], ["h2"], name="outlier_matmul"),
             helper.make_node("Relu", ["h2"], ["r2"], name="second_relu"),
             helper.make_node("MatMul", ["r2", "W3"], ["Y"], name="last_matmul")]
    return _model(nodes, [x], [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [4, size])], weights)
