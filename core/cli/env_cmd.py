"""``cmpx env``: named Python environments for backends' workers, to compare framework versions
(``cmpx env create ort120 'onnxruntime==1.20.*'``, then ``cmpx run MODEL --backend onnxrt --backend onnxrt@env:ort120``).
The environments themselves are cmpx.envs."""

from __future__ import annotations

import click


@click.group("env")
def env_group() -> None:
    """Python environments for backends' workers: --backend NAME@env:ENV runs NAME's worker there.

    \b
    They live in $CMPX_ENVS_DIR (default ~/.cache/cmpx/envs, under $XDG_CACHE_HOME if set); cmpx is not
    installed in them: each run links its own worker code in.
    """


@env_group.command("create")
@click.argument("name")
@click.argument("requirements", nargs=-1)
@click.option("--python", "python", metavar="PYTHON",
              help="the Python to base it on (a path or a command such as python3.10) [default: the one running cmpx]")
def create_command(name: str, requirements: tuple[str, ...], python: str | None) -> None:
    """Make environment NAME with REQUIREMENTS (pip's syntax, e.g. 'onnxruntime==1.20.*') plus what cmpx's worker
    needs (numpy, msgpack), with uv if it is on the PATH, else venv and pip; print its Python."""
    from cmpx import envs

    path = envs.create(name, requirements, python)
    click.echo(f"environment {name!r} is ready; compare with it: --backend NAME@env:{name}", err=True)
    click.echo(path)


@env_group.command("list")
def list_command() -> None:
    """The environments made so far, with their Pythons."""
    from cmpx import envs

    found = envs.names()
    if not found:
        click.echo(f"no environments in {envs.envs_root()} (make one: cmpx env create NAME REQUIREMENT...)")
    for name in found:
        click.echo(f"{name:<16} {envs.env_python(envs.env_dir(name))}")


@env_group.command("remove")
@click.argument("name")
def remove_command(name: str) -> None:
    """Delete environment NAME."""
    from cmpx import envs

    click.echo(f"removed {envs.remove(name)}")
