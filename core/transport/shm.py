"""Named shared-memory segments (files in /dev/shm) and the tensor descriptors that point into them.

cmpx does not use multiprocessing.shared_memory: before Python 3.13 every process that merely attaches to a
segment registers it with its resource tracker, which may unlink it or warn at exit. Here ownership is plain:
every segment's name starts with its run's prefix (cmpx.transport.runspace), and the run sweeps the prefix on
every exit path.

A segment's space is reserved when it is made (posix_fallocate), so a full /dev/shm is an error naming it, the
size needed and the space left, never a SIGBUS when a page is first written.
"""

from __future__ import annotations

import errno
import functools
import mmap
import os
import stat
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from cmpx.dtypes import numpy_dtype
from cmpx.errors import LimitReached
from cmpx.memory import SHM_DIR, shm_free, size_text
from cmpx.transport.runspace import PREFIX

if TYPE_CHECKING:
    from cmpx.transport.messages import TensorDescriptor

ALIGNMENT = 64
PAGE = mmap.PAGESIZE
POPULATE = getattr(mmap, "MAP_POPULATE", 0)
MADV_POPULATE_READ = getattr(mmap, "MADV_POPULATE_READ", 22)  # Linux 5.14; older kernels answer EINVAL


class SharedMemoryFull(LimitReached):
    def __init__(self, needed: int, what: str):
        super().__init__(f"{SHM_DIR} is full: {what} needs {size_text(needed)} and {SHM_DIR} has "
                         f"{size_text(shm_free())} free; free space there, or give it more (docker run --shm-size=...)")


def too_many_open_files(error: OSError) -> LimitReached:
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return LimitReached(f"too many open files (the limit is {soft}; {error.strerror}); raise it with ulimit -n")


def path_of(name: str) -> str:
    if "/" in name or not name.startswith(PREFIX):
        raise ValueError(f"invalid segment name {name!r}")
    return os.path.join(SHM_DIR, name)


class Segment:
    """One mapped segment. Arrays made from it are views: no bytes are copied. (Each mapping holds a file
    descriptor of its own: Python's mmap keeps a duplicate; cmpx therefore packs tensors into few segments.)"""

    def __init__(self, name: str, mapping: mmap.mmap, size: int, inode: int = 0):
        self.name = name
        self.size = size
        self.inode = inode  # tells a mapping of a segment that was since replaced from a current one
        self._mapping = mapping
        self._populated: list[tuple[int, int]] = []  # page ranges mapped by populate_range and not released since

    @classmethod
    def create(cls, name: str, size: int, reserve: bool = True) -> Segment:
        """A new segment of ``size`` bytes, its space reserved (FileExistsError if the name is taken;
        SharedMemoryFull if /dev/shm cannot hold it). Without ``reserve`` nothing is reserved yet: whoever writes a
        range of it reserves that range first (``reserve_range``), so that space never written is never taken."""
        size = max(size, 1)
        path = path_of(name)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except OSError as exc:
            if exc.errno in (errno.EMFILE, errno.ENFILE):
                raise too_many_open_files(exc) from None
            raise
        try:
            if reserve:
                _reserve(fd, 0, size, f"a segment of {size_text(size)}")
            else:
                os.ftruncate(fd, size)
            mapping = _map(fd, size, mmap.PROT_READ | mmap.PROT_WRITE, 0)
            inode = os.fstat(fd).st_ino
        except BaseException:
            _unlink_quietly(path)
            raise
        finally:
            os.close(fd)
        return cls(name, mapping, size, inode)

    @classmethod
    def attach(cls, name: str, *, writable: bool = False, populate: bool = True) -> Segment:
        """Map an existing segment. With ``populate`` its pages are mapped up front (MAP_POPULATE): whoever reads
        all of it saves a fault per page; a reader of a few tensors of a large segment populates only those
        (``populate_range``)."""
        try:
            fd = os.open(path_of(name), (os.O_RDWR if writable else os.O_RDONLY) | os.O_NOFOLLOW)
        except OSError as exc:
            if exc.errno in (errno.EMFILE, errno.ENFILE):
                raise too_many_open_files(exc) from None
            raise
        try:
            status = os.fstat(fd)
            if not stat.S_ISREG(status.st_mode):
                raise ValueError(f"{name} is not a shared-memory segment")
            prot = mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0)
            mapping = _map(fd, status.st_size, prot, POPULATE if populate else 0)
        finally:
            os.close(fd)
        return cls(name, mapping, status.st_size, status.st_ino)

    def view(self, dtype: np.dtype, shape: tuple[int, ...], offset: int) -> np.ndarray:
        count = int(np.prod(shape, dtype=np.int64))
        if offset < 0 or offset + count * dtype.itemsize > self.size:
            raise ValueError(f"tensor of {count} x {dtype} at offset {offset} overruns segment {self.name}")
        return np.frombuffer(self._mapping, dtype=dtype, count=count, offset=offset).reshape(shape)

    def populate_range(self, offset: int, nbytes: int) -> None:
        """Map the pages of ``[offset, offset + nbytes)`` now, in one call rather than a fault per page."""
        start, end = _pages(offset, nbytes, inner=False)
        end = min(end, self.size)
        if end <= start or any(low <= start and end <= high for low, high in self._populated):
            return  # mapped already: a kept mapping's next iteration (MADV_POPULATE_READ walks every page again,
            # ~17 ms for 256 MiB even when all are mapped); a page taken away since is faulted in when read
        try:
            self._mapping.madvise(MADV_POPULATE_READ, start, end - start)
        except (OSError, ValueError):
            return  # an older kernel: the pages are faulted in as they are read
        self._populated.append((start, end))

    def release_range(self, offset: int, nbytes: int) -> None:
        """Drop this process's mappings of the whole pages inside ``[offset, offset + nbytes)``: the data stays in
        the segment, but no longer counts in this process's resident memory."""
        start, end = _pages(offset, nbytes, inner=True)
        if end > start and hasattr(mmap, "MADV_DONTNEED"):
            self._mapping.madvise(mmap.MADV_DONTNEED, start, end - start)
            self._populated.clear()

    def drop_pages(self) -> None:
        """Drop this process's page mappings of the whole segment (the data stays)."""
        self.release_range(0, self.size)

    def close(self) -> None:
        """Unmap; if numpy views are still alive the mapping is released when the last one goes."""
        try:
            self._mapping.close()
        except BufferError:
            pass


def _reserve(fd: int, offset: int, nbytes: int, what: str) -> None:
    try:
        os.posix_fallocate(fd, offset, nbytes)
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EFBIG, errno.ENOMEM):
            raise
        raise SharedMemoryFull(nbytes, what) from None


def reserve_range(name: str, offset: int, nbytes: int) -> None:
    """Reserve ``[offset, offset + nbytes)`` of segment ``name`` (made with ``reserve=False``) before writing it:
    SharedMemoryFull now rather than a SIGBUS at the first write."""
    if nbytes <= 0:
        return
    fd = os.open(path_of(name), os.O_RDWR | os.O_NOFOLLOW)
    try:
        if not _holds_data(fd, offset, nbytes):  # a range written before needs nothing: reserving it again
            _reserve(fd, offset, nbytes, f"a tensor of {size_text(nbytes)}")  # walks every page (15 ms a 256 MiB)
    finally:
        os.close(fd)


def _holds_data(fd: int, offset: int, nbytes: int) -> bool:
    """Whether every page of ``[offset, offset + nbytes)`` holds written data (no hole: writing it cannot fail for
    lack of space). A page reserved but never written counts as a hole, as does everything where lseek cannot say."""
    try:
        return os.lseek(fd, offset, os.SEEK_HOLE) >= offset + nbytes
    except (OSError, AttributeError):
        return False


def _map(fd: int, size: int, prot: int, flags: int) -> mmap.mmap:
    try:
        return mmap.mmap(fd, size, flags=mmap.MAP_SHARED | flags, prot=prot)
    except OSError as exc:
        if exc.errno in (errno.EMFILE, errno.ENFILE):
            raise too_many_open_files(exc) from None
        if exc.errno == errno.ENOMEM:
            raise LimitReached(f"cannot map {size_text(size)} of shared memory: out of memory or address space")
        raise


def _pages(offset: int, nbytes: int, inner: bool) -> tuple[int, int]:
    """The page-aligned range inside (``inner``) or around ``[offset, offset + nbytes)``."""
    if inner:
        return -(-offset // PAGE) * PAGE, (offset + nbytes) // PAGE * PAGE
    return offset // PAGE * PAGE, -(-(offset + nbytes) // PAGE) * PAGE


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def unlink(name: str) -> bool:
    try:
        os.unlink(path_of(name))
        return True
    except FileNotFoundError:
        return False


_PUNCH_HOLE = 0x02 | 0x01  # FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE


def free_range(name: str, offset: int, nbytes: int) -> None:
    """Give back the memory of the whole pages inside ``[offset, offset + nbytes)`` of segment ``name``, in every
    process that maps it (the pages read as zeros afterwards): a sliced run frees each tensor once it is compared
    and no later slice reads it, while other tensors of its segment are still needed. Linux only; elsewhere, and
    for a segment already gone, nothing happens."""
    start, end = _pages(offset, nbytes, inner=True)
    if end <= start:
        return
    try:
        fd = os.open(path_of(name), os.O_RDWR | os.O_NOFOLLOW)
    except FileNotFoundError:
        return
    try:
        _fallocate()(fd, _PUNCH_HOLE, start, end - start)
    finally:
        os.close(fd)


def discard(name: str) -> None:
    """Free all of segment ``name`` (also in processes that still map it) and remove it."""
    try:
        size = os.stat(path_of(name)).st_size
    except FileNotFoundError:
        return
    free_range(name, 0, -(-size // PAGE) * PAGE)
    unlink(name)


@functools.cache
def _fallocate() -> Any:
    """libc's fallocate(fd, mode, offset, length), or a function doing nothing where there is none.

    Looked up among the symbols already loaded into this process (libc is, wherever Python runs on Linux), never
    with ``ctypes.util.find_library``: that runs ``/sbin/ldconfig -p`` (and may try gcc) in a subprocess, which cost
    every worker 10-30 ms on the first inference's critical path."""
    import ctypes

    try:
        function = ctypes.CDLL(None, use_errno=True).fallocate
    except (OSError, AttributeError):
        return lambda *args: 0
    function.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    return function


def list_segments(prefix: str = PREFIX) -> list[str]:
    try:
        return sorted(n for n in os.listdir(SHM_DIR) if n.startswith(prefix))
    except FileNotFoundError:
        return []


# -- tensors in segments -----------------------------------------------------------------------------


def layout(arrays: Iterable[np.ndarray]) -> tuple[list[int], int]:
    """Offsets (aligned to 64 bytes) for packing ``arrays`` one after another, and the total size."""
    offsets, end = [], 0
    for array in arrays:
        start = -(-end // ALIGNMENT) * ALIGNMENT
        offsets.append(start)
        end = start + array.nbytes
    return offsets, end


def describe(name: str, segment: str, offset: int, array: np.ndarray) -> TensorDescriptor:
    return {"name": name, "segment": segment, "offset": offset, "dtype": array.dtype.name,
            "shape": list(array.shape)}


def descriptor_bytes(descriptor: Mapping[str, Any]) -> int:
    return int(np.prod(descriptor["shape"], dtype=np.int64)) * numpy_dtype(descriptor["dtype"]).itemsize


def read_tensors(descriptors: Iterable[Mapping[str, Any]], segments: Mapping[str, Segment]) -> dict[str, np.ndarray]:
    """Views of the tensors that ``descriptors`` point to in the already attached ``segments``."""
    return {d["name"]: segments[d["segment"]].view(numpy_dtype(d["dtype"]), tuple(d["shape"]), int(d["offset"]))
            for d in descriptors}
