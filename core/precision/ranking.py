"""The order ``cmpx precision`` grows its kept set in: the most suspect node first.

From one run of the reduced-precision model with every tensor marked and ``--local-error``: first the node of the
first divergence (the first tensor that fails while all it is computed from passes), then the nodes that fail on
their own (fed the reference's values of their inputs), largest local error first, then the other measured nodes
in the local-error ranking, then the nodes nothing measured, in graph order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cmpx.outcome.results import ranked

if TYPE_CHECKING:
    from cmpx.report import Report


@dataclass(frozen=True)
class Suspects:
    order: list[str]  # every eligible node, most suspect first
    first_divergence: str | None  # its node, if it is an eligible one
    failing_alone: int  # eligible nodes whose local error fails on its own
    measured: int  # eligible nodes with a local error


def suspect_order(report: Report | None, backend: str, reference: str, eligible: Sequence[str],
                  producers: Mapping[str, Sequence[str]]) -> Suspects:
    """``eligible`` (node names in graph order) in the order to try them, from the ranking run's ``report`` (None
    when it could not run: graph order then). ``producers``: each node's producers of its inputs, by name; a node
    the ranking names is followed by those of its producers nothing measured (a transform can fuse a node away:
    the int8 quantizer folds a Relu into its MatMul's Q/DQ pair, so the MatMul's error shows on the Relu)."""
    allowed = set(eligible)
    tally = report.result.tallies.get((backend, reference)) if report is not None else None
    divergence = tally.first_divergence[1].node if tally is not None and tally.first_divergence else None
    divergence = divergence if divergence in allowed else None
    errors = ranked(tally.local_errors or []) if tally is not None else []
    alone = [e.node for e in errors if e.passed is False and e.node in allowed]
    others = [e.node for e in errors if e.passed is not False and e.max_abs is not None and e.node in allowed]
    measured = set(alone) | set(others)
    ranked_nodes = list(dict.fromkeys([*([divergence] if divergence else []), *alone, *others]))
    order = list(dict.fromkeys([*(name for node in ranked_nodes
                                  for name in [node, *_unmeasured_upstream(node, producers, measured, allowed)]),
                                *eligible]))
    return Suspects(order, divergence, len(set(alone)), len(measured))


def _unmeasured_upstream(node: str, producers: Mapping[str, Sequence[str]], measured: set[str], allowed: set[str]
                         ) -> list[str]:
    """The eligible producers of ``node``'s inputs that nothing measured, and theirs in turn, nearest first."""
    found: list[str] = []
    pending = list(producers.get(node, ()))
    while pending:
        name = pending.pop(0)
        if name in measured or name in found:
            continue
        if name in allowed:
            found.append(name)
        pending += producers.get(name, ())
    return found
