"""A sweep file (TOML): which models, and which runs of each.

    models = ["zoo/*.onnx", "extra/bert.onnx"]      # globs, relative to this file (** recurses)

    [defaults]                                      # optional: args every run starts with
    args = ["--iterations", "2"]

    [[runs]]
    name = "ort-vs-ref"                             # a column of the summary; unique
    args = ["--backend", "onnxrt", "--backend", "onnxref"]   # cmpx run's arguments after the model

    [[runs]]
    name = "trt-fp16"
    args = "--backend trt:fp16 --backend onnxrt --atol 1e-2"  # one string is split as a shell would
    resources = {GPU = 1}                           # what a cell of this run needs (Ray executor)
    threads = 4                                     # each backend's threads [default: resources.CPU, else 1]

Every problem is a UsageError naming the file, the line (where it can be found) and the key.
"""

from __future__ import annotations

import glob
import math
import os
import re
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cmpx.errors import UsageError
from cmpx.suggest import closest
from cmpx.sweep.toml_lines import KeyLines

RUN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")
TOP_KEYS = ("models", "runs", "defaults")
RUN_KEYS = ("name", "args", "resources", "threads")
MAX_THREADS = 1024  # per backend of a cell: more than any node's cores
DEFAULT_KEYS = ("args", "resources", "threads")


@dataclass(frozen=True)
class RunSpec:
    """One ``[[runs]]`` entry: ``words`` are the defaults' args followed by its own; ``line`` where it starts."""

    name: str
    words: tuple[str, ...]
    resources: Mapping[str, float] = field(default_factory=dict)
    line: int | None = None
    threads_given: int | None = None  # its ``threads`` (or the defaults')

    @property
    def threads(self) -> int:
        """The threads its cells compute with: as given, else the CPUs a cell reserves (at least one), so that a
        cell computes alike on this machine and on a Ray node."""
        if self.threads_given is not None:
            return self.threads_given
        return max(1, math.ceil(self.resources.get("CPU", 1)))


@dataclass(frozen=True)
class SweepFile:
    """A checked sweep file: ``models`` are absolute paths in the order the globs found them, without repeats;
    ``base`` is the file's directory, which relative paths in the runs' args are relative to."""

    path: str
    base: str
    models: tuple[str, ...]
    runs: tuple[RunSpec, ...]

    def label(self, model: str) -> str:
        """How a model is named in reports: its path relative to the sweep file when it lies below it."""
        relative = os.path.relpath(model, self.base)
        return model if relative.startswith(os.pardir + os.sep) else relative


class _Problems:
    """Builds the one-line errors: ``FILE:LINE: KEY: problem``."""

    def __init__(self, path: str, lines: KeyLines):
        self.path = path
        self.lines = lines

    def error(self, key: str, problem: str, table: str = "", index: int | None = None,
              name: str | None = None) -> UsageError:
        line = self.lines.line(table, index, name)
        return UsageError(f"{self.path}{f':{line}' if line else ''}: {key}: {problem}")


def read_sweep_file(path: str) -> SweepFile:
    """Read and check the sweep file at ``path``; UsageError for anything wrong, before any cell runs."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as exc:
        raise UsageError(f"sweep file {path}: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
        data = tomllib.loads(text)
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not UTF-8 text; a sweep file is TOML") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: invalid TOML: {exc}") from None
    problems = _Problems(path, KeyLines(text))
    _unknown_keys(problems, data, TOP_KEYS, "", None, "")
    base = os.path.dirname(os.path.abspath(path))
    defaults = data.get("defaults", {})
    if not isinstance(defaults, dict):
        raise problems.error("defaults", "must be a table ([defaults] with args = [...])", name="defaults")
    _unknown_keys(problems, defaults, DEFAULT_KEYS, "defaults", None, "defaults.")
    default_words = _words(problems, defaults.get("args", []), "defaults.args", "defaults", None)
    default_resources = _resources(problems, defaults.get("resources", {}), "defaults.resources", "defaults", None)
    default_threads = _threads(problems, defaults.get("threads"), "defaults.threads", "defaults", None)
    models = _models(problems, data.get("models"), base)
    runs = _runs(problems, data.get("runs"), default_words, default_resources, default_threads)
    return SweepFile(os.path.abspath(path), base, models, runs)


def _unknown_keys(problems: _Problems, table: Mapping[str, Any], known: tuple[str, ...], name: str,
                  index: int | None, prefix: str) -> None:
    for key in table:
        if key not in known:
            close = closest(key, known)
            hint = f"; did you mean {close!r}?" if close else f"; expected {', '.join(known)}"
            raise problems.error(f"{prefix}{key}", f"unknown key{hint}", name, index, key)


def _models(problems: _Problems, value: Any, base: str) -> tuple[str, ...]:
    if value is None:
        raise problems.error("models", 'missing: list the models, e.g. models = ["models/*.onnx"]')
    patterns = [value] if isinstance(value, str) else value
    if not isinstance(patterns, list) or not patterns or not all(isinstance(p, str) and p for p in patterns):
        raise problems.error("models", "must be a glob or a non-empty list of globs (strings)", name="models")
    found: dict[str, None] = {}
    for pattern in patterns:
        full = os.path.join(base, os.path.expanduser(pattern))
        matches = sorted(p for p in glob.glob(full, recursive=True) if os.path.isfile(p))
        if not matches:
            raise problems.error("models", f"{pattern!r} matches no file (globs are relative to the sweep file, "
                                 f"{base})", name="models")
        explicit = os.path.isabs(os.path.expanduser(pattern)) or ".." in pattern.replace("\\", "/").split("/")
        root = os.path.realpath(base)
        for match in matches:
            real = os.path.realpath(match)
            if not explicit and os.path.commonpath([root, real]) != root:
                raise problems.error("models", f"{pattern!r} matches {os.path.relpath(match, base)}, which leads "
                                     f"outside the sweep file's directory (through a symbolic link, to {real}); "
                                     "write such a path explicitly (absolute, or with '..') to sweep it",
                                     name="models")
        found.update(dict.fromkeys(os.path.abspath(p) for p in matches))
    return tuple(found)


def _runs(problems: _Problems, value: Any, default_words: tuple[str, ...], default_resources: Mapping[str, float],
          default_threads: int | None) -> tuple[RunSpec, ...]:
    if value is None:
        raise problems.error("runs", "missing: add a [[runs]] table with name and args")
    if not isinstance(value, list) or not value or not all(isinstance(r, dict) for r in value):
        raise problems.error("runs", "must be one or more [[runs]] tables", name="runs")
    runs: list[RunSpec] = []
    for index, run in enumerate(value):
        key = f"runs[{index}]"
        _unknown_keys(problems, run, RUN_KEYS, "runs", index, f"{key}.")
        name = run.get("name")
        if not isinstance(name, str) or not RUN_NAME.match(name):
            raise problems.error(f"{key}.name", "missing or not a name (letters, digits, and . _ + - after the first "
                                 f"character), got {name!r}", "runs", index, "name")
        if any(r.name == name for r in runs):
            raise problems.error(f"{key}.name", f"{name!r} is the name of another run too; names must be unique",
                                 "runs", index, "name")
        if "args" not in run:
            raise problems.error(f"{key}.args", f"missing: run {name!r} needs the cmpx run arguments, e.g. "
                                 'args = ["--backend", "onnxrt", "--backend", "onnxref"]', "runs", index)
        words = _words(problems, run["args"], f"{key}.args", "runs", index)
        resources = dict(default_resources)
        resources.update(_resources(problems, run.get("resources", {}), f"{key}.resources", "runs", index))
        threads = _threads(problems, run.get("threads"), f"{key}.threads", "runs", index)
        runs.append(RunSpec(name, default_words + words, resources, problems.lines.line("runs", index),
                            default_threads if threads is None else threads))
    return tuple(runs)


def _words(problems: _Problems, value: Any, key: str, table: str, index: int | None) -> tuple[str, ...]:
    name = key.rsplit(".", 1)[-1]
    if isinstance(value, str):
        try:
            return tuple(shlex.split(value))
        except ValueError as exc:
            raise problems.error(key, f"cannot split {value!r}: {exc}", table, index, name) from None
    if isinstance(value, list) and all(isinstance(w, str) for w in value):
        return tuple(value)
    raise problems.error(key, "must be a list of strings (or one string, split as a shell would)", table, index,
                         name)


def _resources(problems: _Problems, value: Any, key: str, table: str, index: int | None) -> dict[str, float]:
    name = key.rsplit(".", 1)[-1]
    if not isinstance(value, dict):
        raise problems.error(key, "must be a table such as {GPU = 1}", table, index, name)
    for resource, amount in value.items():
        if isinstance(amount, bool) or not isinstance(amount, (int, float)) or amount < 0:
            raise problems.error(key, f"{resource} = {amount!r}: an amount is a number >= 0", table, index, name)
    return {resource: float(amount) for resource, amount in value.items()}


def _threads(problems: _Problems, value: Any, key: str, table: str, index: int | None) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise problems.error(key, f"must be a whole number of threads >= 1, got {value!r}", table, index, "threads")
    if value > MAX_THREADS:  # 100000 made ONNX Runtime start that many threads: the cell never finished
        raise problems.error(key, f"{value} threads: at most {MAX_THREADS} (a node's cores, as resources.CPU "
                                  "reserves them)", table, index, "threads")
    return value
