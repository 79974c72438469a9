"""``cmpx plugins``: what is registered, by which plugin and distribution, and what failed to load."""

from __future__ import annotations

from cmpx.plugin.manager import PluginSet
from cmpx.plugin.registry import BackendRegistry, DataLoaderRegistry, MetricRegistry, TransformRegistry
from cmpx.reports.terminal import PipeSafeEcho


def show_plugins(plugins: PluginSet) -> None:
    Registry = BackendRegistry | DataLoaderRegistry | MetricRegistry | TransformRegistry
    sections: list[tuple[str, Registry]] = [("Backends", plugins.backends), ("Data loaders", plugins.data_loaders),
                ("Metrics", plugins.metrics), ("Model transforms", plugins.transforms)]
    echo = PipeSafeEcho()  # | head: a reader gone is not a failure (click would exit 1)
    for title, registry in sections:
        echo(f"{title}:")
        if not len(registry):
            echo("  (none)")
        for item in registry:
            formats = getattr(item, "model_formats", ())
            loads = f"; also loads {', '.join(formats)} models" if formats else ""
            echo(f"  {item.name:<12} {item.description}{loads}  [plugin {item.provenance}]")
    if plugins.failures:
        echo("Failed plugins:")
        for failure in plugins.failures:
            dist = f" ({failure.dist})" if failure.dist else ""
            echo(f"  {failure.plugin}{dist}: {failure.error}")
