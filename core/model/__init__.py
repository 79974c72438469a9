"""Reading ONNX models: inputs and outputs straight from the protobuf wire format (``info``, ``wire``), the tensor
graph (``graph``), what to mark (``marking``), input shapes (``shapes``) and models in a backend's own format
(``native``). ``TensorSpec`` and ``ModelInfo`` are re-exported here for plugins; nothing heavy is imported."""

from cmpx.model.info import Dim, ModelInfo, TensorSpec, format_shape, read_model

__all__ = ["Dim", "ModelInfo", "TensorSpec", "format_shape", "read_model"]
