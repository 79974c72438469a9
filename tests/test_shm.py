import os
import subprocess
import sys

import numpy as np
import pytest

from cmpx.transport import shm
from cmpx.dtypes import ONNX_TO_NUMPY, numpy_dtype


@pytest.fixture
def prefix():
    prefix = shm.new_run_prefix()
    yield prefix
    shm.sweep(prefix)


@pytest.mark.parametrize("dtype", sorted(set(ONNX_TO_NUMPY.values())))
def test_tensors_round_trip_as_views_for_every_dtype(prefix, dtype):
    arrays = {"a": np.arange(12).reshape(3, 4).astype(numpy_dtype(dtype)),
              "b": np.ones((0, 5), dtype=numpy_dtype(dtype)), "c": np.float32(2.5).reshape(())}
    writer = shm.ReusedSegments()
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
    writer = shm.ReusedSegments()
    [descriptor] = writer.write(prefix + "x", {"a": np.zeros(4, np.float32)})
    descriptor["shape"] = [1000]
    segment = shm.Segment.attach(prefix + "x")
    with pytest.raises(ValueError, match="overruns"):
        shm.read_tensors([descriptor], {segment.name: segment})
    segment.close()
    writer.close()


def test_sweep_removes_only_its_own_prefix(prefix):
    other = shm.new_run_prefix()
    shm.Segment.create(prefix + "a", 8).close()
    shm.Segment.create(other + "b", 8).close()
    assert shm.sweep(prefix) == [prefix + "a"]
    assert shm.list_segments(other) == [other + "b"]
    shm.sweep(other)


def test_orphans_of_dead_coordinators_are_swept():
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    orphan = f"cmpx-{dead.stdout.strip()}-deadbeef-in0"
    shm.Segment.create(orphan, 8).close()
    mine = shm.new_run_prefix() + "in0"
    shm.Segment.create(mine, 8).close()
    try:
        assert orphan in shm.sweep_orphans()
        assert os.path.exists(os.path.join(shm.SHM_DIR, mine))
    finally:
        shm.unlink(mine)
        shm.unlink(orphan)


def test_names_outside_the_cmpx_namespace_are_refused():
    with pytest.raises(ValueError):
        shm.Segment.create("../etc/x", 1)
    with pytest.raises(ValueError):
        shm.sweep("cmpx-")


def test_segments_are_rewritten_in_place_and_replaced_when_the_size_changes(prefix):
    writer = shm.ReusedSegments()
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
    cache = shm.MappingCache(1 << 20)
    shm.Segment.create(prefix + "o", 8).close()
    old = cache.get(prefix + "o")
    cache.put(old)
    shm.unlink(prefix + "o")
    shm.Segment.create(prefix + "o", 16).close()  # a worker replaced it with a bigger one
    fresh = cache.get(prefix + "o")
    assert fresh is not old and fresh.size == 16
    cache.put(fresh)
    cache.close()
