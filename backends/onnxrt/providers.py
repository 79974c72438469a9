"""Execution provider names: short forms users type, and the check against what is installed."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

SHORT_NAMES = {
    "cpu": "CPUExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "tensorrt": "TensorrtExecutionProvider",
    "trt": "TensorrtExecutionProvider",
    "openvino": "OpenVINOExecutionProvider",
    "dml": "DmlExecutionProvider",
    "coreml": "CoreMLExecutionProvider",
    "rocm": "ROCMExecutionProvider",
    "migraphx": "MIGraphXExecutionProvider",
}


class ProviderError(ValueError):
    pass


def resolve_providers(requested: Iterable[str], available: Sequence[str]) -> list[str]:
    """Full provider names for ``requested`` (short or full, any case), all of which must be available."""
    by_lower = {name.lower(): name for name in available}
    resolved = []
    for word in requested:
        for part in word.split(","):
            part = part.strip()
            if not part:
                continue
            full = SHORT_NAMES.get(part.lower(), part)
            if full.lower() not in by_lower:
                raise ProviderError(
                    f"execution provider {part!r} is not available in this onnxruntime build; available: "
                    f"{', '.join(available)} (install e.g. onnxruntime-gpu for CUDA)")
            resolved.append(by_lower[full.lower()])
    return resolved or ["CPUExecutionProvider"]
