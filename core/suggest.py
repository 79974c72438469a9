"""Did-you-mean for a misspelt name (a backend, a metric, an option, a tensor): the one closest known name."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable


def closest(word: str, known: Iterable[str]) -> str | None:
    """The known name closest to ``word`` (case aside), if one is close enough to be what was meant."""
    names = {name.lower(): name for name in known}
    found = difflib.get_close_matches(word.lower(), list(names), n=5, cutoff=0.6)
    return next((names[name] for name in found if not _other_number(word.lower(), name)), None)


def _other_number(word: str, name: str) -> bool:
    """Whether two names differ in their numbers alone, and not by digits swapped: fp4 is not a misspelt fp8, nor
    mm13 a misspelt mm1 (fp61 is fp16 typed in the wrong order)."""
    letters = [re.sub(r"\d", "", text) for text in (word, name)]
    return letters[0] == letters[1] and sorted(re.findall(r"\d", word)) != sorted(re.findall(r"\d", name))


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """`` (did you mean 'onnxrt'?)`` for the closest known name, or nothing."""
    found = closest(word, known)
    return f" (did you mean {found!r}?)" if found is not None else ""
