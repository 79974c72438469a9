"""The Polygraphy line cmpx reduce prints to check a reduced model written as Polygraphy's JSON (its cmpx run lines
are a request's own words: cmpx.options.words)."""

from __future__ import annotations

from collections.abc import Sequence

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
    if any(word.startswith("--") and word.split("=", 1)[0] not in POLYGRAPHY_COMPARISON for word in words):
        return None
    from cmpx.options.words import command_line

    typed = [] if model.lower().endswith(".onnx") else ["--model-type", "onnx"]  # else Polygraphy cannot tell
    return "polygraphy run " + command_line([model, *typed, *(POLYGRAPHY_RUNNERS[w] for w in live),
                                             "--load-inputs", inputs, "--load-outputs", outputs, *words])
