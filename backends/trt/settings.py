"""TensorRT option values, parsed and checked without TensorRT: pool limits, optimization level, precision."""

from __future__ import annotations

import re
from dataclasses import dataclass

from cmpx.errors import UsageError

UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
POOLS = ("workspace", "dla_managed_sram", "dla_local_dram", "dla_global_dram", "tactic_dram", "tactic_shared_memory")


def parse_pool_limits(words) -> dict[str, int]:
    """``workspace:1G tactic_dram:512M`` -> {pool: bytes} (Polygraphy's --pool-limit form)."""
    limits = {}
    for word in words:
        match = re.fullmatch(r"([a-z_]+):(\d+(?:\.\d+)?)([KMGT]?)(?:i?B)?", word.strip(), re.IGNORECASE)
        if not match or match[1].lower() not in POOLS:
            raise UsageError(f"--pool-limit: cannot read {word!r}; use POOL:SIZE such as workspace:1G (pools: "
                             f"{', '.join(POOLS)})")
        limits[match[1].lower()] = int(float(match[2]) * UNITS[match[3].upper()])
    return limits


def parse_optimization_level(text) -> int | None:
    if text in (None, ""):
        return None
    if not str(text).isdigit() or not 0 <= int(text) <= 5:
        raise UsageError(f"--builder-optimization-level {text}: give an integer from 0 to 5")
    return int(text)


@dataclass(frozen=True)
class PrecisionPlan:
    """How the run's precision reaches TensorRT: always as the ONNX graph (TensorRT 11 builds strongly typed
    networks only); with TensorRT 10, the graph is also what cmpx hands over, so results compare like for
    like across versions. ``tf32`` says whether TF32 math stays allowed (cleared unless asked, as Polygraphy)."""

    strongly_typed: bool
    legacy_flags: bool
    tf32: bool


def precision_plan(major_version: int, tf32_requested: bool, strongly_typed_requested: bool = False) -> PrecisionPlan:
    """TensorRT 11 networks are always strongly typed; with TensorRT 10, ``--strongly-typed`` (as in Polygraphy)
    makes the network honour the graph's types exactly instead of letting the builder pick precisions."""
    if major_version >= 11:
        return PrecisionPlan(strongly_typed=True, legacy_flags=False, tf32=tf32_requested)
    return PrecisionPlan(strongly_typed=strongly_typed_requested, legacy_flags=True, tf32=tf32_requested)
