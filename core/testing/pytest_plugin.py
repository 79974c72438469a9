"""cmpx's pytest plugin (entry point ``pytest11``), for authors of cmpx plugins:

    def test_my_backend_matches_onnxrt(cmpx_cli, cmpx_models):
        result = cmpx_cli("run", cmpx_models.conv(), "--backend", "mine", "--backend", "onnxrt",
                          plugins=["my_package.plugin"])
        assert result.exit_code == 0, result.output

``cmpx_cli(*args, plugins=(), env=None)`` runs the real CLI in-process (its workers are real processes that
see the same sys.path), loading ``plugins`` with ``-p``, and fails the test if a worker process or a shared-memory
segment outlives it. ``cmpx_models`` writes small ONNX models into the test's tmp_path: ``conv()``,
``matmul_chain(layers=3, size=8, perturb=None)``, ``dynamic_add()``, ``gather_model()``, ``unary(op)``,
``two_faults(nodes=60, batchnorm_at=20, softmax_at=45)`` (nodes onnx.reference computes wrongly at opset 9).
``cmpx_no_leaks`` fails a test that leaves a segment or a worker behind however it ran cmpx (a subprocess,
``cmpx.run``). Nothing heavy is imported until a fixture is used.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Mapping

import pytest


class _Models:
    def __init__(self, directory):
        self._directory = directory

    def __getattr__(self, name: str):
        from cmpx.testing import models

        build = getattr(models, name if name.endswith("_model") or name in ("matmul_chain", "dynamic_add", "unary")
                        else f"{name}_model", None) or getattr(models, name)

        def make(*args, **kwargs) -> str:
            suffix = "-".join(str(a) for a in [*args, *kwargs.values()])
            path = self._directory / f"{name}{'-' + suffix if suffix else ''}.onnx"
            if not path.exists():
                models.save(build(*args, **kwargs), path)
            return str(path)

        return make


@pytest.fixture
def cmpx_models(tmp_path):
    """Small ONNX models, written on first use: ``cmpx_models.conv()``, ``cmpx_models.matmul_chain(layers=5)``..."""
    return _Models(tmp_path)


@pytest.fixture
def cmpx_no_leaks():
    """Fails the test if it leaves a cmpx shared-memory segment or a worker process behind (for tests that start
    cmpx runs other than through ``cmpx_cli``: subprocesses, ``cmpx.run``)."""
    from cmpx.testing.leaks import segments, settled, worker_processes

    before = segments()
    yield
    assert segments() - before == set(), "shared-memory segments leaked"
    assert settled(worker_processes) == [], "worker processes leaked"


class _ForkServer:
    """The fork servers of this test session's in-process runs, kept from test to test (a cmpx command keeps one
    for its own runs): each forks workers with numpy and the forkable backends' frameworks already imported, where
    a fresh interpreter would import them again for every run. A server serves one worker environment
    (``PYTEST_CURRENT_TEST`` aside; the import path drifts as tests are collected and import their helpers): one
    is started for an environment seen a second time, and the least recently used of more than ``LIMIT`` is closed.
    A run in an environment seen once (a test that changes it) gets spawned workers, as from the command line."""

    LIMIT = 3

    def __init__(self) -> None:
        from cmpx.transport.forking import ForkServer

        self._servers: dict[tuple[tuple[str, str], ...], ForkServer] = {}  # least recently used first
        self._seen: set[tuple[tuple[str, str], ...]] = set()

    def for_environment(self, env: dict[str, str]):
        from cmpx.transport.forking import PER_RUN_VARIABLES, ForkServer

        key = tuple(sorted((k, v) for k, v in env.items() if k not in PER_RUN_VARIABLES))
        server = self._servers.pop(key, None)
        if server is None or server.broken:
            if key not in self._seen:
                self._seen.add(key)
                return None
            try:
                server = ForkServer(env)
            except OSError:
                return None
        self._servers[key] = server
        while len(self._servers) > self.LIMIT:
            oldest = next(iter(self._servers))
            self._servers.pop(oldest).close()
        return server

    def close(self) -> None:
        for server in self._servers.values():
            server.close()
        self._servers.clear()


@pytest.fixture(scope="session")
def cmpx_fork_server():
    """The fork server the in-process runs of this session fork their workers from (see ``cmpx_cli``)."""
    server = _ForkServer()
    yield server
    server.close()


@pytest.fixture
def cmpx_cli(monkeypatch, cmpx_fork_server):
    """Run ``cmpx`` in-process; see the module docstring."""
    from click.testing import CliRunner

    from cmpx.cli.invocation import Invocation
    from cmpx.cli.main import cli
    from cmpx.options.argv import prescan
    from cmpx.testing.leaks import segments, settled, worker_processes
    from cmpx.transport.pool import WorkerPool, worker_environment

    # Workers are fresh interpreters: give them this process's import path, so plugins importable here are there.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in sys.path if p))
    before = segments()
    runner = CliRunner()

    def invoke(*args: object, plugins: Iterable[str] = (), env: Mapping[str, str] | None = None):
        words = [str(a) for a in args]
        for plugin in plugins:
            words += ["-p", plugin]
        environment = worker_environment()
        environment.update(env or {})
        pool = WorkerPool(server=cmpx_fork_server.for_environment(environment))
        return runner.invoke(cli, words, env=dict(env or {}), catch_exceptions=False,
                             invocation=Invocation(prescan(words), pool))

    yield invoke
    # workers first: a worker being stopped (the spare of a run refused early) removes its own segments as it exits
    assert settled(worker_processes) == [], "a cmpx run left worker processes behind"
    left = settled(lambda: sorted(segments() - before))
    assert left == [], f"a cmpx run left shared-memory segments behind: {', '.join(left)}"
