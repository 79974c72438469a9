"""int8: static Q/DQ quantization (ONNX Runtime's quantizer), calibrated with the run's own data loader.

Weights and activations are int8, per tensor, MinMax calibration on ``--calibration-iterations`` feeds from the
same data the run uses (synthetic, saved or script data). With ``--calibration-cache PATH`` the calibrated ranges
are read from PATH when it exists (no calibration data is drawn then), and written there otherwise: a JSON file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from cmpx.errors import UsageError
from cmpx.transforms.options import TransformOptions
from cmpx.transforms.saving import load_full, save_model

QUANTIZED = ("QuantizeLinear", "DequantizeLinear")


class StaticInt8:
    suggested_tolerance = 1e-1

    def __init__(self, options: TransformOptions):
        self.options = options
        self.calibrated_from_cache = False

    def apply(self, model_path: str, output_path: str, calibration: Callable[[int], Iterator[Any]]) -> None:
        import logging
        import os
        import tempfile

        from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

        class Reader(CalibrationDataReader):
            def __init__(self, feeds: Iterator[Any]):
                self.feeds = feeds

            def get_next(self):
                return next(self.feeds, None)

        cache = self.options.calibration_cache
        self.calibrated_from_cache = bool(cache and os.path.isfile(cache))
        reader = None if self.calibrated_from_cache else Reader(calibration(self.options.calibration_iterations))
        model = load_full(model_path)
        with tempfile.TemporaryDirectory(prefix="cmpx-int8-") as scratch:
            source = os.path.join(scratch, "model.onnx")
            save_model(model, source)
            root = logging.getLogger()
            level = root.level
            root.setLevel(logging.ERROR)  # the quantizer's advice goes to the root logger; keep the report clean
            try:
                quantize_static(source, output_path, reader, quant_format=QuantFormat.QDQ,
                                activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                                calibration_cache_path=cache)
            except (ValueError, RuntimeError, KeyError, TypeError) as exc:
                raise UsageError(f"int8: ONNX Runtime's quantizer failed on {model_path}: {exc}") from exc
            finally:
                root.setLevel(level)
        _check_quantized(model, output_path)


def _check_quantized(original, output_path: str) -> None:
    import onnx

    quantized = onnx.load(output_path, load_external_data=False)
    if not any(node.op_type in QUANTIZED for node in quantized.graph.node):
        nodes = ", ".join(f"{node.name or '(unnamed)'} ({node.op_type})" for node in original.graph.node[:8])
        raise UsageError(f"int8: no node of the model could be quantized (nodes: {nodes}); int8 needs operators "
                         "such as Conv, MatMul or Gemm")
