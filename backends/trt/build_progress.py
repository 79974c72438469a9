"""TensorRT's build progress as one status line, kept without TensorRT: the builder reports nested phases
(``phase_start(name, parent, steps)``, ``step_complete(name, step)``, ``phase_finish(name)``), possibly from
several threads; the line shows the chain from the outermost phase to the newest one still running, e.g.
``Building engine 2/4 > Tactic selection 37/120``."""

from __future__ import annotations

import threading


class BuildPhases:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._phases: dict[str, tuple[str | None, int, int]] = {}  # name -> (parent, steps done, steps)

    def start(self, name: str, parent: str | None, steps: int) -> str:
        with self._lock:
            self._phases.pop(name, None)  # a name may be reused once its earlier phase has finished
            self._phases[name] = (parent or None, 0, max(int(steps), 0))
            return self._text()

    def step(self, name: str, step: int) -> str:
        with self._lock:
            if name in self._phases:
                parent, _, steps = self._phases[name]
                self._phases[name] = (parent, int(step) + 1, steps)
            return self._text()

    def finish(self, name: str) -> str:
        with self._lock:
            self._phases.pop(name, None)
            return self._text()

    def _text(self) -> str:
        if not self._phases:
            return ""
        chain: list[str] = []
        name: str | None = next(reversed(self._phases))
        while name is not None and name in self._phases and name not in chain:
            chain.append(name)
            name = self._phases[name][0]
        return " > ".join(f"{phase} {self._phases[phase][1]}/{self._phases[phase][2]}" for phase in reversed(chain))
