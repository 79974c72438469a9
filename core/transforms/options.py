"""The options every model transform factory receives."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TransformOptions:
    """``keep_fp32``: node names or op types left in float32 (--keep-fp32); ``calibration_iterations``: feeds
    used to calibrate (--calibration-iterations); ``calibration_cache``: a JSON file of calibrated ranges, read
    if present, written otherwise (--calibration-cache)."""

    keep_fp32: tuple[str, ...] = ()
    calibration_iterations: int = 8
    calibration_cache: str | None = None
