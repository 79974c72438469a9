"""What users may call a metric: its name, its aliases (Polygraphy's cosine_similarity), the groups it belongs to
(Polygraphy's distance_metrics: l2 and cosine), and the spellings of its threshold option (--l2-threshold, and
Polygraphy's --l2-tolerance). Metrics declare these as attributes: ``aliases``, ``groups``, ``flag_aliases``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cmpx.errors import UsageError
from cmpx.options.table import threshold_flag
from cmpx.suggest import did_you_mean

if TYPE_CHECKING:
    from cmpx.plugin.manager import PluginSet
    from cmpx.plugin.registry import MetricSpec


def threshold_flags(spec: MetricSpec) -> list[str]:
    """The command-line spellings of a metric's threshold option (empty for a metric without a threshold)."""
    if getattr(spec.metric, "threshold", None) is None:
        return []
    names = [name for name in (spec.name, *getattr(spec.metric, "aliases", ())) if "_" not in name]
    return [*(threshold_flag(name) for name in names), *getattr(spec.metric, "flag_aliases", ())]


def threshold_keywords(plugins: PluginSet) -> dict[str, str]:
    """``cmpx.run()`` keywords for the threshold options (``cosine_threshold``, ``index_tolerance``...) -> metric."""
    return {flag[2:].replace("-", "_"): spec.name for spec in plugins.metrics for flag in threshold_flags(spec)}


def metric_words(plugins: PluginSet) -> list[str]:
    """Every word --compare accepts."""
    words: dict[str, None] = {}
    for spec in plugins.metrics:
        words.update(dict.fromkeys([spec.name, *getattr(spec.metric, "aliases", ()),
                                    *getattr(spec.metric, "groups", ())]))
    return list(words)


def selected_metrics(words: list[str], plugins: PluginSet) -> list[Any]:
    """The metric objects --compare WORDS selects, each once, in the order named."""
    chosen: dict[str, Any] = {}
    for word in words:
        found = [spec for spec in plugins.metrics if word == spec.name or word in getattr(spec.metric, "aliases", ())]
        found = found or [spec for spec in plugins.metrics if word in getattr(spec.metric, "groups", ())]
        if not found:
            raise UsageError(f"--compare: unknown metric {word!r}{did_you_mean(word, metric_words(plugins))}; available: "
                             f"{', '.join(metric_words(plugins)) or '(none)'}")
        chosen.update({spec.name: spec.metric for spec in found})
    return list(chosen.values())
