"""Measuring the run's backends against the fp64 oracle (cmpx.outcome.oracle holds what is found).

Which backend is the oracle: a live backend running the fp64 transform (``--oracle`` adds ``onnxref:fp64``), or
saved outputs of one (``onnxref:fp64@DIR``). It takes part in the run's verdict only as ``--reference``, or when
nothing else could be compared (one other backend). Errors are computed in float64: a float32 backend's values
are widened, the oracle's never rounded down.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from cmpx.outcome.oracle import JUMP, SENTINEL, ORACLE_TRANSFORM, ROUNDING, OracleBackend, OracleError, OracleJudgement, OracleJump
from cmpx.outcome.results import PairResult


def transforms_of(plan: Any) -> dict[str, str | None]:
    """Each backend's transform: a live one's, or what a saved run's name says (``onnxrt:fp16@DIR``: fp16)."""
    saved = {b.name: b.name.partition("@")[0].partition(":")[2].partition("#")[0] or None
             for b in plan.saved_backends}
    return {**saved, **{b.name: b.transform for b in plan.backends}}


def oracle_of(live: Sequence[Any], saved: Sequence[Any]) -> str | None:
    """The name of the run's oracle: its first live fp64 backend, else its first saved run of one."""
    for backend in live:
        if backend.transform == ORACLE_TRANSFORM:
            return backend.name
    for backend in saved:
        if backend.name.partition("@")[0].partition("#")[0].endswith(":" + ORACLE_TRANSFORM):
            return backend.name
    return None


ORACLE_CHUNK = 1 << 20  # elements measured at a time: float64 temporaries of a few MiB, whatever the tensor's size


def measure(actual: Any, oracle: Any, chunk: int = ORACLE_CHUNK) -> OracleError | None:
    """``actual``'s error against the oracle's values, in float64; None when there is nothing to measure (not a
    float tensor, or another shape). Chunk by chunk, so that the temporaries stay small on any tensor; a NaN error
    makes the largest and the mean errors NaN (the scale ignores NaN)."""
    import numpy as np

    if not isinstance(actual, np.ndarray) or not isinstance(oracle, np.ndarray):
        return None
    if actual.shape != oracle.shape or actual.dtype.kind not in "fc" or oracle.dtype.kind not in "fc":
        return None
    if actual.size == 0:
        return OracleError(0.0, 0.0, 0.0, 0.0)
    wide = np.result_type(actual.dtype, oracle.dtype, np.float64)
    flat_actual, flat_oracle = actual.reshape(-1), oracle.reshape(-1)
    max_abs, total, max_rel, scale = 0.0, 0.0, 0.0, -math.inf
    for start in range(0, flat_actual.size, chunk):
        exact = flat_oracle[start:start + chunk].astype(wide, copy=False)
        error = np.abs(flat_actual[start:start + chunk].astype(wide) - exact)
        magnitude = np.abs(exact)
        max_abs = _nan_max(max_abs, float(np.max(error)))
        total += float(np.sum(error))
        nonzero = magnitude > 0
        if nonzero.any():
            with np.errstate(invalid="ignore", divide="ignore", over="ignore"):  # a huge error over a subnormal: inf
                max_rel = _nan_max(max_rel, float(np.max(error[nonzero] / magnitude[nonzero])))
        if not np.isnan(magnitude).all():
            scale = max(scale, float(np.nanmax(magnitude)))
    return OracleError(max_abs, total / flat_actual.size, max_rel, scale if scale > -math.inf else 0.0)


def _nan_max(current: float, value: float) -> float:
    """The larger of two, NaN once either is (as numpy's max over the whole tensor would be)."""
    return math.nan if math.isnan(current) or math.isnan(value) else max(current, value)


def judge(pair: PairResult, errors: Mapping[str, Mapping[str, OracleError]], oracle: str,
          transforms: Mapping[str, str | None]) -> list[OracleJudgement]:
    """For every output that fails ``pair`` (compared, not failed early), which side is closer to the oracle."""
    if oracle in (pair.backend, pair.reference):
        return []
    mine, theirs = errors.get(pair.backend, {}), errors.get(pair.reference, {})
    labels = (transforms.get(pair.backend) or pair.backend, transforms.get(pair.reference) or pair.reference)
    return [OracleJudgement(o.output, pair.backend, pair.reference, oracle, mine[o.output], theirs[o.output], labels)
            for o in pair.outputs
            if not o.passed and not o.failed_early and o.output in mine and o.output in theirs]


def look_for_jump(graph: Any, backend: OracleBackend, iteration: int, errors: Mapping[str, OracleError],
                  transform: str | None) -> None:
    """Walk ``graph`` in topological order and note on ``backend`` the first tensor whose error (at its scale)
    is ``JUMP`` times what the compared tensors it is computed from carried (at least one rounding at the
    backend's precision); otherwise the largest step seen. Tensors not measured are looked through, and so are
    those holding a mask's sentinel values (``SENTINEL``)."""
    if backend.jump is not None or not errors:
        return
    backend.layered = True
    floor = ROUNDING.get(transform, ROUNDING[None])
    carried: dict[str, float] = {}  # per tensor: its error, or the largest among the measured tensors it comes from
    largest = backend.largest_step
    for info in graph.tensors:
        before = max((carried.get(name, 0.0) for name in info.inputs), default=0.0)
        error = errors.get(info.name)
        if error is None or error.relative != error.relative or error.scale > SENTINEL:  # not measured, NaN, a mask
            carried[info.name] = before
            continue
        carried[info.name] = error.relative
        step = error.relative / max(before, floor)
        if step >= JUMP:
            backend.jump = OracleJump(backend.backend, iteration, info.name, info.node, info.op_type,
                                      error.relative, before, step)
            return
        if largest is None or step > largest[1]:
            largest = (info.name, step)
    backend.largest_step = largest
