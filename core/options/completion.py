"""Shell completion (bash, zsh, fish: click's): what each argument and option completes to. Paths are left to the
shell (``file``, ``dir``: it lists them, with its own quoting); names come from the registered plugins."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import click.shell_completion as click_completion
from click.shell_completion import CompletionItem, split_arg_string

Completer = Callable[[Any, Any, str], list[Any]]


def paths(kind: str = "file") -> Completer:
    """The shell completes a path here: ``file`` (any path) or ``dir`` (directories only)."""
    return lambda ctx, param, incomplete: [CompletionItem(incomplete, type=kind)]


def names(known: Sequence[str]) -> Completer:
    """One of a fixed list of names."""
    return lambda ctx, param, incomplete: [name for name in known if name.startswith(incomplete)]


def backends(known: Sequence[str], transforms: Sequence[str]) -> Completer:
    """A backend's name, then after ``NAME:`` the transforms (``onnxrt:fp16``)."""

    def complete(ctx: Any, param: Any, incomplete: str) -> list[str]:
        name, colon, transform = incomplete.partition(":")
        if colon:
            return [f"{name}:{word}" for word in transforms if word.startswith(transform)] if name in known else []
        return [word for word in known if word.startswith(incomplete)]

    return complete


class BashComplete(click_completion.BashComplete):
    """click's bash completion, but for a word holding ':' (``--backend onnxrt:fp16``): bash splits words at ':'
    (COMP_WORDBREAKS), so the script hands cmpx the command line itself, which click splits as the shell would
    without that break, and each completion loses what precedes the part bash replaces."""

    source_template = click_completion.BashComplete.source_template.replace(
        'response=$(env COMP_WORDS="${COMP_WORDS[*]}" COMP_CWORD=$COMP_CWORD %(complete_var)s=bash_complete $1)',
        'local line="${COMP_LINE:0:COMP_POINT}" cur="${COMP_WORDS[COMP_CWORD]}"\n'
        '    local whole="${line##*[[:space:]]}"\n'
        '    local drop="${whole%%"$cur"}"\n'
        '    response=$(env COMP_WORDS="$line" COMP_CWORD=-1 %(complete_var)s=bash_complete $1)').replace(
        "COMPREPLY+=($value)", 'COMPREPLY+=("${value#"$drop"}")')

    def get_completion_args(self) -> tuple[list[str], str]:
        if os.environ.get("COMP_CWORD") != "-1":  # called as click's own script calls it
            return super().get_completion_args()
        line = os.environ["COMP_WORDS"]
        words = split_arg_string(line)
        if not line or line[-1].isspace():
            return words[1:], ""
        return words[1:-1], words[-1] if len(words) > 1 else ""


def register() -> None:
    """cmpx's bash completion in place of click's (zsh and fish hand over whole words already)."""
    click_completion.add_completion_class(BashComplete, "bash")
