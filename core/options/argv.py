"""Command-line words before click sees them: the space-separated multi-value form, and one early look at the
whole command line (``Prescan``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from cmpx.options.table import looks_like_option


def expand_multi_values(args: Sequence[str], multi: Mapping[str, Callable[[str], bool]]) -> list[str]:
    """Rewrite ``--atol 1e-3 out0:1e-2`` as ``--atol 1e-3 --atol out0:1e-2``.

    After a flag in ``multi``, the first word is always its value; following words are values too while
    they do not look like options and the flag's predicate accepts them (so ``--atol 1e-3 model.onnx``
    leaves ``model.onnx`` alone). ``--`` ends option processing.
    """
    out: list[str] = []
    i = 0
    while i < len(args):
        word = args[i]
        if word == "--":
            out.extend(args[i:])
            break
        out.append(word)
        i += 1
        accepts = multi.get(word)
        if accepts is None or i >= len(args):
            continue
        out.append(args[i])
        i += 1
        while i < len(args) and not looks_like_option(args[i]) and accepts(args[i]):
            out += [word, args[i]]
            i += 1
    return out


@dataclass(frozen=True)
class Prescan:
    """What cmpx needs from its command line before click parses it: the plugins to load (``run``'s options depend
    on them), whether --debug was given (errors while loading them are shown with tracebacks), and how many
    backends a run will start (``cmpx.cli.launch`` spawns their workers at once)."""

    plugin_args: tuple[str, ...] = ()
    debug: bool = False
    backends: int = 0


def prescan(args: Sequence[str]) -> Prescan:
    """One pass over ``args``, up to ``--``: every value of ``-p X``, ``-pX``, ``--plugin X``, ``--plugin=X``; any
    ``--debug``; and the number of ``--backend`` options if the command is ``run`` (without ``--help``), leaving out
    those under another Python (``NAME@PYTHON``), which a spare started with this Python cannot serve."""
    words = list(args[:args.index("--")] if "--" in args else args)
    plugins = []
    for i, word in enumerate(words):
        if word in ("-p", "--plugin") and i + 1 < len(words):
            plugins.append(words[i + 1])
        elif word.startswith("--plugin="):
            plugins.append(word[len("--plugin="):])
        elif word.startswith("-p") and not word.startswith("--") and len(word) > 2:
            plugins.append(word[2:])
    return Prescan(tuple(plugins), "--debug" in words, _backends_to_run(words))


def _backends_to_run(words: Sequence[str]) -> int:
    i = 0
    while i < len(words) and looks_like_option(words[i]):
        i += 2 if words[i] in ("-p", "--plugin") else 1
    if i >= len(words) or words[i] != "run" or "-h" in words or "--help" in words:
        return 0
    rest = words[i + 1:]
    values = [rest[j + 1] for j, word in enumerate(rest[:-1]) if word == "--backend"]
    values += [word[len("--backend="):] for word in rest if word.startswith("--backend=")]
    values += [word[2:] for word in rest if word in POLYGRAPHY_RUNNERS]
    return sum(1 for value in values if "@" not in value)  # NAME@PYTHON runs under another Python: no spare


POLYGRAPHY_RUNNERS = ("--onnxrt", "--trt")  # Polygraphy's runner flags: backends too (cmpx.options.polygraphy)
