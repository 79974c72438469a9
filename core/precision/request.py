"""What one ``cmpx precision`` is asked to do (``PrecisionOptions``), which pair of backends it searches for
(``Pair``), and the run that keeps a set of nodes (``with_kept``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from cmpx.precision.nodes import kept_option

if TYPE_CHECKING:
    from cmpx.options.request import RunRequest


@dataclass(frozen=True)
class PrecisionOptions:
    request: RunRequest  # the run, as cmpx run would take it
    output: str  # -o: the node list
    max_candidates: int | None = None
    strategy: str = "search"
    verbose: bool = False  # each run's own report too
    live_reference: bool = False  # run the reference on every candidate, not once (cmpx.precision.reference)


@dataclass(frozen=True)
class Pair:
    backend: str  # the run name of the backend on the transformed model
    reference: str
    kind: str  # fp16, bf16, int8 or fp8
    given: tuple[str, ...]  # what the user keeps already (--keep-fp32 or --no-quantize words, @FILEs read)
    specs: tuple[Any, ...] = ()  # the backends' descriptors, whose options a printed command line writes


def with_kept(request: RunRequest, pair: Pair, nodes: Sequence[str]) -> RunRequest:
    """The user's run with ``nodes`` kept as well (in float32, or unquantized)."""
    words: dict[str, Any] = {kept_option(pair.kind): (*pair.given, *nodes)}
    return replace(request, **words)
