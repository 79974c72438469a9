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
_LPIPS = ("cmpx has no LPIPS metric (it needs torch); --compare psnr, snr or cosine measure images too, and a "
          "metric plugin can add LPIPS (docs/plugins.md, section 3)")

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
    "--lpips-threshold": _LPIPS, "--lpips-tolerance": _LPIPS,
    "--opset": "Polygraphy's --opset converts TensorFlow models; cmpx runs ONNX (export with the opset you want; "
               "--onnxref-opset N runs the reference on the model converted to opset N)",
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


MODEL_TYPES = ("onnx", "engine")  # Polygraphy's model types cmpx runs; the model file's suffix decides which
_OTHER_TYPE = "cmpx runs ONNX models (.onnx) and TensorRT engines (.engine, .plan, with --backend trt); leave it out"
OTHER_MODEL_TYPES = {
    "trt-network-script": "a TensorRT network script builds its network in Python code; cmpx runs models: export "
                          "the network to ONNX, or build an engine and run it with --backend trt",
    "frozen": _TENSORFLOW, "keras": _TENSORFLOW, "ckpt": _TENSORFLOW, "tf": _TENSORFLOW,
}
COMMANDS: dict[str, str] = {  # Polygraphy's other commands, and what cmpx does instead
    "debug": "'polygraphy debug reduce' is 'cmpx reduce MODEL --backend A --backend B [run options] -o OUT' (the "
             "smallest subgraph that still fails); 'debug precision' is 'cmpx precision MODEL --backend NAME:fp16 "
             "--reference NAME -o kept.txt' (the fewest nodes to keep in float32, for any backend), and --keep-fp32 "
             "@kept.txt applies them",
    "inspect": "'cmpx tensors MODEL' lists a model's tensors (names, ops, dtypes, shapes); 'cmpx run MODEL "
               "--backend onnxrt -v' describes its outputs",
    "convert": "cmpx makes the fp16, bf16, int8 and fp8 graphs itself: --backend NAME:fp16 (and --save-transformed "
               "DIR keeps them)",
    "surgeon": "cmpx does not edit models; 'cmpx reduce' writes the smallest failing subgraph",
    "check": "cmpx run --validate checks outputs for NaN and Inf; cmpx reads any model ONNX Runtime loads",
    "template": "cmpx has no script templates; its Python API runs the same comparison: cmpx.run(...) "
                "(docs/api.md)",
    "data": "cmpx needs no data files merged: --load-inputs reads Polygraphy's JSON (a file holding more tensors "
            "than the model's inputs, such as layer-wise outputs, feeds the inputs it has, with one warning), and "
            "'cmpx reduce' feeds each candidate its input tensors itself",
    "plugin": "cmpx's plugins are Python packages registered through the 'cmpx' entry-point group; 'cmpx plugins' "
              "lists them (docs/plugins.md)",
}
DEBUG_OPTIONS: dict[str, str] = {  # options of 'polygraphy debug' given to cmpx run
    "--mode": "cmpx reduce searches by itself (bisection, then node by node) and needs no --mode",
    "--check": "cmpx reduce runs the comparison itself (the backends and run options given): no --check command",
    "--fail-regex": "cmpx decides failure by exit code: --fail-on mismatch|crash|any (cmpx reduce)",
    "--artifacts": "cmpx reduce keeps what it writes with -o OUT; --save-inputs/--save-outputs keep a run's data",
}


def translate(args: Sequence[str], backends: Collection[str], flags: Collection[str]) -> list[str]:
    """``args`` with Polygraphy's runner flags made ``--backend NAME`` (``--NAME`` for a registered backend that no
    option of ``flags`` spells); UsageError for a Polygraphy option cmpx lacks. ``--`` ends the options."""
    out: list[str] = []
    words = iter(enumerate(args))
    for index, word in words:
        if word == "--":
            return out + list(args[index:])
        flag = word.split("=", 1)[0]
        if flag == "--model-type" and "--model-type" not in flags:  # the suffix decides; a known type is accepted
            value = word.split("=", 1)[1] if "=" in word else next(words, (0, ""))[1]
            if value not in MODEL_TYPES:
                raise UsageError(f"--model-type {value}: {OTHER_MODEL_TYPES.get(value, _OTHER_TYPE)}")
            continue
        alternative = ALTERNATIVES.get(flag) or DEBUG_OPTIONS.get(flag)
        if alternative and flag not in flags:
            raise UsageError(f"{flag} is a Polygraphy option that cmpx does not have: {alternative}")
        name = word[2:]
        if word.startswith("--") and name in backends and word not in flags:
            out += ["--backend", name]
        else:
            out.append(word)
    return out
