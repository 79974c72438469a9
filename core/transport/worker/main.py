"""The worker's loop: receive load/infer/close, drive one backend, answer with descriptors only."""

from __future__ import annotations

import importlib
import json
import operator
import os
import pkgutil
import signal
import sys
import threading
import time
import traceback
from typing import Any, cast

import numpy as np

from cmpx.plugin.backend import Backend
from cmpx.errors import ExitCode, bounded
from cmpx.structured import NotComparable, StructureError, Structured, flatten
from cmpx.transport import protocol, shm
from cmpx.transport.arena import Allocations, MappingCache
from cmpx.transport.messages import Load, Setup
from cmpx.transport.worker.parent_watch import die_with_parent

MAPPING_BUDGET = 1 << 30  # output segments kept mapped between inferences
MESSAGE_LIMIT = 16 << 10  # characters of an error message sent to the coordinator (head and tail kept)
TRACEBACK_LIMIT = 64 << 10


class WorkerError(Exception):
    """A problem the worker reports about the backend's contract (bad target, bad outputs...)."""


def main(argv: list[str]) -> int:
    """``FD_IN FD_OUT PARENT_PID``. The worker says hello as soon as it is up; its first request is ``setup``
    (backend name, resolved target, plugin settings), after which it imports its backend at once, while the
    coordinator is still reading the model. A worker can so be started before the coordinator knows its
    backend (cmpx starts them while it parses the command line)."""
    fd_in, fd_out, parent_pid = (int(a) for a in argv[:3])
    die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the coordinator decides when workers stop
    outbox = _Outbox(fd_out)
    state = _State(outbox)
    outbox.send(hello())
    while True:
        try:
            message = protocol.read_frame(fd_in)
        except protocol.ProtocolError:
            return ExitCode.INTERNAL
        if message is None:  # the coordinator is gone or closed the pipe
            return ExitCode.PASSED
        if message["op"] == "setup":  # no reply: a failure is reported when the load request comes
            state.prepare(cast("Setup", message))  # decoded: its fields are checked where they are read
            continue
        reply = _handle(state, message)
        outbox.send(reply)
        if message["op"] == "close":
            return ExitCode.PASSED


def hello() -> dict[str, Any]:
    """The first frame: the protocol this worker speaks, and where it runs (which Python, which cmpx)."""
    from cmpx import _version

    return {"op": "hello", "pid": os.getpid(), "protocol": protocol.PROTOCOL_VERSION, "python": sys.executable,
            "python_version": sys.version.split()[0], "prefix": sys.prefix, "venv": sys.prefix != sys.base_prefix,
            "cmpx": os.path.dirname(os.path.abspath(_version.__file__)), "cmpx_version": _version.__version__}


class _Outbox:
    """Every frame the worker writes goes through here, one at a time: a backend may report progress from a
    thread of its own while the main thread answers a request."""

    PROGRESS_INTERVAL = 0.1

    def __init__(self, fd_out: int):
        self.fd_out = fd_out
        self.lock = threading.Lock()
        self.progress_at = 0.0

    def send(self, message: dict[str, Any]) -> None:
        with self.lock:
            protocol.write_frame(self.fd_out, message)

    def progress(self, text: str) -> None:
        """``Backend.progress``: the backend's status text, sent at most every 0.1 s (more frequent updates are
        dropped; the status line shows the latest that arrived)."""
        now = time.monotonic()
        with self.lock:
            if now - self.progress_at < self.PROGRESS_INTERVAL:
                return
            self.progress_at = now
            protocol.write_frame(self.fd_out, {"op": "progress", "text": str(text)[:200]})


class _State:
    """The worker's backend: its class once ``setup`` has named it, and the loaded instance."""

    def __init__(self, outbox: _Outbox) -> None:
        self.outbox = outbox
        self.backend: Backend | None = None
        self.loaded: tuple[str, float] | None = None  # (what was loaded, seconds it took), after a describe
        self.backend_class: type[Backend] | Exception = WorkerError("load before setup")
        self.mappings = MappingCache(MAPPING_BUDGET, writable=True)
        self.output_bytes: dict[str, int] = {}  # per output prefix: what the last inference's outputs took

    def prepare(self, setup: Setup) -> None:
        """Import the plugin modules named with -p / CMPX_PLUGINS, then the backend class the coordinator resolved
        (``setup["target"]``); a failure is kept and reported when the load request comes, with its traceback."""
        try:
            for module in setup["plugins"].get("extra", ()):
                importlib.import_module(module)
            self.backend_class = _import_backend(setup["target"])
        except ModuleNotFoundError as exc:  # the framework (or the plugin) is not installed for this Python
            self.backend_class = ModuleNotFoundError(
                f"{exc}, in {sys.executable} (Python {sys.version.split()[0]}, in {sys.prefix}); install it there",
                name=exc.name)
            self.backend_class.__cause__ = exc
        except Exception as exc:
            self.backend_class = exc

    def new_backend(self, message: Load) -> Backend:
        if isinstance(self.backend_class, Exception):
            raise self.backend_class
        return _load(self.backend_class, message, self.outbox)


def _handle(state: _State, message: dict[str, Any]) -> dict[str, Any]:
    op, request_id = message["op"], message.get("id")
    started = time.perf_counter()
    try:
        if op == "describe":  # load now, say what the model takes and returns, and keep it for the load request
            state.backend = state.new_backend(cast("Load", message))
            state.loaded = (_load_key(message), time.perf_counter() - started)
            takes, gives = state.backend.describe()
            return {"op": "described", "id": request_id, "inputs": _described(takes, "input"),
                    "outputs": _described(gives, "output"), "seconds": state.loaded[1]}
        if op == "load":
            if state.loaded is not None and state.loaded[0] == _load_key(message):
                seconds = state.loaded[1]
            else:  # a later load replaces the model (--local-error runs subgraphs in the same worker)
                previous, state.backend, state.loaded = state.backend, None, None
                if previous is not None:
                    previous.close()
                state.backend = state.new_backend(cast("Load", message))
                seconds = time.perf_counter() - started
            if state.backend is None:
                raise WorkerError("load: no backend")
            return {"op": "ready", "id": request_id, "seconds": seconds,
                    "framework_version": _framework_version(state.backend)}
        if op == "infer":
            if state.backend is None:
                raise WorkerError("infer before load")
            outputs, seconds = _infer(state, message)
            return {"op": "result", "id": request_id, "outputs": outputs, "seconds": seconds}
        if state.backend is not None:  # close
            state.backend.close()
        return {"op": "bye", "id": request_id}
    except Exception as exc:  # everything a backend raises is reported, never fatal to the protocol
        kind = type(exc).__qualname__
        if type(exc).__module__ != "builtins":
            kind = f"{type(exc).__module__}.{kind}"
        return {"op": "error", "id": request_id, "type": kind, "message": bounded(str(exc), MESSAGE_LIMIT),
                "traceback": bounded(traceback.format_exc(), TRACEBACK_LIMIT)}


def _framework_version(backend: Backend) -> str | None:
    """``Backend.framework_version()``, for the reports; a backend that cannot tell (or fails to) has none."""
    try:
        version = backend.framework_version()
    except Exception:  # the version is for the reports: never a reason to fail a backend that loaded
        return None
    return None if version is None else str(version)[:100]


def _import_backend(path: str) -> type[Backend]:
    target = pkgutil.resolve_name(path)
    if not (isinstance(target, type) and issubclass(target, Backend)):
        raise WorkerError(f"{path} is not a subclass of cmpx.Backend")
    return target


def _load(backend_class: type[Backend], message: Load, outbox: _Outbox) -> Backend:
    backend = backend_class(message.get("options") or {})
    backend.marked = list(message.get("mark") or ())
    backend.progress = outbox.progress
    backend.load(message["model"])
    return backend


def _load_key(message: dict[str, Any]) -> str:
    return json.dumps([message["backend"], message.get("options"), message["model"], message.get("mark")],
                      sort_keys=True)


def _described(specs: Any, kind: str) -> list[list[Any]]:
    """The backend's TensorSpecs as msgpack-able [name, dtype, shape]; anything malformed is the backend's error."""
    from cmpx.dtypes import numpy_dtype
    from cmpx.model.info import TensorSpec

    described = []
    for spec in specs:
        if not isinstance(spec, TensorSpec) or not isinstance(spec.name, str):
            raise WorkerError(f"describe() must return cmpx.TensorSpec objects for the {kind}s, not {spec!r}")
        try:
            numpy_dtype(spec.dtype)
        except (TypeError, AttributeError):
            raise WorkerError(f"describe(): {kind} {spec.name!r} has dtype {spec.dtype!r}, which numpy does not "
                              "know") from None
        described.append([spec.name, spec.dtype, None if spec.shape is None else _dims(spec, kind)])
    return described


def _dims(spec: Any, kind: str) -> list[int | str | None]:
    try:
        return [d if d is None or isinstance(d, str) else operator.index(d) for d in spec.shape]
    except TypeError:
        raise WorkerError(f"describe(): {kind} {spec.name!r} has shape {spec.shape!r}; dimensions are integers, "
                          "names or None") from None


def _infer(state: _State, message: dict[str, Any]) -> tuple[list[dict[str, Any]], float]:
    """Run the inference (after ``warm_up`` untimed ones, if asked); return the outputs' descriptors and the seconds
    the timed inference took."""
    backend = state.backend
    if backend is None:
        raise WorkerError("infer before load")
    descriptors = message["inputs"]
    # Map only the pages of the tensors fed: a sliced run's segment may hold freed tensors, which reading would
    # allocate again.
    segments = {name: shm.Segment.attach(name, populate=False) for name in {d["segment"] for d in descriptors}}
    for descriptor in descriptors:
        segments[descriptor["segment"]].populate_range(int(descriptor["offset"]), shm.descriptor_bytes(descriptor))
    prefix = message["out_prefix"]
    # out_bytes: what the coordinator expects the outputs to take (a slice of a sliced run), so that one output
    # chunk of that size holds them all, rather than chunks grown ahead of need
    allocations = Allocations(prefix, state.mappings, max(state.output_bytes.get(prefix, 0),
                                                          int(message.get("out_bytes") or 0)))
    try:
        feeds = shm.read_tensors(descriptors, segments)
        for _ in range(int(message.get("warm_up") or 0)):  # untimed; their outputs go to segments of their own
            warm = Allocations(f"{prefix}w", None)
            try:
                backend.infer_into(feeds, warm.allocate)
            finally:
                warm.close()
        started = time.perf_counter()
        outputs = _check_outputs(backend.infer_into(feeds, allocations.allocate))
        seconds = time.perf_counter() - started
        del feeds
        arrays = {name: value.values if isinstance(value, Structured) else value for name, value in outputs.items()
                  if not isinstance(value, NotComparable)}
        placed = {d["name"]: d for d in allocations.describe(arrays)}
        described: list[dict[str, Any]] = []
        for name, value in outputs.items():  # in the backend's order; a structure's description rides along
            if isinstance(value, NotComparable):
                described.append({"name": name, "not_comparable": value.reason})
            else:
                described.append({**placed[name], "structure": value.skeleton} if isinstance(value, Structured)
                                 else dict(placed[name]))
        state.output_bytes[prefix] = allocations.used
        return described, seconds
    finally:
        allocations.close()
        for segment in segments.values():
            segment.close()


def _check_outputs(outputs: Any) -> dict[str, np.ndarray | Structured | NotComparable]:
    """Each output as a numeric array, a flattened sequence/map/optional, or the reason cmpx cannot compare it
    (strings, objects): that output is then reported as not comparable, and the others are still compared."""
    if not isinstance(outputs, dict):
        raise WorkerError(f"infer() must return a dict of output name -> array, not {type(outputs).__name__}")
    checked: dict[str, np.ndarray | Structured | NotComparable] = {}
    for name, value in outputs.items():
        if not isinstance(name, str):
            raise WorkerError(f"infer() returned a non-string output name {name!r}")
        try:
            if value is None or isinstance(value, (list, tuple, dict)):
                checked[name] = flatten(value)
                continue
            array = np.asarray(value)
            if array.dtype.hasobject or array.dtype.kind in "USM":
                raise StructureError(f"it is a tensor of {array.dtype}; cmpx compares numbers")
            checked[name] = array
        except StructureError as exc:
            checked[name] = NotComparable(str(exc))
    return checked
