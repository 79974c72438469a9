"""Command-line words before click sees them: the space-separated multi-value form, and an early look at
``-p`` / ``--debug`` (plugins must be loaded before the ``run`` command's options exist) and at how many
backends a run will start."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence


def is_number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True


def looks_like_option(word: str) -> bool:
    return word.startswith("-") and word != "-" and not is_number(word)


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


def option_values(args: Sequence[str], short: str, long: str) -> list[str]:
    """Every value given to an option written ``-p X``, ``-pX``, ``--plugin X`` or ``--plugin=X``."""
    values = []
    for i, word in enumerate(args):
        if word == "--":
            break
        if word in (short, long) and i + 1 < len(args):
            values.append(args[i + 1])
        elif word.startswith(long + "="):
            values.append(word[len(long) + 1:])
        elif word.startswith(short) and not word.startswith("--") and len(word) > len(short):
            values.append(word[len(short):])
    return values


def backends_to_run(args: Sequence[str]) -> int:
    """How many ``--backend`` options ``cmpx [-p MODULE ...] run ...`` has; 0 for any other command, and for
    ``run --help``. A guess made before plugins are loaded: the options may still turn out to be wrong."""
    i = 0
    while i < len(args) and looks_like_option(args[i]):
        i += 2 if args[i] in ("-p", "--plugin") else 1
    if i >= len(args) or args[i] != "run":
        return 0
    words = list(args[i + 1:])
    if "--" in words:
        words = words[:words.index("--")]
    if "-h" in words or "--help" in words:
        return 0
    return sum(1 for word in words if word == "--backend" or word.startswith("--backend="))
