"""Backend instance names and which backend is compared against which."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from cmpx.errors import UsageError
from cmpx.suggest import did_you_mean


def instance_names(backends: Sequence[str]) -> list[str]:
    """Unique, deterministic names: the first ``onnxrt`` stays ``onnxrt``, later ones become ``onnxrt#2``..."""
    seen: Counter[str] = Counter()
    names = []
    for backend in backends:
        seen[backend] += 1
        names.append(backend if seen[backend] == 1 else f"{backend}#{seen[backend]}")
    return names


def check_reference(reference: str | None, names: Sequence[str]) -> None:
    if reference is not None and reference not in names:
        raise UsageError(f"--reference {reference!r}{did_you_mean(reference, names)} is not one of this run's "
                         f"backends: {', '.join(names)}")


def comparison_pairs(names: Sequence[str], reference: str | None, oracle: str | None = None
                     ) -> list[tuple[str, str]]:
    """(backend, reference) pairs among ``names`` (the backends that produced results).

    By default each backend is compared with the next one, which is the reference (as in Polygraphy);
    with ``reference`` every other backend is compared against it. The run's fp64 ``oracle`` (cmpx.outcome.oracle) takes
    part only as the reference, or when there is nothing else to compare (it and one other backend).
    """
    if oracle is not None and oracle != reference and len([n for n in names if n != oracle]) >= 2:
        names = [name for name in names if name != oracle]
    if reference is not None:
        return [(name, reference) for name in names if name != reference] if reference in names else []
    return [(names[i], names[i + 1]) for i in range(len(names) - 1)]
