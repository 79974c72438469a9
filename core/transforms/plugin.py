"""Registers the built-in model transforms, exactly as a third-party plugin would. The factories import the
conversion libraries only when a transform is actually used."""

from cmpx.hookspecs import hookimpl


def fp16(options):
    from cmpx.transforms.half import HalfPrecision

    return HalfPrecision(options, "fp16")


def bf16(options):
    from cmpx.transforms.half import HalfPrecision

    return HalfPrecision(options, "bf16")


def int8(options):
    from cmpx.transforms.static_qdq import StaticQuantization

    return StaticQuantization(options, "int8")


def fp8(options):
    from cmpx.transforms.static_qdq import StaticQuantization

    return StaticQuantization(options, "fp8")


def fp64(options):
    from cmpx.transforms.double import DoublePrecision

    return DoublePrecision(options)


@hookimpl
def register_model_transforms(registry):
    registry.add("fp16", fp16, description="float16 compute, inputs and outputs kept in their types "
                                           "(--keep-fp32 NODE_OR_OP keeps more in float32)")
    registry.add("bf16", bf16, description="bfloat16 compute, like fp16 (for backends with bfloat16 kernels)")
    registry.add("int8", int8, description="static int8 Q/DQ quantization calibrated on the run's own data "
                                           "(--calibration-iterations, --calibration-cache)")
    registry.add("fp8", fp8, description="static float8 (E4M3) Q/DQ quantization calibrated on the run's own "
                                         "data, like int8")
    registry.add("fp64", fp64, description="float64 compute, an oracle for the others (--oracle): float inputs "
                                           "kept, outputs float64, Q/DQ pairs kept, raised to opset 19 where it can")
