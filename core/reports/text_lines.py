"""The text report's lines that do not depend on the run's state: an output's metric lines, a pair's summary line,
the warning that a check cannot fail, --local-error's table, tolerances rounded up for a hint."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable

from cmpx.errors import telling_line
from cmpx.results import OutputResult, PairTally

DETAIL_INDENT = "        "
LOCAL_ERRORS_SHOWN = 10  # nodes listed by --local-error, failing ones first (the JSON report has every one)


def wrapped(line: str, width: int | None) -> str:
    """``line`` broken at word boundaries to fit ``width`` columns (None: as it is), each continuation indented
    four columns deeper than the line; a word longer than the width (a path) stays whole."""
    if width is None or len(line) <= width:
        return line
    indent = line[:len(line) - len(line.lstrip(" "))]
    return "\n".join(textwrap.wrap(line, width, initial_indent="", subsequent_indent=indent + "    ",
                                    break_long_words=False, break_on_hyphens=False, drop_whitespace=True)
                      ) if line.strip() else line


def round_up(value: float) -> float:
    """``value`` rounded up to one significant digit: 2.6e-3 -> 3e-3, 0.0017 -> 0.002, 1e-3 -> 1e-3."""
    exponent = math.floor(math.log10(value))
    digit = math.ceil(round(value / 10.0 ** exponent, 9))
    return float(f"{digit}e{exponent}") if digit < 10 else float(f"1e{exponent + 1}")


def reminder(detail: str, limit: int = 160) -> str:
    """An error's first line, cut to ``limit`` characters: the summary recalls an error printed in full above."""
    line = telling_line(detail)
    if len(line) <= limit and line == detail.strip():
        return line
    return line[:limit].rstrip() + " ... (in full above)"


def saved_label(saved) -> str:
    """A saved run's backend, with what made it where the run says so: ``onnxrt@golden (saved by onnxrt 1.20.1)``."""
    about = getattr(saved.source, "about", None) or {}
    return f"{saved.name} (saved by {about['label']})" if about.get("label") else saved.name


BLIND_LISTED = 5  # outputs named one by one in the warning that a check cannot fail; the rest are counted


def blind_lines(tally: PairTally) -> list[str]:
    """What the text and HTML reports say of the outputs whose check could not fail (PairTally.cannot_fail)."""
    blind = tally.cannot_fail
    lines = [f"{name} cannot fail at these tolerances: every reference value is below atol {atol:g} (largest "
             f"|reference| {peak:.3g}), so even an output of zeros would pass; --atol {name}:0 lets rtol decide"
             for name, (peak, atol) in list(blind.items())[:BLIND_LISTED]]
    if len(blind) > BLIND_LISTED:
        lines.append(f"{len(blind) - BLIND_LISTED} more output(s) of {tally.backend} vs {tally.reference} cannot fail "
                     "either (the JSON report lists them: cannot_fail)")
    return lines


def pair_line(tally: PairTally) -> str:
    text = (f"{tally.iterations_passed}/{tally.iterations} iterations passed ({100.0 * tally.pass_rate:.0f}%), "
            f"{tally.outputs_passed}/{tally.outputs} outputs passed ({tally.elements} elements)")
    if tally.worst_abs is not None:
        text += f", worst abs {tally.worst_abs:.3g}, worst rel {tally.worst_rel:.3g}"
    return text


def format_output(output: OutputResult, details: bool = True) -> list[str]:
    """One line per metric, ``STATUS  NAME: finding [criterion]``, each followed by its detail lines."""
    if output.failed_early:
        return [f"FAILED  {output.output}: {output.note}"]
    lines = []
    for metric in output.metrics:
        status = "PASSED" if metric.passed else "FAILED"
        lines.append(f"{status}  {output.output}: {metric.summary} [{metric.criterion}]")
        if details:
            lines += [DETAIL_INDENT + detail for detail in metric.details]
    if output.note:
        lines.append(DETAIL_INDENT + output.note)
    return lines


def local_error_lines(tally: PairTally, name: Callable[[str], str], quiet: bool) -> list[tuple[str, str | None]]:
    """--local-error: the nodes with the largest errors of their own, and how many fail or inherit."""
    errors = tally.local_errors or []
    lines: list[tuple[str, str | None]] = []

    def say(text: str, word: str | None = None) -> None:
        lines.append((text, word))

    failing = [e for e in errors if e.passed is False]
    inheriting = [e for e in errors if e.inheriting]
    unmeasured = [e for e in errors if e.passed is None]
    say(f"Local error of {name(tally.backend)} vs {name(tally.reference)} (each node run on the reference's values "
        f"of its inputs, iteration 0; {tally.local_error_seconds or 0:.2f} s): {len(failing)} of {len(errors)} node "
        f"output(s) fail on their own, {len(inheriting)} only inherit an error"
        + (f", {len(unmeasured)} not measured" if unmeasured else ""), "FAILED" if failing else None)
    if quiet and not failing:
        return lines
    # the nodes that fail on their own first (largest first), then the largest of the others: by max abs alone,
    # nodes that pass by the relative tolerance on large values would hide those that fail
    shown = sorted(errors, key=lambda e: e.passed is not False)[:LOCAL_ERRORS_SHOWN]
    for error in shown:
        where = ", ".join(p for p in (error.node, error.op_type) if p)
        if error.passed is None:
            say(f"  ------  {error.tensor} ({where}): {error.note}")
            continue
        status = "PASSED" if error.passed else "FAILED"
        numbers = (f"max abs {error.max_abs:.3g}, max rel {error.max_rel:.3g}" if error.max_abs is not None
                   and error.max_rel is not None else "no abs/rel statistics (see the metrics of the run)")
        group = f" (with {error.subgraph_nodes - 1} uncompared node(s))" if error.subgraph_nodes > 1 else ""
        say(f"  {status}  {error.tensor} ({where}): {numbers}{group}"
            + (" (inheriting: fails in the run)" if error.inheriting else ""), status)
    if len(errors) > LOCAL_ERRORS_SHOWN:
        say(f"  ... {len(errors) - LOCAL_ERRORS_SHOWN} more (all of them: --report-json, local_errors)")
    return lines
