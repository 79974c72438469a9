"""Turn the model's declared input shapes plus --input-shapes into the concrete shapes fed to backends.

Named (symbolic) dimensions are shared: a size given for ``batch`` through one input's shape, or by name
(``--input-shapes batch=4``), applies to every input that has a dimension named ``batch``, as the exporter meant.
A dimension written as an expression of names (``past_sequence_length + 1``) takes the size the expression gives
(cmpx.model.dimension_sizes); with synthetic data, a name nothing sets takes its conventional size, else 1.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from cmpx.options.argtypes import SHAPE_FORM, check_names
from cmpx.errors import UsageError
from cmpx.model.dimension_sizes import BATCH, DECODING, PAST, TOTAL, convention_of, decodes, evaluate, \
    is_expression, names_in, solve
from cmpx.model.info import Dim, TensorSpec


def resolve_input_shapes(inputs: Sequence[TensorSpec], overrides: Mapping[str, tuple[int, ...]],
                         warn: Callable[[str], None], fill_dynamic: bool = True,
                         dims: Mapping[str, int] | None = None) -> list[TensorSpec]:
    """Return ``inputs`` with the shapes to feed.

    An override must name a model input and agree with its rank and static dimensions; ``dims`` sets named
    dimensions by name. Sizes given for one named dimension must agree (an error names both sources). With
    ``fill_dynamic`` (synthetic data), a dynamic dimension still unknown gets a size (its convention's, else 1),
    ``warn(message)`` says so, naming the input and the dimension, and the input's ``chosen`` holds the
    --input-shapes words that set what cmpx chose; otherwise (data from files or scripts) it stays open for the data.
    """
    check_names("--input-shapes", overrides, [spec.name for spec in inputs], "model inputs")
    for spec in inputs:
        if spec.name in overrides:
            _check_override(spec, overrides[spec.name])
    sizes = _named_sizes(inputs, overrides, dims or {})
    decoding = decodes(_plain_names(inputs))
    chosen = _chosen_sizes(inputs, overrides, sizes, decoding) if fill_dynamic else {}
    every = {**chosen, **sizes}
    _check_expressions(inputs, overrides, every)
    resolved: list[TensorSpec] = []
    named_in_warnings: set[str] = set()
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
        known = tuple(_size(d, sizes) for d in spec.shape)
        if not fill_dynamic or all(isinstance(d, int) and d >= 0 for d in known):
            resolved.append(replace(spec, shape=known))
            continue
        shape = tuple(_fed_size(d, every) for d in known)
        words = _warn_dynamic(spec, known, shape, chosen, every, decoding, named_in_warnings, warn)
        resolved.append(replace(spec, shape=shape, chosen=words))
    return resolved


def _size(dimension: Dim, sizes: Mapping[str, int]) -> Dim:
    """A dimension's size from ``sizes`` (by name, or by evaluating its expression), else the dimension itself."""
    if not isinstance(dimension, str):
        return dimension
    if dimension in sizes:
        return sizes[dimension]
    value = evaluate(dimension, sizes) if is_expression(dimension) else None
    return dimension if value is None else value


def _fed_size(dimension: Dim, sizes: Mapping[str, int]) -> int:
    """What a dimension still open is fed: its size from ``sizes`` (by name or expression), else 1."""
    size = _size(dimension, sizes) if isinstance(dimension, str) else dimension
    return size if isinstance(size, int) and size >= 0 else 1


def _plain_names(inputs: Sequence[TensorSpec]) -> list[str]:
    """The names of the inputs' named dimensions, those inside expressions included, in order."""
    names: list[str] = []
    for spec in inputs:
        for d in spec.shape or ():
            if isinstance(d, str):
                names += names_in(d) if is_expression(d) else [d]
    return list(dict.fromkeys(names))


def _chosen_sizes(inputs: Sequence[TensorSpec], overrides: Mapping[str, tuple[int, ...]],
                  sizes: Mapping[str, int], decoding: bool) -> dict[str, int]:
    """The sizes cmpx chooses for the plain names nothing sets, in order: a convention's (of a model that
    ``decoding``: cmpx.model.dimension_sizes.decodes), else 1."""
    chosen: dict[str, int] = {}
    for spec in inputs:
        if spec.name in overrides or spec.shape is None:
            continue
        for d in spec.shape:
            if not isinstance(d, str) or d in sizes:
                continue
            for name in (names_in(d) if is_expression(d) else [d]):
                if name not in sizes and name not in chosen:
                    convention = convention_of(name, spec.name, decoding)
                    chosen[name] = convention.size if convention else 1
    known = {**chosen, **sizes}
    past = next((known[n] for n in known if n.lower() in PAST.names), None)
    new = next((known[n] for n in known if n.lower() in DECODING.names), 1)
    for name in chosen:
        if name.lower() in TOTAL.names and past is not None:  # the past and the new tokens
            chosen[name] = past + new
    return chosen


def _named_sizes(inputs: Sequence[TensorSpec], overrides: Mapping[str, tuple[int, ...]],
                 dims: Mapping[str, int]) -> dict[str, int]:
    """The size of each named dimension: given by name, or through the shape of an input that has it."""
    names = _plain_names(inputs)
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
    for declared, (given, source) in list(sizes.items()):  # past_sequence_length + 1 given 9: the past is 8
        unknown = [n for n in names_in(declared) if n not in sizes] if is_expression(declared) else []
        if len(unknown) == 1:
            value = solve(declared, unknown[0], given, {n: size for n, (size, _) in sizes.items()})
            if value is not None:
                sizes[unknown[0]] = (value, f"{source} (its {declared} = {given})")
    return {name: size for name, (size, _) in sizes.items()}


def _check_expressions(inputs: Sequence[TensorSpec], overrides: Mapping[str, tuple[int, ...]],
                       sizes: Mapping[str, int]) -> None:
    """A size given for a dimension the exporter wrote as an expression must be what the expression gives."""
    for spec in inputs:
        override = overrides.get(spec.name)
        for declared, given in zip(spec.shape or (), override or ()):
            if not isinstance(declared, str) or not is_expression(declared):
                continue
            expected = evaluate(declared, sizes)
            if expected is not None and expected != given:
                names = " ".join(f"{n}={sizes[n]}" for n in names_in(declared))
                raise UsageError(f"--input-shapes {spec.name}:[{','.join(map(str, override or ()))}] sets dimension "
                                 f"{declared} to {given}, but with {names} it is {expected}; give sizes that agree "
                                 f"(or set the names: --input-shapes {names})")


def _warn_dynamic(spec: TensorSpec, known: tuple[Dim, ...], shape: tuple[int, ...], chosen: Mapping[str, int],
                  every: Mapping[str, int], decoding: bool, named_before: set[str], warn: Callable[[str], None]
                  ) -> tuple[str, ...]:
    """Say which of the input's dimensions cmpx chose the size of, once per named dimension (the first input that
    has it); return the --input-shapes words that set them (the names, or the input's shape where one is unnamed)."""
    open_named = list(dict.fromkeys(n for d in known if isinstance(d, str)
                                    for n in (names_in(d) if is_expression(d) else [d]) if n in chosen))
    unnamed = any(d is None or (isinstance(d, int) and d < 0) for d in known)
    example = f"{spec.name}:[{','.join(map(str, shape))}]"
    words = tuple(f"{name}={chosen[name]}" for name in open_named) + ((example,) if unnamed else ())
    if not unnamed and all(name in named_before for name in open_named):
        return words  # every open dimension is named and was already reported with an earlier input
    named_before.update(open_named)
    conventions = {name: convention_of(name, spec.name, decoding) for name in open_named}
    why = [f"{name}={chosen[name]}, cmpx's size for {convention.what}" for name, convention in conventions.items()
           if convention is not None and convention is not BATCH]
    why += [f"{d} = {size}" if evaluate(d, every) == size else
            f"{d} gives no whole size of 0 or more: {size}" for d, size in zip(known, shape)
            if isinstance(d, str) and is_expression(d)]
    text = f"input {spec.name} has dynamic shape {spec.shape_text()}; using {list(shape)}" + \
           (f" ({'; '.join(why)})" if why else "") + f". Set it with --input-shapes {example}"
    if open_named:
        text += (", or by name for every input that has " + ("it" if len(open_named) == 1 else "them") + ": "
                 f"--input-shapes {' '.join(f'{name}={chosen[name]}' for name in open_named)}")
    warn(text)
    return words


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
