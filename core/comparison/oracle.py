"""Measuring the run's backends against the fp64 oracle (cmpx.oracle holds what is found).

Which backend is the oracle: a live backend running the fp64 transform (``--oracle`` adds ``onnxref:fp64``), or
saved outputs of one (``onnxref:fp64@DIR``). It takes part in the run's verdict only as ``--reference``, or when
nothing else could be compared (one other backend). Errors are computed in float64: a float32 backend's values
are widened, the oracle's never rounded down.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cmpx.oracle import JUMP, SENTINEL, ORACLE_TRANSFORM, ROUNDING, OracleBackend, OracleError, OracleJudgement, OracleJump
from cmpx.results import PairResult


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


def measure(actual: Any, oracle: Any) -> OracleError | None:
    """``actual``'s error against the oracle's values, in float64; None when there is nothing to measure (not a
    float tensor, or another shape)."""
    import numpy as np

    if not isinstance(actual, np.ndarray) or not isinstance(oracle, np.ndarray):
        return None
    if actual.shape != oracle.shape or actual.dtype.kind not in "fc" or oracle.dtype.kind not in "fc":
        return None
    exact = oracle.astype(np.float64, copy=False)
    error = np.abs(actual.astype(np.float64) - exact)
    if error.size == 0:
        return OracleError(0.0, 0.0, 0.0, 0.0)
    magnitude = np.abs(exact)
    nonzero = magnitude > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        max_rel = float(np.max(error[nonzero] / magnitude[nonzero])) if nonzero.any() else 0.0
    scale = float(np.nanmax(magnitude)) if not np.isnan(magnitude).all() else 0.0
    return OracleError(float(np.max(error)), float(np.mean(error)), max_rel, scale)


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
