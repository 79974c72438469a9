"""The text report's lines that do not depend on the run's state: an output's metric lines, a pair's summary line,
the warning that a check cannot fail, a saved run's label, an error recalled in the summary, and a line wrapped to
a terminal's width."""

from __future__ import annotations

import textwrap

from cmpx.errors import telling_line
from cmpx.outcome.results import OutputResult, PairTally

DETAIL_INDENT = "        "


def wrapped(line: str, width: int | None) -> str:
    """``line`` broken at word boundaries to fit ``width`` columns (None: as it is), each continuation indented
    four columns deeper than the line; a word longer than the width (a path) stays whole."""
    if width is None or len(line) <= width or not line.strip():
        return line
    indent = line[:len(line) - len(line.lstrip(" "))]
    return "\n".join(textwrap.wrap(line, width, subsequent_indent=indent + "    ", break_long_words=False,
                                    break_on_hyphens=False))


def reminder(detail: str, limit: int = 160) -> str:
    """An error's first line, cut to ``limit`` characters: the summary recalls an error printed in full above."""
    line = telling_line(detail)
    return line if len(line) <= limit and line == detail.strip() else line[:limit].rstrip() + " ... (in full above)"


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
    if tally.outputs and not tally.elements:
        lines.append(all_empty_line(tally.backend, tally.reference))
    return lines


def all_empty_line(backend: str, reference: str) -> str:
    """What the reports say of a pair whose compared outputs were all empty: it passes, and compared no value."""
    return (f"every output of {backend} vs {reference} was empty (0 elements): their shapes agree, but no value was "
            "compared; give inputs that make them non-empty (--input-shapes, --data-loader-script)")


def pair_line(tally: PairTally) -> str:
    text = (f"{tally.iterations_passed}/{tally.iterations} iterations passed ({100.0 * tally.pass_rate:.0f}%), "
            f"{tally.outputs_passed}/{tally.outputs} outputs passed ({tally.elements} elements)")
    if tally.worst_abs is not None:
        text += f", worst abs {tally.worst_abs:.3g}, worst rel {tally.worst_rel:.3g}"
        beyond = tally.worst_rel_beyond_atol
        if beyond is not None and beyond != tally.worst_rel:  # the worst rel is against references near 0
            text += f" ({beyond:.3g} where |reference| > atol)"
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

