"""fp16 and bf16: compute in a 16-bit float, keeping the model's inputs and outputs in their types.

The conversion is ONNX Runtime's float16 converter (onnxruntime.transformers.float16), which keeps tensor names,
so per-layer comparison lines up the same tensors in both graphs; the casts it inserts have new names and are
therefore never compared. Ops in its default block list (ops without float16 kernels, listed by
``blocked_ops()``) stay in float32, as does anything named with --keep-fp32 (node names or op types); what one
kept node passes to another, or a float32 input to a kept node, is not rounded on the way (cmpx.transforms.kept_float32).
bf16 is the same graph with bfloat16 in place of float16.

Models over 2 GB work at disk speed: shapes are inferred without the weights, external float32 weights are
converted chunk by chunk straight from their file into the result's (cmpx.transforms.streamed, with
``half_chunk``, which gives exactly what the converter gives), and other external weights stay external
(cmpx.transforms.saving).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from cmpx.errors import UsageError
from cmpx.transforms.kept_float32 import join_kept_float32
from cmpx.transforms.options import TransformOptions
from cmpx.transforms.returned_as_is import put_back, set_aside
from cmpx.transforms.saving import read_external, save_model
from cmpx.transforms.streamed import detach

FLOAT, FLOAT16, BFLOAT16 = 1, 10, 16
SMALLEST_FLOAT16, LARGEST_FLOAT16 = 2.0**-24, 65504.0
LARGEST_FLOAT16_BITS = 0x477FE000  # float32 bits of 65504
HALF_SMALLEST_FLOAT16_BITS = 0x33000000  # float32 bits of 2**-25, which float16 rounds to zero


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

        from cmpx.model.graph import load_structure

        # the converter rewrites float32 weights in place, and infers shapes itself unless told it was done;
        # external ones are converted as they are written (placeholders meanwhile), any others are read in
        model = load_structure(model_path)
        detached = detach(model, model_path, half_chunk)
        read_external(model, model_path, loads=lambda tensor: tensor.data_type == TensorProto.FLOAT)
        node_names = {node.name for node in model.graph.node}
        op_types = {node.op_type for node in model.graph.node}
        unknown = [k for k in self.options.keep_fp32 if k not in node_names and k not in op_types]
        if unknown:
            raise UsageError(f"--keep-fp32: {unknown[0]!r} is neither a node name nor an op type of the model; "
                             "list the nodes with: cmpx tensors MODEL")
        keep_ops = [k for k in self.options.keep_fp32 if k in op_types and k not in node_names]  # a name first
        keep_nodes = [k for k in self.options.keep_fp32 if k in node_names]
        aside = set_aside(model.graph)  # outputs no node computes: the converter would define them twice
        converted = convert_float_to_float16(model, keep_io_types=True, op_block_list=blocked_ops() + keep_ops,
                                             node_block_list=keep_nodes, disable_shape_infer=True)
        converted = join_kept_float32(converted, node_names)
        put_back(converted.graph, aside, detached.tensors)
        if self.kind == "bf16":
            converted = to_bfloat16(converted)
        save_model(topologically_sorted(converted), output_path, model_path, detached)


def half_chunk(chunk, to: int, scratch):
    """A float32 chunk as the converter and ``to_bfloat16`` would make it in type ``to`` (float32: left as it
    is): float16 with the converter's clamping (a non-zero below float16's smallest subnormal becomes that
    subnormal, a finite value beyond float16's range its largest finite value; infinities and NaN stay), bfloat16
    through that float16. One cast, and two reductions over the magnitudes' bits that say whether any value
    needs clamping (rare: the masks that fix them cost four times the cast); the float16 result, the magnitudes
    and, for bfloat16, its float32 and bfloat16 values live in ``scratch`` (8 bytes per element), so no chunk
    allocates (page faults cost as much as the cast). ml_dtypes' bfloat16 cast costs 1.5× the rest."""
    import numpy as np

    if to == FLOAT:
        return chunk
    size = chunk.size
    magnitude = scratch[: 4 * size].view(np.uint32)
    half = scratch[4 * size: 6 * size].view(np.float16)
    with np.errstate(over="ignore"):
        np.copyto(half, chunk, casting="unsafe")
    np.bitwise_and(chunk.view(np.uint32), 0x7FFFFFFF, out=magnitude)
    if size and magnitude.max() > LARGEST_FLOAT16_BITS:  # beyond float16's range, or inf/NaN
        overflowed = np.isinf(half) & np.isfinite(chunk)
        half[overflowed] = np.copysign(np.float16(LARGEST_FLOAT16), chunk[overflowed])
    np.subtract(magnitude, 1, out=magnitude)  # zero wraps round to the largest: only non-zeros can be small
    if size and magnitude.min() < HALF_SMALLEST_FLOAT16_BITS:  # rounds to zero in float16
        lost = (half == 0) & (chunk != 0)
        half[lost] = np.copysign(np.float16(SMALLEST_FLOAT16), chunk[lost])
    if to == FLOAT16:
        return half
    if to == BFLOAT16:  # through float32 (exact), in scratch too: the magnitudes are done with
        import ml_dtypes

        wide = magnitude.view(np.float32)
        np.copyto(wide, half)
        brain = scratch[6 * size: 8 * size].view(ml_dtypes.bfloat16)
        np.copyto(brain, wide, casting="unsafe")
        return brain
    raise ValueError(f"a float32 weight cannot become ONNX type {to} in the fp16 transform")


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
