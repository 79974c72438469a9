"""fp16 and bf16: compute in a 16-bit float, keeping the model's inputs and outputs in their types.

The conversion is ONNX Runtime's float16 converter (onnxruntime.transformers.float16), which keeps tensor names,
so per-layer comparison lines up the same tensors in both graphs; the casts it inserts have new names and are
therefore never compared. Ops in its default block list (ops without float16 kernels, listed by
``blocked_ops()``) stay in float32, as does anything named with --keep-fp32 (node names or op types); what one
kept node passes to another, or a float32 input to a kept node, is not rounded on the way (cmpx.transforms.kept_float32).
bf16 is the same graph with bfloat16 in place of float16.

Models over 2 GB work: shapes are inferred without the weights, only float32 weights (the ones converted) are
read, and other external weights stay external (cmpx.transforms.saving).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from cmpx.errors import UsageError
from cmpx.transforms.kept_float32 import join_kept_float32
from cmpx.transforms.options import TransformOptions
from cmpx.transforms.saving import load_for_transform, save_model


def blocked_ops() -> list[str]:
    from onnxruntime.transformers.float16 import DEFAULT_OP_BLOCK_LIST

    return list(DEFAULT_OP_BLOCK_LIST)


class HalfPrecision:
    def __init__(self, options: TransformOptions, kind: str):
        self.options = options
        self.kind = kind

    def apply(self, model_path: str, output_path: str, calibration: Callable[[int], Iterator[Any]]) -> None:
        from onnx import TensorProto
        from onnxruntime.transformers.float16 import convert_float_to_float16

        # the converter rewrites float32 weights in place, and infers shapes itself unless told it was done
        model = load_for_transform(model_path, loads=lambda tensor: tensor.data_type == TensorProto.FLOAT)
        node_names = {node.name for node in model.graph.node}
        op_types = {node.op_type for node in model.graph.node}
        unknown = [k for k in self.options.keep_fp32 if k not in node_names and k not in op_types]
        if unknown:
            raise UsageError(f"--keep-fp32: {unknown[0]!r} is neither a node name nor an op type of the model; "
                             "list the nodes with: cmpx tensors MODEL")
        keep_ops = [k for k in self.options.keep_fp32 if k in op_types and k not in node_names]  # a name first
        keep_nodes = [k for k in self.options.keep_fp32 if k in node_names]
        converted = convert_float_to_float16(model, keep_io_types=True, op_block_list=blocked_ops() + keep_ops,
                                             node_block_list=keep_nodes, disable_shape_infer=True)
        converted = join_kept_float32(converted, node_names)
        if self.kind == "bf16":
            converted = to_bfloat16(converted)
        save_model(topologically_sorted(converted), output_path, model_path)


def topologically_sorted(model):
    """The model with its nodes in an order where every input is produced before use, as ONNX requires (the
    converter appends the casts it inserts at the end; ONNX Runtime copes, the reference evaluator does not)."""
    graph = model.graph
    available = {i.name for i in graph.input} | {i.name for i in graph.initializer} | {""}
    pending = list(graph.node)
    ordered = []
    while pending:
        ready = [node for node in pending if all(name in available for name in node.input)]
        if not ready:  # a cycle or a subgraph reference: keep the rest as it was
            ordered += pending
            break
        for node in ready:
            ordered.append(node)
            available.update(node.output)
        pending = [node for node in pending if node not in ready]
    nodes = [type(node)() for node in ordered]
    for copy, node in zip(nodes, ordered):
        copy.CopyFrom(node)
    del graph.node[:]
    graph.node.extend(nodes)
    return model


def to_bfloat16(model):
    """The float16 graph with every float16 (types, casts, weights) turned into bfloat16."""
    import ml_dtypes
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    def retype(value_infos):
        for value in value_infos:
            if value.type.tensor_type.elem_type == TensorProto.FLOAT16:
                value.type.tensor_type.elem_type = TensorProto.BFLOAT16

    graph = model.graph
    for index, initializer in enumerate(graph.initializer):
        if initializer.data_type == TensorProto.FLOAT16:
            array = numpy_helper.to_array(initializer).astype(np.float32).astype(ml_dtypes.bfloat16)
            graph.initializer[index].CopyFrom(helper.make_tensor(
                initializer.name, TensorProto.BFLOAT16, array.shape, array.view(np.uint16).tobytes(), raw=True))
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.name == "to" and attribute.i == TensorProto.FLOAT16:
                attribute.i = TensorProto.BFLOAT16
            if attribute.name == "value" and attribute.t.data_type == TensorProto.FLOAT16:
                array = numpy_helper.to_array(attribute.t).astype(np.float32).astype(ml_dtypes.bfloat16)
                attribute.t.CopyFrom(helper.make_tensor(attribute.t.name, TensorProto.BFLOAT16, array.shape,
                                                        array.view(np.uint16).tobytes(), raw=True))
    retype(graph.value_info)
    retype(graph.input)
    retype(graph.output)
    return model
