"""cmpx.transport.live: the one owner of talking to a run's workers, here with real workers and no run around them,
and a check that nothing else in cmpx builds a request to a worker."""

import ast
import os

import numpy as np
import onnxruntime
import pytest

from conftest import REPO
from cmpx.errors import BackendCrashed, BackendFailed
from cmpx.plan import BackendPlan
from cmpx.plugin.manager import PluginSettings, make_plugin_manager
from cmpx.transport import shm, supervisor
from cmpx.transport.arena import ReusedSegments
from cmpx.transport.live import HeldOutputs, LiveBackends
from cmpx.transport.messages import TO_WORKER
from cmpx.transport.pool import worker_environment
from cmpx.transport.runspace import RunSpace


@pytest.fixture
def space():
    space = RunSpace()
    yield space
    space.close()


def _live(space, backends, plugins=()):
    """LiveBackends over fresh workers for ``backends``: (name, backend, options)."""
    settings = PluginSettings.from_cli(list(plugins))
    plugin_set = make_plugin_manager(autoload=settings.autoload, extra=settings.extra, blocked=settings.blocked)
    plans = []
    for name, backend, options in backends:
        spec = plugin_set.backends.get(backend)
        values = {option.name: option.default for option in spec.options}
        plans.append(BackendPlan(name, spec, dict(values, **options)))
    workers = {}
    try:
        for plan in plans:
            workers[plan.name] = supervisor.assign(supervisor.spawn_worker(worker_environment()), plan, settings)
    except BaseException:
        supervisor.release_all(workers.values())
        raise
    return LiveBackends(plans, workers, space.prefix, dict.fromkeys(workers, 60.0))


def test_several_backends_answer_at_once_a_crash_is_reported_by_name_and_the_others_go_on(no_leaks, space, models):
    live = _live(space, [("onnxrt", "onnxrt", {}), ("faulty", "faulty", {"fault": "infer:segfault"})],
                 plugins=["cmpx_test_faulty"])
    feed = {"X": np.linspace(-1, 1, 8, dtype=np.float32).reshape(1, 8)}
    try:
        assert all(not isinstance(r, BackendFailed) for r in live.start().values())
        loaded = live.load({name: (models.matmul_chain, ()) for name in live.workers})
        assert all(not isinstance(r, BackendFailed) for r in loaded.values())
        descriptors = live.write_inputs(feed, "p0")
        replies = live.results(live.infer(dict.fromkeys(live.alive(), descriptors), "p0"))
        crashed = replies["faulty"]
        assert isinstance(crashed, BackendCrashed)
        assert (crashed.backend, crashed.phase, crashed.signal_name) == ("faulty", "infer", "SIGSEGV")
        assert live.alive() == ["onnxrt"]
        # the run's naming scheme: the inputs of key p0, the first backend's output chunks of key p0
        assert {space.prefix + "inp0", space.prefix + "o0p0-0"} <= set(shm.list_segments(space.prefix))
        sources = live.iteration_outputs({n: r for n, r in replies.items() if not isinstance(r, BackendFailed)})
        assert list(sources) == ["onnxrt"] and sources["onnxrt"].mappings is live.mappings  # small: kept mapped
        session = onnxruntime.InferenceSession(models.matmul_chain, providers=["CPUExecutionProvider"])
        expected = dict(zip(["Y", "S"], session.run(["Y", "S"], feed)))
        for name, array in expected.items():
            assert sources["onnxrt"].load(name).tobytes() == array.tobytes()  # bit-identical through cmpx
        sources["onnxrt"].release_all()
        again = live.results(live.infer(dict.fromkeys(live.alive(), live.write_inputs(feed, "p1")), "p1"))
        assert list(again) == ["onnxrt"] and not isinstance(again["onnxrt"], BackendFailed)
        assert [r["op"] for r in live.close_workers().values()] == ["bye"]
    finally:
        live.free_segments()
        supervisor.release_all(live.workers.values())
    assert shm.list_segments(space.prefix) == [space.prefix + "lock"]


def test_held_outputs_give_a_segment_back_once_its_last_tensor_is_freed(space):
    inputs = ReusedSegments()
    descriptors = inputs.write(space.prefix + "o0s0-0", {"a": np.ones(4, np.float32), "b": np.zeros(3, np.int64)})
    inputs.close()
    held = HeldOutputs()
    held.add(descriptors)
    held.free("a")
    assert space.prefix + "o0s0-0" in shm.list_segments(space.prefix)  # b still lives there
    held.free("a")  # twice: nothing
    held.free("b")
    assert space.prefix + "o0s0-0" not in shm.list_segments(space.prefix)
    assert held.descriptors == {}


def _requests_built(path):
    """The ops of the worker requests (dict literals with an "op" a worker takes) built in the file at ``path``."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if not isinstance(key, ast.Constant):
                    continue
                if key.value == "op" and isinstance(value, ast.Constant) and value.value in TO_WORKER:
                    found.append(value.value)
                if key.value == "out_prefix":  # where a worker puts its outputs: a segment name
                    found.append("out_prefix")
    return found


def test_only_the_transport_builds_requests_to_workers():
    """cmpx.transport.live is the one place a run's requests are built (supervisor builds setup and load,
    which it also sends for a pool and the describing of a model): no other module writes an infer message."""
    owners = {os.path.join("transport", "live.py"), os.path.join("transport", "supervisor.py")}
    wrong = {}
    for folder, _, files in os.walk(REPO / "core"):
        for file in files:
            path = os.path.join(folder, file)
            relative = os.path.relpath(path, REPO / "core")
            if file.endswith(".py") and relative not in owners and not relative.startswith(
                    os.path.join("transport", "worker")):
                built = _requests_built(path)
                if built:
                    wrong[relative] = built
    assert wrong == {}
    assert _requests_built(REPO / "core" / "transport" / "live.py")  # the check sees them where they are
