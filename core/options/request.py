"""A run as the user asked for it, before any check: ``RunRequest``, made from click's values by the CLI or
from keyword arguments by ``cmpx.run()``. Light: no numpy, no click."""

from __future__ import annotations

import operator
import os
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from cmpx.errors import UsageError
from cmpx.options.table import BY_NAME, FLAG, INT, PRECISION_FLAGS, TEXT, RunOption
from cmpx.suggest import closest

Words = tuple[str, ...]


@dataclass(frozen=True)
class RunRequest:
    """Every option of one run, as typed (see cmpx.options.table for what each means). ``thresholds`` holds the
    words of each metric's ``--NAME-threshold``; ``backend_options`` each backend option's value by its parameter
    name (``onnxrt_providers``)."""

    model: str | None = None
    backends: Words = ()
    reference: str | None = None
    oracle: bool = False
    load_outputs: Words = ()
    save_outputs: str | None = None
    seed: int = 1
    iterations: int | None = None
    warm_up: int = 0
    input_shapes: Words = ()
    val_range: Words = ()
    data_loader: str | None = None
    data_loader_script: str | None = None
    load_inputs: Words = ()
    input_map: Words = ()
    save_inputs: str | None = None
    external_data_dir: str | None = None
    atol: Words = ()
    rtol: Words = ()
    check_error_stat: Words = ()
    tolerances: str | None = None
    error_quantile: Words = ()
    compare: Words = ()
    output_map: Words = ()
    postprocess: Words = ()
    nan_equal: bool = False
    infinities_compare_equal: bool = False
    strict_infinities: bool = False
    validate: bool = False
    fail_fast: bool = False
    onnx_outputs: Words = ()
    onnx_exclude_outputs: Words = ()
    mark_all: bool = False
    show_unmatched: bool = False
    local_error: bool = False
    strict_marking: bool = False
    memory_budget: str | None = None
    fp16: bool = False
    bf16: bool = False
    int8: bool = False
    fp8: bool = False
    keep_fp32: Words = ()
    no_quantize: Words = ()
    calibration_iterations: int = 8
    calibration_cache: str | None = None
    save_transformed: str | None = None
    report_json: str | None = None
    junit: str | None = None
    report_html: str | None = None
    log_file: str | None = None
    save_error_plots: str | None = None
    timeout: Words = ()
    thresholds: Mapping[str, Words] = field(default_factory=dict)  # metric name -> words
    backend_options: Mapping[str, Any] = field(default_factory=dict)  # parameter name -> value

    @property
    def precision_flag(self) -> str | None:
        """The transform --fp16/--bf16/--int8/--fp8 asks for (at most one)."""
        given = [name for name in PRECISION_FLAGS if getattr(self, name)]
        if len(given) > 1:
            raise UsageError(f"--{given[0]} and --{given[1]} both given; choose one precision")
        return given[0] if given else None


def request_defaults() -> dict[str, Any]:
    """Each RunRequest field's default (the command line's defaults too)."""
    return {f.name: f.default for f in fields(RunRequest) if f.default is not MISSING}


def from_python(model: Any, backends: Any, options: Mapping[str, Any], thresholds: Mapping[str, str],
                backend_params: Sequence[str]) -> RunRequest:
    """A RunRequest from ``cmpx.run()``'s arguments. ``thresholds`` maps each keyword such as ``cosine_threshold``
    to its metric; ``backend_params`` are the registered backends' option parameters (``onnxrt_providers``).
    Python values become the words a user would type (module docstring of cmpx.options.table); anything else is a
    UsageError naming the keyword."""
    values: dict[str, Any] = {"model": None if model is None else _path("model", model),
                              "backends": _plain_words("backends", [backends] if isinstance(backends, str)
                                                       else list(backends or ()))}
    metric_words: dict[str, Words] = {}
    backend_options: dict[str, Any] = {}
    for name, value in options.items():
        if name in BY_NAME and name != "backends":
            values[name] = _convert(BY_NAME[name], value)
        elif name in thresholds:
            metric_words[thresholds[name]] = _per_output(name, value)
        elif name in backend_params:
            backend_options[name] = value
        else:
            known = [*BY_NAME, *thresholds, *backend_params]
            close = closest(name, known)
            raise UsageError(f"cmpx.run() got an unknown option {name!r}" + (f"; did you mean {close!r}?" if close
                                                                             else "; see help(cmpx.run)"))
    return RunRequest(**values, thresholds=metric_words, backend_options=backend_options)


def _convert(option: RunOption, value: Any) -> Any:
    name = option.name
    if option.kind == FLAG:
        if not isinstance(value, bool):
            raise UsageError(f"cmpx.run({name}=...) takes True or False, not {value!r}")
        return value
    if option.kind == INT:
        if value is None:
            return None
        try:
            if isinstance(value, bool):
                raise TypeError
            return operator.index(value)
        except TypeError:
            raise UsageError(f"cmpx.run({name}=...) takes an integer, not {value!r}") from None
    if option.kind == TEXT:
        if value is None:
            return None
        if option.python == "size" and isinstance(value, int) and not isinstance(value, bool):
            return str(value)  # bytes
        return _path(name, value) if option.python == "path" else _text(name, value)
    convert = {"per_output": _per_output, "shapes": _shapes, "ranges": _ranges, "path": _paths,
               "words": _plain_words}[option.python]
    return convert(name, value)


def _text(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise UsageError(f"cmpx.run({name}=...) takes a string, not {value!r}")
    return value


def _path(name: str, value: Any) -> str:
    if not isinstance(value, (str, os.PathLike)):
        raise UsageError(f"cmpx.run({name}=...) takes a path, not {value!r}")
    return os.fspath(value)


def _items(value: Any) -> list[Any]:
    """A value or a list of values; a string is one value."""
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _plain_words(name: str, value: Any) -> Words:
    return tuple(_text(name, item) for item in _items(value))


def _paths(name: str, value: Any) -> Words:
    return tuple(_path(name, item) for item in _items(value))


def _number(name: str, value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UsageError(f"cmpx.run({name}=...): {value!r} is not a number")
    return repr(float(value)) if isinstance(value, float) else str(value)


def _scalar(name: str, value: Any) -> str:
    return value if isinstance(value, str) else _number(name, value)


def _per_output(name: str, value: Any) -> Words:
    """``1e-3``, ``"1e-3"``, ``{"logits": 1e-2}``, or a list of those: a bare value is the default."""
    words: list[str] = []
    for item in _items(value):
        if isinstance(item, Mapping):
            words += [f"{_text(name, key)}:{_scalar(name, v)}" for key, v in item.items()]
        else:
            words.append(_scalar(name, item))
    return tuple(words)


def _shapes(name: str, value: Any) -> Words:
    """``{"x": [1, 3, 224, 224]}`` (or the command line's words)."""
    words: list[str] = []
    for item in _items(value):
        if isinstance(item, Mapping):
            for key, dims in item.items():
                if isinstance(dims, (list, tuple)):
                    words.append(f"{_text(name, key)}:[{','.join(_number(name, d) for d in dims)}]")
                else:
                    words.append(f"{_text(name, key)}={_number(name, dims)}")  # a symbolic dimension by name
        else:
            words.append(_text(name, item))
    return tuple(words)


def _ranges(name: str, value: Any) -> Words:
    """``(0, 1)`` (the default range), ``{"x": (-1, 1)}``, or the command line's words."""
    def pair(item: Any) -> str:
        if not isinstance(item, (list, tuple)) or len(item) != 2:
            raise UsageError(f"cmpx.run({name}=...): {item!r} is not a (low, high) pair")
        return f"[{_number(name, item[0])},{_number(name, item[1])}]"

    if isinstance(value, tuple) and len(value) == 2 and not any(isinstance(v, (str, Mapping)) for v in value):
        return (pair(value),)
    words: list[str] = []
    for item in _items(value):
        if isinstance(item, Mapping):
            words += [f"{_text(name, key)}:{pair(r)}" for key, r in item.items()]
        elif isinstance(item, str):
            words.append(item)
        else:
            words.append(pair(item))
    return tuple(words)
