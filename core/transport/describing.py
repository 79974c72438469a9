"""A model in a backend's own format (a TensorRT engine, an OpenVINO IR): cmpx reads only ONNX itself, so the
first backend of the run loads the model early and says what it takes and returns. That backend keeps the model
loaded, so its load request later costs nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cmpx.errors import BackendFailed, BackendProtocolError
from cmpx.model.info import ModelInfo, TensorSpec
from cmpx.transport import supervisor

if TYPE_CHECKING:
    from cmpx.plan import BackendPlan


def describe_model(worker: supervisor.Worker, backend: BackendPlan, path: str, timeout: float) -> ModelInfo:
    """Ask ``worker`` (the run's first backend's) to load and describe the model at ``path``. Raises the
    BackendFailed of a backend that fails, crashes or times out (the run cannot go on)."""
    request_id = worker.next_id()
    supervisor.send(worker, supervisor.load_request("describe", request_id, backend, path, ()), "load")
    reply = supervisor.wait_replies([worker], "described", "load", timeout, {backend.name: request_id})[backend.name]
    if isinstance(reply, BackendFailed):
        raise reply
    try:
        inputs, outputs = _specs(reply["inputs"]), _specs(reply["outputs"])
    except (KeyError, TypeError, ValueError) as exc:
        raise BackendProtocolError(backend.name, "load", f"malformed description ({exc})") from None
    if not outputs:
        raise BackendFailed(backend.name, "load", f"describe() gave no outputs for {path}")
    for kind, specs in (("input", inputs), ("output", outputs)):
        names = [spec.name for spec in specs]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise BackendFailed(backend.name, "load", f"describe() gave {kind} {repeated[0]!r} twice")
    return ModelInfo(path, inputs, outputs)


def _specs(described: Any) -> tuple[TensorSpec, ...]:
    specs = []
    for name, dtype, shape in described:
        if not isinstance(name, str) or not isinstance(dtype, str):
            raise ValueError(f"{name!r}: name and dtype must be strings")
        specs.append(TensorSpec(name, dtype, None if shape is None else tuple(shape)))
    return tuple(specs)
