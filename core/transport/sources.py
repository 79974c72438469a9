"""One backend's tensors of one iteration, as the coordinator reads them: live ones from the worker's shared
memory, saved ones from a saved run. Loaded one at a time, released as soon as they are compared, so that the
coordinator holds only the tensors being compared."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cmpx.transport import shm
from cmpx.transport.arena import MappingCache


class TensorSource:
    """``arrays``: a saved run's tensors (a mapping that loads each on access); ``descriptors``: where a worker
    left its outputs. A live tensor's segment is mapped when first needed (its pages populated only for that
    tensor), the tensor's pages are dropped once it is released, and the segments are handed back to
    ``mappings`` (kept mapped for the next iteration while they fit its budget) when the iteration is done.
    The segments stay for the worker to reuse two iterations later; the run's sweep removes them at the end."""

    def __init__(self, arrays: Mapping[str, Any] | None = None,
                 descriptors: Mapping[str, Mapping[str, Any]] | None = None, mappings: MappingCache | None = None):
        self._arrays = arrays if arrays is not None else {}
        self._loaded: dict[str, Any] = {}
        self._descriptors = dict(descriptors or {})
        self._segments: dict[str, shm.Segment] = {}
        self.mappings = mappings  # None: unmap each segment when the iteration is done
        self.names = list(self._arrays) or list(self._descriptors)

    def load(self, name: str) -> Any:
        """The tensor ``name`` (a numpy view); a ``cmpx.structured.Structured`` for a sequence, map or optional; a
        ``NotComparable`` for an output its backend returned in a form cmpx cannot compare."""
        if name not in self._descriptors:
            self._loaded[name] = self._arrays[name]
            return self._loaded[name]
        descriptor = self._descriptors[name]
        if "not_comparable" in descriptor:
            from cmpx.structured import NotComparable

            return NotComparable(str(descriptor["not_comparable"]))
        segment = self._segments.get(descriptor["segment"])
        if segment is None:
            segment = self.mappings.get(descriptor["segment"], populate=False) if self.mappings else \
                shm.Segment.attach(descriptor["segment"], populate=False)
            self._segments[segment.name] = segment
        segment.populate_range(int(descriptor["offset"]), shm.descriptor_bytes(descriptor))
        array = shm.read_tensors([descriptor], {segment.name: segment})[name]
        if "structure" in descriptor:
            from cmpx.structured import Structured

            return Structured(descriptor["structure"], array)
        return array

    def release(self, name: str) -> None:
        self._loaded.pop(name, None)
        descriptor = self._descriptors.get(name)
        if descriptor is not None and descriptor.get("segment") in self._segments:
            self._segments[descriptor["segment"]].release_range(int(descriptor["offset"]),
                                                               shm.descriptor_bytes(descriptor))

    def release_all(self) -> None:
        self._loaded.clear()
        segments, self._segments = self._segments, {}
        for segment in segments.values():
            if self.mappings is not None:
                self.mappings.put(segment)
            else:
                segment.close()

    @property
    def nbytes(self) -> int:
        return sum(shm.descriptor_bytes(d) for d in self._descriptors.values() if "segment" in d)
