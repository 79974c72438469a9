"""What a saved file holds once opened: sources (a backend's outputs, or a stream of inputs) of iterations,
each loaded only when asked for, so that no more than one iteration's tensors need to be in memory."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

Tensors = Mapping[str, Any]  # name -> numpy array


@dataclass
class SavedSource:
    name: str  # the backend that produced it, or "inputs"
    loaders: list[Callable[[], Tensors]] = field(default_factory=list)  # one per iteration
    digests: list[str | None] = field(default_factory=list)  # digest of the inputs of each iteration
    about: dict[str, Any] | None = None  # what made these outputs (framework version, Python), where saved

    def __len__(self) -> int:
        return len(self.loaders)

    def load(self, iteration: int) -> Tensors:
        return self.loaders[iteration]()


@dataclass
class SavedFile:
    path: str
    kind: str  # "inputs" or "outputs"
    sources: list[SavedSource]
    complete: bool = True  # False for a cmpx run whose writer did not finish (interrupted, or a full disk)
