"""The ONNX reference evaluator backend. Runs only inside a cmpx worker process."""

from __future__ import annotations

import numpy as np
import onnx
from onnx.reference import ReferenceEvaluator

from cmpx import Backend
from cmpx_onnxref.ml_ops import NEW_OPS


class OnnxrefBackend(Backend):
    def load(self, model_path: str) -> None:
        model: str | onnx.ModelProto = model_path
        if self.marked:
            from cmpx.model.graph import exposed_model, model_directory

            exposed = exposed_model(model_path, self.marked)
            onnx.load_external_data_for_model(exposed, model_directory(model_path))
            model = exposed
        if self.options.get("opset") is not None:
            model = _converted(onnx.load(model) if isinstance(model, str) else model, int(self.options["opset"]))
        try:
            self.evaluator = ReferenceEvaluator(model, new_ops=NEW_OPS)
        except RuntimeError as exc:
            raise _with_opset_hint(exc) from exc
        self.output_names = list(self.evaluator.output_names)
        self.optional = {o.name for o in self.evaluator.proto_.graph.output if o.type.HasField("optional_type")}

    def infer(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        outputs = self.evaluator.run(None, feeds)
        return {name: _unwrapped(value) if name in self.optional else value
                for name, value in zip(self.output_names, outputs)}

    def framework_version(self) -> str:
        """The reference evaluator is part of the onnx package: its version."""
        return onnx.__version__


def _unwrapped(value):
    """An optional output as ONNX Runtime gives it (the value, or None when empty): the reference evaluator's
    Optional op holds it in a one-element list ([x], [None]), where a bare value (from other ops) is kept."""
    if isinstance(value, list) and len(value) == 1 and (value[0] is None or isinstance(value[0], (list, np.ndarray))):
        return value[0]
    return value


def _with_opset_hint(exc: RuntimeError) -> RuntimeError:
    """The reference evaluator implements some ops from a newer opset only ('No implementation for operator
    DequantizeLinear ... version 13, found 19, ...'): the error, and the option that runs it converted."""
    text = str(exc)
    if "No implementation for operator" in text and "found" in text:
        newer = [word.strip(" .,") for word in text.rsplit("found", 1)[1].split(",")]
        opset = next((word for word in newer if word.isdigit()), None)
        if opset is not None:
            return RuntimeError(f"{text.rstrip('.')}; the reference evaluator implements it from opset {opset}: run "
                                f"it on the model converted there with --onnxref-opset {opset}")
    return exc


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
