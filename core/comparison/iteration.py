"""One iteration's comparison: every backend's tensors (live and saved) side by side, each tensor compared in
every pair as soon as it is loaded, then released; plus what rides along (NaN/Inf checks, saving outputs, value
statistics, top-k post-processing, an explicit output map) and what a pass must prove (that something was
compared, and if not, why)."""

from __future__ import annotations

import shlex
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from cmpx.comparison.compare import compare_tensor
from cmpx.comparison.divergence import first_divergence
from cmpx.comparison.oracle import judge, look_for_jump, measure, transforms_of
from cmpx.comparison.pairing import comparison_pairs
from cmpx.comparison.structural import conform
from cmpx.comparison.validation import find_non_finite
from cmpx.outcome.results import PairResult
from cmpx.structured import NotComparable, Structured

if TYPE_CHECKING:
    from cmpx.local_error.keeper import ReferenceKeeper
    from cmpx.outcome.oracle import OracleError
    from cmpx.plan import RunPlan
    from cmpx.reports.reporter import Reporter
    from cmpx.outcome.results import RunResult
    from cmpx.saved.cmpx_format import RunWriter
    from cmpx.transport.sources import TensorSource


class IterationComparer:
    """Compares iterations of one run; ``warned`` keeps each warning to once per run."""

    def __init__(self, plan: RunPlan, reporter: Reporter, result: RunResult, outputs_writer: RunWriter | None,
                 keeper: ReferenceKeeper | None = None):
        self.plan = plan
        self.reporter = reporter
        self.result = result
        self.outputs_writer = outputs_writer
        self.keeper = keeper  # --local-error: keeps the reference's values of iteration 0
        self.warned: set[tuple[str, str]] = set()
        self.wants_values = plan.single or bool(getattr(reporter, "wants_values", False))
        outputs = plan.model.outputs if plan.model else ()
        self.structured = {spec.name: spec for spec in outputs if not spec.is_tensor}  # sequences, maps...
        if plan.oracle is not None and result.oracle is None:
            from cmpx.outcome.oracle import OracleSummary

            result.oracle = OracleSummary(plan.oracle)

    def compare(self, iteration: int, digest: str | None, sources: dict[str, TensorSource]) -> None:
        """Compare iteration ``iteration``: every tensor of the live backends' ``sources`` and the saved runs."""
        state = self.open(iteration, digest, sources)
        self.compare_tensors(state)
        self.close(state)

    def open(self, iteration: int, digest: str | None, sources: dict[str, TensorSource],
             live: Sequence[str] = ()) -> OpenIteration:
        """Start comparing iteration ``iteration`` of the live backends in ``sources`` and ``live`` (whose sources a
        sliced run adds slice by slice, ``OpenIteration.add``); the saved runs are added here."""
        plan = self.plan
        from cmpx.transport.sources import TensorSource

        sources = dict(sources)
        for saved in plan.saved_backends:
            if iteration < len(saved.source):
                sources[saved.name] = TensorSource(saved.source.load(iteration))
                self._check_digest(saved, iteration, digest)
            elif self._once("missing", saved.name):
                self.reporter.warning(f"{saved.name} ({saved.path}) holds {len(saved.source)} iteration(s); it is "
                                      f"left out from iteration {iteration} on")
        order = [name for name in plan.names if name in sources or name in live]
        state = OpenIteration(iteration, digest, order,
                              [PairResult(b, r, iteration) for b, r in comparison_pairs(order, plan.reference, plan.oracle)])
        for name, source in sources.items():
            state.add(name, source, plan.output_map)
        return state

    def compare_tensors(self, state: OpenIteration, tensors: Sequence[str] | None = None) -> bool:
        """Compare ``tensors`` (None: every one not compared yet) in every pair whose sides hold them, each loaded,
        compared and released in turn; True when --fail-fast stopped the run."""
        plan = self.plan
        names = state.names
        order = state.order
        required = plan.required_outputs or frozenset(t for name in order for t in names[name])
        live = {b.name for b in plan.backends}
        wanted = dict.fromkeys(t for name in order for t in names[name]) if tensors is None else tensors
        for tensor in wanted:
            if tensor in state.compared or tensor in plan.excluded:
                continue
            holders = {name: holder for name in order if (holder := state.holder(name, tensor)) is not None}
            if not holders:
                continue
            state.compared.add(tensor)
            arrays = {name: source.load(names[name][tensor]) for name, source in holders.items()}
            if tensor in self.structured:
                arrays = {name: conform(array, self.structured[tensor].dtype) for name, array in arrays.items()}
            for name, array in arrays.items():
                self._inspect(name, state.iteration, tensor, array, live, state.values)
            if tensor not in self.structured:  # top-k applies to tensors
                arrays = {name: plan.postprocess.apply(tensor, array) if not isinstance(array, NotComparable)
                          else array for name, array in arrays.items()}
            stop = compare_tensor(state.pairs, tensor, arrays, plan.comparison, required,
                                  {name: spec.value_type for name, spec in self.structured.items() if spec.value_type})
            if plan.oracle in arrays:
                self._against_oracle(state, tensor, arrays)
            del arrays
            for name, source in holders.items():
                source.release(names[name][tensor])
            if stop:
                self.result.stopped_early = True
                return True
        return False

    def close(self, state: OpenIteration, failed: Collection[str] = ()) -> None:
        """Finish the iteration: its verdicts, first divergences and reports. A backend in ``failed`` (it failed
        during the iteration, after some of its tensors were compared) takes no part in its pairs."""
        plan = self.plan
        iteration, names = state.iteration, state.names
        pairs = [pair for pair in state.pairs if pair.backend not in failed and pair.reference not in failed]
        if state.sliced:  # slice by slice, tensors come in graph order: report them in the unsliced order
            rank = {name: number for number, name in enumerate([*plan.required_outputs_order, *plan.mark])}
            for pair in pairs:
                pair.outputs.sort(key=lambda output: rank.get(output.output, len(rank)))
        if self.outputs_writer is not None:
            self.outputs_writer.finish_iteration(iteration, state.digest)
        for name, stats in state.values.items():
            self.result.add_values(name, iteration, stats)
            self.reporter.outputs_described(name, iteration, stats)
        if self.keeper is not None:
            self.keeper.compared(iteration, pairs)
        transformed = {b.name: b.transform for b in plan.backends if b.absent_marks}
        transforms = transforms_of(plan)
        if self.result.oracle is not None and plan.mark and plan.graph is not None:
            for name, errors in state.oracle_errors.items():
                look_for_jump(plan.graph, self.result.oracle.backend(name), iteration, errors, transforms.get(name))
        for pair in pairs:
            for side in (pair.backend, pair.reference):
                if side in transformed and any(has != side for _, has in pair.unmatched):
                    pair.lacking[side] = f"not in the {transformed[side]} graph"
            if plan.graph is not None:
                pair.first_divergence = first_divergence(plan.graph, {o.output: o for o in pair.outputs})
            if plan.oracle is not None:
                pair.oracle = judge(pair, state.oracle_errors, plan.oracle, transforms)
            if not pair.outputs or any(o.missing_in for o in pair.outputs):
                pair.note = _mismatched_names(pair, names, _known_names(plan))
            self.result.note_compared(pair)
            self.result.add_pair(pair)
            self.reporter.pair_compared(pair)
            if plan.comparison.samples:  # the reporters drew what they wanted; the run keeps results, not samples
                pair.outputs[:] = [output.without_sample() for output in pair.outputs]
                if pair.first_divergence is not None:
                    pair.first_divergence = replace(pair.first_divergence,
                                                    result=pair.first_divergence.result.without_sample())

    def _inspect(self, name: str, iteration: int, tensor: str, array: Any, live: set[str],
                 values: dict[str, list[Any]]) -> None:
        """What happens to every tensor of every backend, compared or not: saved, checked, described."""
        if isinstance(array, NotComparable):
            return
        if name in live and self.outputs_writer is not None:
            self.outputs_writer.tensor(name, iteration, tensor, array)
        flat = array.values if isinstance(array, Structured) else array
        if self.keeper is not None and not isinstance(array, Structured):
            self.keeper.tensor(iteration, name, tensor, array)
        if self.plan.validate:
            for finding in find_non_finite(name, {tensor: flat}):
                self.result.non_finite.append(finding)
                self.reporter.non_finite(finding)
        if self.wants_values and (tensor in self.plan.required_outputs or not self.plan.required_outputs):
            from cmpx.comparison.values import value_stats

            values.setdefault(name, []).append(value_stats(tensor, flat))

    def _against_oracle(self, state: OpenIteration, tensor: str, arrays: Mapping[str, Any]) -> None:
        """Measure every other backend's ``tensor`` against the oracle's, in float64."""
        oracle = self.plan.oracle
        if oracle is None:
            return
        for name, array in arrays.items():
            if name != oracle and self.result.oracle is not None:
                error = measure(array, arrays[oracle])
                if error is not None:
                    state.oracle_errors.setdefault(name, {})[tensor] = error
                    self.result.oracle.backend(name).add(tensor, error)

    def _once(self, kind: str, name: str) -> bool:
        if (kind, name) in self.warned:
            return False
        self.warned.add((kind, name))
        return True

    def _check_digest(self, saved: Any, iteration: int, digest: str | None) -> None:
        theirs = saved.source.digests[iteration]
        if digest and theirs and theirs != digest and self._once("digest", saved.name):
            self.reporter.warning(f"the inputs of iteration {iteration} differ from those {saved.name} was run with "
                                  f"({saved.path}); compare like with like (same --seed, or --load-inputs)")


class OpenIteration:
    """An iteration being compared: each backend's sources (a sliced run has one per slice), the names its tensors
    are compared under, the pairs, and the tensors compared so far."""

    def __init__(self, iteration: int, digest: str | None, order: list[str], pairs: list[PairResult]):
        self.iteration = iteration
        self.digest = digest
        self.order = order
        self.pairs = pairs
        self.sources: dict[str, list[TensorSource]] = {}
        self.names: dict[str, dict[str, str]] = {name: {} for name in order}
        self.compared: set[str] = set()
        self.values: dict[str, list[Any]] = {}
        self.sliced = False
        self.oracle_errors: dict[str, dict[str, OracleError]] = {}  # backend -> tensor -> its error against the oracle

    def add(self, name: str, source: TensorSource, output_map: Mapping[str, str]) -> None:
        """``source`` holds more of backend ``name``'s tensors."""
        self.sources.setdefault(name, []).append(source)
        self.names.setdefault(name, {}).update(_mapped(source.names, output_map))

    def holder(self, name: str, tensor: str) -> TensorSource | None:
        """The source of backend ``name`` that holds ``tensor`` (under its compared name), if any."""
        own = self.names.get(name, {}).get(tensor)
        if own is None:
            return None
        return next((source for source in self.sources.get(name, ()) if own in source.names), None)


def _mapped(names: list[str], output_map: Mapping[str, str]) -> dict[str, str]:
    """The names a source's tensors are compared under (``--output-map A=B``: its tensor B is compared as A)."""
    renamed = {}
    for name in names:
        target = next((a for a, b in output_map.items() if b == name and a not in names), name)
        renamed[target] = name
    return renamed


def _map_option(target: str, source: str) -> str:
    """The --output-map option pairing ``source`` as ``target``, quoted for a shell where it needs to be."""
    return f"--output-map {shlex.quote(f'{target}={source}')}"


def _known_names(plan: RunPlan) -> frozenset[str]:
    """The names --output-map must map to (its left side): the model's outputs and the marked tensors; none
    without a model (saved runs alone), where either side's names will do."""
    if plan.model is None:
        return frozenset()
    return frozenset([*(spec.name for spec in plan.model.outputs), *plan.mark])


def _mismatched_names(pair: PairResult, names: Mapping[str, Mapping[str, str]], known: frozenset[str]) -> str:
    """Why a pair compared nothing or lacks outputs: both sides' names, and a hint when they match ignoring case
    or by position, with the --output-map options that pair them: each maps a name of the side that does not
    hold the model's names (``known``; a saved run, most often) to the model's."""
    mine, theirs = list(names.get(pair.backend, {})), list(names.get(pair.reference, {}))
    only_mine = [n for n in mine if n not in theirs]
    only_theirs = [n for n in theirs if n not in mine]
    nothing = all(output.missing_in for output in pair.outputs)
    text = (f"{'nothing was compared' if nothing else 'outputs differ by name'}: {pair.backend} has "
            f"{', '.join(only_mine) or '(none)'} that {pair.reference} lacks; {pair.reference} has "
            f"{', '.join(only_theirs) or '(none)'} that {pair.backend} lacks")
    mine_known = bool(only_mine) and set(only_mine) <= known and not set(only_theirs) <= known

    def options(pairs: list[tuple[str, str]]) -> str:  # (mine, theirs): the model's name on the left
        return " ".join(_map_option(a, b) if mine_known else _map_option(b, a) for a, b in pairs)

    by_case = [(a, b) for a in only_mine for b in only_theirs if a.lower() == b.lower()]
    if by_case:
        return text + "; they match ignoring case: pair them with " + options(by_case)
    if only_mine and len(only_mine) == len(only_theirs):
        return text + "; by position they would pair " + ", ".join(
            f"{a} with {b}" for a, b in zip(only_mine, only_theirs)) + " (cmpx pairs by exact name only; if that "\
            "is right, say so with " + options(list(zip(only_mine, only_theirs))) + ")"
    return text
