"""The OpenVINO backend. Runs only inside a cmpx worker process."""

from __future__ import annotations

import os

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
        declared = _declared_outputs(model_path)
        if declared and not all(is_tensor for _, is_tensor in declared):
            model = _read_tensor_outputs(core, model_path, declared)
        else:
            model = core.read_model(model_path)
        # the names the model declares (a port can carry several), then the marked tensors it has
        wanted = [name for name, is_tensor in declared if is_tensor] if declared else \
            [output.get_any_name() for output in model.outputs]
        if self.marked:  # --mark-all / --onnx-outputs: OpenVINO keeps the ONNX tensor names; expose those it has
            present = {name for op in model.get_ordered_ops() for port in op.outputs() for name in port.get_names()}
            extra = [name for name in self.marked if name in present and name not in wanted]
            if extra:
                model.add_outputs(extra)
            wanted += extra
        config: dict[str, object] = {"INFERENCE_PRECISION_HINT": hint}
        threads = os.environ.get("OMP_NUM_THREADS", "")
        if device == "CPU" and threads.isdigit() and int(threads) > 0:  # OpenVINO's TBB threads ignore it otherwise
            config["INFERENCE_NUM_THREADS"] = int(threads)  # (a sweep's cell sets it, cmpx.sweep.threads)
        self.compiled = core.compile_model(model, device, config)
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


def _declared_outputs(model_path: str) -> list[tuple[str, bool]] | None:
    """An ONNX model's outputs as it declares them: (name, is a tensor); None for an OpenVINO IR."""
    if not model_path.lower().endswith(".onnx"):
        return None
    info = cmpx.read_model(model_path)
    return [(spec.name, spec.is_tensor) for spec in info.outputs] + [(name, False) for name, _ in info.unsupported]


def _read_tensor_outputs(core, model_path: str, declared: list[tuple[str, bool]]):
    """The ONNX model with only its tensor outputs: OpenVINO has no sequences or maps, and refuses a model that
    returns one (a scikit-learn classifier's ZipMap), so those are left out; cmpx reports them as not comparable
    and compares the others. A model without external data is read from memory without them (OpenVINO cannot even
    parse a map's type); one with external data through OpenVINO's front end, which keeps the weights' paths."""
    import onnx

    proto = onnx.load(model_path, load_external_data=False)
    if not any(t.data_location == onnx.TensorProto.EXTERNAL for t in proto.graph.initializer):
        tensors = [o for o in proto.graph.output if o.type.HasField("tensor_type")]
        del proto.graph.output[:]
        proto.graph.output.extend(tensors)
        typed = [v for v in proto.graph.value_info if v.type.HasField("tensor_type")]
        del proto.graph.value_info[:]
        proto.graph.value_info.extend(typed)
        return core.read_model(proto.SerializeToString(), b"")
    from openvino.frontend import FrontEndManager

    frontend = FrontEndManager().load_by_framework("onnx")
    model = frontend.load(model_path)
    model.override_all_outputs([model.get_place_by_tensor_name(name) for name, is_tensor in declared if is_tensor])
    return frontend.convert(model)


def _name(port, wanted: list[str]) -> str:
    """The output's name: of a port with several names (a compiled fp16 model's output is both ``logits`` and the
    converter's ``graph_output_cast_0``; ``get_any_name()`` may pick any), the one the model or the marking asked
    for."""
    names = port.get_names()
    return next((name for name in wanted if name in names), port.get_any_name())


def _spec(port) -> cmpx.TensorSpec:
    shape = port.get_partial_shape()
    dims = tuple(d.get_length() if d.is_static else None for d in shape) if shape.rank.is_static else None
    return cmpx.TensorSpec(port.get_any_name(), port.get_element_type().to_dtype().name, dims)
