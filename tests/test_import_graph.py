"""The import graph of cmpx and its built-in plugins (issue #27, item 5; docs/architecture.md states the rules):
every import counts — at the top of a module, inside a function (deferred for start-up speed), or under
TYPE_CHECKING — so a dependency that runs the wrong way cannot hide. No cycles, and the layer rules below hold."""

import ast
import os
from collections import defaultdict

import pytest

from conftest import REPO

PACKAGES = {"cmpx": "core", "cmpx_onnxrt": "backends/onnxrt", "cmpx_onnxref": "backends/onnxref",
            "cmpx_trt": "backends/trt", "cmpx_comparators": "comparators"}


def modules() -> dict[str, str]:
    """Every module of the packages: dotted name -> file."""
    found = {}
    for package, directory in PACKAGES.items():
        for folder, _, files in os.walk(REPO / directory):
            for file in files:
                if file.endswith(".py"):
                    relative = os.path.relpath(os.path.join(folder, file), REPO / directory)[:-3].replace(os.sep, ".")
                    name = package if relative == "__init__" else f"{package}.{relative.removesuffix('.__init__')}"
                    found[name] = os.path.join(folder, file)
    return found


def import_graph(known: dict[str, str]) -> dict[str, set[str]]:
    """module -> the modules of ``known`` it imports, anywhere in its file. ``from P import m`` is an import of
    the module P.m where there is one, else of P (a name P defines, or re-exports)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in known.items():
        package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                submodules = [f"{base}.{alias.name}" for alias in node.names]
                targets = [m for m in submodules if m in known]
                if len(targets) < len(submodules):
                    targets.append(base)
            else:
                continue
            for target in targets:
                while target and target not in known:  # an attribute of a module: the module
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]], nodes) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    index, low, on_stack, stack, found, counter = {}, {}, set(), [], [], [0]
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


KNOWN = modules()
GRAPH = import_graph(KNOWN)

# Layer rules: (who, what it must not import, why). A prefix "cmpx.x" means the module cmpx.x and those under it.
COMMANDS = ("cmpx.cli.main", "cmpx.cli.launch", "cmpx.cli.run", "cmpx.cli.reduce_cmd", "cmpx.cli.sweep_cmd",
            "cmpx.cli.precision_cmd",
            "cmpx.cli.env_cmd", "cmpx.cli.tolerances_cmd")
LOWER = ("cmpx.errors", "cmpx._version", "cmpx.printable", "cmpx.suggest", "cmpx.dtypes", "cmpx.userfiles",
         "cmpx.outputs", "cmpx.structured", "cmpx.memory", "cmpx.limits", "cmpx.plan", "cmpx.model", "cmpx.saved",
         "cmpx.transport", "cmpx.loaders", "cmpx.transforms", "cmpx.outcome", "cmpx.options.table",
         "cmpx.options.request", "cmpx.options.words", "cmpx.options.argtypes", "cmpx.tolerances.tolerance_file",
         "cmpx.tolerances.noise_floor")
RUN_LAYER = ("cmpx.lifecycle", "cmpx.api", "cmpx.report", "cmpx.reports", "cmpx.cli", "cmpx.sweep", "cmpx.reduce",
             "cmpx.precision")
RULES = [
    (("cmpx",), ("cmpx_onnxrt", "cmpx_onnxref", "cmpx_trt", "cmpx_comparators"),
     "the core finds plugins through entry points, never by importing them"),
    (("cmpx",), ("cmpx.testing",), "the test helpers sit on top of cmpx; cmpx itself never needs them"),
    (LOWER, RUN_LAYER, "a lower layer must not reach up into the run, its reports or the commands"),
    (("cmpx",), COMMANDS, "only the command group and the console script import a command's module"),
    (("cmpx.sweep",), ("cmpx.reduce",), "a command's implementation never imports another's (sweep, reduce): what "
     "both need (cmpx run's word parser) sits below them"),
    (("cmpx.reduce",), ("cmpx.sweep",), "a command's implementation never imports another's (reduce, sweep)"),
    (("cmpx.sweep", "cmpx.reduce"), ("cmpx.precision",), "a command's implementation never imports another's"),
    (("cmpx.precision",), ("cmpx.sweep", "cmpx.reduce.driver", "cmpx.reduce.search", "cmpx.reduce.candidates",
                           "cmpx.reduce.command_lines"),
     "cmpx precision runs its candidates as cmpx reduce does, through cmpx.reduce.observe, and nothing else of it"),
    (("cmpx.sweep", "cmpx.reduce", "cmpx.precision", "cmpx.tolerances", "cmpx.options", "cmpx.lifecycle"),
     ("cmpx.cli",),
     "the commands' implementations and what they share (the run grammar) sit below the CLI"),
]
EXEMPT = {  # importer -> imported, each allowed with its reason
    ("cmpx.cli.main", "cmpx.cli.run"): "the group builds the run command",
    ("cmpx.cli.main", "cmpx.cli.reduce_cmd"): "the group holds its commands",
    ("cmpx.cli.main", "cmpx.cli.precision_cmd"): "the group holds its commands",
    ("cmpx.cli.main", "cmpx.cli.sweep_cmd"): "the group holds its commands",
    ("cmpx.cli.main", "cmpx.cli.env_cmd"): "the group holds its commands",
    ("cmpx.cli.main", "cmpx.cli.tolerances_cmd"): "the group holds its commands",
    ("cmpx.cli.launch", "cmpx.cli.main"): "the console script hands over to the group",
    ("cmpx.__main__", "cmpx.cli.launch"): "python -m cmpx is the console script",
}
# The public API (the package cmpx itself) is for plugins, users and the test helpers, not for cmpx's own modules.
PUBLIC_API_USERS = ("cmpx.testing", "cmpx_onnxrt", "cmpx_onnxref", "cmpx_trt", "cmpx_comparators")


def _under(module: str, prefixes) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def test_the_graph_is_read_from_every_module_and_sees_deferred_and_type_checking_imports():
    assert len(KNOWN) > 150 and "cmpx.cli.main" in KNOWN and "cmpx_onnxrt.backend" in KNOWN
    assert "cmpx.cli.run" in GRAPH["cmpx.cli.main"]  # a deferred import (inside CmpxGroup.get_command)
    assert "cmpx.transport.pool" in GRAPH["cmpx.cli.invocation"]  # under TYPE_CHECKING
    assert "cmpx.errors" in GRAPH["cmpx.outcome.report_data"]  # from cmpx.errors import ExitCode


def test_there_is_no_import_cycle():
    found = cycles(GRAPH, sorted(KNOWN))
    assert found == [], "import cycles (each a set of modules that import each other): " + "; ".join(
        " <-> ".join(c) for c in found)


def test_the_cycle_finder_finds_a_cycle_it_is_given():
    graph = defaultdict(set, {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}})
    assert cycles(graph, ["a", "b", "c", "d"]) == [["a", "b", "c"]]


@pytest.mark.parametrize("importers, forbidden, why", RULES, ids=[why.split(",")[0][:40] for *_, why in RULES])
def test_imports_follow_the_layers(importers, forbidden, why):
    wrong = sorted(f"{m} imports {t}" for m, targets in GRAPH.items() for t in targets
                   if _under(m, importers) and _under(t, forbidden) and not _under(m, forbidden)
                   and (m, t) not in EXEMPT and not _under(m, ("cmpx.testing",)))
    assert wrong == [], f"{why}: " + "; ".join(wrong)


def test_cmpx_modules_do_not_import_the_public_api_package():
    wrong = sorted(m for m, targets in GRAPH.items() if "cmpx" in targets and not _under(m, PUBLIC_API_USERS))
    assert wrong == [], ("these import the package cmpx (its public API) instead of the module that defines what "
                         "they need: " + ", ".join(wrong))
