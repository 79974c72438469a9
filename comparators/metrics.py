"""The built-in metrics. Each is a small object with a name, a default threshold where it has one, and
``compare(context)``; numpy-heavy work is imported when a comparison runs, so registering them is cheap."""

from __future__ import annotations

import math
from typing import Any

from cmpx.comparison.compare import CHECK_STATS, ComparisonContext
from cmpx.outcome.results import MetricResult


def _stats(context: ComparisonContext) -> Any:
    """The error statistics of this output, computed once however many metrics ask."""
    from cmpx_comparators.errors import error_stats

    s = context.settings
    return context.memo("error_stats", lambda: error_stats(
        context.actual, context.reference, atol=s.atol, rtol=s.rtol, quantiles=(s.quantile,),
        nan_equal=s.nan_equal, inf_equal=s.inf_equal, samples=s.samples))


class ToleranceCheck:
    """Polygraphy's "simple" check with atol/rtol. ``stat`` None means: the --check-error-stat of each output.

    elemwise: an element fails if abs > atol AND rel > rtol (NaN counts as exceeding); the output fails if any
    element fails. max/mean/median/quantile: the output fails if that statistic of the absolute error exceeds
    atol AND the same statistic of the relative error exceeds rtol.
    """

    threshold = None

    DESCRIPTIONS = {
        None: "the tolerance check chosen per output by --check-error-stat (default elemwise)",
        "elemwise": "fails if any element exceeds atol AND rtol",
        "max": "fails if the max abs error exceeds atol AND the max rel error exceeds rtol",
        "mean": "fails if the mean abs error exceeds atol AND the mean rel error exceeds rtol",
        "median": "fails if the median abs error exceeds atol AND the median rel error exceeds rtol",
        "quantile": "fails if the --error-quantile abs error exceeds atol AND that rel error exceeds rtol",
    }

    def __init__(self, stat: str | None):
        self.stat = stat
        self.name = stat or "simple"
        self.description = self.DESCRIPTIONS[stat]

    def compare(self, context: ComparisonContext) -> MetricResult:
        from cmpx_comparators.tolerance_report import tolerance_result

        stat = self.stat or context.settings.check_stat
        return tolerance_result(self.name, stat, _stats(context), context.settings)


class SimilarityMetric:
    """A metric that condenses the pair into one number checked against a threshold."""

    def __init__(self, name: str, threshold: float, higher_is_better: bool, unit: str, doc: str,
                 aliases: tuple[str, ...] = (), groups: tuple[str, ...] = (), flag_aliases: tuple[str, ...] = ()):
        self.name = name
        self.threshold = threshold
        self.higher_is_better = higher_is_better
        self.unit = unit
        self.aliases = aliases  # other names for --compare (Polygraphy's)
        self.groups = groups  # names that select several metrics at once (Polygraphy's distance_metrics...)
        self.flag_aliases = flag_aliases  # other spellings of --NAME-threshold (Polygraphy's --l2-tolerance...)
        self.__doc__ = doc

    def compare(self, context: ComparisonContext) -> MetricResult:
        from cmpx_comparators import similarity

        sums = context.memo("similarity_sums", lambda: similarity.similarity_sums(context.actual, context.reference))
        value = getattr(similarity, self.name)(sums)
        threshold = context.settings.thresholds.get(self.name, self.threshold)
        passed = value >= threshold if self.higher_is_better else value <= threshold
        passed = passed and not math.isnan(value)
        relation = ">=" if self.higher_is_better else "<="
        shown, limit = distinct_digits(value, threshold)
        return MetricResult(self.name, bool(passed), summary=f"{self.name} {shown}{self.unit}",
                            criterion=f"{relation} {limit}{self.unit}", value=value,
                            data={"value": value, "threshold": threshold})


def distinct_digits(value: float, threshold: float) -> tuple[str, str]:
    """``value`` and ``threshold`` as text: the threshold exactly as given, the value with the fewest significant
    digits (at least 6) that keep its order against the threshold, so that a cosine of 0.99999998 against a
    threshold of 0.99999999 does not read "1 [>= 1]"."""
    limit = f"{threshold:g}" if float(f"{threshold:g}") == threshold else repr(threshold)
    if math.isnan(value):
        return "nan", limit
    order = (value > threshold) - (value < threshold)
    for digits in range(6, 18):
        shown = f"{value:.{digits}g}"
        rounded = float(shown)
        if (rounded > threshold) - (rounded < threshold) == order and (order == 0 or shown != limit):
            return shown, limit
    return repr(value), limit


def builtin_metrics() -> list[Any]:
    from cmpx_comparators.indices import IndicesCheck

    return [
        ToleranceCheck(None),
        *(ToleranceCheck(stat) for stat in CHECK_STATS),
        SimilarityMetric("cosine", 0.997, True, "", "cosine similarity of the flattened outputs (1 = same "
                         "direction)", aliases=("cosine-similarity", "cosine_similarity"), groups=("distance_metrics",)),
        SimilarityMetric("l2", 1e-5, False, "", "L2 norm of the difference (Euclidean distance)",
                         groups=("distance_metrics",), flag_aliases=("--l2-tolerance",)),
        SimilarityMetric("snr", 20.0, True, " dB", "signal-to-noise ratio: reference power over difference power",
                         groups=("quality_metrics",), flag_aliases=("--snr-tolerance",)),
        SimilarityMetric("psnr", 30.0, True, " dB", "peak signal-to-noise ratio, peak of the reference",
                         groups=("quality_metrics",), flag_aliases=("--psnr-tolerance",)),
        IndicesCheck(),
    ]
