"""The command line being run, shared by every command: what the prescan found, its plugins, the workers started
ahead (cmpx.cli.launch)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import click

from cmpx.options.argv import Prescan
from cmpx.plugin.manager import PluginSet, PluginSettings, make_plugin_manager

if TYPE_CHECKING:
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
        return PluginSettings.from_cli(self.prescan.plugin_args)

    @property
    def plugins(self) -> PluginSet:
        if self._plugins is None:
            settings = self.settings
            self._plugins = make_plugin_manager(autoload=settings.autoload, extra=settings.extra,
                                                blocked=settings.blocked)
        return self._plugins


def invocation(ctx: click.Context) -> Invocation:
    return ctx.find_root().obj
