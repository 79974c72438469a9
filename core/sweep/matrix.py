"""The cells of a sweep: every model with every run, each run's arguments checked before any cell runs.

A run's ``args`` are ``cmpx run`` arguments, parsed by the ``cmpx run`` command itself
(``cmpx.options.grammar.request_from_words``) and checked by the run's own preflight, so a sweep takes exactly what the
command line takes. In args, ``{model}`` stands for the model's path relative to the sweep file without its suffix
(``zoo/resnet50``) and ``{run}`` for the run's name, so that one run can read or write a path per model:
``--load-outputs golden/{model}``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cmpx._version import __version__
from cmpx.errors import UsageError
from cmpx.sweep.sweepfile import RunSpec, SweepFile

# Paths a run writes: with several models, each model's cell needs its own, so they must name {model}; the folders
# above such a path are made by the cell before it runs (the check at the start skips them: they need not exist yet).
WRITTEN_PER_CELL = ("save_outputs", "save_inputs", "save_transformed", "save_error_plots", "calibration_cache",
                    "report_html", "log_file")
WRITTEN_BY_SWEEP = ("report_json", "junit")  # the sweep writes each cell's report itself
_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")
_MODEL_MARK = "__cmpx_sweep_model__"  # {model} while a run's args are checked, before there is a model


@dataclass(frozen=True)
class CheckedRun:
    """A run whose arguments parsed and passed the preflight; ``plugin_args`` are the ``-p`` values its cells
    load (the sweep's own, then the run's); ``frameworks`` the framework each of its backends runs, as installed
    where the sweep runs: backend -> (distribution, version), or None when not installed here or when the backend
    runs under another Python (``--backend NAME@PYTHON``)."""

    spec: RunSpec
    plugin_args: tuple[str, ...]
    model_paths: tuple[str, ...] = ()  # the written paths that name {model}, as _MODEL_MARK
    frameworks: Mapping[str, tuple[str, str] | None] = dataclasses.field(default_factory=dict)
    framework_names: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)  # each backend's
    # distributions, in its order of preference (onnxruntime, onnxruntime-gpu...): a node may have another one


@dataclass(frozen=True)
class Cell:
    """One model with one run. ``key`` names its directory under the results' ``cells/``."""

    model: str  # absolute path
    label: str  # the model as reports name it
    run: CheckedRun
    words: tuple[str, ...]  # the run's words, placeholders filled in
    key: str
    directories: tuple[str, ...] = ()  # made before the cell runs: the folders of its {model} paths

    @property
    def run_name(self) -> str:
        return self.run.spec.name

    def task(self, base: str, model_digest: str) -> dict:
        """What an executor hands to the process that runs the cell (plain JSON data): cmpx.sweep.cell.run_cell,
        which checks there what was fingerprinted (cmpx.sweep.node_check)."""
        return {"model": self.model, "words": list(self.words), "cwd": base, "plugins": list(self.run.plugin_args),
                "key": self.key, "directories": list(self.directories), "threads": self.run.spec.threads,
                "model_sha256": model_digest, "cmpx_version": __version__, "frameworks": _plain(self.run.frameworks),
                "framework_names": {backend: list(names) for backend, names in self.run.framework_names.items()}}

    def fingerprint(self, model_digest: str, base: str) -> dict:
        """The inputs that decide whether an earlier result of this cell still holds (the model's path is not
        one: two paths of the same content give the same fingerprint, and run once, cmpx.sweep.driver); with
        the content of each ``@FILE`` list its args name, relative to ``base``, if any (a --keep-fp32 list that
        cmpx precision wrote again changes the cell as its args would)."""
        found = {"model_sha256": model_digest, "args": list(self.words), "plugins": list(self.run.plugin_args),
                 "threads": self.run.spec.threads, "frameworks": _plain(self.run.frameworks),
                 "cmpx_version": __version__}
        lists = _list_digests(self.words, base)
        return {**found, "lists": lists} if lists else found


def _list_digests(words: Sequence[str], base: str) -> dict[str, str]:
    """SHA-256 of each readable ``@FILE`` in ``words`` (``--keep-fp32 @kept.txt`` or ``--mark=@names.txt``); one
    that cannot be read is left to the cell, whose run says why."""
    from cmpx.userfiles import open_regular

    digests = {}
    for word in words:
        listed = word.partition("=")[2] if word.startswith("--") else word
        if not listed.startswith("@") or len(listed) < 2:
            continue
        try:
            with open_regular(os.path.join(base, listed[1:]), "list", "rb") as f:
                digests[listed] = hashlib.sha256(f.read()).hexdigest()
        except (OSError, UsageError):
            continue
    return digests


def _plain(frameworks: Mapping[str, tuple[str, str] | None]) -> dict[str, list[str] | None]:
    """As JSON holds it (a record read back compares equal)."""
    return {backend: list(pinned) if pinned else None for backend, pinned in sorted(frameworks.items())}


def model_placeholder(label: str) -> str:
    return os.path.splitext(label)[0].lstrip(os.sep)


def fill(words: Sequence[str], model: str, run: str) -> tuple[str, ...]:
    return tuple(w.replace("{model}", model).replace("{run}", run) for w in words)


def check_runs(sweep: SweepFile, plugin_args: Sequence[str] = ()) -> tuple[CheckedRun, ...]:
    """Parse and preflight each run's arguments as ``cmpx run`` would; a UsageError names the file, the run's
    line, the run and the problem."""
    from cmpx.options.argv import prescan
    from cmpx.options.grammar import request_from_words
    from cmpx.plugin.manager import PluginSettings, make_plugin_manager
    from cmpx.lifecycle.preflight import preflight

    loaded: dict[tuple[str, ...], tuple] = {}
    checked = []
    for index, run in enumerate(sweep.runs):
        where = f"{sweep.path}{f':{run.line}' if run.line else ''}: runs[{index}] {run.name!r}"
        args = (*plugin_args, *prescan(["run", *run.words]).plugin_args)
        try:
            if args not in loaded:
                settings = PluginSettings.from_cli(args)
                loaded[args] = (settings, make_plugin_manager(autoload=settings.autoload, extra=settings.extra,
                                                              blocked=settings.blocked))
            settings, plugins = loaded[args]
            request, _ = request_from_words(fill(run.words, _MODEL_MARK, run.name), plugins)
            _check_paths(request, sweep)
            per_model = {name: getattr(request, name) for name in WRITTEN_PER_CELL
                         if _MODEL_MARK in (getattr(request, name) or "")}
            # Paths to save to are checked in the cell: they exist already when an earlier sweep is resumed, and
            # the folders of a {model} path are made there. Each cell has its model: checked here as if it had
            # one (--oracle, for one, needs a model)
            unchecked: dict[str, Any] = dict.fromkeys(("save_inputs", "save_outputs", *per_model))
            checked_run = preflight(dataclasses.replace(request, model=request.model or _MODEL_MARK,
                                                        tolerances=_checked_now(request.tolerances, sweep),
                                                        **unchecked), plugins, settings)
        except UsageError as exc:
            raise UsageError(f"{where}: {str(exc).replace(_MODEL_MARK, '{model}')}") from None
        checked.append(CheckedRun(run, args, tuple(per_model.values()), _frameworks(checked_run.backends),
                                  {b.spec.name: tuple(b.spec.frameworks) for b in checked_run.backends}))
    return tuple(checked)


def _frameworks(backends) -> dict[str, tuple[str, str] | None]:
    """Each backend's framework as installed here (read from package metadata: nothing is imported)."""
    from cmpx.plugin import installed

    found: dict[str, tuple[str, str] | None] = {}
    for backend in backends:
        if backend.python_given is not None:
            found[f"{backend.spec.name}@{backend.python_given}"] = None
            continue
        found[backend.spec.name] = next(((name, version) for name in backend.spec.frameworks
                                         if (version := installed.version([name]))), None)
    return found


def _checked_now(path: str | None, sweep: SweepFile) -> str | None:
    """A --tolerances file read when the sweep starts (relative to the sweep file, as in its cells); one whose path
    names the model is read by each cell."""
    if path is None or _MODEL_MARK in path:
        return None
    return os.path.join(sweep.base, path)


def _check_paths(request, sweep: SweepFile) -> None:
    if request.model is not None:
        raise UsageError(f"args name a model ({request.model}); the models come from 'models', and args are the "
                         "options after the model")
    for name in WRITTEN_BY_SWEEP:
        if getattr(request, name):
            raise UsageError(f"--{name.replace('_', '-')} is written by cmpx sweep for every cell "
                             "(OUT/cells/*/report.json); leave it out")
    if len(sweep.models) > 1:
        for name in WRITTEN_PER_CELL:
            value = getattr(request, name)
            if value and _MODEL_MARK not in value:
                raise UsageError(f"--{name.replace('_', '-')} {value} would be written by the cell of every model; "
                                 f"put {{model}} in the path (e.g. {value}/{{model}})")


def cells(sweep: SweepFile, runs: Sequence[CheckedRun]) -> list[Cell]:
    """Models x runs, model by model; each cell's directory name is unique."""
    found: list[Cell] = []
    taken: set[str] = set()
    for model in sweep.models:
        label = sweep.label(model)
        for run in runs:
            key = f"{_UNSAFE.sub('_', label.replace(os.sep, '__')).strip('_')}--{run.spec.name}"
            if key in taken:  # two labels that differ only in characters replaced above
                key += "-" + hashlib.sha256(label.encode()).hexdigest()[:8]
            taken.add(key)
            placeholder = model_placeholder(label)
            words = fill(run.spec.words, placeholder, run.spec.name)
            directories = (os.path.dirname(p.replace(_MODEL_MARK, placeholder)) for p in run.model_paths)
            found.append(Cell(model, label, run, words, key, tuple(dict.fromkeys(d for d in directories if d))))
    return found


def model_digest(path: str) -> str:
    """SHA-256 of the model file's content."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
