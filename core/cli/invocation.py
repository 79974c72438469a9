"""The command line being run, shared by every command: what the prescan found, its plugins, the workers started
ahead (cmpx.cli.launch)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import click

from cmpx.options.argv import Prescan

if TYPE_CHECKING:
    from cmpx.plugin.manager import PluginSet, PluginSettings
    from cmpx.transport.pool import WorkerPool


@dataclass
class Invocation:
    """The command line being run: what the prescan found, its plugins (loaded on first use) and the pool of
    workers started ahead for a run (cmpx.cli.launch). It holds no run state: a run's is its Session's."""

    prescan: Prescan = field(default_factory=Prescan)
    pool: WorkerPool | None = None
    _plugins: PluginSet | None = None

    @property
    def settings(self) -> PluginSettings:
        from cmpx.plugin.manager import PluginSettings

        return PluginSettings.from_cli(self.prescan.plugin_args)

    @property
    def plugins(self) -> PluginSet:
        """The plugin manager, built on first use (imported then too: ``cmpx --help`` needs no plugins)."""
        if self._plugins is None:
            from cmpx.plugin.manager import make_plugin_manager

            settings = self.settings
            self._plugins = make_plugin_manager(autoload=settings.autoload, extra=settings.extra,
                                                blocked=settings.blocked)
        return self._plugins


def invocation(ctx: click.Context) -> Invocation:
    return ctx.find_root().obj
