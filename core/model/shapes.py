"""Turn the model's declared input shapes plus --input-shapes into the concrete shapes fed to backends."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from cmpx.argtypes import SHAPE_FORM, check_names
from cmpx.errors import UsageError
from cmpx.model.info import TensorSpec


def resolve_input_shapes(inputs: Sequence[TensorSpec], overrides: Mapping[str, tuple[int, ...]],
                         warn, fill_dynamic: bool = True) -> list[TensorSpec]:
    """Return ``inputs`` with the shapes to feed.

    An override must name a model input and agree with its rank and static dimensions. With
    ``fill_dynamic`` (synthetic data), a dynamic dimension without an override becomes 1 and ``warn(message)``
    says so, naming the input; otherwise (data from files or scripts) it stays open for the data to fill.
    """
    check_names("--input-shapes", overrides, [spec.name for spec in inputs], "model inputs")
    resolved = []
    for spec in inputs:
        override = overrides.get(spec.name)
        if override is not None:
            _check_override(spec, override)
            resolved.append(replace(spec, shape=override))
        elif not fill_dynamic or spec.is_static:
            resolved.append(spec)
        elif spec.shape is None:
            raise UsageError(f"input {spec.name} has an unknown rank; give its shape with --input-shapes "
                             f"{spec.name}:[D0,D1,...]")
        else:
            shape = tuple(d if isinstance(d, int) and d >= 0 else 1 for d in spec.shape)
            example = f"{spec.name}:[{','.join(map(str, shape))}]"
            warn(f"input {spec.name} has dynamic shape {spec.shape_text()}; using {list(shape)}. "
                 f"Set it with --input-shapes {example}")
            resolved.append(replace(spec, shape=shape))
    return resolved


def _check_override(spec: TensorSpec, shape: tuple[int, ...]) -> None:
    if spec.shape is None:
        return
    if len(shape) != len(spec.shape):
        raise UsageError(f"--input-shapes: {spec.name} has rank {len(spec.shape)} {spec.shape_text()} in the "
                         f"model, but {list(shape)} has rank {len(shape)}; the accepted form is {SHAPE_FORM}")
    for axis, (declared, given) in enumerate(zip(spec.shape, shape)):
        if isinstance(declared, int) and declared != given:
            raise UsageError(f"--input-shapes: {spec.name} dimension {axis} is fixed to {declared} in the model "
                             f"{spec.shape_text()}, but {given} was given; only dynamic dimensions can be set")
