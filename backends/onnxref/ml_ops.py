"""The ai.onnx.ml operators the reference evaluator lacks (onnx 1.23): ZipMap, CastMap and CategoryMapper, given
to it through ``new_ops`` so that scikit-learn models (whose classifiers end in ZipMap) have a CPU reference.

Written from the operator specifications (onnx/docs/Operators-ml.md), as plain numpy.
"""

from __future__ import annotations

import numpy as np
from onnx.reference.op_run import OpRun
from onnx.reference.ops.aionnxml._op_run_aionnxml import OpRunAiOnnxMl


class ZipMap(OpRunAiOnnxMl):
    """Each row of a [N, C] (or [C]) float tensor as a map from the C class labels to its values: a sequence of
    N maps."""

    def _run(self, X, classlabels_int64s=None, classlabels_strings=None):  # noqa: N803 - the spec's names
        labels = classlabels_int64s if classlabels_int64s is not None else classlabels_strings
        if labels is None:
            raise ValueError("ZipMap needs classlabels_int64s or classlabels_strings")
        labels = [int(label) for label in labels] if classlabels_int64s is not None else \
            [label.decode() if isinstance(label, bytes) else str(label) for label in labels]
        rows = np.asarray(X)
        rows = rows.reshape(1, -1) if rows.ndim == 1 else rows
        if rows.ndim != 2 or rows.shape[1] != len(labels):
            raise ValueError(f"ZipMap: input of shape {list(np.shape(X))} does not fit {len(labels)} class labels")
        return ([dict(zip(labels, row)) for row in rows],)


class CastMap(OpRunAiOnnxMl):
    """A map from int64 keys to values as a [1, N] tensor of its values in ascending key order (DENSE), or of
    ``max_map`` slots indexed by key, missing keys 0 (SPARSE); cast to float, int64 or string (printed with six
    decimals, as ONNX Runtime prints them: the spec does not say)."""

    def _run(self, X, cast_to=None, map_form=None, max_map=None):  # noqa: N803
        cast_to = _text(cast_to) or "TO_FLOAT"
        map_form = _text(map_form) or "DENSE"
        types = {"TO_FLOAT": np.float32, "TO_INT64": np.int64, "TO_STRING": np.str_}
        if cast_to not in types:
            raise ValueError(f"CastMap: unknown cast_to {cast_to!r}")
        keys = sorted(int(k) for k in X)
        if map_form == "DENSE":
            values = [X[k] for k in keys]
        elif map_form == "SPARSE":
            size = int(max_map if max_map is not None else 1)
            if any(not 0 <= k < size for k in keys):
                raise ValueError(f"CastMap: SPARSE keys must lie in [0, {size - 1}]")
            values = [X.get(k, 0) for k in range(size)]
        else:
            raise ValueError(f"CastMap: unknown map_form {map_form!r}")
        kind = types[cast_to]
        out = np.array([f"{float(v):f}" for v in values] if kind is np.str_ else values).astype(kind)  # as ORT
        return (out.reshape(1, -1),)


class CategoryMapper(OpRunAiOnnxMl):
    """Strings to int64 or int64 to strings through two parallel lists; unknown values become the default."""

    def _run(self, X, cats_int64s=None, cats_strings=None, default_int64=None, default_string=None):  # noqa: N803
        numbers = [int(v) for v in (cats_int64s if cats_int64s is not None else [])]
        words = [w.decode() if isinstance(w, bytes) else str(w) for w in (cats_strings or [])]
        array = np.asarray(X)
        if array.dtype.kind in "iu":
            to_word = dict(zip(numbers, words))
            unknown_word = _text(default_string) if default_string is not None else "_Unused"
            out = np.array([to_word.get(int(v), unknown_word) for v in array.reshape(-1)], dtype=object)
        else:
            to_number = dict(zip(words, numbers))
            unknown_number = int(default_int64) if default_int64 is not None else -1
            out = np.array([to_number.get(str(v), unknown_number) for v in array.reshape(-1)], dtype=np.int64)
        return (out.reshape(array.shape),)


def _text(value) -> str | None:
    return value.decode() if isinstance(value, bytes) else value


NEW_OPS: list[type[OpRun]] = [ZipMap, CastMap, CategoryMapper]
