"""Polygraphy's ``polygraphy run`` command lines, accepted by ``cmpx run`` where the meaning is the same: its runner
flags (``--onnxrt``, ``--trt``, and ``--NAME`` for any registered backend whose name is no option's) become
``--backend NAME`` in the order given, and its option spellings are aliases of cmpx's (declared with the options).
For a Polygraphy option cmpx lacks, the error names it as Polygraphy's and says what cmpx offers instead."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from cmpx.errors import UsageError

_TENSORRT = ("a TensorRT builder option of Polygraphy's that cmpx's trt backend does not offer; its options are "
             "listed under 'Backend trt' in cmpx run --help")
_PRECISION = ("TensorRT 11 builds strongly typed networks: precision comes from the graph (--fp16, --int8... or "
              "--backend trt:fp16); cmpx has no per-layer precision constraints")
_SAVE_MODEL = "--save-transformed DIR keeps the models cmpx makes (MODEL.fp16.onnx...)"
_TENSORFLOW = "cmpx runs ONNX models (and engines or IR through the backends that load them), not TensorFlow"

ALTERNATIVES: dict[str, str] = {
    "--sequential-runners": "cmpx runs every backend in a worker process of its own, all at once; leave it out",
    "--use-subprocess": "every cmpx backend always runs in a worker process of its own; leave it out",
    "--gen-script": "cmpx has no script generation; its Python API does the same run: cmpx.run(...) (docs/api.md)",
    "--gen": "cmpx has no script generation; its Python API does the same run: cmpx.run(...) (docs/api.md)",
    "--check-average": "the summary gives each pair's pass rate and worst errors; --check-error-stat mean (or "
                       "median, quantile) checks a statistic of each output",
    "--save-heatmaps": "--save-error-plots DIR writes error histograms and error against reference magnitude, "
                       "--report-html PATH a page with them",
    "--show-heatmaps": "--save-error-plots DIR (or --report-html PATH) writes the plots to look at",
    "--show-error-metrics-plot": "--save-error-plots DIR (or --report-html PATH) writes the plots to look at",
    "--model-type": "the model file's suffix decides: .onnx, or an engine or IR file for the backends that load it",
    "--fp-to-fp16": "--backend NAME:fp16 runs any backend on the fp16 graph",
    "--onnx-outputs-by-type": "mark tensors by name or fnmatch pattern with --onnx-outputs (cmpx tensors MODEL "
                              "lists them with their op types)",
    "--trt-outputs-by-type": "mark layers by name or pattern with --trt-outputs",
    "--data-loader-backend-module": "cmpx's synthetic data is numpy's (Polygraphy's default); feed your own with "
                                    "--data-loader-script",
    "--save-input-blob": "--save-inputs DIR writes a cmpx run: one plain .npy file per tensor",
    "--compare-func-script": "write a metric plugin (docs/plugins.md, section 3) and select it with --compare NAME",
    "--postprocess-func-script": "--postprocess top-K is built in; other post-processing belongs in a metric plugin",
    "--no-shape-check": "cmpx compares outputs of the same shape only, and says when shapes differ",
    "--save-accuracy-results": "--report-json PATH writes every verdict and statistic (and --junit PATH JUnit XML)",
    "--verbosity": "use -q, -v or -vv", "--silent": "use -q",
    "--log-format": "cmpx's text report has one format; --report-json PATH is for machines",
    "--shape-inference": "cmpx infers shapes itself where it needs them",
    "--do-shape-inference": "cmpx infers shapes itself where it needs them",
    "--no-onnxruntime-shape-inference": "cmpx infers shapes with onnx where it needs them",
    "--ignore-external-data": "external data is read by the backends; --external-data-dir DIR says where it is",
    "--save-onnx": _SAVE_MODEL, "--save-external-data": _SAVE_MODEL, "--external-data-path": _SAVE_MODEL,
    "--external-data-size-threshold": _SAVE_MODEL, "--no-save-all-tensors-to-one-file": _SAVE_MODEL,
    "--precision-constraints": _PRECISION, "--layer-precisions": _PRECISION, "--tensor-dtypes": _PRECISION,
    "--tensor-datatypes": _PRECISION, "--all-tensor-dtypes": _PRECISION, "--all-tensor-datatypes": _PRECISION,
    "--calib-base-cls": "int8 is calibrated by cmpx's int8 transform (--calibration-iterations, "
                        "--calibration-cache); TensorRT 11 has no calibrators",
    "--calibration-base-class": "int8 is calibrated by cmpx's int8 transform (--calibration-iterations, "
                                "--calibration-cache); TensorRT 11 has no calibrators",
    "--tf": _TENSORFLOW, "--tftrt": _TENSORFLOW, "--use-tftrt": _TENSORFLOW, "--ckpt": _TENSORFLOW,
    "--tf-outputs": _TENSORFLOW, "--pluginref": "cmpx has no pluginref runner; onnxref (onnx.reference) is its "
                                                "CPU reference",
    **dict.fromkeys((
        "--sparse-weights", "--version-compatible", "--exclude-lean-runtime", "--quantile", "--regression-cutoff",
        "--error-on-timing-cache-miss", "--disable-compilation-cache", "--save-tactics", "--save-tactic-replay",
        "--load-tactics", "--load-tactic-replay", "--tactic-sources", "--trt-config-script",
        "--trt-config-postprocess-script", "--trt-cpps", "--trt-safety-restricted", "--refittable", "--strip-plan",
        "--use-dla", "--allow-gpu-fallback", "--preview-features", "--hardware-compatibility-level",
        "--max-aux-streams", "--quantization-flags", "--profiling-verbosity", "--weight-streaming",
        "--runtime-platform", "--direct-io", "--tiling-optimization-level", "--onnx-flags",
        "--plugin-instancenorm", "--decomposable-attentions", "--tensor-formats", "--all-tensor-formats",
        "--trt-network-postprocess-script", "--trt-npps", "--mark-debug", "--mark-unfused-tensors-as-debug-tensors",
        "--load-runtime", "--dla-workspace-allocation-strategy", "--optimization-profile", "--allocation-strategy",
        "--weight-streaming-budget", "--enable-uint8-asymmetric-quantization-dla"), _TENSORRT),
}


def translate(args: Sequence[str], backends: Collection[str], flags: Collection[str]) -> list[str]:
    """``args`` with Polygraphy's runner flags made ``--backend NAME`` (``--NAME`` for a registered backend that no
    option of ``flags`` spells); UsageError for a Polygraphy option cmpx lacks. ``--`` ends the options."""
    out: list[str] = []
    for index, word in enumerate(args):
        if word == "--":
            return out + list(args[index:])
        flag = word.split("=", 1)[0]
        if flag in ALTERNATIVES and flag not in flags:
            raise UsageError(f"{flag} is a Polygraphy option that cmpx does not have: {ALTERNATIVES[flag]}")
        name = word[2:]
        if word.startswith("--") and name in backends and word not in flags:
            out += ["--backend", name]
        else:
            out.append(word)
    return out
