"""A run's options are declared once (cmpx.options.table): RunRequest's fields follow the table, and a request
written back as words (cmpx.options.words) parses to the same request through the parser that ``cmpx run``, sweep
cells and ``cmpx reduce`` use (cmpx.options.grammar.request_from_words)."""

from dataclasses import fields, replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cmpx.options.grammar import request_from_words
from cmpx.comparison.metric_names import threshold_flags
from cmpx.plugin.manager import make_plugin_manager
from cmpx.options.request import RunRequest, request_defaults
from cmpx.options.words import command_line, request_words
from cmpx.options.table import COMPARISON, FLAG, INT, RUN_OPTIONS, TEXT, WORDS, threshold_flag
from conftest import REPO

PLUGINS = make_plugin_manager()
SPECS = list(PLUGINS.backends)
DEFAULT_BACKEND_OPTIONS = request_from_words([], PLUGINS)[0].backend_options
THRESHOLD_METRICS = [m.name for m in PLUGINS.metrics if getattr(m.metric, "threshold", None) is not None]


def test_request_fields_are_the_option_table_in_its_order_with_the_types_its_kinds_give():
    assert [f.name for f in fields(RunRequest)] == ["model", *(o.name for o in RUN_OPTIONS), "thresholds",
                                                    "backend_options"]
    types = {f.name: f.type for f in fields(RunRequest)}
    expected = {WORDS: ("Words",), FLAG: ("bool",), TEXT: ("str | None",), INT: ("int", "int | None")}
    wrong = [(o.name, o.kind, types[o.name]) for o in RUN_OPTIONS if types[o.name] not in expected[o.kind]]
    assert wrong == []
    defaults = request_defaults()
    assert all(defaults[o.name] is False for o in RUN_OPTIONS if o.kind == FLAG)
    assert all(defaults[o.name] == () for o in RUN_OPTIONS if o.kind == WORDS)


def test_the_threshold_spelling_is_made_in_one_place():
    assert threshold_flag("l2") == "--l2-threshold"
    assert threshold_flags(PLUGINS.metrics.get("l2")) == ["--l2-threshold", "--l2-tolerance"]
    spelled = sorted(str(path.relative_to(REPO)) for folder in ("core", "backends", "comparators")
                     for path in (REPO / folder).rglob("*.py") if "}-threshold" in path.read_text())
    assert spelled == ["core/options/table.py"]


def test_per_output_values_follow_one_flag_as_polygraphy_reads_them_and_select_orders_the_words():
    request = RunRequest(model="m.onnx", backends=("onnxrt:fp16", "onnxref"), atol=("1e-9", "M:1"), nan_equal=True,
                         thresholds={"l2": ("0.1", "y:0.2")}, compare=("l2", "cosine"), seed=3)
    assert request_words(request, (COMPARISON,)) == [
        "--atol", "1e-9", "M:1", "--compare", "l2", "--compare", "cosine", "--nan-equal", "--l2-threshold", "0.1",
        "y:0.2"]
    assert request_words(request, ("seed", "model", "backends")) == [
        "m.onnx", "--seed", "3", "--backend", "onnxrt:fp16", "--backend", "onnxref"]
    assert request_words(RunRequest(reference="-odd", input_map=("a=b",))) == ["--reference=-odd",
                                                                               "--input-map", "a=b"]
    with pytest.raises(ValueError, match="no option or group"):
        request_words(request, ("atl",))
    assert command_line(["m y.onnx", "--load-inputs", "g$.json"]) == "'m y.onnx' --load-inputs 'g$.json'"


def test_backend_options_are_written_once_per_backend_and_only_when_given():
    onnxrt, onnxref = PLUGINS.backends.get("onnxrt"), PLUGINS.backends.get("onnxref")
    options = {**DEFAULT_BACKEND_OPTIONS, "onnxrt_providers": ("cuda", "cpu"), "onnxref_opset": 0}
    request = RunRequest(backend_options=options)
    assert request_words(request, (), [onnxrt, onnxrt, onnxref]) == [
        "--onnxrt-providers", "cuda", "--onnxrt-providers", "cpu", "--onnxref-opset", "0"]  # 0 is a value given
    assert request_words(RunRequest(backend_options=DEFAULT_BACKEND_OPTIONS), (), SPECS) == []


# What a user might type: the forms each option takes, and words with characters a shell or the parser could trip on.
ODD = st.text(st.sampled_from("ab:=[],.-_@#$ '/0123456789e"), min_size=1, max_size=8)
NUMBER = st.one_of(st.integers(-5, 5).map(str), st.floats(allow_nan=False, allow_infinity=False).map(repr))
PER_OUTPUT = st.one_of(NUMBER, st.tuples(st.sampled_from(["y", "out 0", "a:b"]), NUMBER).map(":".join), ODD)
SHAPE = st.one_of(st.lists(st.integers(0, 9), max_size=3).map(lambda d: f"x:[{','.join(map(str, d))}]"),
                  st.integers(1, 9).map(lambda n: f"batch={n}"), ODD)
RANGE = st.one_of(st.tuples(NUMBER, NUMBER).map(lambda r: f"[{r[0]},{r[1]}]"),
                  st.tuples(NUMBER, NUMBER).map(lambda r: f"x:[{r[0]},{r[1]}]"), ODD)
FORMS = {"atol": PER_OUTPUT, "rtol": PER_OUTPUT, "error_quantile": PER_OUTPUT, "timeout": PER_OUTPUT,
         "check_error_stat": st.one_of(st.sampled_from(["elemwise", "y:median", "mean"]), ODD),
         "input_shapes": SHAPE, "val_range": RANGE, "compare": st.sampled_from(["l2", "cosine", "indices", "max"]),
         "postprocess": st.one_of(st.sampled_from(["top-3", "y:top-2,axis=1"]), ODD),
         "load_inputs": st.one_of(st.sampled_from(["in.json", "a b/in", "m.onnx"]), ODD)}


def _option_value(option):
    if option.kind == FLAG:
        return st.booleans()
    if option.kind == INT:
        return st.one_of(st.none(), st.integers(-2**40, 2**40)) if option.name == "iterations" else \
            st.integers(-2**40, 2**40)
    if option.kind == TEXT:
        return st.one_of(st.none(), ODD)
    return st.lists(FORMS.get(option.name, ODD), max_size=3).map(tuple)


def _backend_value(spec, option):
    if option.is_flag:
        return st.booleans()
    one = st.sampled_from(option.choices) if option.choices else \
        st.integers(-3, 300) if option.type is int else ODD
    if option.multiple:
        return st.lists(one, min_size=1 if option.default else 0, max_size=3).map(tuple)
    return st.one_of(st.just(option.default), one)


REQUESTS = st.builds(
    lambda model, values, thresholds, backend: RunRequest(
        model=model, **values, thresholds={k: v for k, v in thresholds.items() if v},
        backend_options={**DEFAULT_BACKEND_OPTIONS, **backend}),
    st.one_of(st.none(), st.sampled_from(["m.onnx", "my dir/m.onnx", "e.engine"])),
    st.fixed_dictionaries({o.name: _option_value(o) for o in RUN_OPTIONS}),
    st.dictionaries(st.sampled_from(THRESHOLD_METRICS), st.lists(PER_OUTPUT, max_size=3).map(tuple)),
    st.fixed_dictionaries({}, optional={spec.param(o): _backend_value(spec, o) for spec in SPECS for o in spec.options}))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(REQUESTS)
def test_a_request_written_as_words_parses_back_to_itself(request):
    words = request_words(request, backends=SPECS)
    parsed, cli = request_from_words(words, PLUGINS)
    assert parsed == request, words
    assert cli == {"plugin_args": (), "debug": False, "verbose": 0, "quiet": False}


@pytest.mark.parametrize("select", [("backends", "reference"), (COMPARISON,), ("model", "load_inputs", COMPARISON)])
@settings(max_examples=40, deadline=None)
@given(request=REQUESTS)
def test_a_selection_of_a_request_parses_back_to_that_selection(select, request):
    """What cmpx reduce prints: only some options; the others come back at their defaults."""
    words = request_words(request, select, SPECS)
    chosen = {o.name for o in RUN_OPTIONS if o.name in select or o.group in select}
    expected = replace(RunRequest(**{name: getattr(request, name) for name in chosen}),
                       model=request.model if "model" in select else None,
                       thresholds=request.thresholds if COMPARISON in select else {},
                       backend_options=request.backend_options)
    assert request_from_words(words, PLUGINS)[0] == expected, words


FLOAT = st.floats(allow_nan=False, allow_infinity=False)
PYTHON_VALUES = st.fixed_dictionaries({}, optional={
    "atol": st.one_of(FLOAT, st.dictionaries(st.sampled_from(["y", "out 0"]), FLOAT, min_size=1)),
    "rtol": st.lists(st.one_of(FLOAT, st.just("1e-3")), min_size=1, max_size=2),
    "input_shapes": st.dictionaries(st.sampled_from(["x", "batch"]), st.one_of(
        st.lists(st.integers(0, 64), max_size=3), st.integers(1, 8)), min_size=1),
    "val_range": st.one_of(st.tuples(FLOAT, FLOAT), st.dictionaries(st.just("x"), st.tuples(FLOAT, FLOAT),
                                                                      min_size=1)),
    "seed": st.integers(0, 2**32 - 1), "iterations": st.one_of(st.none(), st.integers(1, 9)),
    "nan_equal": st.booleans(), "reference": st.sampled_from(["onnxref", "onnxrt#2"]),
    "memory_budget": st.one_of(st.integers(1, 2**40), st.just("6GiB")), "load_inputs": st.just(["a b/in.json"]),
    "l2_threshold": FLOAT, "index_tolerance": st.dictionaries(st.just("y"), st.integers(0, 5), min_size=1),
    "onnxrt_providers": st.one_of(st.lists(st.sampled_from(["cuda", "cpu"]), min_size=1, max_size=2),
                                  st.just("cuda")),
    "onnxref_opset": st.integers(0, 21), "trt_tf32": st.booleans()})


@settings(max_examples=60, deadline=None)
@given(PYTHON_VALUES)
def test_a_request_made_from_python_values_prints_as_words_that_parse_to_it(values):
    """cmpx.run()'s keywords become the words the command line takes: printed, they parse to the same request."""
    from cmpx.comparison.metric_names import threshold_keywords
    from cmpx.options.request import from_python

    params = [spec.param(option) for spec in SPECS for option in spec.options]
    request = from_python("m.onnx", ["onnxrt", "onnxref"], values, threshold_keywords(PLUGINS), params)
    request = replace(request, backend_options={**DEFAULT_BACKEND_OPTIONS, **request.backend_options})
    words = request_words(request, backends=SPECS)
    parsed = request_from_words(words, PLUGINS)[0]
    assert replace(parsed, backend_options={}) == replace(request, backend_options={}), words
    # a backend option's Python value (a list, or one string for several) is the command line's tuple once checked
    assert _checked(parsed) == _checked(request), words


def _checked(request):
    from cmpx.lifecycle.preflight import _backend_options

    return {spec.name: _backend_options(spec, request.backend_options) for spec in SPECS}
