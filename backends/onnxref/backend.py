"""The ONNX reference evaluator backend. Runs only inside a cmpx worker process."""

from __future__ import annotations

import numpy as np
import onnx
from onnx.reference import ReferenceEvaluator

from cmpx import Backend
from cmpx_onnxref.ml_ops import NEW_OPS


class OnnxrefBackend(Backend):
    def load(self, model_path: str) -> None:
        model = model_path
        if self.marked:
            from cmpx.model.graph import exposed_model, model_directory

            model = exposed_model(model_path, self.marked)
            onnx.load_external_data_for_model(model, model_directory(model_path))
        if self.options.get("opset") is not None:
            model = _converted(onnx.load(model) if isinstance(model, str) else model, int(self.options["opset"]))
        self.evaluator = ReferenceEvaluator(model, new_ops=NEW_OPS)
        self.output_names = list(self.evaluator.output_names)

    def infer(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        outputs = self.evaluator.run(None, feeds)
        return dict(zip(self.output_names, outputs))

    def framework_version(self) -> str:
        """The reference evaluator is part of the onnx package: its version."""
        return onnx.__version__


class OpsetConversionError(ValueError):
    pass


def _converted(model: onnx.ModelProto, opset: int) -> onnx.ModelProto:
    """``model`` converted to ``opset`` of the default domain by ONNX's version converter."""
    from onnx import version_converter

    newest = onnx.defs.onnx_opset_version()
    if not 1 <= opset <= newest:
        raise OpsetConversionError(f"--onnxref-opset {opset}: this onnx knows opsets 1 to {newest}")
    try:
        return version_converter.convert_version(model, opset)
    except Exception as exc:  # the converter raises several types, naming the op it cannot convert
        raise OpsetConversionError(f"ONNX's version converter cannot take this model to opset {opset}: {exc}") \
            from None
