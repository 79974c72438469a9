"""A RunRequest back into the words a user would type after ``cmpx run``: the inverse of ``cmpx run``'s word parser
(cmpx.options.grammar.request_from_words), made from the same option table (cmpx.options.table), so that a printed
command (cmpx reduce's reproduce lines) runs what the request holds. Light: no numpy, no click."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cmpx.options.request import RunRequest, request_defaults
from cmpx.options.table import COMPARISON, FLAG, RUN_OPTIONS, WORDS, RunOption, looks_like_option, \
    per_output_value, threshold_flag

if TYPE_CHECKING:
    from cmpx.plugin.registry import BackendSpec


def request_words(request: RunRequest, select: Sequence[str] | None = None,
                  backends: Iterable[BackendSpec] = ()) -> list[str]:
    """``request`` as command-line words that ``cmpx run`` parses back to it (unquoted: ``command_line`` quotes).

    ``select`` picks what to write, in its order: option names (``"backends"``), option groups
    (``run_options.COMPARISON``) and ``"model"`` (the first word, wherever it is named); None writes every option.
    The metric thresholds go with the comparison group (or ``"thresholds"``). Options at their defaults are left
    out. ``backends``: the backends whose options to write, each once, after the rest (their options are read from
    ``request.backend_options`` by parameter name; those at their defaults are left out)."""
    everything = select is None
    keys = [] if select is None else list(select)
    unknown = set(keys) - {"model", "thresholds"} - {key for o in RUN_OPTIONS for key in (o.name, o.group)}
    if unknown:
        raise ValueError(f"request_words: no option or group {sorted(unknown)}")
    chosen: dict[str, RunOption] = {}
    for key in [option.name for option in RUN_OPTIONS] if everything else keys:
        chosen.update({option.name: option for option in RUN_OPTIONS if key in (option.name, option.group)})
    words = [request.model] if request.model is not None and (everything or "model" in keys) else []
    defaults = request_defaults()
    for option in chosen.values():
        value = getattr(request, option.name)
        if option.kind == FLAG:
            words += [option.flag] if value else []
        elif option.kind == WORDS:
            words += _values(option.flag, value, option.accepts)
        elif value != defaults[option.name]:
            words += _values(option.flag, [str(value)], None)
    if everything or COMPARISON in keys or "thresholds" in keys:
        for metric, values in sorted(request.thresholds.items()):
            words += _values(threshold_flag(metric), values, per_output_value)  # as the parser takes them
    seen: set[str] = set()
    for spec in backends:
        if spec.name not in seen:
            seen.add(spec.name)
            words += _backend_words(spec, request.backend_options)
    return words


def command_line(words: Iterable[str]) -> str:
    """Words as one shell command line, each quoted where the shell would split or expand it."""
    return " ".join(shlex.quote(str(word)) for word in words)


def _values(flag: str, values: Iterable[str], accepts: Callable[[str], bool] | None) -> list[str]:
    """``flag`` with its values: several after one flag where the parser takes them so (Polygraphy keeps only the
    last of a repeated flag, so ``--atol 1e-3 M:1`` is what it understands), else the flag again before each;
    ``--flag=VALUE`` for a value that looks like an option."""
    words: list[str] = []
    grouping = False
    for value in values:
        if grouping and accepts is not None and accepts(value) and not looks_like_option(value):
            words.append(value)
            continue
        words += [f"{flag}={value}"] if looks_like_option(value) else [flag, value]
        grouping = not looks_like_option(value)
    return words


def _backend_words(spec: BackendSpec, options: Mapping[str, Any]) -> list[str]:
    words: list[str] = []
    for option in spec.options:
        value = options.get(spec.param(option))
        if not option.given(value):
            continue
        if value is True:
            words.append(spec.flag(option))
            continue
        for item in value if isinstance(value, (list, tuple)) else [value]:
            words += _values(spec.flag(option), [str(item)], None)
    return words
