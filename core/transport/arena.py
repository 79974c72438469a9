"""Where tensors go in shared memory: the coordinator's input segments and each worker's output segments, both
rewritten in place from one iteration to the next, and a cache of mapped segments.

Tensors are packed into as few segments as possible, because every mapping holds a file descriptor (Python's mmap
keeps a duplicate of the one it maps): a mark-all run with thousands of tensors must not run out of descriptors.
A worker's outputs of one inference go into "chunks" (``<prefix>-<k>``): the first is as large as the previous
inference's outputs were, so after the first iteration one chunk usually holds them all. Large tensors start on a
page boundary, so that a reader can drop a tensor's pages once it is compared.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from cmpx.transport.shm import ALIGNMENT, PAGE, Segment, describe, free_range, layout, path_of, reserve_range, \
    unlink

if TYPE_CHECKING:
    from cmpx.transport.messages import TensorDescriptor

MIN_CHUNK = 64 << 10
PAGE_ALIGNED_FROM = 64 << 10  # tensors at least this large start on a page boundary


class MappingCache:
    """Keeps segments mapped from one iteration to the next (mapping and populating a large segment costs
    more than copying into it), up to ``budget`` bytes; beyond that, a released segment is unmapped, so that a
    run with many large tensors (mark all) holds only the ones in use."""

    def __init__(self, budget: int, writable: bool = False):
        self.budget = budget
        self.writable = writable
        self._kept: dict[str, Segment] = {}

    def get(self, name: str, populate: bool = True) -> Segment:
        segment = self._kept.pop(name, None)
        if segment is not None:
            try:
                current = os.stat(path_of(name))
            except FileNotFoundError:
                current = None
            if current is not None and current.st_ino == segment.inode and current.st_size == segment.size:
                return segment
            segment.close()
        return Segment.attach(name, writable=self.writable, populate=populate)

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


def reuse_or_create(name: str, size: int, cache: MappingCache | None = None, reserve: bool = True) -> Segment:
    """The segment ``name`` at ``size`` bytes: the existing one if it has that size (its pages are already
    allocated, so writing costs no page zeroing), else a new one (``reserve``: see ``Segment.create``)."""
    try:
        return Segment.create(name, size, reserve)
    except FileExistsError:
        segment = cache.get(name) if cache is not None else Segment.attach(name, writable=True)
        if segment.size == max(size, 1):
            return segment
        segment.close()
        unlink(name)
        return Segment.create(name, size, reserve)


class ReusedSegments:
    """The coordinator's input segments, one per name (one per iteration parity), rewritten in place."""

    def __init__(self) -> None:
        self._segments: dict[str, Segment] = {}

    def write(self, name: str, arrays: Mapping[str, np.ndarray]) -> list[TensorDescriptor]:
        offsets, total = layout(arrays.values())
        segment = self._segments.get(name)
        if segment is None or segment.size != max(total, 1):
            if segment is not None:
                segment.close()
                del self._segments[name]
            segment = self._segments[name] = reuse_or_create(name, total)
        descriptors: list[TensorDescriptor] = []
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
    """A worker's output segments for one inference. A backend may ``allocate`` an output's buffer up front and
    have its framework write into it (no copy at all); ``describe`` copies the other outputs in (one copy) and
    returns every descriptor. ``expected``: how many bytes the outputs took last time (the first chunk's size)."""

    def __init__(self, prefix: str, cache: MappingCache | None = None, expected: int = 0):
        self.prefix = prefix
        self.cache = cache
        self.expected = expected
        self._chunks: list[list[Any]] = []  # [segment, bytes used]
        self._allocated: dict[str, tuple[Segment, int, np.ndarray]] = {}
        self._needed = 0

    @property
    def used(self) -> int:
        """Bytes that hold every tensor placed so far, in one chunk whatever the alignment: the next inference's
        first chunk size."""
        return self._needed

    def _place(self, nbytes: int) -> tuple[Segment, int]:
        align = PAGE if nbytes >= PAGE_ALIGNED_FROM else ALIGNMENT
        self._needed += nbytes + align  # with the most padding the alignment could take
        if self._chunks:
            chunk = self._chunks[-1]
            start = -(-chunk[1] // align) * align
            if start + nbytes <= chunk[0].size:
                chunk[1] = start + nbytes
                reserve_range(chunk[0].name, start, nbytes)
                return chunk[0], start
        # Chunks grow ahead of need, but only the space tensors take is reserved (reserved pages are memory)
        size = max(nbytes, MIN_CHUNK, self.expected if not self._chunks else 2 * self._needed)
        segment = reuse_or_create(f"{self.prefix}-{len(self._chunks)}", size, self.cache, reserve=False)
        reserve_range(segment.name, 0, nbytes)
        self._chunks.append([segment, nbytes])
        return segment, 0

    def allocate(self, name: str, dtype: Any, shape: tuple[int, ...]) -> np.ndarray:
        dtype = np.dtype(dtype)
        segment, offset = self._place(int(np.prod(shape, dtype=np.int64)) * dtype.itemsize)
        view = segment.view(dtype, tuple(shape), offset)
        self._allocated[name] = (segment, offset, view)
        return view

    def describe(self, arrays: Mapping[str, np.ndarray]) -> list[TensorDescriptor]:
        descriptors: list[TensorDescriptor] = []
        for name, array in arrays.items():
            allocated = self._allocated.get(name)
            if allocated is not None and array is allocated[2]:
                descriptors.append(describe(name, allocated[0].name, allocated[1], array))
                continue
            segment, offset = self._place(array.nbytes)
            np.copyto(segment.view(array.dtype, array.shape, offset), array, casting="no")
            descriptors.append(describe(name, segment.name, offset, array))
        return descriptors

    def close(self) -> None:
        """Done with this inference's chunks: give back the space a chunk reserved beyond its last tensor (chunks
        grow ahead of need, and reserved pages are memory), and remove the chunks a previous inference used beyond
        these (the next inference sizes its first chunk to hold everything)."""
        chunks, self._chunks = self._chunks, []
        self._allocated.clear()
        for segment, used in chunks:
            if segment.size - used >= PAGE:
                free_range(segment.name, used, segment.size - used)
        stale = len(chunks)
        while chunks and unlink(f"{self.prefix}-{stale}"):
            stale += 1
        for segment, _ in chunks:
            if self.cache is not None:
                self.cache.put(segment)
            else:
                segment.close()
