"""The OpenVINO backend. Runs only inside a cmpx worker process."""

from __future__ import annotations

import numpy as np
import openvino

import cmpx

# --openvino-precision -> (OpenVINO's hint value, the capability the device must list)
PRECISIONS = {"f32": ("f32", "FP32"), "bf16": ("bf16", "BF16"), "f16": ("f16", "FP16")}


class PrecisionUnsupported(ValueError):
    pass


class OpenvinoBackend(cmpx.Backend):
    def load(self, model_path: str) -> None:
        core = openvino.Core()
        device = self.options.get("device") or "CPU"
        hint, capability = PRECISIONS[self.options.get("precision") or "f32"]
        capabilities = list(core.get_property(device, "OPTIMIZATION_CAPABILITIES"))
        if capability not in capabilities:
            raise PrecisionUnsupported(
                f"{device} has no {capability} support (it lists {', '.join(capabilities)}); choose another "
                f"--openvino-precision")
        model = core.read_model(model_path)
        wanted = [output.get_any_name() for output in model.outputs]
        if self.marked:  # --mark-all / --onnx-outputs: OpenVINO keeps the ONNX tensor names; expose those it has
            present = {name for op in model.get_ordered_ops() for port in op.outputs() for name in port.get_names()}
            extra = [name for name in self.marked if name in present and name not in wanted]
            if extra:
                model.add_outputs(extra)
            wanted += extra
        self.compiled = core.compile_model(model, device, {"INFERENCE_PRECISION_HINT": hint})
        self.request = self.compiled.create_infer_request()
        self.output_names = [_name(output, wanted) for output in self.compiled.outputs]

    def describe(self) -> tuple[list[cmpx.TensorSpec], list[cmpx.TensorSpec]]:
        """An OpenVINO IR (.xml) model's inputs and outputs; dynamic dimensions are None."""
        return [_spec(port) for port in self.compiled.inputs], [_spec(port) for port in self.compiled.outputs]

    def framework_version(self) -> str:
        """The release (2026.4.1), without the build suffix of ``openvino.__version__``."""
        return openvino.__version__.split("-")[0]

    def infer(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        results = self.request.infer(feeds)
        return {name: np.asarray(results[output]) for name, output in zip(self.output_names, self.compiled.outputs)}


def _name(port, wanted: list[str]) -> str:
    """The output's name: of a tensor with several names, the one the model (or the marking) asked for."""
    names = port.get_names()
    return next((name for name in wanted if name in names), port.get_any_name())


def _spec(port) -> cmpx.TensorSpec:
    shape = port.get_partial_shape()
    dims = tuple(d.get_length() if d.is_static else None for d in shape) if shape.rank.is_static else None
    return cmpx.TensorSpec(port.get_any_name(), port.get_element_type().to_dtype().name, dims)
