"""--onnx-outputs / --mark-all: which intermediate tensors to expose, from names, patterns and @files."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping, Sequence

from cmpx.errors import UsageError
from cmpx.suggest import did_you_mean
from cmpx.userfiles import expand_list_files

def expand_words(option: str, words: Iterable[str]) -> list[str]:
    """Names and patterns from ``words``: ``@file`` reads one per line (blank lines and # comments skipped);
    ``mark all`` (Polygraphy's spelling) and ``*`` mean every tensor."""
    words = list(words)
    if words[:2] == ["mark", "all"]:
        words = ["*", *words[2:]]
    return expand_list_files(option, words, "one tensor name or pattern per line")


def is_pattern(word: str) -> bool:
    return any(c in word for c in "*?[")


def select_tensors(option: str, words: Sequence[str], exclude: Sequence[str], markable: Sequence[str],
                   hint: str, unmarkable: Mapping[str, str] | None = None) -> list[str]:
    """The markable tensors named or matched by ``words`` minus ``exclude``, in graph order.

    A name that is not a markable tensor, or a pattern matching none, is a UsageError (``hint`` says how to
    list them; ``unmarkable`` maps the model's other tensors to why they cannot be marked).
    """
    unmarkable = unmarkable or {}
    wanted = set()
    for word in words:
        wanted |= set(_match(option, word, markable, hint, unmarkable))
    for word in exclude:
        wanted -= set(_match(option.replace("outputs", "exclude-outputs"), word, markable, hint, unmarkable))
    return [name for name in markable if name in wanted]


def excluded_outputs(words: Sequence[str], outputs: Sequence[str], marking: bool
                     ) -> tuple[frozenset[str], list[str]]:
    """--onnx-exclude-outputs: the model outputs its words leave out, and the words left for marked tensors.

    A word naming a model output (or a pattern matching some) leaves those outputs out of the comparison. Without
    marking (``marking`` False) every word must name or match model outputs."""
    excluded: set[str] = set()
    rest = []
    for word in words:
        found = fnmatch.filter(outputs, word) if is_pattern(word) else [word] if word in outputs else []
        excluded.update(found)
        if not marking and not found:
            raise UsageError(f"--onnx-exclude-outputs {word}: without --onnx-outputs or --mark-all it leaves out "
                             f"model outputs only, and {word!r} is not one (the outputs: {', '.join(outputs)})")
        if not found or is_pattern(word):
            rest.append(word)
    return frozenset(excluded), rest


def _match(option: str, word: str, markable: Sequence[str], hint: str, unmarkable: Mapping[str, str]) -> list[str]:
    if is_pattern(word):
        found = fnmatch.filter(markable, word)
        if not found:
            raise UsageError(f"{option}: the pattern {word!r} matches no tensor of the model; {hint}")
        return found
    if word in unmarkable:
        raise UsageError(f"{option}: {word!r} cannot be marked: {unmarkable[word]}; {hint}")
    if word not in markable:
        raise UsageError(f"{option}: the model has no markable tensor {word!r}{did_you_mean(word, markable)}; {hint}")
    return [word]
