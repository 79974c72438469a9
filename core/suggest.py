"""Did-you-mean for a misspelt name (a backend, a metric, an option, a tensor): the one closest known name."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def closest(word: str, known: Iterable[str]) -> str | None:
    """The known name closest to ``word`` (case aside), if one is close enough to be what was meant."""
    names = {name.lower(): name for name in known}
    found = difflib.get_close_matches(word.lower(), list(names), n=1, cutoff=0.6)
    return names[found[0]] if found else None


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """`` (did you mean 'onnxrt'?)`` for the closest known name, or nothing."""
    found = closest(word, known)
    return f" (did you mean {found!r}?)" if found is not None else ""
