"""The layout keeps its promises: small modules, one table of run options, no framework in the coordinator's
imports of the core."""

from dataclasses import fields

from cmpx.options.request import RunRequest
from cmpx.options.table import RUN_OPTIONS
from conftest import REPO

MAX_LINES = 400


def test_no_module_is_over_400_lines():
    long = {str(path.relative_to(REPO)): n for folder in ("core", "backends", "comparators")
            for path in (REPO / folder).rglob("*.py") if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_every_run_option_is_a_request_field_and_back():
    declared = {option.name for option in RUN_OPTIONS}
    extra = {"model", "thresholds", "backend_options"}
    assert declared == {f.name for f in fields(RunRequest)} - extra


def test_each_flag_belongs_to_one_option():
    flags = [flag for option in RUN_OPTIONS for flag in option.flags]
    assert len(flags) == len(set(flags))
