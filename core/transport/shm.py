"""Named shared-memory segments (files in /dev/shm) and the tensor descriptors that point into them.

cmpx does not use multiprocessing.shared_memory: before Python 3.13 every process that merely attaches to a
segment registers it with its resource tracker, which may unlink it or warn at exit. Here ownership is plain:
the coordinator names every segment with its run prefix, unlinks each one when done, and sweeps the prefix on
every exit path; a later run removes segments whose coordinator process is dead.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from cmpx.dtypes import numpy_dtype

SHM_DIR = "/dev/shm"
POPULATE = getattr(mmap, "MAP_POPULATE", 0)
PREFIX = "cmpx-"
ALIGNMENT = 64


def new_run_prefix() -> str:
    """A prefix unique to this coordinator process and run: ``cmpx-<pid>-<random>-``."""
    return f"{PREFIX}{os.getpid()}-{os.urandom(4).hex()}-"


def _path(name: str) -> str:
    if "/" in name or not name.startswith(PREFIX):
        raise ValueError(f"invalid segment name {name!r}")
    return os.path.join(SHM_DIR, name)


class Segment:
    """One mapped segment. Arrays made from it are views: no bytes are copied."""

    def __init__(self, name: str, mapping: mmap.mmap, size: int, inode: int = 0):
        self.name = name
        self.size = size
        self.inode = inode  # tells a mapping of a segment that was since replaced from a current one
        self._mapping = mapping

    @classmethod
    def create(cls, name: str, size: int) -> Segment:
        """A new segment of ``size`` bytes (FileExistsError if the name is taken)."""
        fd = os.open(_path(name), os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.ftruncate(fd, max(size, 1))
            mapping = mmap.mmap(fd, max(size, 1))
            inode = os.fstat(fd).st_ino
        finally:
            os.close(fd)
        return cls(name, mapping, max(size, 1), inode)

    @classmethod
    def attach(cls, name: str, *, writable: bool = False) -> Segment:
        """Map an existing segment. Its pages are mapped up front (MAP_POPULATE where Linux has it): whoever
        attaches reads or writes all of it, and one populate call is far cheaper than a fault per page."""
        fd = os.open(_path(name), os.O_RDWR if writable else os.O_RDONLY)
        try:
            status = os.fstat(fd)
            prot = mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0)
            mapping = mmap.mmap(fd, status.st_size, flags=mmap.MAP_SHARED | POPULATE, prot=prot)
        finally:
            os.close(fd)
        return cls(name, mapping, status.st_size, status.st_ino)

    def view(self, dtype: np.dtype, shape: tuple[int, ...], offset: int) -> np.ndarray:
        count = int(np.prod(shape, dtype=np.int64))
        if offset < 0 or offset + count * dtype.itemsize > self.size:
            raise ValueError(f"tensor of {count} x {dtype} at offset {offset} overruns segment {self.name}")
        return np.frombuffer(self._mapping, dtype=dtype, count=count, offset=offset).reshape(shape)

    def drop_pages(self) -> None:
        """Drop this process's page mappings (the data stays in the segment): the workers read the inputs, the
        coordinator needs not count them in its resident memory until it writes the next ones."""
        if hasattr(mmap, "MADV_DONTNEED"):
            self._mapping.madvise(mmap.MADV_DONTNEED)

    def close(self) -> None:
        """Unmap; if numpy views are still alive the mapping is released when the last one goes."""
        try:
            self._mapping.close()
        except BufferError:
            pass


def unlink(name: str) -> bool:
    try:
        os.unlink(_path(name))
        return True
    except FileNotFoundError:
        return False


def list_segments(prefix: str = PREFIX) -> list[str]:
    try:
        return sorted(n for n in os.listdir(SHM_DIR) if n.startswith(prefix))
    except FileNotFoundError:
        return []


def sweep(prefix: str) -> list[str]:
    """Unlink every segment whose name starts with ``prefix``; return the names removed."""
    if not prefix.startswith(PREFIX) or len(prefix) <= len(PREFIX):
        raise ValueError(f"refusing to sweep with prefix {prefix!r}")
    return [name for name in list_segments(prefix) if unlink(name)]


def sweep_orphans() -> list[str]:
    """Unlink segments left by cmpx runs whose coordinator process no longer exists."""
    removed = []
    for name in list_segments():
        pid_text = name[len(PREFIX):].split("-", 1)[0]
        if pid_text.isdigit() and not process_alive(int(pid_text)) and unlink(name):
            removed.append(name)
    return removed


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# -- tensors in segments -----------------------------------------------------------------------------


def layout(arrays: Iterable[np.ndarray]) -> tuple[list[int], int]:
    """Offsets (aligned to 64 bytes) for packing ``arrays`` one after another, and the total size."""
    offsets, end = [], 0
    for array in arrays:
        start = -(-end // ALIGNMENT) * ALIGNMENT
        offsets.append(start)
        end = start + array.nbytes
    return offsets, end


class MappingCache:
    """Keeps segments mapped from one iteration to the next (mapping and populating a large segment costs
    more than copying into it), up to ``budget`` bytes; beyond that, a released segment is unmapped, so that a
    run with many large tensors (mark all) holds only the ones in use."""

    def __init__(self, budget: int, writable: bool = False):
        self.budget = budget
        self.writable = writable
        self._kept: dict[str, Segment] = {}

    def get(self, name: str) -> Segment:
        segment = self._kept.pop(name, None)
        if segment is not None:
            try:
                current = os.stat(_path(name))
            except FileNotFoundError:
                current = None
            if current is not None and current.st_ino == segment.inode and current.st_size == segment.size:
                return segment
            segment.close()
        return Segment.attach(name, writable=self.writable)

    def put(self, segment: Segment) -> None:
        """Done with ``segment`` for now: keep it mapped if the budget allows, else unmap it."""
        if sum(s.size for s in self._kept.values()) + segment.size <= self.budget:
            self._kept[segment.name] = segment
        else:
            segment.close()

    def close(self) -> None:
        for segment in self._kept.values():
            segment.close()
        self._kept.clear()


def _reuse_or_create(name: str, size: int, cache: MappingCache | None = None) -> Segment:
    """The segment ``name`` at ``size`` bytes: the existing one if it has that size (its pages are already
    allocated, so writing costs no page zeroing), else a new one."""
    try:
        return Segment.create(name, size)
    except FileExistsError:
        segment = cache.get(name) if cache is not None else Segment.attach(name, writable=True)
        if segment.size == max(size, 1):
            return segment
        segment.close()
        unlink(name)
        return Segment.create(name, size)


class ReusedSegments:
    """The coordinator's input segments, one per name, rewritten in place from one iteration to the next."""

    def __init__(self) -> None:
        self._segments: dict[str, Segment] = {}

    def write(self, name: str, arrays: Mapping[str, np.ndarray]) -> list[dict[str, Any]]:
        offsets, total = layout(arrays.values())
        segment = self._segments.get(name)
        if segment is None or segment.size != max(total, 1):
            if segment is not None:
                segment.close()
            segment = self._segments[name] = _reuse_or_create(name, total)
        descriptors = []
        for (tensor, array), offset in zip(arrays.items(), offsets):
            np.copyto(segment.view(array.dtype, array.shape, offset), array, casting="no")
            descriptors.append(describe(tensor, name, offset, array))
        segment.drop_pages()
        return descriptors

    def close(self) -> None:
        for segment in self._segments.values():
            segment.close()
        self._segments.clear()


class Allocations:
    """A worker's output segments for one inference: one per tensor, named ``<prefix>-<k>``, so that the
    coordinator can read, compare and release the tensors one at a time.

    A backend may ``allocate`` an output's buffer up front and have its framework write into it (no copy at
    all); ``describe`` copies the other outputs into new segments (one copy) and returns every descriptor.
    """

    def __init__(self, prefix: str, cache: MappingCache | None = None):
        self.prefix = prefix
        self.cache = cache
        self._count = 0
        self._allocated: dict[str, tuple[Segment, np.ndarray]] = {}
        self._written: list[Segment] = []

    def _segment(self, nbytes: int) -> Segment:
        segment = _reuse_or_create(f"{self.prefix}-{self._count}", nbytes, self.cache)
        self._count += 1
        return segment

    def allocate(self, name: str, dtype: Any, shape: tuple[int, ...]) -> np.ndarray:
        dtype = np.dtype(dtype)
        segment = self._segment(int(np.prod(shape, dtype=np.int64)) * dtype.itemsize)
        view = segment.view(dtype, tuple(shape), 0)
        self._allocated[name] = (segment, view)
        return view

    def describe(self, arrays: Mapping[str, np.ndarray]) -> list[dict[str, Any]]:
        descriptors = []
        for name, array in arrays.items():
            allocated = self._allocated.get(name)
            if allocated is not None and array is allocated[1]:
                descriptors.append(describe(name, allocated[0].name, 0, array))
                continue
            segment = self._segment(array.nbytes)
            self._written.append(segment)
            np.copyto(segment.view(array.dtype, array.shape, 0), array, casting="no")
            descriptors.append(describe(name, segment.name, 0, array))
        return descriptors

    def close(self) -> None:
        segments = [segment for segment, _ in self._allocated.values()] + self._written
        self._allocated.clear()
        self._written.clear()
        for segment in segments:
            if self.cache is not None:
                self.cache.put(segment)
            else:
                segment.close()


def describe(name: str, segment: str, offset: int, array: np.ndarray) -> dict[str, Any]:
    return {"name": name, "segment": segment, "offset": offset, "dtype": array.dtype.name,
            "shape": list(array.shape)}


def read_tensors(descriptors: Iterable[Mapping[str, Any]], segments: Mapping[str, Segment]) -> dict[str, np.ndarray]:
    """Views of the tensors that ``descriptors`` point to in the already attached ``segments``."""
    return {d["name"]: segments[d["segment"]].view(numpy_dtype(d["dtype"]), tuple(d["shape"]), int(d["offset"]))
            for d in descriptors}
