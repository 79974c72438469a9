"""Each built-in backend's framework driven through its own plain Python API, in this process, and a bitwise
comparison of what it returns with what cmpx returns: the reference side of cmpx's differential tests.

The framework is configured as the backend configures it, and no further: ONNX Runtime on the CPU provider with
its default graph optimizations, the reference evaluator with the ai.onnx.ml operators cmpx adds to it
(cmpx_onnxref.ml_ops), OpenVINO on the CPU with the f32 inference precision the backend asks for (its CPU default
may be bf16 where the processor has it). Everything else (reading the model, feeding, naming the outputs) is the
framework's own.
"""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

PLAIN_APIS = ("onnxrt", "onnxref", "openvino")


def run_plain(backend: str, model_path: str, feeds: Mapping[str, Any],
              outputs: Sequence[str] | None = None) -> dict[str, Any]:
    """The outputs, by name, that ``backend``'s framework returns for ``feeds``: ``outputs`` (the model's own when
    None). Raises whatever the framework raises."""
    if backend == "onnxrt":
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3
        session = onnxruntime.InferenceSession(model_path, sess_options=options, providers=["CPUExecutionProvider"])
        names = list(outputs) if outputs is not None else [o.name for o in session.get_outputs()]
        return dict(zip(names, session.run(names, dict(feeds))))
    if backend == "onnxref":
        from onnx.reference import ReferenceEvaluator

        from cmpx_onnxref.ml_ops import NEW_OPS

        evaluator = ReferenceEvaluator(model_path, new_ops=NEW_OPS)
        names = list(outputs) if outputs is not None else list(evaluator.output_names)
        return dict(zip(names, evaluator.run(names, dict(feeds))))
    if backend == "openvino":
        import onnx
        import openvino

        with signal_stack_kept():
            compiled = openvino.Core().compile_model(model_path, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
            results = compiled.create_infer_request().infer(dict(feeds))
            # a port may carry several tensor names (an output that is also an input): the ones the model declares
            wanted = list(outputs) if outputs is not None else \
                [o.name for o in onnx.load(model_path, load_external_data=False).graph.output]
            found = {}
            for port in compiled.outputs:
                for name in port.get_names() & set(wanted):
                    found[name] = np.array(results[port], copy=True)  # the request's buffers are reused
            return {name: found[name] for name in wanted if name in found}
    raise ValueError(f"no plain API for backend {backend!r}; known: {', '.join(PLAIN_APIS)}")


class _SignalStack(ctypes.Structure):
    _fields_ = [("ss_sp", ctypes.c_void_p), ("ss_flags", ctypes.c_int), ("ss_size", ctypes.c_size_t)]


@contextlib.contextmanager
def signal_stack_kept() -> Iterator[None]:
    """Put this thread's alternate signal stack back afterwards. OpenVINO's compile_model gives the calling thread
    an alternate signal stack of its own and later frees that memory, leaving the thread's stack pointing at unmapped
    memory: the next signal handled on that thread (Python's handlers run on the alternate stack) killed the whole
    process with SIGSEGV (a test process's Ctrl-C test, long after the OpenVINO test that ran before it)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        saved = _SignalStack()
        kept = libc.sigaltstack(None, ctypes.byref(saved)) == 0
    except (OSError, AttributeError):
        kept = False
    try:
        yield
    finally:
        if kept:
            libc.sigaltstack(ctypes.byref(saved), None)


def unwrap_optionals(outputs: dict[str, Any], optional: Sequence[str]) -> dict[str, Any]:
    """The reference evaluator returns an optional output as a one-element list; cmpx reports the value itself (as
    ONNX Runtime does): the same here, for the outputs named in ``optional``."""
    return {name: value[0] if name in optional and isinstance(value, list) and len(value) == 1 else value
            for name, value in outputs.items()}


def leaves(value: Any, path: str = "") -> list[tuple[str, Any]]:
    """A value as (path, leaf) pairs, in order: a list's items ``[i]``, a dict's keys sorted ``{k}``, an empty
    list or dict as one ``("[]"|"{}")`` leaf, None as None, anything else as a numpy array."""
    if value is None:
        return [(path, None)]
    if isinstance(value, (list, tuple)):
        return [pair for i, item in enumerate(value) for pair in leaves(item, f"{path}[{i}]")] or [(path, "[]")]
    if isinstance(value, Mapping):
        return [pair for key in sorted(value) for pair in leaves(value[key], f"{path}{{{key}}}")] or [(path, "{}")]
    if isinstance(value, (bool, int, float)):  # a framework's Python number (ONNX Runtime's ZipMap values)
        return [(path, PythonNumber(value))]
    return [(path, np.asarray(value))]


class PythonNumber:
    """A Python int or float a framework returned inside a sequence or map, where the model declares a numpy type
    (ONNX Runtime gives a ZipMap's float32 probabilities as Python floats): cmpx's value must be the same number,
    exactly, in the declared type or in Python's."""

    def __init__(self, value: bool | int | float):
        self.value = value

    def __repr__(self) -> str:
        return f"PythonNumber({self.value!r})"


def rebuilt(structured: Any) -> Any:
    """A ``cmpx.structured.Structured`` (a sequence, map or optional a worker flattened) as Python lists, dicts and
    arrays again, read from its skeleton (see cmpx.structured's docstring) and its values."""
    values = structured.values
    position = [0]

    def build(node: list) -> Any:
        kind = node[0]
        if kind == "none":
            return None
        if kind == "t":
            count = int(np.prod(node[1], dtype=np.int64))
            start, position[0] = position[0], position[0] + count
            return values[start:position[0]].reshape(node[1])
        if kind == "seq":
            return [build(item) for item in node[1]]
        if kind == "seq*":
            return [build(node[2]) for _ in range(node[1])]
        if kind == "map":
            return {key: build(item) for key, item in zip(node[1], node[2])}
        if kind == "map*":
            return {key: build(node[2]) for key in node[1]}
        raise ValueError(f"unknown skeleton node {kind!r}")

    return build(structured.skeleton)


def difference(expected: Any, actual: Any) -> str | None:
    """None if ``actual`` (what cmpx returned) is bit for bit ``expected`` (what the framework returned): the same
    structure, and at every leaf the same dtype, shape and bytes (NaN payloads and signed zeros included); else
    the first difference, in words."""
    want, got = leaves(expected), leaves(actual)
    if [path for path, _ in want] != [path for path, _ in got]:
        return f"structure differs: {[p for p, _ in want][:6]} vs {[p for p, _ in got][:6]}"
    for (path, a), (_, b) in zip(want, got):
        where = path or "the tensor"
        if isinstance(a, PythonNumber):
            b = np.asarray(b.value) if isinstance(b, PythonNumber) else b
            if not (isinstance(b, np.ndarray) and b.size == 1 and b.dtype.kind in "biuf"):
                return f"{where}: the number {a.value!r} vs {_word(b)}"
            number = b.reshape(-1)[0].item()
            if type(number) is not type(a.value) or np.asarray(number).tobytes() != np.asarray(a.value).tobytes():
                return f"{where}: {a.value!r} vs {b.reshape(-1)[0]!r}"
            continue
        if isinstance(a, str) or a is None or isinstance(b, str) or b is None:
            if not (type(a) is type(b) and a == b):
                return f"{where}: {_word(a)} vs {_word(b)}"
            continue
        if a.dtype != b.dtype:
            return f"{where}: dtype {a.dtype} vs {b.dtype}"
        if a.shape != b.shape:
            return f"{where}: shape {list(a.shape)} vs {list(b.shape)}"
        if a.dtype.hasobject:
            if not np.array_equal(a, b):
                return f"{where}: values differ"
            continue
        differing = np.flatnonzero((_element_bytes(a) != _element_bytes(b)).any(axis=1))
        if differing.size:
            first = int(differing[0])
            return (f"{where}: {differing.size} of {a.size} elements differ, first at flat index {first}: "
                    f"{a.reshape(-1)[first]!r} vs {b.reshape(-1)[first]!r}")
    return None


def _element_bytes(array: np.ndarray) -> np.ndarray:
    """Each element's bytes, one row per element."""
    return np.ascontiguousarray(array).reshape(-1).view(np.uint8).reshape(array.size, array.dtype.itemsize)


def _word(leaf: Any) -> str:
    if leaf is None or isinstance(leaf, (str, PythonNumber)):
        return repr(leaf)
    return f"a tensor {leaf.dtype}{list(leaf.shape)}"
