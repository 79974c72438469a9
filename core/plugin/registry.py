"""Typed registries that registration hooks fill. The registries, not the plugins, own name clashes."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from cmpx.errors import PluginError

_NAME = re.compile(r"[a-z][a-z0-9_-]*\Z")
_TARGET = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*\Z")
_SUFFIX = re.compile(r"\.[a-z0-9][a-z0-9_-]*\Z")


@dataclass(frozen=True)
class Provenance:
    """Which plugin registered something, and which installed distribution provided that plugin."""

    plugin: str
    dist: str | None = None  # "name version", or None for modules loaded with -p / CMPX_PLUGINS

    def __str__(self) -> str:
        return f"{self.plugin} ({self.dist})" if self.dist else self.plugin


@dataclass(frozen=True)
class BackendOption:
    """A backend-specific option, shown on the command line as ``--<backend>-<name>``.

    ``multiple`` options may be repeated and give a tuple; ``choices`` restricts the accepted values;
    ``is_flag`` options take no value and give True when present (False otherwise); ``type`` (str, int or
    float) is checked on the command line, before any worker starts.
    """

    name: str
    help: str
    default: Any = None
    multiple: bool = False
    choices: tuple[str, ...] | None = None
    flag: str | None = None  # a flag users already know (Polygraphy's --save-engine) instead of the generated one
    is_flag: bool = False
    type: type = str
    marks: bool = False  # its value selects tensors to mark (like --onnx-outputs), e.g. --trt-outputs
    aliases: tuple[str, ...] = ()  # more spellings users know (Polygraphy's --providers for --onnxrt-providers)

    def given(self, value: Any) -> bool:
        """Whether ``value`` (as a run holds it) is the user's, not this option's default or absence."""
        if value is None or value is False or (isinstance(value, (tuple, list)) and not value):
            return False
        return value != self.default  # 0 is a value given (``value not in (False, ...)`` took it for False)


@dataclass(frozen=True)
class BackendSpec:
    """A light description of a backend. ``target`` ("module:Class") is imported only in the worker."""

    name: str
    target: str
    description: str = ""
    options: tuple[BackendOption, ...] = ()
    supports_marking: bool = False
    model_formats: tuple[str, ...] = ()  # suffixes of model files it loads besides ONNX (".engine", ".xml")
    precision_flags: tuple[str, ...] = ()  # transforms that --fp16/--bf16/--int8/--fp8 give it (Polygraphy's flags)
    marking_changes_fusion: bool = False  # marked tensors change what it computes (TensorRT's layer fusion)
    frameworks: tuple[str, ...] = ()  # distributions of the framework it runs (the first installed one is reported)
    runs_subgraphs: bool = True  # it can load a model cut out of the run's model (a slice of a sliced run)
    transform_notes: tuple[tuple[str, str], ...] = ()  # (transform, what a pass on it does not prove), for the hint
    marking_changes_qdq_fusion: bool = False  # marked tensors stop it fusing Q/DQ pairs (ONNX Runtime's int8 kernels)
    # importing ``target``'s module (and the framework it imports) starts nothing a fork would break (no device
    # context, no thread the framework needs later): cmpx may import it once in its fork server and fork workers
    # from there, instead of importing it again in every worker (cmpx.transport.worker.forkserver)
    forkable: bool = False
    provenance: Provenance = field(default=Provenance("?"), compare=False)

    def flag(self, option: BackendOption) -> str:
        return option.flag or f"--{self.name}-{option.name.replace('_', '-')}"

    def param(self, option: BackendOption) -> str:
        return f"{self.name}_{option.name}".replace("-", "_")


@dataclass(frozen=True)
class TransformSpec:
    """A model transform; ``factory(options)`` runs in the coordinator."""

    name: str
    factory: Callable[..., Any]
    description: str = ""
    provenance: Provenance = field(default=Provenance("?"), compare=False)


@dataclass(frozen=True)
class DataLoaderSpec:
    """A data loader; ``factory(options)`` runs in the coordinator. ``generates``: it makes data for the shapes
    it is given (so dynamic dimensions must be fixed first) and runs one iteration unless asked for more, rather
    than reading a given number of feeds; ``default``: used when no option selects a loader; ``selected_by``: the
    run option that selects it (``load_inputs``)."""

    name: str
    factory: Callable[..., Any]
    description: str = ""
    provenance: Provenance = field(default=Provenance("?"), compare=False)
    generates: bool = False
    default: bool = False
    selected_by: str | None = None


@dataclass(frozen=True)
class MetricSpec:
    """A metric; ``default`` metrics run when --compare is not given."""

    name: str
    metric: Any
    description: str = ""
    provenance: Provenance = field(default=Provenance("?"), compare=False)
    default: bool = False


T = TypeVar("T", BackendSpec, DataLoaderSpec, TransformSpec, MetricSpec)


class _Registry(Generic[T]):
    kind = "item"

    def __init__(self) -> None:
        self._items: dict[str, T] = {}
        self._staged: list[T] | None = None
        self._current: Provenance | None = None

    @contextmanager
    def attributing(self, provenance: Provenance) -> Iterator[None]:
        """Attribute the adds made inside to ``provenance``; keep them only if the block succeeds."""
        self._current, self._staged = provenance, []
        try:
            yield
            for item in self._staged:
                self._items[item.name] = item
        finally:
            self._current, self._staged = None, None

    def _checked_name(self, name: object) -> str:
        if not isinstance(name, str) or not _NAME.match(name):
            raise PluginError(f"invalid {self.kind} name {name!r}: use lower-case letters, digits, '_' and '-',"
                              " starting with a letter")
        return name

    def _add(self, item: T) -> None:
        self._checked_name(item.name)
        existing = self._items.get(item.name) or next((s for s in self._staged or () if s.name == item.name), None)
        if existing is not None:
            raise PluginError(f"{self.kind} '{item.name}' is registered by both plugin {existing.provenance} and "
                              f"plugin {self._current or item.provenance}; block one with -p no:PLUGIN")
        if self._staged is None:
            self._items[item.name] = item
        else:
            self._staged.append(item)

    def _stamp(self) -> Provenance:
        return self._current or Provenance("(direct)")

    def get(self, name: str) -> T | None:
        return self._items.get(name)

    def __getitem__(self, name: str) -> T:
        return self._items[name]

    def names(self) -> list[str]:
        return sorted(self._items)

    def __iter__(self) -> Iterator[T]:
        return iter(sorted(self._items.values(), key=lambda item: item.name))

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items


class BackendRegistry(_Registry[BackendSpec]):
    kind = "backend"

    def add(self, name: str, target: str, *, description: str = "", options: Sequence[BackendOption] = (),
            supports_marking: bool = False, model_formats: Sequence[str] = (), precision_flags: Sequence[str] = (),
            marking_changes_fusion: bool = False, frameworks: Sequence[str] = (), runs_subgraphs: bool = True,
            transform_notes: Mapping[str, str] | None = None, marking_changes_qdq_fusion: bool = False,
            forkable: bool = False) -> None:
        """Register backend ``name`` implemented by the class at ``target`` ("package.module:Class").

        ``model_formats``: suffixes of model files in the backend's own format that it loads directly (".engine",
        ".xml"); its class must then implement ``describe()``, since cmpx reads only ONNX models itself.
        ``precision_flags``: the transforms (``fp16``...) that the run-wide flags ``--fp16``... give this backend,
        as Polygraphy's users expect of TensorRT. ``marking_changes_fusion``: marking tensors changes what the
        backend computes, so cmpx warns when a run marks tensors on it. ``frameworks``: the distributions (pip
        names) of the framework it runs, in order of preference; reports name the first one installed with its
        version, read from package metadata (nothing is imported). ``runs_subgraphs``: a marking backend can load
        models cut out of the run's model, so that a run too large for the memory budget runs it slice by slice;
        False makes it run the whole model always (say so when loading a model is costly, like building an
        engine). ``transform_notes``: per transform (``fp16``), what a passing comparison on it does not prove
        about the framework (ONNX Runtime's CPU provider runs most float16 ops in float32): said in the summary when
        such a pair passes. ``marking_changes_qdq_fusion``: marking tensors of a quantized (Q/DQ) graph stops the
        backend fusing Q/DQ pairs into quantized kernels, so a marked int8 run computes other numbers (a warning).
        ``forkable``: importing ``target``'s module starts no thread and touches no device (ONNX Runtime, numpy),
        so cmpx may import it once in its fork server and fork workers that already have it; leave it False for a
        framework that starts threads or a device context on import (TensorRT, CUDA)."""
        if not isinstance(target, str) or not _TARGET.match(target):
            raise PluginError(f"backend {name!r}: target {target!r} must look like 'package.module:ClassName'")
        if isinstance(model_formats, str):
            model_formats = (model_formats,)
        for suffix in model_formats:
            if not isinstance(suffix, str) or not _SUFFIX.match(suffix) or suffix == ".onnx":
                raise PluginError(f"backend {name!r}: model format {suffix!r} must be a lower-case file suffix such "
                                  "as '.engine' (ONNX is every backend's format and is not listed)")
        for option in options:
            if not isinstance(option, BackendOption):
                raise PluginError(f"backend {name!r}: options must be cmpx.BackendOption, got {option!r}")
            for flag in (option.flag, *option.aliases):
                if flag is not None and not re.fullmatch(r"--[a-z][a-z0-9-]*", flag):
                    raise PluginError(f"backend {name!r}: option flag {flag!r} must look like --some-name")
            if option.is_flag and (option.multiple or option.choices):
                raise PluginError(f"backend {name!r}: option {option.name!r} is a flag; it takes no values")
            if option.type not in (str, int, float):
                raise PluginError(f"backend {name!r}: option {option.name!r} has type {option.type!r}; use str, int "
                                  "or float")
        if isinstance(precision_flags, str):
            precision_flags = (precision_flags,)
        if isinstance(frameworks, str):
            frameworks = (frameworks,)
        self._add(BackendSpec(name, target, description, tuple(options), supports_marking, tuple(model_formats),
                              tuple(precision_flags), marking_changes_fusion, tuple(frameworks),
                              bool(runs_subgraphs),
                              tuple((str(k), str(v)) for k, v in (transform_notes or {}).items()),
                              bool(marking_changes_qdq_fusion), bool(forkable), provenance=self._stamp()))


def _check_factory(kind: str, name: str, factory: Any) -> None:
    if not callable(factory):
        raise PluginError(f"{kind} {name!r}: factory {factory!r} is not callable")


class DataLoaderRegistry(_Registry[DataLoaderSpec]):
    kind = "data loader"

    def add(self, name: str, factory: Callable[..., Any], *, description: str = "", generates: bool = False,
            default: bool = False, selected_by: str | None = None) -> None:
        """Register data loader ``name``; ``factory(options)`` builds it in the coordinator when a run uses it.
        ``generates``, ``default`` and ``selected_by`` (a run option's name, such as ``load_inputs``) are
        described on :class:`DataLoaderSpec`."""
        _check_factory(self.kind, name, factory)
        if selected_by is not None:
            from cmpx.options.table import BY_NAME

            if selected_by not in BY_NAME:
                raise PluginError(f"data loader {name!r}: selected_by {selected_by!r} is not a run option")
        self._add(DataLoaderSpec(name, factory, description, self._stamp(), generates, default, selected_by))

    def defaults(self) -> list[DataLoaderSpec]:
        return [spec for spec in self if spec.default]


class MetricRegistry(_Registry[MetricSpec]):
    kind = "metric"

    def add(self, metric: Any, *, description: str = "", default: bool = False) -> None:
        """Register ``metric``: an object with a ``name`` and a ``compare(context)`` method. ``default`` metrics run
        when the user selects none with --compare."""
        if not callable(getattr(metric, "compare", None)):
            raise PluginError(f"metric {metric!r} has no compare() method")
        description = description or getattr(metric, "description", "") or (metric.__doc__ or "").strip()
        self._add(MetricSpec(self._checked_name(getattr(metric, "name", None)), metric, description.split("\n")[0],
                             self._stamp(), default))

    def defaults(self) -> list[MetricSpec]:
        return [spec for spec in self if spec.default]


class TransformRegistry(_Registry[TransformSpec]):
    kind = "model transform"

    def add(self, name: str, factory: Callable[..., Any], *, description: str = "") -> None:
        """Register transform ``name``; ``factory(options)`` builds it in the coordinator when a run uses it."""
        _check_factory(self.kind, name, factory)
        self._add(TransformSpec(name, factory, description, self._stamp()))
