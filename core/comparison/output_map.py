"""--output-map A=B: a tensor named B (in a backend or saved run that has no A) is compared as output A.

Names may hold ``=`` themselves (``model/out=1:0``), so a word with several ``=`` is read at the one split whose
left side is a known output name (and, among several such, whose right side is a known name too); a word that
still reads two ways is an error showing the readings."""

from __future__ import annotations

from collections.abc import Sequence

from cmpx.errors import UsageError

EXAMPLE = "e.g. --output-map logits=output_0 (an output named output_0 is compared as logits)"


def check_output_map(words: Sequence[str]) -> tuple[str, ...]:
    """The words, each checked to have a readable form (NAME=OTHER_NAME); read against names by ``resolve``."""
    for word in words:
        if not _splits(word):
            raise UsageError(f"--output-map: cannot read {word!r}; give NAME=OTHER_NAME, {EXAMPLE}")
    return tuple(words)


def resolve_output_map(words: Sequence[str], known: Sequence[str]) -> dict[str, str]:
    """Each word's (target, source), read against ``known`` (the outputs the run knows by name)."""
    names = set(known)
    mapping: dict[str, str] = {}
    for word in words:
        splits = _splits(word)
        fitting = [s for s in splits if s[0] in names] or splits[:1]
        if len(fitting) > 1:
            fitting = [s for s in fitting if s[1] in names] or fitting
        if len(fitting) > 1:
            readings = "; ".join(f"{a!r} from {b!r}" for a, b in fitting)
            raise UsageError(f"--output-map {word}: reads {len(fitting)} ways ({readings}); rename the outputs, or "
                             "compare the runs without the ambiguous names")
        target, source = fitting[0]
        if target in mapping:
            raise UsageError(f"--output-map: {target!r} is mapped twice; map each output once")
        mapping[target] = source
    return mapping


def _splits(word: str) -> list[tuple[str, str]]:
    return [(word[:i], word[i + 1:]) for i, char in enumerate(word) if char == "=" and 0 < i < len(word) - 1]
