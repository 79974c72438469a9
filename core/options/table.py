"""The options of a run, declared once: ``cmpx run``'s command-line options and ``cmpx.run()``'s keywords are both
made from this table, so that the CLI and the Python API take the same options and check them the same way.

Each option's value in a ``RunRequest`` is what a user could type: words for the options that take several
values (``--atol 1e-3 logits:1e-2`` gives ``("1e-3", "logits:1e-2")``), text, numbers or flags. The Python API
also accepts Python values and turns them into those words (``atol={"logits": 1e-2}``, ``input_shapes={"x":
[1, 3, 224, 224]}``, ``val_range=(0, 1)``), so one set of parsers validates both. Light: no numpy, no click.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cmpx.options.argtypes import CHECK_STATS

MODEL_SUFFIXES = (".onnx", ".engine", ".plan", ".xml")  # a model path ends a list of values

BACKENDS, DATA, COMPARISON, LAYERS, PRECISION, REPORTS, EXECUTION = (
    "Backends", "Data", "Comparison", "Per-layer comparison", "Precision (--backend NAME:fp16|bf16|int8|fp8)",
    "Reports", "Execution and plugins")

WORDS, TEXT, INT, FLAG = "words", "text", "int", "flag"


def is_number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True


def looks_like_option(word: str) -> bool:
    """A word the command line takes for an option, not a value: ``-x``, ``--x``, but not ``-1e-3`` or ``-``."""
    return word.startswith("-") and word != "-" and not is_number(word)


def threshold_flag(metric: str) -> str:
    """The one spelling of a metric's threshold option: ``--NAME-threshold`` (its aliases are the metric's own
    ``flag_aliases``, cmpx.comparison.metric_names)."""
    return f"--{metric}-threshold"


def per_output_value(word: str) -> bool:
    """A word that can follow ``--atol 1e-3``: another value, or NAME:VALUE."""
    return ":" in word or is_number(word)


def _shape_word(word: str) -> bool:
    """A word that can follow ``--input-shapes X:[1,3]``: another NAME:[...] or DIMENSION=SIZE."""
    return (":" in word and "[" in word) or ("=" in word and not word.startswith("-"))


def not_a_model(word: str) -> bool:
    return not word.lower().endswith(MODEL_SUFFIXES)


@dataclass(frozen=True)
class RunOption:
    """One option of a run. ``name`` is the ``RunRequest`` field and the keyword of ``cmpx.run()``; ``flags`` are
    its command-line spellings (Polygraphy's among them); ``kind`` is one of ``words`` (repeatable; several values
    may follow one flag, as long as ``accepts`` takes them), ``text``, ``int`` or ``flag``."""

    name: str
    flags: tuple[str, ...]
    kind: str
    group: str
    help: str
    metavar: str | None = None
    accepts: Callable[[str], bool] | None = None  # words: which words after the first are more values
    python: str = "words"  # how cmpx.run() reads a Python value: words, per_output, shapes, ranges, path

    @property
    def flag(self) -> str:
        return self.flags[0]


def _option(name: str, kind: str, group: str, help: str, *, flags: tuple[str, ...] = (), **extra) -> RunOption:
    return RunOption(name, flags or (f"--{name.replace('_', '-')}",), kind, group, help, **extra)


RUN_OPTIONS: tuple[RunOption, ...] = (
    _option("backends", WORDS, BACKENDS, "a backend to run, in order; repeat for each; NAME:TRANSFORM runs it on a "
            "transformed model (onnxrt:fp16); NAME@PYTHON runs its worker under another Python, to compare framework "
            "versions (onnxrt@/opt/ort-1.20/bin/python, onnxrt@env:ENV from 'cmpx env create')",
            flags=("--backend",), metavar="NAME"),
    _option("reference", TEXT, BACKENDS, "compare every other backend against this one (e.g. onnxref, or onnxrt#2)",
            metavar="NAME"),
    _option("oracle", FLAG, BACKENDS, "add the fp64 oracle, onnxref:fp64 (the model's float graph in float64 on the "
            "reference evaluator; or the --backend NAME:fp64 of the run), and measure every backend's outputs and "
            "marked tensors against it: each failing pair says which side is closer to the exact value, and with "
            "--mark-all where a backend's own error jumps. Not the reference of the verdict unless --reference names "
            "it; slow on large models (docs/oracle.md)"),
    _option("load_outputs", WORDS, BACKENDS, "add saved outputs as backends after the live ones (named "
            "BACKEND@FILE): cmpx runs, Polygraphy RunResults JSON files and per-iteration directories, ONNX "
            "test-data directories", metavar="PATH", accepts=not_a_model, python="path",
            flags=("--load-outputs", "--load-results")),
    _option("save_outputs", TEXT, BACKENDS, "save every live backend's outputs, every iteration: a directory is a "
            "cmpx run, a .json file Polygraphy's RunResults", metavar="DIR|FILE.json", python="path",
            flags=("--save-outputs", "--save-results")),
    _option("seed", INT, DATA, "seed of the synthetic data; iteration i uses seed + i"),
    _option("iterations", INT, DATA, "number of input sets to run and compare [default: 1 for synthetic data, all "
            "of loaded or scripted data]", flags=("--iterations", "--iters")),
    _option("warm_up", INT, DATA, "inferences each backend runs before the first timed one (not compared, not "
            "timed)", metavar="N"),
    _option("input_shapes", WORDS, DATA, "shapes for inputs with dynamic dimensions, e.g. X:[1,3,224,224] Y:[1,10]; "
            "DIMENSION=SIZE sets a named dimension in every input that has it, e.g. batch=4 sequence=128 (a size "
            "given through one input's shape also applies to the others that share its dimension names)",
            metavar="NAME:[D0,D1,...] | DIMENSION=SIZE", accepts=_shape_word, python="shapes",
            flags=("--input-shapes", "--inputs")),
    _option("val_range", WORDS, DATA, "range of synthetic values [default: floats [0,1); integers: what the graph's "
            "use calls for (an index into a table of N rows: [0,N-1]; a mask: [0,1]), else [0,9], inclusive; -v "
            "says which and why]", metavar="[LO,HI] | NAME:[LO,HI]", accepts=lambda w: "[" in w, python="ranges"),
    _option("data_loader", TEXT, DATA, "where inputs come from (a registered data loader) [default: synthetic]",
            metavar="NAME"),
    _option("data_loader_script", TEXT, DATA, "a Python function (default load_data) returning an iterable of "
            "{input name: array}", metavar="FILE.py[:FUNC]", python="path"),
    _option("load_inputs", WORDS, DATA, "feed saved inputs: cmpx runs, Polygraphy JSON inputs and per-iteration "
            "directories, ONNX test-data directories", metavar="PATH", accepts=not_a_model, python="path",
            flags=("--load-inputs", "--load-input-data")),
    _option("input_map", WORDS, DATA, "feed a model input from a differently named tensor of the data: NAME=DATA "
            "feeds input NAME with the data's DATA (inputs are otherwise fed by exact name only)", metavar="NAME=DATA",
            accepts=lambda w: "=" in w and not w.startswith("-")),
    _option("save_inputs", TEXT, DATA, "save every iteration's inputs: a directory is a cmpx run, a .json file "
            "Polygraphy's inputs list", metavar="DIR|FILE.json", python="path",
            flags=("--save-inputs", "--save-input-data")),
    _option("external_data_dir", TEXT, DATA, "where the model's external data (weights) are, when not beside the "
            "model", metavar="DIR", python="path", flags=("--external-data-dir", "--load-external-data", "--ext")),
    _option("atol", WORDS, COMPARISON, "absolute tolerance; a bare value is the default, NAME:VALUE sets one output "
            "[default: 1e-5]", metavar="[NAME:]VALUE", accepts=per_output_value, python="per_output",
            flags=("--atol", "--abs-tol")),
    _option("rtol", WORDS, COMPARISON, "relative tolerance, same forms as --atol [default: 1e-5]. An element fails "
            "only if it exceeds both tolerances", metavar="[NAME:]VALUE", accepts=per_output_value,
            python="per_output", flags=("--rtol", "--rel-tol")),
    _option("check_error_stat", WORDS, COMPARISON, f"statistic the tolerances apply to: {', '.join(CHECK_STATS)} "
            "[default: elemwise]", metavar="[NAME:]STAT", accepts=lambda w: ":" in w or w in CHECK_STATS,
            python="per_output"),
    _option("tolerances", TEXT, COMPARISON, "read per-output atol, rtol and check statistic from this TOML file (as "
            "'cmpx tolerances' writes it); the command line's values win: NAME:VALUE for that output, a bare value "
            "for every output", metavar="FILE.toml", python="path"),
    _option("error_quantile", WORDS, COMPARISON, "quantile for --check-error-stat quantile [default: 0.99]",
            metavar="[NAME:]Q", accepts=per_output_value, python="per_output"),
    _option("compare", WORDS, COMPARISON, "metrics that must all pass [default: the tolerance check]",
            metavar="METRIC", flags=("--compare", "--compare-func")),
    _option("output_map", WORDS, COMPARISON, "compare differently named outputs: A=B compares an output named B "
            "(of a backend or saved run that has no A) as output A; outputs are otherwise paired by exact name only",
            metavar="A=B", accepts=lambda w: "=" in w and not w.startswith("-")),
    _option("postprocess", WORDS, COMPARISON, "replace outputs by the indices of their K largest values before "
            "comparing (Polygraphy's top-k): top-K[,axis=N], or NAME:top-K for one output; e.g. with --compare "
            "indices", metavar="[NAME:]top-K[,axis=N]", accepts=lambda w: "top-" in w,
            flags=("--postprocess", "--postprocess-func")),
    _option("nan_equal", FLAG, COMPARISON, "NaN in both outputs counts as equal"),
    _option("infinities_compare_equal", FLAG, COMPARISON, "the same infinity at the same element counts as equal "
            "(cmpx's default; Polygraphy's flag for it, accepted)"),
    _option("strict_infinities", FLAG, COMPARISON, "Polygraphy's rule: the same infinity on both sides fails "
            "(--validate fails on any infinity either way)"),
    _option("validate", FLAG, COMPARISON, "fail if any backend's output holds NaN or Inf"),
    _option("fail_fast", FLAG, COMPARISON, "stop at the first mismatching output"),
    _option("onnx_outputs", WORDS, LAYERS, "also compare these intermediate tensors (ONNX-based backends): 'mark all' "
            "or '*' for every one, names, fnmatch patterns, @file with one per line; see 'cmpx tensors MODEL'",
            metavar="NAME|PATTERN|@FILE", accepts=not_a_model),
    _option("onnx_exclude_outputs", WORDS, LAYERS, "leave these out of --onnx-outputs / --mark-all",
            metavar="NAME|PATTERN|@FILE", accepts=not_a_model),
    _option("mark_all", FLAG, LAYERS, "compare every intermediate tensor on every backend that can expose them, and "
            "report the first diverging layer"),
    _option("show_unmatched", FLAG, LAYERS, "list the marked tensors only one backend of a pair produced"),
    _option("local_error", FLAG, LAYERS, "with --mark-all or --onnx-outputs: also measure each compared node's own "
            "error, its inputs taken from the reference's values (iteration 0), and rank the nodes by it; a node "
            "that fails only with the error reaching it is marked inheriting. Costs one load and one inference of "
            "a one-node model per node, on each backend compared against a reference"),
    _option("strict_marking", FLAG, LAYERS, "make it an error (exit 2, before any inference) that a backend of a "
            "--mark-all / --onnx-outputs run cannot mark tensors, instead of a warning naming the pairs that then "
            "compare only the model's outputs"),
    _option("memory_budget", TEXT, LAYERS, "memory the marked tensors of all live backends may take at once, e.g. "
            "6GiB or 500MB; a run that would need more cuts the graph into slices run one after another, each "
            "backend fed its own values of the tensors crossing a cut, and compares each slice's tensors before the "
            "next runs (same statistics and verdicts) [default: half the memory available when the run starts: "
            "MemAvailable, capped by the memory limit of cmpx's cgroup]", metavar="SIZE", python="size"),
    _option("fp16", FLAG, PRECISION, "run the backends that take precision flags (TensorRT) on the fp16 graph; "
            "others: --backend NAME:fp16"),
    _option("bf16", FLAG, PRECISION, "the same with the bf16 graph"),
    _option("int8", FLAG, PRECISION, "the same with the int8 Q/DQ graph"),
    _option("fp8", FLAG, PRECISION, "the same with the float8 (E4M3) Q/DQ graph"),
    _option("keep_fp32", WORDS, PRECISION, "node names or op types the fp16/bf16 transforms leave in float32; "
            "@FILE reads one per line (what cmpx precision writes)", metavar="NODE|OP|@FILE", accepts=not_a_model),
    _option("no_quantize", WORDS, PRECISION, "node names or op types the int8/fp8 transforms leave unquantized "
            "(the quantizer's nodes to exclude); @FILE reads one per line (what cmpx precision writes)",
            metavar="NODE|OP|@FILE", accepts=not_a_model),
    _option("calibration_iterations", INT, PRECISION, "feeds of the run's data used to calibrate int8 and fp8"),
    _option("calibration_cache", TEXT, PRECISION, "int8/fp8 calibrated ranges: read from PATH if it exists, "
            "written there otherwise", metavar="PATH", python="path"),
    _option("save_transformed", TEXT, PRECISION, "keep the transformed models (MODEL.fp16.onnx...) in DIR",
            metavar="DIR", python="path"),
    _option("report_json", TEXT, REPORTS, "write every pair, iteration and output with verdicts and statistics as "
            "JSON", metavar="PATH", python="path"),
    _option("junit", TEXT, REPORTS, "write a JUnit XML report: one test case per pair and output", metavar="PATH",
            python="path"),
    _option("report_html", TEXT, REPORTS, "write the whole run as one self-contained HTML page (verdict, tables, "
            "statistics, first divergence, failures; with matplotlib also the plots of --save-error-plots)",
            metavar="PATH", python="path"),
    _option("log_file", TEXT, REPORTS, "also write the text report to this file", metavar="PATH", python="path"),
    _option("save_error_plots", TEXT, REPORTS, "write error plots: per model output, histograms of its errors and the "
            "error against the reference's magnitude; per pair of a marked run, the per-layer error profile and the "
            "first divergence's plot (needs matplotlib: pip install 'cmpx[plots]')", metavar="DIR", python="path",
            flags=("--save-error-plots", "--save-error-metrics-plot")),
    _option("timeout", WORDS, EXECUTION, "limit for each load and each inference; BACKEND:SECONDS for one backend (a "
            "name like onnxrt, or onnxrt#2) [default: 600]. A backend past it is stopped (SIGTERM, then SIGKILL 2 s "
            "later) and reported; the others go on", metavar="[BACKEND:]SECONDS", accepts=per_output_value,
            python="per_output"),
)

BY_NAME = {option.name: option for option in RUN_OPTIONS}
PRECISION_FLAGS = ("fp16", "bf16", "int8", "fp8")
