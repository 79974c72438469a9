"""The plugin manager factory: entry points, -p modules, blocking, and isolated per-plugin failures."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pluggy

from cmpx import hookspecs

from cmpx.plugin import installed
from cmpx._version import __version__
from cmpx.errors import PluginError
from cmpx.plugin.registry import BackendRegistry, DataLoaderRegistry, MetricRegistry, Provenance, TransformRegistry

if TYPE_CHECKING:
    from cmpx.transport.messages import PluginsMessage

ENTRY_POINT_GROUP = "cmpx"
BUILTIN_DIST = "cmpx"
PLUGINS_ENV = "CMPX_PLUGINS"
DISABLE_AUTOLOAD_ENV = "CMPX_DISABLE_PLUGIN_AUTOLOAD"
TRACE_ENV = "CMPX_TRACE_PLUGINS"

_REGISTRATION_HOOKS = ("register_backends", "register_data_loaders", "register_metrics", "register_model_transforms")


@dataclass(frozen=True)
class PluginFailure:
    plugin: str
    dist: str | None
    error: str
    requested: bool = False  # named with -p / CMPX_PLUGINS, so the user relies on it


@dataclass(frozen=True)
class PluginSettings:
    """What decides which plugins load in the coordinator. Workers receive it with their setup and import the
    ``extra`` modules (``-p``), which may hold the backend classes they run."""

    autoload: bool = True
    extra: tuple[str, ...] = ()
    blocked: tuple[str, ...] = ()

    @classmethod
    def from_cli(cls, plugin_args: Iterable[str], environ: Mapping[str, str] | None = None) -> PluginSettings:
        """Combine ``-p`` arguments with CMPX_PLUGINS and CMPX_DISABLE_PLUGIN_AUTOLOAD.

        ``-p no:NAME`` blocks plugin NAME (an entry point name or a module name), as in pytest.
        """
        environ = os.environ if environ is None else environ
        words = [w.strip() for w in environ.get(PLUGINS_ENV, "").split(",") if w.strip()]
        words += [w.strip() for w in plugin_args if w.strip()]
        extra = tuple(dict.fromkeys(w for w in words if not w.startswith("no:")))
        blocked = tuple(dict.fromkeys(w[3:] for w in words if w.startswith("no:")))
        autoload = environ.get(DISABLE_AUTOLOAD_ENV, "").strip().lower() in ("", "0", "false", "no")
        return cls(autoload=autoload, extra=extra, blocked=blocked)

    def to_message(self) -> PluginsMessage:
        return {"autoload": self.autoload, "extra": list(self.extra), "blocked": list(self.blocked)}

    @classmethod
    def from_message(cls, message: Mapping[str, Any]) -> PluginSettings:
        return cls(bool(message["autoload"]), tuple(message["extra"]), tuple(message["blocked"]))


@dataclass
class PluginSet:
    """A loaded plugin manager with the registries its plugins filled, and what failed on the way."""

    pm: pluggy.PluginManager
    backends: BackendRegistry = field(default_factory=BackendRegistry)
    data_loaders: DataLoaderRegistry = field(default_factory=DataLoaderRegistry)
    metrics: MetricRegistry = field(default_factory=MetricRegistry)
    transforms: TransformRegistry = field(default_factory=TransformRegistry)
    failures: list[PluginFailure] = field(default_factory=list)
    provenance: dict[str, Provenance] = field(default_factory=dict)

    def failures_of(self, plugin: str) -> list[PluginFailure]:
        return [f for f in self.failures if f.plugin == plugin]


# Plugins the core cannot run without, as pytest has its essential plugins: the default comparison and the default
# data. They load even with CMPX_DISABLE_PLUGIN_AUTOLOAD=1, and ``-p no:NAME`` cannot block them.
ESSENTIAL_PLUGINS = {"metrics": "cmpx_comparators.plugin", "synthetic": "cmpx.loaders.plugin"}


def make_plugin_manager(*, autoload: bool = True, extra: Iterable[Any] = (), blocked: Iterable[str] = (),
                        trace: bool | None = None) -> PluginSet:
    """Build a fresh plugin manager and fill the registries.

    ``autoload`` loads every entry point of group ``cmpx`` (the built-ins included); ``extra`` holds module
    names (as given to ``-p``) or plugin objects to register as well; ``blocked`` names plugins never to load,
    and raises PluginError if it names an essential plugin. A plugin that fails to import, implements an unknown
    hook or raises while registering is recorded in ``failures`` under its name; the others load normally.
    """
    blocked = list(blocked)
    essential = [name for name in blocked if name in ESSENTIAL_PLUGINS or name in ESSENTIAL_PLUGINS.values()]
    if essential:
        raise PluginError(f"-p no:{essential[0]}: plugin {essential[0]!r} is essential to cmpx (it provides the "
                          "default comparison or data) and cannot be blocked; block other plugins, or choose "
                          "metrics with --compare and data with --data-loader")
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    plugins = PluginSet(pm)
    for name in blocked:
        pm.set_blocked(name)
    if trace if trace is not None else bool(os.environ.get(TRACE_ENV)):
        _trace_hook_calls(pm)
    found = _sorted_entry_points() if autoload else []
    loaded = {entry_point.name for entry_point in found}
    for name, module in ESSENTIAL_PLUGINS.items():
        if name not in loaded:
            _register(plugins, name, f"{BUILTIN_DIST} {__version__}", lambda module=module: importlib.import_module(module))
    for entry_point in found:
        if pm.is_blocked(entry_point.name) or entry_point.name in plugins.provenance:
            continue
        _register(plugins, entry_point.name, f"{entry_point.dist.name} {entry_point.dist.version}", entry_point.load)
    for item in extra:
        if isinstance(item, str):
            if not pm.is_blocked(item):
                _register(plugins, item, None, lambda item=item: importlib.import_module(item), requested=True)
        else:
            _register(plugins, getattr(item, "__name__", None) or repr(item), None, lambda item=item: item,
                      requested=True)
    _run_registration_hooks(plugins)
    pm.check_pending()
    return plugins


def _sorted_entry_points() -> list[installed.EntryPoint]:
    """Each entry point of the group once; built-ins first, so a third-party plugin that reuses a built-in name is
    the one reported as clashing."""
    unique: dict[tuple[str, str], installed.EntryPoint] = {}
    for entry_point in installed.entry_points(ENTRY_POINT_GROUP):
        unique.setdefault((entry_point.name, entry_point.value), entry_point)
    return sorted(unique.values(), key=lambda ep: (ep.dist.name != BUILTIN_DIST, ep.dist.name, ep.name))


def _register(plugins: PluginSet, name: str, dist: str | None, load: Any, requested: bool = False) -> None:
    pm = plugins.pm
    try:
        plugin = load()
        if pm.is_registered(plugin):
            return  # e.g. a built-in also named with -p
        pm.register(plugin, name=name)
        unknown = [caller.name for caller in pm.get_hookcallers(plugin) or () if caller.spec is None]
        if unknown:
            pm.unregister(plugin)
            raise PluginError(f"implements unknown hook(s) {', '.join(unknown)}; known hooks: "
                              f"{', '.join(_REGISTRATION_HOOKS)}")
    except Exception as exc:  # any failure of one plugin is that plugin's, never the run's
        plugins.failures.append(PluginFailure(name, dist, _describe(exc), requested))
        return
    plugins.provenance[name] = Provenance(name, dist)


def _run_registration_hooks(plugins: PluginSet) -> None:
    registries: dict[str, BackendRegistry | DataLoaderRegistry | MetricRegistry | TransformRegistry] = {
        "register_backends": plugins.backends,
        "register_data_loaders": plugins.data_loaders,
        "register_metrics": plugins.metrics,
        "register_model_transforms": plugins.transforms,
    }
    pm = plugins.pm
    for hook_name, registry in registries.items():
        implementing = [impl.plugin for impl in getattr(pm.hook, hook_name).get_hookimpls()]
        for plugin in implementing:
            name = pm.get_name(plugin) or repr(plugin)
            others = [p for p in implementing if p is not plugin]
            caller = pm.subset_hook_caller(hook_name, remove_plugins=others)
            provenance = plugins.provenance.get(name, Provenance(name))
            try:
                with registry.attributing(provenance):
                    caller(registry=registry)
            except Exception as exc:
                requested = name not in plugins.provenance or plugins.provenance[name].dist is None
                plugins.failures.append(PluginFailure(name, provenance.dist, f"{hook_name}: {_describe(exc)}",
                                                      requested))


def _describe(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, PluginError) else f"{type(exc).__name__}: {exc}"


def _trace_hook_calls(pm: pluggy.PluginManager) -> None:
    def before(hook_name: str, impls: Any, kwargs: Mapping[str, Any]) -> None:
        names = ", ".join(pm.get_name(impl.plugin) or "?" for impl in impls)
        print(f"[cmpx trace] {hook_name} -> {names}", file=sys.stderr)

    def after(outcome: Any, hook_name: str, impls: Any, kwargs: Mapping[str, Any]) -> None:
        if outcome.exception is not None:
            print(f"[cmpx trace] {hook_name} raised {outcome.exception!r}", file=sys.stderr)

    pm.add_hookcall_monitoring(before, after)
