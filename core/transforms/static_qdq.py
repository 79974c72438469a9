"""int8 and fp8: static Q/DQ quantization (ONNX Runtime's quantizer), calibrated with the run's own data loader.

Weights and activations are quantized per tensor, calibrated on ``--calibration-iterations`` feeds from the same
data the run uses (synthetic, saved or script data). With ``--calibration-cache PATH`` the calibrated ranges are
read from PATH when it exists (no calibration data is drawn then), and written there otherwise: a JSON file that
records its calibration method, so an int8 cache is refused for fp8 and the other way round. ``--no-quantize``
names nodes (or op types) the quantizer leaves in float (its ``nodes_to_exclude``).

In the result each quantized tensor's name is its DequantizeLinear output, the value the quantized model gives it
(cmpx.transforms.dequantized_names), so per-layer comparison compares that, not the value before quantization.

- int8: signed 8-bit integers, MinMax calibration; Relu/Clip after a quantized op are folded into its Q/DQ pair
  (the integer range clamps them). A model below opset 19 is raised to 19 first where ONNX's version converter
  can: the reference evaluator implements QuantizeLinear/DequantizeLinear only from opset 19, and this way
  ``onnxref:int8`` can check ``onnxrt:int8`` (if the conversion fails, the model keeps its opset).
- fp8: float8 E4M3 (``float8_e4m3fn``, as TensorRT's fp8), the distribution calibration ONNX Runtime requires for
  float types; the model is raised to opset 19 (float8 Q/DQ). Activations such as Relu are kept: a float8 range is
  symmetric and would not clamp them (ONNX Runtime's quantizer folds them otherwise, which changes the model).
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from cmpx.errors import UsageError
from cmpx.transforms.options import TransformOptions
from cmpx.transforms.returned_as_is import put_back, set_aside
from cmpx.transforms.saving import has_external_data, load_for_transform, save_model

QUANTIZED = ("QuantizeLinear", "DequantizeLinear")


QDQ_OPSET = 19  # the first opset whose QuantizeLinear/DequantizeLinear the reference evaluator implements


@dataclass(frozen=True)
class QuantizationKind:
    quant_type: str  # onnxruntime.quantization.QuantType member
    calibration: str  # onnxruntime.quantization.CalibrationMethod member
    extra_options: dict[str, Any] = field(default_factory=dict)
    raise_opset: bool = False  # raise the model to QDQ_OPSET first (fp8: ONNX Runtime's quantizer does it)


KINDS = {
    "int8": QuantizationKind("QInt8", "MinMax", raise_opset=True),
    "fp8": QuantizationKind("QFLOAT8E4M3FN", "Distribution", {"QDQKeepRemovableActivations": True}),
}


class StaticQuantization:
    def __init__(self, options: TransformOptions, kind: str):
        self.options = options
        self.kind = kind
        self.calibrated_from_cache = False

    def apply(self, model_path: str, output_path: str, calibration: Callable[[int], Iterator[Any]]) -> None:
        import logging
        import os
        import tempfile

        from onnxruntime.quantization import CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType, \
            quantize_static

        class Reader(CalibrationDataReader):
            def __init__(self, feeds: Iterator[Any]):
                self.feeds = feeds

            def get_next(self):
                return next(self.feeds, None)

        kind = KINDS[self.kind]
        cache = self.options.calibration_cache
        self.calibrated_from_cache = bool(cache and os.path.isfile(cache))
        reader = None if self.calibrated_from_cache else Reader(calibration(self.options.calibration_iterations))
        model = load_for_transform(model_path, loads=lambda tensor: False)  # the quantizer reads the weights
        excluded = excluded_nodes(model, self.options.no_quantize)
        source_model = _raised_opset(model) if kind.raise_opset else model
        aside = set_aside(source_model.graph)  # outputs no node computes: the quantizer would see a cycle
        with tempfile.TemporaryDirectory(prefix=f"cmpx-{self.kind}-") as scratch:
            source = os.path.join(scratch, "model.onnx")
            save_model(source_model, source, model_path)
            external = has_external_data(source)  # then the quantizer keeps weights external too (> 2 GB)
            root = logging.getLogger()
            level = root.level
            root.setLevel(logging.ERROR)  # the quantizer's advice goes to the root logger; keep the report clean
            try:
                with contextlib.redirect_stdout(io.StringIO()):  # and its calibrators print their progress
                    quantize_static(source, output_path, reader, quant_format=QuantFormat.QDQ,
                                    activation_type=getattr(QuantType, kind.quant_type),
                                    weight_type=getattr(QuantType, kind.quant_type),
                                    calibrate_method=getattr(CalibrationMethod, kind.calibration),
                                    extra_options=dict(kind.extra_options), calibration_cache_path=cache,
                                    nodes_to_exclude=excluded,
                                    use_external_data_format=external)
            except (ValueError, RuntimeError, KeyError, TypeError) as exc:
                raise UsageError(f"{self.kind}: ONNX Runtime's quantizer failed on {model_path}: {exc}") from exc
            finally:
                root.setLevel(level)
        if not excluded:  # with nodes left out on purpose, a graph with nothing quantized is what was asked
            _check_quantized(self.kind, model, output_path)
        _name_dequantized_values(output_path, aside, model_path)


def excluded_nodes(model, words: tuple[str, ...]) -> list[str]:
    """The names of the nodes --no-quantize leaves unquantized: each word a node name or an op type (all its nodes);
    a word that is neither is a UsageError. A node without a name cannot be named to the quantizer."""
    names = {node.name for node in model.graph.node if node.name}
    by_type: dict[str, list[str]] = {}
    for node in model.graph.node:
        by_type.setdefault(node.op_type, []).append(node.name)
    unknown = [word for word in words if word not in names and word not in by_type]
    if unknown:
        raise UsageError(f"--no-quantize: {unknown[0]!r} is neither a node name nor an op type of the model; "
                         "list the nodes with: cmpx tensors MODEL")
    chosen = [name for word in words for name in ([word] if word in names else by_type[word]) if name]
    return list(dict.fromkeys(chosen))


def _name_dequantized_values(output_path: str, aside: list[tuple[int, Any]], model_path: str) -> None:
    """Give each quantized tensor's name to the value the quantized model computes for it, its DequantizeLinear
    output (cmpx.transforms.dequantized_names says why), and put back the outputs set aside; the weights stay
    where the quantizer wrote them."""
    import onnx

    from cmpx.transforms.dequantized_names import name_dequantized_values

    quantized = onnx.load(output_path, load_external_data=False)
    renamed = name_dequantized_values(quantized.graph)
    _return_dequantized_weights(quantized.graph, aside)
    try:
        put_back(quantized.graph, aside)
    except ValueError as exc:
        raise UsageError(f"the quantizer changed {model_path} too much: {exc}") from None
    if renamed or aside:
        onnx.save(quantized, output_path)  # external tensors keep their references: only the graph is rewritten


def _return_dequantized_weights(graph: Any, aside: list[tuple[int, Any]]) -> None:
    """A weight the model returned as it is, now quantized (gone, its value the output of its DequantizeLinear):
    that value is returned under the weight's name."""
    from onnx import helper

    there = {name for node in graph.node for name in node.output} | {t.name for t in graph.initializer} | {
        i.name for i in graph.input}
    for _, output in aside:
        dequantized = f"{output.name}_DequantizeLinear_Output"
        if output.name not in there and dequantized in there:
            graph.node.append(helper.make_node("Identity", [dequantized], [output.name],
                                               name=f"{output.name}_returned"))


def _raised_opset(model):
    """``model`` at QDQ_OPSET of the default domain, or ``model`` itself where it is there already or ONNX's
    version converter cannot take it there."""
    from onnx import version_converter

    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), QDQ_OPSET)
    if opset >= QDQ_OPSET:
        return model
    try:
        return version_converter.convert_version(model, QDQ_OPSET)
    except Exception:  # noqa: BLE001 - the converter raises many types; the original opset still quantizes
        return model


def _check_quantized(kind: str, original, output_path: str) -> None:
    import onnx

    quantized = onnx.load(output_path, load_external_data=False)
    if not any(node.op_type in QUANTIZED for node in quantized.graph.node):
        nodes = ", ".join(f"{node.name or '(unnamed)'} ({node.op_type})" for node in original.graph.node[:8])
        raise UsageError(f"{kind}: no node of the model could be quantized (nodes: {nodes}); {kind} needs operators "
                         "such as Conv, MatMul or Gemm")
