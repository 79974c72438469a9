"""What a run found: each metric's verdict on each output, per pair and iteration, aggregated per pair as the
iterations come, plus backend failures and timings. Plain data; no numpy.

Memory does not grow with the iteration count: every pair keeps running totals (``PairTally``), and the
per-iteration results (``RunResult.pairs``) are kept only up to ``RunResult.retain_outputs`` compared outputs in
all; past that, only failing iterations are kept, up to the same bound again. Reports that need every iteration
(``--report-json``) receive them as they happen.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any


if TYPE_CHECKING:
    from cmpx.errors import BackendFailed
    from cmpx.outcome.oracle import OracleJudgement, OracleSummary
    from cmpx.outcome.runtimes import BackendRuntime

RETAINED_OUTPUTS = 500  # per-iteration output results kept in memory (each holds a few KB of statistics): a few MB
FAILING_ITERATIONS_LISTED = 1_000  # iteration numbers kept per pair to say which iterations failed


@dataclass(frozen=True)
class ErrorSample:
    """A bounded sample of one output's elements, for plots only (never in the JSON report): computed while the
    arrays are being compared, when error plots or an HTML report are asked for.

    ``magnitude``, ``abs`` and ``rel`` are float64 numpy arrays of the same length: |reference|, the absolute and
    the relative error of each sampled element. The first ``worst`` entries are the elements with the largest
    absolute errors, the rest a uniform random sample (every element when the output is small); ``total`` is the
    output's element count. ``abs_histogram`` and ``rel_histogram`` are exact (low, high, count) rows, one per
    power of two (a row (0, 0, n) for zeros, (inf, nan, n) for infinities and NaN).
    """

    magnitude: Any
    abs: Any
    rel: Any
    worst: int
    total: int
    abs_histogram: Sequence[tuple[float, float, int]] = ()
    rel_histogram: Sequence[tuple[float, float, int]] = ()

    @property
    def nbytes(self) -> int:
        return int(self.magnitude.nbytes + self.abs.nbytes + self.rel.nbytes)


@dataclass(frozen=True)
class MetricResult:
    """One metric's verdict on one output.

    ``criterion`` says what was required ("atol 1e-05, rtol 1e-05", ">= 0.997"), ``summary`` is the one-line
    finding, ``details`` are further report lines, ``data`` JSON-friendly numbers for machine reports,
    ``sample`` the elements sampled for plots (an ``ErrorSample``; None unless plots were asked for).
    """

    metric: str
    passed: bool
    summary: str = ""
    criterion: str = ""
    value: float | None = None
    details: Sequence[str] = ()
    data: Mapping[str, Any] = field(default_factory=dict)
    sample: ErrorSample | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class OutputResult:
    """One output (or marked tensor) of one pair in one iteration. ``elements`` is how many elements were
    compared (0 when it failed before any metric ran)."""

    output: str
    metrics: Sequence[MetricResult] = ()
    note: str = ""  # why it failed before any metric ran (missing, shape mismatch), or a dtype remark
    failed_early: bool = False
    elements: int = 0
    missing_in: str = ""  # the side of the pair that lacks this output ("" when both sides have it)

    @property
    def passed(self) -> bool:
        return not self.failed_early and all(m.passed for m in self.metrics)

    def worst(self, key: str) -> float | None:
        """The largest ``key`` ("abs", "rel" or "rel_beyond_atol") error any metric measured; None if none did."""
        values = [m.data[key]["max"] for m in self.metrics if isinstance(m.data.get(key), Mapping)]
        return _largest(values)

    @property
    def sample(self) -> ErrorSample | None:
        """The first metric's sample of elements for plots, if one was taken."""
        return next((m.sample for m in self.metrics if m.sample is not None), None)

    def without_sample(self) -> OutputResult:
        """This result without the sampled elements (the run keeps results, not samples)."""
        if self.sample is None:
            return self
        return replace(self, metrics=[replace(m, sample=None) for m in self.metrics])


@dataclass(frozen=True)
class Divergence:
    """The first tensor, in graph order, that fails while every compared tensor it is computed from passes."""

    tensor: str
    node: str
    op_type: str
    result: OutputResult


@dataclass(frozen=True)
class LocalError:
    """--local-error: the error one node makes on its own, given the reference's values of its inputs (iteration
    0), for one of its output tensors. ``passed`` is None when it could not be measured (``note`` says why);
    ``accumulated_passed`` is that tensor's verdict in the run itself (iteration 0), None if it was not compared."""

    tensor: str
    node: str
    op_type: str
    max_abs: float | None
    max_rel: float | None
    passed: bool | None
    accumulated_passed: bool | None = None
    note: str = ""
    subgraph_nodes: int = 1  # the node, and the uncompared nodes run with it (their outputs have no reference value)
    max_rel_beyond_atol: float | None = None  # the largest relative error where |reference| > atol

    @property
    def inheriting(self) -> bool:
        """It fails in the run but not on its own: its error comes from the nodes before it."""
        return self.passed is True and self.accumulated_passed is False

    def to_dict(self) -> dict[str, Any]:
        return {"tensor": self.tensor, "node": self.node, "op_type": self.op_type, "max_abs": self.max_abs,
                "max_rel": self.max_rel, "passed": self.passed, "inheriting": self.inheriting,
                "accumulated_passed": self.accumulated_passed, "note": self.note or None,
                "subgraph_nodes": self.subgraph_nodes, "max_rel_beyond_atol": self.max_rel_beyond_atol}

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> LocalError:
        """Read back what ``to_dict`` wrote (a --report-json document's ``local_errors``)."""
        def number(value: Any) -> float | None:
            return None if value is None else float(value)  # strict JSON's "NaN" and "Infinity" too

        return cls(record["tensor"], record.get("node") or "", record.get("op_type") or "",
                   number(record.get("max_abs")), number(record.get("max_rel")), record.get("passed"),
                   record.get("accumulated_passed"), record.get("note") or "", int(record.get("subgraph_nodes") or 1),
                   number(record.get("max_rel_beyond_atol")))


def ranked(errors: Sequence[LocalError]) -> list[LocalError]:
    """Largest local error first (NaN counts as the largest; unmeasured ones last, in graph order)."""
    def key(error: LocalError) -> tuple[int, float]:
        if error.max_abs is None:
            return (2, 0.0)
        return (0, 0.0) if math.isnan(error.max_abs) else (1, -error.max_abs)

    return sorted(errors, key=key)


@dataclass
class PairResult:
    """One backend compared against its reference backend, in one iteration. ``unmatched`` lists intermediate
    tensors that only one side produced (not failures); ``first_divergence`` is set when tensors were marked."""

    backend: str
    reference: str
    iteration: int
    outputs: list[OutputResult] = field(default_factory=list)
    unmatched: list[tuple[str, str]] = field(default_factory=list)  # (tensor, the side that has it)
    first_divergence: Divergence | None = None
    note: str = ""  # why nothing (or not everything) was compared: both sides' names, and a hint
    lacking: dict[str, str] = field(default_factory=dict)  # a side -> why it lacks marked tensors ("not in the
    # int8 graph": its transform removed them); such tensors are in ``unmatched`` like the others
    not_comparable: list[tuple[str, str]] = field(default_factory=list)  # (output, why): a sequence or map one
    # side cannot produce, or an output returned as strings or objects; neither passed nor failed
    oracle: list[OracleJudgement] = field(default_factory=list)  # each failing output's sides against the oracle

    @property
    def passed(self) -> bool:
        """Every compared output passed, and there was at least one: a pair that compared nothing fails."""
        return bool(self.outputs) and all(o.passed for o in self.outputs)


@dataclass(frozen=True)
class NonFinite:
    """--validate: NaN or Inf in one backend's output."""

    backend: str
    output: str
    nan_count: int
    inf_count: int
    first_index: tuple[int, ...]

    def __str__(self) -> str:
        return (f"{self.backend} output {self.output} has {self.nan_count} NaN and {self.inf_count} Inf; "
                f"the first at index {self.first_index}")


@dataclass
class PairTally:
    """One (backend, reference) pair over every iteration, totalled as the iterations come."""

    backend: str
    reference: str
    iterations: int = 0
    iterations_passed: int = 0
    outputs: int = 0
    outputs_passed: int = 0
    outputs_compared: int = 0  # outputs that got as far as a comparison (not missing on a side, same shape)
    iterations_compared: int = 0  # iterations in which at least one output did
    elements: int = 0
    worst_abs: float | None = None
    worst_rel: float | None = None
    worst_rel_beyond_atol: float | None = None  # the worst over elements whose |reference| > atol
    failing_iterations: list[int] = field(default_factory=list)  # the first FAILING_ITERATIONS_LISTED
    first_divergence: tuple[int, Divergence] | None = None  # (iteration, divergence), the first one found
    local_errors: list[LocalError] | None = None  # --local-error: every measured node, largest error first
    local_error_seconds: float | None = None  # what measuring them took (loads and inferences of subgraphs)
    _blind: dict[str, tuple[float, float]] = field(default_factory=dict, repr=False)
    _able: set[str] = field(default_factory=set, repr=False)

    @property
    def cannot_fail(self) -> dict[str, tuple[float, float]]:
        """The outputs whose tolerance check could not fail in any iteration: every reference value below atol
        (so an output of zeros would pass too); name -> (largest |reference|, atol)."""
        return {name: blind for name, blind in self._blind.items() if name not in self._able}

    def _note_blind(self, output: OutputResult) -> None:
        checks = [m.data for m in output.metrics if "cannot_fail" in m.data]
        if not checks:
            return
        if not all(data["cannot_fail"] for data in checks):
            self._able.add(output.output)
        elif output.output not in self._able:
            peak, atol = self._blind.get(output.output, (0.0, math.inf))
            self._blind[output.output] = (max(peak, *(float(d["reference_max"]) for d in checks)),
                                          min(atol, *(float(d["atol"]) for d in checks)))

    def add(self, pair: PairResult) -> None:
        self.iterations += 1
        self.iterations_passed += pair.passed
        self.outputs += len(pair.outputs)
        self.outputs_passed += sum(o.passed for o in pair.outputs)
        reached = sum(not o.failed_early for o in pair.outputs)
        self.outputs_compared += reached
        self.iterations_compared += reached > 0
        self.elements += sum(o.elements for o in pair.outputs)
        self.worst_abs = _largest([self.worst_abs, *(o.worst("abs") for o in pair.outputs)])
        self.worst_rel = _largest([self.worst_rel, *(o.worst("rel") for o in pair.outputs)])
        self.worst_rel_beyond_atol = _largest([self.worst_rel_beyond_atol,
                                               *(o.worst("rel_beyond_atol") for o in pair.outputs)])
        if not pair.passed and len(self.failing_iterations) < FAILING_ITERATIONS_LISTED:
            self.failing_iterations.append(pair.iteration)
        if pair.first_divergence is not None and self.first_divergence is None:
            self.first_divergence = (pair.iteration, pair.first_divergence)
        for output in pair.outputs:
            self._note_blind(output)

    @property
    def passed(self) -> bool:
        return self.iterations > 0 and self.iterations_passed == self.iterations

    @property
    def pass_rate(self) -> float:
        return self.iterations_passed / self.iterations if self.iterations else 0.0


@dataclass
class Timing:
    """Running totals of one backend's inference times."""

    count: int = 0
    total: float = 0.0
    fastest: float = math.inf
    slowest: float = 0.0

    def add(self, seconds: float) -> None:
        self.count += 1
        self.total += seconds
        self.fastest = min(self.fastest, seconds)
        self.slowest = max(self.slowest, seconds)

    @property
    def mean(self) -> float | None:
        return self.total / self.count if self.count else None


@dataclass
class RunResult:
    """Everything a run found; built by the execution, read by the reports and the public ``Report``."""

    tallies: dict[tuple[str, str], PairTally] = field(default_factory=dict)
    pairs: list[PairResult] = field(default_factory=list)  # retained per-iteration results (module docstring)
    pairs_dropped: int = 0  # per-iteration results not retained (their totals are in ``tallies``)
    non_finite: list[NonFinite] = field(default_factory=list)  # found by --validate
    stopped_early: bool = False  # --fail-fast
    failures: dict[str, BackendFailed] = field(default_factory=dict)
    load_seconds: dict[str, float] = field(default_factory=dict)
    infer_seconds: dict[str, Timing] = field(default_factory=dict)
    runtimes: dict[str, BackendRuntime] = field(default_factory=dict)  # where each live backend ran, and versions
    iterations: int = 0
    retain_outputs: int = field(default_factory=lambda: RETAINED_OUTPUTS)
    values: list[tuple[str, int, list[Any]]] = field(default_factory=list)  # (backend, iteration, ValueStats)
    compared_outputs: set[str] = field(default_factory=set)  # names of the outputs compared at least once
    metrics_ran: set[str] = field(default_factory=set)
    slices: list[dict[str, Any]] = field(default_factory=list)  # a sliced run: each slice's time, per iteration
    oracle: OracleSummary | None = None  # every backend against the run's oracle (cmpx.outcome.oracle), if it has one
    _retained_outputs: int = 0

    def add_pair(self, pair: PairResult) -> None:
        key = (pair.backend, pair.reference)
        self.tallies.setdefault(key, PairTally(*key)).add(pair)
        size = max(1, len(pair.outputs))
        keep = self._retained_outputs + size <= self.retain_outputs or (
            not pair.passed and self._retained_outputs + size <= 2 * self.retain_outputs)
        if keep:
            self.pairs.append(pair)
            self._retained_outputs += size
        else:
            self.pairs_dropped += 1

    def add_values(self, backend: str, iteration: int, stats: list[Any]) -> None:
        """One backend's output value statistics of one iteration (single-backend runs, -v), kept while bounded."""
        if len(self.values) < FAILING_ITERATIONS_LISTED:
            self.values.append((backend, iteration, stats))

    def note_compared(self, pair: PairResult) -> None:
        """Remember which outputs were compared and which metrics ran (to warn about requests that never were)."""
        for output in pair.outputs:
            if output.metrics or not output.missing_in:  # compared, or failed on its shape: both sides had it
                self.compared_outputs.add(output.output)
                self.metrics_ran.update(m.metric for m in output.metrics)

    def add_timing(self, backend: str, seconds: float) -> None:
        self.infer_seconds.setdefault(backend, Timing()).add(seconds)

    @property
    def compared(self) -> int:
        """Pair-iterations that compared at least one output."""
        return sum(t.iterations_compared for t in self.tallies.values())


def _largest(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    if not present:
        return None
    return math.nan if any(math.isnan(v) for v in present) else max(present)
