"""The command lines cmpx reduce prints: a run's comparison and backend options as words, and the Polygraphy
line that checks a reduced model written as Polygraphy's JSON."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cmpx.preflight import Preflight
    from cmpx.request import RunRequest

POLYGRAPHY_RUNNERS = {"onnxrt": "--onnxrt", "trt": "--trt"}  # cmpx's backends that are Polygraphy runners
POLYGRAPHY_COMPARISON = {"--atol", "--rtol", "--check-error-stat"}  # options both spell and mean alike


def polygraphy_command(model: str, inputs: str, outputs: str, live: Sequence[str], words: Sequence[str]
                       ) -> str | None:
    """The ``polygraphy run`` line that checks ``model`` on its ``inputs`` against the saved ``outputs``, where
    Polygraphy can: both files in its JSON, each live backend word one of its runners, every option in ``words`` one
    it spells alike; else None."""
    if not all(path.lower().endswith(".json") for path in (inputs, outputs)):
        return None
    if not all(word in POLYGRAPHY_RUNNERS for word in live):
        return None
    if any(word.startswith("--") and word not in POLYGRAPHY_COMPARISON for word in words):
        return None
    import shlex

    typed = [] if model.lower().endswith(".onnx") else ["--model-type", "onnx"]  # else Polygraphy cannot tell
    return " ".join(["polygraphy run", shlex.quote(model), *typed, *(POLYGRAPHY_RUNNERS[w] for w in live),
                     "--load-inputs", shlex.quote(inputs), "--load-outputs", shlex.quote(outputs), *words])


def comparison_words(request: RunRequest) -> list[str]:
    """The comparison options of ``request`` (tolerances, metrics, thresholds...) as command-line words, so that
    the printed command fails as the candidate did."""
    import shlex

    from cmpx.run_options import COMPARISON, FLAG, RUN_OPTIONS, WORDS

    words: list[str] = []
    for option in RUN_OPTIONS:
        value = getattr(request, option.name, None)
        if option.group != COMPARISON or value in (None, False, (), []):
            continue
        if option.kind == FLAG:
            words.append(option.flags[0])
        elif option.kind == WORDS:  # one flag, its values after it: Polygraphy keeps only the last of repeated flags
            words += [option.flags[0], *(shlex.quote(str(word)) for word in value)]
        else:
            words += [option.flags[0], shlex.quote(str(value))]
    for metric, values in sorted(request.thresholds.items()):
        words += [part for word in values for part in (f"--{metric}-threshold", shlex.quote(str(word)))]
    return words


def backend_option_words(request: RunRequest, checked: Preflight, names: set[str]) -> tuple[str, ...]:
    """The options of the backends ``names`` given other values than their defaults, as command-line words (each
    backend's once, though two of its instances run)."""
    import shlex

    words: list[str] = []
    specs = {backend.spec.name: backend.spec for backend in checked.backends if backend.name in names}
    for spec in specs.values():
        for option in spec.options:
            value = request.backend_options.get(spec.param(option))
            if not option.given(value):
                continue
            if value is True:
                words.append(spec.flag(option))
                continue
            for item in value if isinstance(value, (list, tuple)) else [value]:
                words += [spec.flag(option), shlex.quote(str(item))]
    return tuple(words)
