"""Turn the model's declared input shapes plus --input-shapes into the concrete shapes fed to backends.

Named (symbolic) dimensions are shared: a size given for ``batch`` through one input's shape, or by name
(``--input-shapes batch=4``), applies to every input that has a dimension named ``batch``, as the exporter meant.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from cmpx.argtypes import SHAPE_FORM, check_names
from cmpx.errors import UsageError
from cmpx.model.info import Dim, TensorSpec


def resolve_input_shapes(inputs: Sequence[TensorSpec], overrides: Mapping[str, tuple[int, ...]],
                         warn: Callable[[str], None], fill_dynamic: bool = True,
                         dims: Mapping[str, int] | None = None) -> list[TensorSpec]:
    """Return ``inputs`` with the shapes to feed.

    An override must name a model input and agree with its rank and static dimensions; ``dims`` sets named
    dimensions by name. Sizes given for one named dimension must agree (an error names both sources). With
    ``fill_dynamic`` (synthetic data), a dynamic dimension still unknown becomes 1 and ``warn(message)`` says so,
    naming the input and the dimension; otherwise (data from files or scripts) it stays open for the data.
    """
    check_names("--input-shapes", overrides, [spec.name for spec in inputs], "model inputs")
    for spec in inputs:
        if spec.name in overrides:
            _check_override(spec, overrides[spec.name])
    sizes = _named_sizes(inputs, overrides, dims or {})
    resolved, named_in_warnings = [], set()
    for spec in inputs:
        override = overrides.get(spec.name)
        if override is not None:
            resolved.append(replace(spec, shape=override))
            continue
        if spec.shape is None:
            if fill_dynamic:
                raise UsageError(f"input {spec.name} has an unknown rank; give its shape with --input-shapes "
                                 f"{spec.name}:[D0,D1,...]")
            resolved.append(spec)
            continue
        known = tuple(sizes.get(d, d) if isinstance(d, str) else d for d in spec.shape)
        if not fill_dynamic or all(isinstance(d, int) and d >= 0 for d in known):
            resolved.append(replace(spec, shape=known))
            continue
        shape = tuple(d if isinstance(d, int) and d >= 0 else 1 for d in known)
        _warn_dynamic(spec, known, shape, named_in_warnings, warn)
        resolved.append(replace(spec, shape=shape))
    return resolved


def _named_sizes(inputs: Sequence[TensorSpec], overrides: Mapping[str, tuple[int, ...]],
                 dims: Mapping[str, int]) -> dict[str, int]:
    """The size of each named dimension: given by name, or through the shape of an input that has it."""
    names = list(dict.fromkeys(d for spec in inputs if spec.shape for d in spec.shape if isinstance(d, str)))
    for name in dims:
        if name not in names:
            raise UsageError(f"--input-shapes {name}={dims[name]}: no input of the model has a dimension named "
                             f"{name!r}; its named dimensions are: {', '.join(names) or '(none)'}")
    sizes: dict[str, tuple[int, str]] = {name: (size, f"{name}={size}") for name, size in dims.items()}
    for spec in inputs:
        override = overrides.get(spec.name)
        if override is None or spec.shape is None:
            continue
        for declared, given in zip(spec.shape, override):
            if not isinstance(declared, str):
                continue
            source = f"{spec.name}:[{','.join(map(str, override))}]"
            if declared in sizes and sizes[declared][0] != given:
                raise UsageError(f"--input-shapes: {sizes[declared][1]} sets dimension {declared} to "
                                 f"{sizes[declared][0]}, but {source} sets it to {given}; inputs that share a "
                                 "dimension name must agree on its size")
            sizes.setdefault(declared, (given, source))
    return {name: size for name, (size, _) in sizes.items()}


def _warn_dynamic(spec: TensorSpec, known: tuple[Dim, ...], shape: tuple[int, ...], named_before: set[str],
                  warn: Callable[[str], None]) -> None:
    """Say which of the input's dimensions became 1, once per named dimension (the first input that has it)."""
    open_named = [d for d in dict.fromkeys(known) if isinstance(d, str)]
    unnamed = any(d is None or (isinstance(d, int) and d < 0) for d in known)
    if not unnamed and all(name in named_before for name in open_named):
        return  # every open dimension is named and was already reported with an earlier input
    named_before.update(open_named)
    example = f"{spec.name}:[{','.join(map(str, shape))}]"
    text = f"input {spec.name} has dynamic shape {spec.shape_text()}; using {list(shape)}. Set it with " \
           f"--input-shapes {example}"
    if open_named:
        text += (", or by name for every input that has " + ("it" if len(open_named) == 1 else "them") + ": "
                 f"--input-shapes {' '.join(f'{name}=1' for name in open_named)}")
    warn(text)


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
