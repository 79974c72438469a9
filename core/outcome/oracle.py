"""What the fp64 oracle found (--oracle, or a backend NAME:fp64 in the run): plain data, no numpy.

Every backend's tensors are measured against the oracle's float64 values (``OracleError``). For each output that
fails a pair of the run (a backend A against its reference R), the two sides' errors against the oracle say which
side is closer to the exact value and by how much (``OracleJudgement``). Per backend, with marked tensors, the
first tensor where its own error jumps (``OracleJump``) tells a fault from a precision drift.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

ORACLE_TRANSFORM = "fp64"  # a backend running this transform is the run's oracle
EQUALLY_FAR = 2.0  # one side is closer only if the other's largest error against the oracle is this many times its
JUMP = 100.0  # a tensor's error jumps when it is this many times what its inputs carried (or one rounding)
SENTINEL = 1e30  # a tensor holding values this large holds a mask's "minus infinity" (each precision writes its own
# largest value there, a difference that the Softmax after it erases): no jump is looked for in it
ROUNDING = {None: 2.0 ** -24, "fp16": 2.0 ** -11, "bf16": 2.0 ** -8, "int8": 2.0 ** -7, "fp8": 2.0 ** -4}


@dataclass(frozen=True)
class OracleError:
    """One backend's error against the oracle on one tensor, computed in float64: the largest and the mean
    absolute error, the largest relative error (over elements where the oracle is not 0), and ``scale``, the
    largest magnitude of the oracle's values (``relative``: ``max_abs`` over it, the error at the tensor's scale)."""

    max_abs: float
    mean_abs: float
    max_rel: float
    scale: float

    @property
    def relative(self) -> float:
        return self.max_abs / self.scale if self.scale > 0 else self.max_abs

    def to_dict(self) -> dict[str, Any]:
        return {"max_abs": self.max_abs, "mean_abs": self.mean_abs, "max_rel": self.max_rel, "scale": self.scale}


@dataclass(frozen=True)
class OracleJudgement:
    """A failing output of a pair (``backend`` against ``reference``), both sides measured against the oracle.
    ``closer`` is the side nearer the exact value (None: equally far, within ``EQUALLY_FAR``); ``ratio`` is the
    further side's largest error over the closer side's (inf when the closer side is exact)."""

    output: str
    backend: str
    reference: str
    oracle: str
    backend_error: OracleError
    reference_error: OracleError
    labels: tuple[str, str] = ("", "")  # how the sentence names the disagreement of each side ("fp16's")

    @property
    def ratio(self) -> float:
        low, high = sorted((self.backend_error.max_abs, self.reference_error.max_abs))
        if math.isnan(low) or math.isnan(high):
            return math.nan
        return high / low if low > 0 else (math.inf if high > 0 else 1.0)

    @property
    def closer(self) -> str | None:
        ratio = self.ratio
        if math.isnan(ratio) or ratio < EQUALLY_FAR:
            return None
        return self.backend if self.backend_error.max_abs < self.reference_error.max_abs else self.reference

    @property
    def wrong_side(self) -> str | None:
        closer = self.closer
        return None if closer is None else (self.reference if closer == self.backend else self.backend)

    def sentence(self) -> str:
        """"onnxrt:fp16 is 3,100× further from fp64 than onnxrt: the disagreement is fp16's"."""
        closer, wrong = self.closer, self.wrong_side
        if math.isnan(self.ratio):
            return f"NaN against {self.oracle}: cannot say which side is closer to the exact value"
        if closer is None or wrong is None:
            return (f"both are equally far from {self.oracle} ({self.ratio:.2g}× apart): the reference is as noisy "
                    "as the backend")
        label = self.labels[0] if wrong == self.backend else self.labels[1]
        if math.isinf(self.ratio):
            return f"{closer} equals {self.oracle} and {wrong} does not: the disagreement is {label or wrong}'s"
        return (f"{wrong} is {times(self.ratio)} further from {self.oracle} than {closer}: the disagreement is "
                f"{label or wrong}'s")

    def to_dict(self) -> dict[str, Any]:
        return {"output": self.output, "oracle": self.oracle, "closer": self.closer, "wrong_side": self.wrong_side,
                "ratio": self.ratio, "backend_error": self.backend_error.to_dict(),
                "reference_error": self.reference_error.to_dict(), "sentence": self.sentence()}


@dataclass(frozen=True)
class OracleJump:
    """The first tensor, in graph order, where a backend's own error against the oracle jumps: ``error`` (its
    largest error at the tensor's scale) is ``step`` times ``carried``, the most that the compared tensors it is
    computed from carried, or one rounding at the backend's precision when that is more."""

    backend: str
    iteration: int
    tensor: str
    node: str
    op_type: str
    error: float
    carried: float
    step: float

    def to_dict(self) -> dict[str, Any]:
        return {"iteration": self.iteration, "tensor": self.tensor, "node": self.node, "op_type": self.op_type,
                "error": self.error, "carried": self.carried, "step": self.step}


@dataclass
class OracleBackend:
    """One backend against the oracle over the run: the largest errors of each output and marked tensor, the
    first jump found (``jump``; ``largest_step`` when none), and how many tensors were measured."""

    backend: str
    worst: dict[str, OracleError] = field(default_factory=dict)
    jump: OracleJump | None = None
    largest_step: tuple[str, float] | None = None  # (tensor, step) of the largest step when nothing jumped
    layered: bool = False  # marked tensors were measured: the jump was looked for

    def add(self, tensor: str, error: OracleError) -> None:
        known = self.worst.get(tensor)
        if known is None or _more(error.max_abs, known.max_abs):
            self.worst[tensor] = error

    def to_dict(self) -> dict[str, Any]:
        step = self.largest_step
        return {"backend": self.backend, "tensors": {name: e.to_dict() for name, e in self.worst.items()},
                "first_jump": self.jump.to_dict() if self.jump else None,
                "largest_step": None if step is None or self.jump else {"tensor": step[0], "step": step[1]},
                "layered": self.layered}


@dataclass
class OracleSummary:
    """The oracle of a run and every other backend measured against it."""

    oracle: str
    backends: dict[str, OracleBackend] = field(default_factory=dict)

    def backend(self, name: str) -> OracleBackend:
        return self.backends.setdefault(name, OracleBackend(name))

    def to_dict(self) -> dict[str, Any]:
        return {"oracle": self.oracle, "backends": [b.to_dict() for b in self.backends.values()]}


def times(ratio: float) -> str:
    """3100.4 -> "3,100×", 12.3 -> "12×", 2.46 -> "2.5×"."""
    if ratio >= 100:
        digits = len(str(int(ratio))) - 2
        return f"{round(ratio, -digits):,.0f}×"
    return f"{ratio:.2g}×" if ratio < 10 else f"{ratio:.0f}×"


def _more(a: float, b: float) -> bool:
    return math.isnan(a) or (not math.isnan(b) and a > b)
