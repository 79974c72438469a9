"""The tolerance file: per output, the atol, rtol and check statistic a run applies (``cmpx run --tolerances
FILE``), as ``cmpx tolerances`` writes it (docs/tolerances.md). TOML, read with tomllib and written by hand so
that it can carry comments: the numbers its tolerances were derived from.

    format = "cmpx-tolerances"
    version = 1

    [outputs."logits"]
    check = "elemwise"
    atol = 1.2e-05
    rtol = 3.4e-04

The file's values become the words ``--atol logits:1.2e-05`` would give, placed before the command line's own,
so one parser reads both and the command line wins: its NAME:VALUE over the file's value for NAME, and a bare
value (``--atol 1e-3``, every output) over all of the file's values of that option. Light: no numpy."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cmpx.options.argtypes import check_stat, quantile, tolerance
from cmpx.errors import UsageError
from cmpx.userfiles import open_regular

FORMAT = "cmpx-tolerances"
VERSION = 1
TOP_KEYS = ("format", "version", "outputs")
# key of an output's table -> the run option its value feeds (a RunRequest field) and the parser of its words
OUTPUT_KEYS = {"atol": ("atol", tolerance), "rtol": ("rtol", tolerance), "check": ("check_error_stat", check_stat),
               "quantile": ("error_quantile", quantile)}
PER_OUTPUT_FIELDS = tuple(field for field, _ in OUTPUT_KEYS.values())


@dataclass(frozen=True)
class OutputTolerance:
    """One output's entry. ``notes``: comment lines written above its values (what they were derived from)."""

    output: str
    atol: float
    rtol: float
    check: str = "elemwise"
    quantile: float | None = None
    notes: Sequence[str] = ()


def read_tolerance_file(path: str) -> dict[str, dict[str, Any]]:
    """{output: {key: value}} of the file at ``path``, every value checked with the parser its option uses; a
    UsageError naming the file and the problem otherwise (nothing has run yet)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib
    where = f"--tolerances {path}"
    with open_regular(path, f"{where}: tolerance file") as f:
        raw = f.read()
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise UsageError(f"{where}: not UTF-8 text; a tolerance file is TOML (see docs/tolerances.md)") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{where}: invalid TOML: {exc}; fix the file or write it again with 'cmpx tolerances'") \
            from None
    unknown = sorted(set(data) - set(TOP_KEYS))
    if unknown:
        raise UsageError(f"{where}: unknown key {unknown[0]!r}; a tolerance file has {', '.join(TOP_KEYS)}")
    if data.get("format") != FORMAT or data.get("version") != VERSION:
        raise UsageError(f"{where}: not a tolerance file (it needs format = {json.dumps(FORMAT)} and version = "
                         f"{VERSION}); write one with 'cmpx tolerances'")
    outputs = data.get("outputs")
    if not isinstance(outputs, dict) or not outputs:
        raise UsageError(f"{where}: no [outputs.\"NAME\"] table; give at least one output's atol and rtol")
    checked: dict[str, dict[str, Any]] = {}
    for name, entry in outputs.items():
        if not isinstance(entry, dict):
            raise UsageError(f"{where}: outputs.{json.dumps(name)} must be a table of "
                             f"{', '.join(OUTPUT_KEYS)}")
        checked[name] = {}
        for key, value in entry.items():
            if key not in OUTPUT_KEYS:
                raise UsageError(f"{where}: outputs.{json.dumps(name)}: unknown key {key!r}; use "
                                 f"{', '.join(OUTPUT_KEYS)}")
            if isinstance(value, bool) or not isinstance(value, (int, float, str)):
                raise UsageError(f"{where}: outputs.{json.dumps(name)}.{key} = {value!r} is not a value")
            try:
                checked[name][key] = OUTPUT_KEYS[key][1](str(value))
            except ValueError as exc:
                raise UsageError(f"{where}: outputs.{json.dumps(name)}.{key}: {exc}") from None
    return checked


def merged_words(path: str | None, command_line: Mapping[str, Sequence[str]]) -> tuple[dict[str, tuple[str, ...]],
                                                                                      tuple[str, ...]]:
    """Each per-output option's words with the file's first: {RunRequest field: words} for the fields the file
    feeds, and the file's output names (to check against the model's). A bare command-line value drops the
    file's values of that option (the command line's value is for every output)."""
    if path is None:
        return {}, ()
    entries = read_tolerance_file(path)
    words: dict[str, tuple[str, ...]] = {}
    for key, (field, _) in OUTPUT_KEYS.items():
        given = tuple(command_line.get(field, ()))
        if any(":" not in word for word in given):
            words[field] = given
            continue
        from_file = tuple(f"{name}:{entry[key]}" for name, entry in entries.items() if key in entry)
        words[field] = from_file + given
    return words, tuple(entries)


def _toml_string(text: str) -> str:
    """A TOML basic string: JSON's escapes, which TOML shares, plus DEL, which TOML wants escaped."""
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _comment(text: str) -> str:
    return "# " + " ".join(text.splitlines())


def tolerance_file_text(entries: Sequence[OutputTolerance], header: Sequence[str]) -> str:
    """The file's text: ``header`` as comment lines, then each output's table with its notes as comments."""
    lines = [_comment(line) for line in header]
    lines += [f"format = {_toml_string(FORMAT)}", f"version = {VERSION}"]
    for entry in entries:
        lines += ["", f"[outputs.{_toml_string(entry.output)}]"]
        lines += [_comment(note) for note in entry.notes]
        lines += [f"check = {_toml_string(entry.check)}", f"atol = {entry.atol!r}", f"rtol = {entry.rtol!r}"]
        if entry.quantile is not None:
            lines.append(f"quantile = {entry.quantile!r}")
    return "\n".join(lines) + "\n"
