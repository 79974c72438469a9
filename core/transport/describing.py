"""A model in a backend's own format (a TensorRT engine, an OpenVINO IR): cmpx reads only ONNX itself, so the
first backend of the run loads the model early and says what it takes and returns. That backend keeps the model
loaded, so its load request later costs nothing."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cmpx.transport import supervisor
from cmpx.errors import BackendError
from cmpx.model.info import ModelInfo, TensorSpec


def describe_model(workers: Mapping[str, supervisor.Worker], checked: Any) -> ModelInfo:
    """Ask the worker of the run's first backend (checked: cmpx.planning.Preflight) to load and describe the
    model. Raises the BackendError of a backend that fails, crashes or times out (the run cannot go on)."""
    backend = checked.backends[0]
    path = checked.request.model
    worker = workers[backend.name]
    request_id = worker.next_id()
    supervisor.send(worker, supervisor.load_request("describe", request_id, backend, path, (), checked.settings),
                    "load")
    reply = supervisor.wait_replies([worker], "described", "load", checked.timeouts,
                                    {backend.name: request_id})[backend.name]
    if isinstance(reply, BackendError):
        raise reply
    try:
        inputs, outputs = _specs(reply["inputs"]), _specs(reply["outputs"])
    except (KeyError, TypeError, ValueError) as exc:
        raise BackendError(backend.name, "load", f"protocol error: malformed description ({exc})") from None
    if not outputs:
        raise BackendError(backend.name, "load", f"describe() gave no outputs for {path}")
    for kind, specs in (("input", inputs), ("output", outputs)):
        names = [spec.name for spec in specs]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise BackendError(backend.name, "load", f"describe() gave {kind} {repeated[0]!r} twice")
    return ModelInfo(path, inputs, outputs)


def _specs(described: Any) -> tuple[TensorSpec, ...]:
    specs = []
    for name, dtype, shape in described:
        if not isinstance(name, str) or not isinstance(dtype, str):
            raise ValueError(f"{name!r}: name and dtype must be strings")
        specs.append(TensorSpec(name, dtype, None if shape is None else tuple(shape)))
    return tuple(specs)
