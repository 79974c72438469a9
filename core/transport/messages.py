"""The messages coordinator and workers exchange, one TypedDict per op (msgpack maps on the wire; see protocol.py).

Coordinator -> worker: ``setup`` (first; no reply), ``describe`` (load a model in the backend's own format and say
its inputs and outputs), ``load``, ``infer``, ``close``.
Worker -> coordinator: ``hello`` (on start, with the protocol version it speaks and the Python it runs on),
``progress`` (a status text, any time; no reply), ``described``, ``ready`` (after load, with the framework's version),
``result`` (after infer), ``error`` (an exception: type, message, traceback), ``bye`` (after close).
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

PROTOCOL_VERSION = 5


class PluginsMessage(TypedDict):
    autoload: bool
    extra: list[str]  # plugin modules named with -p / CMPX_PLUGINS: imported in the worker too
    blocked: list[str]


class TensorDescriptor(TypedDict):
    """Where a tensor lies in shared memory: the bytes never travel in a frame."""

    name: str
    segment: str
    offset: int
    dtype: str
    shape: list[int]


class OutputDescriptor(TensorDescriptor, total=False):
    """An output in a ``result``: a tensor; a sequence, map or optional (its values as a 1-D tensor, plus its
    ``structure``: see cmpx.structured); or, with only ``name`` and ``not_comparable`` (why), an output the worker
    could not pass on (strings, objects)."""

    structure: list[Any]
    not_comparable: str


# -- coordinator -> worker ------------------------------------------------------------------------------------


class Setup(TypedDict):
    op: Literal["setup"]
    backend: str
    target: str  # "module:Class" of its cmpx.Backend
    plugins: PluginsMessage


class Load(TypedDict):
    """Also the shape of ``describe``: a worker that described a model answers the same load without loading. A
    later load replaces the loaded model (its backend is closed first): --local-error runs subgraphs this way."""

    op: Literal["load", "describe"]
    id: int
    backend: str
    options: dict[str, Any]
    model: str
    mark: list[str]


class Infer(TypedDict, total=False):
    op: Literal["infer"]
    id: int
    inputs: list[TensorDescriptor]
    out_prefix: str
    warm_up: int  # untimed inferences to run first (--warm-up; on the first iteration only)
    out_bytes: int  # optional: the bytes the outputs are expected to take (a sliced run's slice)


class Close(TypedDict):
    op: Literal["close"]
    id: int


# -- worker -> coordinator ------------------------------------------------------------------------------------


class Hello(TypedDict):
    op: Literal["hello"]
    pid: int
    protocol: int
    python: str  # the worker's interpreter (sys.executable)
    python_version: str  # "3.11.7"
    prefix: str  # its environment (sys.prefix)
    venv: bool  # the environment is a virtual environment
    cmpx: str  # the directory of the cmpx package the worker runs (installed there, or linked in by the coordinator)
    cmpx_version: str


class Progress(TypedDict):
    op: Literal["progress"]
    text: str


class Described(TypedDict):
    op: Literal["described"]
    id: int
    inputs: list[list[Any]]  # [name, dtype, shape or None]
    outputs: list[list[Any]]
    seconds: float


class Ready(TypedDict):
    op: Literal["ready"]
    id: int
    seconds: float
    framework_version: str | None  # Backend.framework_version()


class Result(TypedDict):
    op: Literal["result"]
    id: int
    outputs: list[OutputDescriptor]
    seconds: float


class Error(TypedDict):
    op: Literal["error"]
    id: int | None
    type: str
    message: str
    traceback: str


class Bye(TypedDict):
    op: Literal["bye"]
    id: int


ToWorker = Setup | Load | Infer | Close
FromWorker = Hello | Progress | Described | Ready | Result | Error | Bye
TO_WORKER = frozenset({"setup", "describe", "load", "infer", "close"})
FROM_WORKER = frozenset({"hello", "progress", "described", "ready", "result", "error", "bye"})
