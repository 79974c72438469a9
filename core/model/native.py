"""Models in a backend's own format (a TensorRT engine, an OpenVINO IR), told apart from ONNX by their suffix."""

from __future__ import annotations

import os
from collections.abc import Sequence

from cmpx.plugin.registry import BackendSpec


def native_format(model: str | None, specs: Sequence[BackendSpec]) -> str | None:
    """The suffix of ``model`` if a backend registered it as a format of its own (".engine"), else None (ONNX)."""
    if model is None:
        return None
    suffix = os.path.splitext(model)[1].lower()
    return suffix if any(suffix in spec.model_formats for spec in specs) else None
