"""--save-error-plots: a PNG per compared output with histograms of its absolute and relative errors, on a
log scale (the bins come from the streaming statistics). Needs matplotlib: pip install 'cmpx[plots]'."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence

from cmpx.errors import UsageError
from cmpx.outputs import write_file

INSTALL_HINT = "--save-error-plots needs matplotlib: pip install 'cmpx[plots]'"


def check_plotting() -> None:
    """Fail before any inference if matplotlib is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UsageError(INSTALL_HINT) from None


def write_error_plots(directory: str, pairs: Sequence) -> list[str]:
    """One PNG per pair, iteration and output that has error histograms; returns the paths written."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    os.makedirs(directory, exist_ok=True)
    written = []
    for pair in pairs:
        for output in pair.outputs:
            data = next((m.data for m in output.metrics if "abs_histogram" in m.data), None)
            if data is None:
                continue
            figure, axes = pyplot.subplots(1, 2, figsize=(10, 3.5))
            for axis, key, title in ((axes[0], "abs_histogram", "absolute error"),
                                     (axes[1], "rel_histogram", "relative error")):
                _draw(axis, data[key], title)
            verdict = "PASSED" if output.passed else "FAILED"
            figure.suptitle(f"{output.output}: {pair.backend} vs {pair.reference}, iteration {pair.iteration} "
                            f"({verdict})")
            figure.tight_layout()
            name = f"{pair.iteration}-{pair.backend}-vs-{pair.reference}-{output.output}.png"
            path = os.path.join(directory, re.sub(r"[^\w.#@-]+", "_", name))
            write_file("--save-error-plots", path, lambda f, figure=figure: figure.savefig(f, dpi=80, format="png"),
                       mode="wb")
            pyplot.close(figure)
            written.append(path)
    return written


def _draw(axis, rows, title: str) -> None:
    labels, counts = [], []
    for low, high, count in rows:
        if low == 0 and high == 0:
            labels.append("~0")
        elif math.isinf(low):
            labels.append("inf/NaN")
        else:
            labels.append(f"{low:.0e}")
        counts.append(count)
    axis.bar(range(len(counts)), counts, color="tab:red" if title.startswith("abs") else "tab:blue")
    axis.set_xticks(range(len(labels)), labels, rotation=45, fontsize=7)
    axis.set_yscale("log" if counts and max(counts) > 100 * max(1, min(c for c in counts if c)) else "linear")
    axis.set_title(title)
    axis.set_xlabel("error (bin start)")
    axis.set_ylabel("elements")
