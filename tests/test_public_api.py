"""The plugin API is the package ``cmpx`` itself (issue #27, item 6): every name it exports resolves, what
docs/plugins.md and docs/api.md tell authors to use is one of them, and the example OpenVINO plugin imports nothing
else of cmpx (a pytest-style public face over a private body)."""

import ast
import re
import subprocess
import sys

import pytest

import cmpx
from conftest import REPO

DOCS = [REPO / "docs" / "plugins.md", REPO / "docs" / "api.md"]
EXAMPLE = REPO / "examples" / "plugins" / "cmpx-openvino" / "cmpx_openvino"


def _python_blocks(path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(), re.S)


def private_uses(tree: ast.AST) -> list[str]:
    """What code reaches into cmpx beyond its public names: a module import (``import cmpx.model``, ``from
    cmpx.model.info import ...``), a name ``from cmpx import`` that is not exported, or ``cmpx.NAME`` for a NAME
    that is not."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names if a.name.startswith("cmpx.")]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "cmpx":
            if node.module != "cmpx":
                found.append(f"from {node.module} import ...")
            else:
                found += [f"from cmpx import {a.name}" for a in node.names if a.name not in cmpx.__all__]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "cmpx" \
                and node.attr not in cmpx.__all__:
            found.append(f"cmpx.{node.attr}")
    return found


def test_every_exported_name_resolves_and_is_listed_once():
    assert len(set(cmpx.__all__)) == len(cmpx.__all__)
    missing = [name for name in cmpx.__all__ if getattr(cmpx, name, None) is None]
    assert missing == []


def test_every_lazy_name_is_exported_and_imported_for_type_checkers():
    """A name resolved on first use is in ``__all__`` and imported under TYPE_CHECKING too, from the module it
    is resolved from, so that mypy and editors see its real type (not ``Any`` from ``__getattr__``)."""
    assert set(cmpx.__all__) == set(cmpx._LAZY) | {"Backend", "__version__"}
    tree = ast.parse((REPO / "core" / "__init__.py").read_text())
    checking = next(node for node in tree.body
                    if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING")
    imported = {alias.name: node.module for node in checking.body if isinstance(node, ast.ImportFrom)
                for alias in node.names}
    assert imported == cmpx._LAZY


def test_the_plugin_api_has_what_the_plugin_guide_names():
    for name in ("hookimpl", "Backend", "BackendOption", "TensorSpec", "MetricResult", "ComparisonContext",
                 "DataOptions", "TransformOptions", "exposed_model", "load_for_transform", "save_model",
                 "read_model", "BackendRegistry", "DataLoaderRegistry", "MetricRegistry", "TransformRegistry"):
        assert name in cmpx.__all__, name


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'model_graph'"):
        cmpx.model_graph  # noqa: B018


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_the_guides_name_only_public_names(path):
    """Code and text alike: ``cmpx.NAME`` is an exported name, never a module path such as cmpx.model.graph."""
    text = path.read_text()
    modules = sorted(set(re.findall(r"\bcmpx\.[a-z_]+\.[A-Za-z_.]+", text)))
    assert modules == [], f"{path.name} sends readers into cmpx's modules"
    named = set(re.findall(r"(?<![\w.])cmpx\.([A-Za-z_]\w*)", text))
    assert sorted(named - set(cmpx.__all__)) == []
    for block in _python_blocks(path):
        assert private_uses(ast.parse(block)) == [], block


def test_the_example_openvino_plugin_uses_only_the_public_api():
    sources = sorted(EXAMPLE.glob("*.py"))
    assert {p.name for p in sources} >= {"plugin.py", "backend.py"}
    wrong = {p.name: uses for p in sources if (uses := private_uses(ast.parse(p.read_text())))}
    assert wrong == {}


def test_the_checker_sees_private_imports_and_names():
    code = ("import cmpx.model\nfrom cmpx.model.info import read_model\nfrom cmpx import Backend, Secret\n"
            "from cmpx import hookimpl\ncmpx.TensorSpec\ncmpx.registry\n")
    assert private_uses(ast.parse(code)) == ["import cmpx.model", "from cmpx.model.info import ...",
                                             "from cmpx import Secret", "cmpx.registry"]


def test_importing_cmpx_and_resolving_a_plugin_name_imports_no_framework():
    """``cmpx --help`` and a plugin's light registration module stay free of onnx and numpy: names resolve lazily."""
    code = ("import sys, cmpx; cmpx.DataOptions, cmpx.TransformOptions, cmpx.BackendOption, cmpx.TensorSpec; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('onnx', 'numpy', 'onnxruntime')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout
