"""Optimization profiles from --trt-min-shapes/--trt-opt-shapes/--trt-max-shapes, checked without TensorRT.

For each input, the k-th shape given to a flag belongs to profile k: ``--trt-min-shapes X:[1,3] X:[8,3]``
describes two profiles. An input named in none of the flags takes its shape from --input-shapes (or the model's
static shape) as min = opt = max in every profile.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cmpx.options.argtypes import parse_input_shapes
from cmpx.errors import UsageError

Shape = tuple[int, ...]


@dataclass(frozen=True)
class Profile:
    shapes: Mapping[str, tuple[Shape, Shape, Shape]]  # input -> (min, opt, max)


def _per_input(flag: str, words: Sequence[str]) -> dict[str, list[Shape]]:
    found: dict[str, list[Shape]] = {}
    for word in words:
        (name, shape), = parse_input_shapes([word]).items()
        found.setdefault(name, []).append(shape)
    return found


def build_profiles(min_words: Sequence[str], opt_words: Sequence[str], max_words: Sequence[str],
                   default_shapes: Mapping[str, Shape]) -> list[Profile]:
    """Profiles for every input in ``default_shapes`` (the shapes data will be made with)."""
    flags = {"--trt-min-shapes": _per_input("--trt-min-shapes", min_words),
             "--trt-opt-shapes": _per_input("--trt-opt-shapes", opt_words),
             "--trt-max-shapes": _per_input("--trt-max-shapes", max_words)}
    named = set().union(*flags.values())
    for name in named:
        if name not in default_shapes:
            raise UsageError(f"--trt-*-shapes: {name!r} is not a model input; the inputs are: "
                             f"{', '.join(default_shapes)}")
        counts = {flag: len(values.get(name, [])) for flag, values in flags.items()}
        if len(set(counts.values())) != 1:
            raise UsageError(f"--trt-*-shapes: {name} has {counts['--trt-min-shapes']} min, "
                             f"{counts['--trt-opt-shapes']} opt and {counts['--trt-max-shapes']} max shapes; give "
                             "one of each per profile")
    count = max([len(v) for values in flags.values() for v in values.values()] or [1])
    profiles = []
    for index in range(count):
        shapes = {}
        for name, default in default_shapes.items():
            if name in named:
                values = [flags[f][name] for f in flags]
                if any(len(v) <= index for v in values):
                    raise UsageError(f"--trt-*-shapes: profile {index} has no shapes for {name}; every named input "
                                     "needs a shape in every profile")
                low, opt, high = (v[index] for v in values)
                _check_order(name, index, low, opt, high)
                shapes[name] = (low, opt, high)
            else:
                shapes[name] = (default, default, default)
        profiles.append(Profile(shapes))
    return profiles


def _check_order(name: str, index: int, low: Shape, opt: Shape, high: Shape) -> None:
    if not len(low) == len(opt) == len(high):
        raise UsageError(f"--trt-*-shapes: profile {index}, {name}: min, opt and max shapes have different ranks")
    if not all(a <= b <= c for a, b, c in zip(low, opt, high)):
        raise UsageError(f"--trt-*-shapes: profile {index}, {name}: need min <= opt <= max in every dimension, got "
                         f"{list(low)}, {list(opt)}, {list(high)}")


def profile_for(profiles: Sequence[Profile], shapes: Mapping[str, Shape]) -> int:
    """The first profile that admits ``shapes`` (the inference's input shapes), or a UsageError saying why."""
    for index, profile in enumerate(profiles):
        if all(name in profile.shapes and _within(shape, profile.shapes[name]) for name, shape in shapes.items()):
            return index
    described = "; ".join(f"{n} {list(s)}" for n, s in shapes.items())
    ranges = " | ".join(", ".join(f"{n} {list(lo)}..{list(hi)}" for n, (lo, _, hi) in p.shapes.items())
                        for p in profiles)
    raise UsageError(f"input shapes {described} fit no optimization profile ({ranges}); widen "
                     "--trt-min-shapes/--trt-max-shapes")


def _within(shape: Shape, bounds: tuple[Shape, Shape, Shape]) -> bool:
    low, _, high = bounds
    return len(shape) == len(low) and all(a <= s <= b for a, s, b in zip(low, shape, high))
