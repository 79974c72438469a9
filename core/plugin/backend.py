"""The base class every backend implements. It runs inside a worker process, never in the coordinator."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    from cmpx.model.info import TensorSpec


class Backend:
    """One inference framework, driven by cmpx inside its own worker process.

    The smallest backend implements :meth:`load` and :meth:`infer`. ``self.options`` holds the values of
    the options the backend declared when it was registered (``--<backend>-<option>`` on the command line),
    keyed by option name. A backend registered with ``supports_marking=True`` finds in ``self.marked``, before
    :meth:`load`, the names of intermediate tensors to return from :meth:`infer` besides the model's outputs
    (``--onnx-outputs``, ``--mark-all``); :func:`cmpx.exposed_model` makes the ONNX graph that does so.
    """

    def __init__(self, options: Mapping[str, Any] | None = None):
        self.options: dict[str, Any] = dict(options or {})
        self.marked: Sequence[str] = ()
        # Call self.progress("building engine 3/7") during a long load or inference: the text shows on the
        # terminal's status line next to the backend's name (cheap to call often: the worker sends at most
        # ten updates a second).
        self.progress: Callable[[str], None] = lambda text: None

    def load(self, model_path: str) -> None:
        """Load (and build, compile...) the model at ``model_path``; called once before any inference."""
        raise NotImplementedError(f"{type(self).__name__} does not implement load()")

    def infer(self, feeds: dict[str, Any]) -> dict[str, Any]:
        """Run one inference. ``feeds`` maps input names to read-only numpy arrays; return output
        name -> numpy array. The returned arrays are copied into shared memory by the worker."""
        raise NotImplementedError(f"{type(self).__name__} does not implement infer()")

    def infer_into(self, feeds: dict[str, Any], allocate: Callable[[str, Any, tuple[int, ...]], np.ndarray]
                   ) -> dict[str, Any]:
        """Optional: like :meth:`infer`, but an output may be written straight into shared memory.
        ``allocate(name, dtype, shape)`` returns a writable numpy array in a segment the coordinator reads;
        return that very array for the output and the worker copies nothing. The default calls :meth:`infer`."""
        return self.infer(feeds)

    def describe(self) -> tuple[Sequence[TensorSpec], Sequence[TensorSpec]]:
        """The loaded model's inputs and outputs, as ``cmpx.TensorSpec`` (name, numpy dtype name, shape with
        ``None`` or a name for dynamic dimensions). Called after :meth:`load`, only for a model in one of the
        ``model_formats`` the backend registered: cmpx reads ONNX models itself, but learns what a model in a
        backend's own format (a TensorRT engine, an OpenVINO IR) takes and returns from the backend."""
        raise NotImplementedError(f"{type(self).__name__} does not implement describe()")

    def framework_version(self) -> str | None:
        """Optional: the version of the framework this backend runs (``onnxruntime.__version__``), or None if it
        cannot tell. Asked once after :meth:`load`; the reports show it next to the backend's name, so that a
        report says which versions were compared (``--backend onnxrt@/opt/ort-1.20/bin/python``)."""
        return None

    def close(self) -> None:
        """Release framework resources. Called once, when the run ends normally."""
