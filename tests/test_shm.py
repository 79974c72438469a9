import os
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

from cmpx.dtypes import ONNX_TO_NUMPY, numpy_dtype
from cmpx.errors import LimitReached
from cmpx.transport import runspace, shm
from cmpx.transport.arena import Allocations, MappingCache, ReusedSegments


@pytest.fixture
def prefix():
    space = runspace.RunSpace()
    yield space.prefix
    space.close()


@pytest.mark.parametrize("dtype", sorted(set(ONNX_TO_NUMPY.values())))
def test_tensors_round_trip_as_views_for_every_dtype(prefix, dtype):
    arrays = {"a": np.arange(12).reshape(3, 4).astype(numpy_dtype(dtype)),
              "b": np.ones((0, 5), dtype=numpy_dtype(dtype)), "c": np.float32(2.5).reshape(())}
    writer = ReusedSegments()
    descriptors = writer.write(prefix + "x", arrays)
    assert all(d["offset"] % shm.ALIGNMENT == 0 for d in descriptors)
    reader = shm.Segment.attach(prefix + "x")
    back = shm.read_tensors(descriptors, {reader.name: reader})
    for name, array in arrays.items():
        assert back[name].dtype == array.dtype and back[name].shape == array.shape
        assert back[name].tobytes() == array.tobytes()
    assert not back["a"].flags.writeable  # workers cannot scribble on the inputs
    assert np.shares_memory(back["a"], back["a"]) and back["a"].base is not None
    del back
    reader.close()
    writer.close()


def test_descriptors_cannot_point_outside_the_segment(prefix):
    writer = ReusedSegments()
    [descriptor] = writer.write(prefix + "x", {"a": np.zeros(4, np.float32)})
    descriptor["shape"] = [1000]
    segment = shm.Segment.attach(prefix + "x")
    with pytest.raises(ValueError, match="overruns"):
        shm.read_tensors([descriptor], {segment.name: segment})
    segment.close()
    writer.close()


def test_sweep_removes_only_its_own_prefix(prefix):
    other = runspace.RunSpace()
    shm.Segment.create(prefix + "a", 8).close()
    shm.Segment.create(other.prefix + "b", 8).close()
    assert runspace.sweep(prefix) == [prefix + "a"]
    assert shm.list_segments(other.prefix) == [other.prefix + "b", other.prefix + "lock"]
    other.close()
    assert shm.list_segments(other.prefix) == []


def _dead_run(prefix_holder: list) -> str:
    """A run whose process died without cleaning up: its lock file and a segment are left, the lock not held."""
    code = ("from cmpx.transport import runspace, shm\n"
            "space = runspace.RunSpace()\n"
            "shm.Segment.create(space.prefix + 'in0', 8).close()\n"
            "print(space.prefix, flush=True)\n"
            "import os; os._exit(0)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_orphans_of_dead_runs_are_swept_and_live_runs_are_not(prefix):
    dead = _dead_run([])
    shm.Segment.create(prefix + "in0", 8).close()
    removed = runspace.sweep_orphans()
    assert dead + "in0" in removed and dead + "lock" in removed
    assert shm.list_segments(dead) == []
    assert shm.list_segments(prefix) == [prefix + "in0", prefix + "lock"]  # ours: alive, whatever its pid says


def test_a_lock_still_under_its_temporary_name_is_left_alone_while_young():
    """A run makes its lock under a temporary name, then locks and renames it: in between, the file is unlocked.
    A sweep at that moment once removed it and the starting run failed with FileNotFoundError on the rename (a
    sweep cell's "internal error"). A young one is left alone; one a run died holding is removed once old."""
    name = f".cmpx-{os.getpid()}-{os.urandom(4).hex()}-lock"
    path = os.path.join(shm.SHM_DIR, name)
    open(path, "w").close()
    try:
        assert name not in runspace.sweep_orphans()
        assert os.path.exists(path)
        old = time.time() - 2 * runspace.STAGING_GRACE_SECONDS
        os.utime(path, (old, old))
        assert name in runspace.sweep_orphans()
        assert not os.path.exists(path)
    finally:
        if os.path.exists(path):
            os.unlink(path)


def test_liveness_is_the_lock_not_the_pid():
    """A run in another PID namespace (a container sharing /dev/shm) has a pid that means nothing here: a
    live run must be judged by its lock. Here: a live run whose name carries a pid that does not exist."""
    space = runspace.RunSpace()
    fake = f"cmpx-999999999-{space.prefix.split('-')[2]}-"
    os.rename(space.lock_path, runspace.lock_path(fake))  # the lock, still held, under the foreign name
    shm.Segment.create(fake + "in0", 8).close()
    try:
        assert fake + "in0" not in runspace.sweep_orphans()
        assert os.path.exists(os.path.join(shm.SHM_DIR, fake + "in0"))
    finally:
        os.rename(runspace.lock_path(fake), space.lock_path)
        runspace.sweep(fake)
        space.close()


def test_a_sweep_from_another_pid_namespace_leaves_a_live_run_alone(prefix):
    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("needs root and unshare(1) to make a PID namespace")
    shm.Segment.create(prefix + "in0", 8).close()
    code = "from cmpx.transport import runspace; print(runspace.sweep_orphans())"
    done = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", code],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert prefix + "in0" not in done.stdout
    assert os.path.exists(os.path.join(shm.SHM_DIR, prefix + "in0"))


def test_another_users_leftovers_are_skipped_not_fatal(run_cli):
    if os.geteuid() != 0:
        pytest.skip("needs root to make files owned by another user")
    stale = "cmpx-1-0badf00d-"  # a live pid: no sweeper of any cmpx version may take these for a dead run of its own
    for name in ("in0", "lock"):
        shm.Segment.create(stale + name, 8).close()
        os.chown(os.path.join(shm.SHM_DIR, stale + name), 65534, 65534)  # nobody
    try:
        result = run_cli("run", "examples/models/conv.onnx", "--backend", "onnxrt", "--backend", "onnxref")
        assert result.exit_code == 0, result.output
        assert os.path.exists(os.path.join(shm.SHM_DIR, stale + "in0"))  # not ours to remove
    finally:
        for name in ("in0", "lock"):
            shm.unlink(stale + name)


def test_names_outside_the_cmpx_namespace_are_refused():
    with pytest.raises(ValueError):
        shm.Segment.create("../etc/x", 1)
    with pytest.raises(ValueError):
        runspace.sweep("cmpx-")


def test_segments_are_rewritten_in_place_and_replaced_when_the_size_changes(prefix):
    writer = ReusedSegments()
    writer.write(prefix + "in", {"a": np.ones(4, np.float32)})
    first = os.stat(os.path.join(shm.SHM_DIR, prefix + "in")).st_ino
    [descriptor] = writer.write(prefix + "in", {"a": np.full(4, 7, np.float32)})
    assert os.stat(os.path.join(shm.SHM_DIR, prefix + "in")).st_ino == first  # same file, new values
    reader = shm.Segment.attach(prefix + "in")
    assert shm.read_tensors([descriptor], {reader.name: reader})["a"].tolist() == [7.0] * 4
    reader.close()
    writer.write(prefix + "in", {"a": np.ones(40, np.float32)})
    assert os.path.getsize(os.path.join(shm.SHM_DIR, prefix + "in")) == 160
    writer.close()


def test_a_cached_mapping_of_a_replaced_segment_is_not_reused(prefix):
    cache = MappingCache(1 << 20)
    shm.Segment.create(prefix + "o", 8).close()
    old = cache.get(prefix + "o")
    cache.put(old)
    shm.unlink(prefix + "o")
    shm.Segment.create(prefix + "o", 16).close()  # a worker replaced it with a bigger one
    fresh = cache.get(prefix + "o")
    assert fresh is not old and fresh.size == 16
    cache.put(fresh)
    cache.close()


def test_outputs_are_packed_so_descriptors_stay_few_whatever_the_tensor_count(prefix):
    cache = MappingCache(1 << 30, writable=True)
    expected = 0
    for _ in range(3):
        allocations = Allocations(prefix + "o0p0", cache, expected)
        arrays = {f"t{i}": np.full((8, 8), i, np.float32) for i in range(300)}
        arrays["big"] = np.ones((256, 256), np.float32)
        descriptors = allocations.describe(arrays)
        expected = allocations.used
        allocations.close()
    assert len({d["segment"] for d in descriptors}) == 1  # after the first inference: one chunk holds them all
    big = next(d for d in descriptors if d["name"] == "big")
    assert big["offset"] % shm.PAGE == 0  # large tensors start on a page, so a reader can drop their pages
    reader = shm.Segment.attach(descriptors[0]["segment"], populate=False)
    back = shm.read_tensors(descriptors, {reader.name: reader})
    assert back["t299"][0, 0] == 299 and back["big"].sum() == 256 * 256
    del back
    reader.close()
    cache.close()


def _shm_limited(code: str, size: str) -> subprocess.CompletedProcess:
    """Run ``code`` in a private mount namespace whose /dev/shm is a tmpfs of ``size``."""
    script = f"mount -t tmpfs -o size={size} tmpfs /dev/shm && exec {sys.executable} -c \"$0\""
    return subprocess.run(["unshare", "-m", "sh", "-c", script, code], capture_output=True, text=True, timeout=120)


def _can_limit_shm() -> str | None:
    if shutil.which("unshare") is None or os.geteuid() != 0:
        return "needs root and unshare(1) for a private, small /dev/shm"
    probe = _shm_limited("print('ok')", "1M")
    return None if probe.stdout.strip() == "ok" else f"cannot mount a private tmpfs: {probe.stderr.strip()}"


def test_a_full_dev_shm_is_an_error_naming_it_not_a_sigbus():
    reason = _can_limit_shm()
    if reason:
        pytest.skip(reason)
    code = ("from cmpx.transport import runspace, shm\n"
            "space = runspace.RunSpace()\n"
            "try:\n"
            "    shm.Segment.create(space.prefix + 'big', 64 << 20)\n"
            "except shm.SharedMemoryFull as exc:\n"
            "    print('ERROR', exc)\n"
            "print('LEFT', shm.list_segments())\n"
            "space.close()\n")
    done = _shm_limited(code, "8M")
    assert done.returncode == 0, done.stderr
    assert "ERROR /dev/shm is full: a segment of 64 MiB needs 64 MiB and /dev/shm has 8 MiB free" in done.stdout
    assert "'big'" not in done.stdout and "big']" not in done.stdout  # nothing half-made is left
    assert issubclass(shm.SharedMemoryFull, LimitReached)


def test_a_leak_check_counts_the_dead_runs_this_process_started_and_no_others(tmp_path):
    """Tests run in parallel processes: one test killing its own coordinator must not fail another's leak check,
    and a run this process started that died with its files must still fail its own."""
    import signal
    import subprocess
    import sys

    from cmpx.testing.leaks import segments
    from cmpx.transport import runspace

    code = ("import os, sys; from cmpx.transport.runspace import RunSpace; space = RunSpace(); "
            "open(os.path.join('/dev/shm', space.prefix + 'seg'), 'w').close(); print(space.prefix, flush=True); "
            "sys.stdin.read()")
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    prefix = child.stdout.readline().strip()
    try:
        assert os.getpid() in runspace.started_by(prefix)
        assert prefix + "seg" not in segments()  # alive: not a leak (yet)
        child.send_signal(signal.SIGKILL)
        child.wait()
        assert prefix + "seg" in segments()  # dead, and started here: a leak of this process's test
        # the same dead run, as a parallel test process sees it: started by someone else
        with open(runspace.lock_path(prefix), "w") as f:
            f.write("999999999 1\n")
        assert prefix + "seg" not in segments()
    finally:
        runspace.sweep_orphans()
    assert not os.path.exists(runspace.lock_path(prefix))


def test_freeing_a_range_gives_its_pages_back_and_starts_no_process(prefix):
    """free_range punches a hole (the pages read as zeros, the size stays) through libc's fallocate, found among
    the symbols already loaded: ctypes.util.find_library would run ldconfig in a subprocess in every worker, on
    the first inference's critical path."""
    code = ("import os, sys\n"
            "from cmpx.transport import shm\n"
            "def no_process(event, args):\n"
            "    if event in ('subprocess.Popen', 'os.posix_spawn', 'os.fork', 'os.exec'):\n"
            "        raise RuntimeError('started a process: ' + event)\n"
            "sys.addaudithook(no_process)\n"
            f"name = {prefix + 'f'!r}\n"
            "segment = shm.Segment.create(name, 64 * shm.PAGE)\n"
            "import numpy as np\n"
            "data = segment.view(np.dtype(np.uint8), (64 * shm.PAGE,), 0)\n"
            "data[:] = ord('x')\n"
            "before = os.stat(shm.path_of(name)).st_blocks\n"
            "shm.free_range(name, shm.PAGE // 2, 32 * shm.PAGE)\n"
            "after = os.stat(shm.path_of(name)).st_blocks\n"
            "data = data.tobytes()\n"
            "print(before > after, data[:shm.PAGE] == b'x' * shm.PAGE,\n"
            "      set(data[shm.PAGE:32 * shm.PAGE]) == {0},\n"
            "      data[32 * shm.PAGE:] == b'x' * (32 * shm.PAGE),\n"
            "      os.path.getsize(shm.path_of(name)) == 64 * shm.PAGE)\n"
            "del data\n"
            "segment.close()\n"
            "shm.unlink(name)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True"] * 5, done.stdout


def test_a_kept_mapping_is_populated_once_until_its_pages_are_released(prefix):
    # MADV_POPULATE_READ walks every page again even when all are mapped (~17 ms for 256 MiB): a mapping kept
    # across iterations populated each output again (bench/transport.py: 2.2x a memcpy where 1.5x was the target)
    name = f"{prefix}-populate"
    shm.Segment.create(name, 1 << 20).close()
    segment = shm.Segment.attach(name, populate=False)
    calls = []

    class Counting:  # the mapping, counting its madvise calls
        def __init__(self, mapping):
            self.mapping = mapping

        def madvise(self, *args):
            calls.append(args[0])
            return self.mapping.madvise(*args)

    mapping, segment._mapping = segment._mapping, Counting(segment._mapping)
    try:
        for _ in range(3):
            segment.populate_range(0, 1 << 20)
        segment.populate_range(4096, 8192)  # inside what is mapped
        assert calls.count(shm.MADV_POPULATE_READ) == 1
        segment.release_range(0, 1 << 20)  # dropped: the next read maps them again
        segment.populate_range(0, 1 << 20)
        assert calls.count(shm.MADV_POPULATE_READ) == 2
    finally:
        segment._mapping = mapping
        segment.close()
        shm.unlink(name)


def test_a_range_written_before_is_not_reserved_again_and_a_freed_one_is(prefix, monkeypatch):
    # reserving a range walks every page (15 ms for 256 MiB), also where an earlier inference wrote it all
    name = f"{prefix}-reserve"
    segment = shm.Segment.create(name, 1 << 20, reserve=False)
    reserved = []
    real = shm._reserve
    monkeypatch.setattr(shm, "_reserve", lambda fd, offset, nbytes, what: reserved.append(offset) or
                        real(fd, offset, nbytes, what))
    try:
        shm.reserve_range(name, 0, 1 << 20)
        segment.view(np.dtype(np.uint8), (1 << 20,), 0)[:] = 7
        shm.reserve_range(name, 0, 1 << 20)  # every page holds data: nothing to reserve
        assert reserved == [0]
        shm.free_range(name, 1 << 19, 4096)  # a page given back (a sliced run frees tensors)
        shm.reserve_range(name, 0, 1 << 20)
        assert reserved == [0, 0]
    finally:
        segment.close()
        shm.unlink(name)
