"""``--help`` with options grouped by concern (backends, data, comparison, each backend's own options)."""

from __future__ import annotations

from typing import Any

import click

OTHER = "Other options"


class GroupedOption(click.Option):
    """A click option that knows which help section it belongs to."""

    def __init__(self, *args: Any, group: str = OTHER, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.group = group


class GroupedCommand(click.Command):
    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        sections: dict[str, list[tuple[str, str]]] = {}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is not None:
                sections.setdefault(getattr(param, "group", OTHER), []).append(record)
        for title in sorted(sections, key=lambda t: t == OTHER):  # stable order, "Other" last
            with formatter.section(title):
                formatter.write_dl(sections[title])
