"""The options every model transform factory receives."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TransformOptions:
    """``keep_fp32``: node names or op types left in float32 (--keep-fp32); ``no_quantize``: node names or op
    types left unquantized by int8/fp8 (--no-quantize); both with any ``@FILE`` already read.
    ``calibration_iterations``: feeds used to calibrate (--calibration-iterations); ``calibration_cache``: a JSON
    file of calibrated ranges, read if present, written otherwise (--calibration-cache)."""

    keep_fp32: tuple[str, ...] = ()
    calibration_iterations: int = 8
    calibration_cache: str | None = None
    no_quantize: tuple[str, ...] = ()


NODE_LIST = "one node name or op type per line"  # what an @FILE of --keep-fp32 or --no-quantize holds


def transform_options(keep_fp32, no_quantize, calibration_iterations: int, calibration_cache: str | None
                      ) -> TransformOptions:
    """The options from a run's words: each ``@FILE`` of --keep-fp32 and --no-quantize read (a UsageError if it
    cannot be)."""
    from cmpx.userfiles import expand_list_files

    return TransformOptions(tuple(expand_list_files("--keep-fp32", keep_fp32, NODE_LIST)), calibration_iterations,
                            calibration_cache, tuple(expand_list_files("--no-quantize", no_quantize, NODE_LIST)))
