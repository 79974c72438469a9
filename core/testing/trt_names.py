"""The TensorRT names a module's source uses, read with ``ast`` (the source is never run), for checking against
TensorRT's published API (cmpx.testing.trt_api).

What counts: attribute chains on the module's aliases (``trt.BuilderFlag.TF32``); members of the values those
give, typed through the stubs' annotations (``trt.Builder(logger)`` is a Builder, ``builder.create_network()`` an
INetworkDefinition, a comprehension over ``network.get_input(i)`` a list of ITensor, and so on through locals and
``self.`` attributes); parameters annotated with a TensorRT class; names asked for with ``hasattr``/``getattr``;
keyword arguments to TensorRT methods; the methods a subclass of a TensorRT class overrides. Where the stubs do not
say what a call returns (``-> ...``), ``return_types`` may; an attribute read on such a value is reported as
untyped rather than skipped, and so is a ``getattr`` with a computed name (its names must be declared).
"""

from __future__ import annotations

import ast
import re
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from cmpx.testing.trt_api import StubsAPI, Use


@dataclass(frozen=True)
class _Value:
    kind: str  # "module", "class" (the class itself), "object", "function", "list" (of objects), "opaque"
    name: str = ""  # the class (of an object, a list's items); a function's dotted name; what an opaque value is
    returns: str | None = None  # a function's return type, as the stubs write it


@dataclass
class SourceUses:
    uses: list[Use] = field(default_factory=list)
    untyped: list[str] = field(default_factory=list)  # TensorRT values whose class goes unknown, and where
    dynamic: list[str] = field(default_factory=list)  # classes ``getattr`` reads a computed name from


def source_uses(source: str, filename: str, aliases: Sequence[str], api: StubsAPI,
                return_types: Mapping[str, str] | None = None) -> SourceUses:
    """The TensorRT names ``source`` uses, where ``aliases`` (``"trt"``, ``"self.trt"``) are the tensorrt module;
    ``return_types``: {"Class.method" or "function": "Class"} where the stubs do not say."""
    reader = _Reader(ast.parse(source), filename, tuple(aliases), api, dict(return_types or {}))
    return reader.read()


class _Reader:
    def __init__(self, tree: ast.Module, filename: str, aliases: tuple[str, ...], api: StubsAPI,
                 return_types: dict[str, str]):
        self.tree, self.filename, self.aliases, self.api, self.return_types = tree, filename, aliases, api, return_types
        self.env: dict[tuple[int | None, str], _Value] = {}  # (scope, name) -> value; scope None: ``self.`` names
        self.scopes: list[int] = [0]
        self.functions = {node.name: node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
        self.found = SourceUses()

    def read(self) -> SourceUses:
        for _ in range(6):  # until what the names hold stops changing (a use may precede its assignment)
            before = dict(self.env)
            self.found = SourceUses()
            self._statements(self.tree.body)
            if self.env == before:
                break
        unique = {(u.name, u.where, u.guarded, u.keywords): u for u in self.found.uses}
        return SourceUses(list(unique.values()), sorted(set(self.found.untyped)), sorted(set(self.found.dynamic)))

    # statements

    def _statements(self, body: Sequence[ast.AST]) -> None:
        for node in body:
            self._statement(node)

    def _statement(self, node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for expr in node.decorator_list + node.args.defaults + [d for d in node.args.kw_defaults if d]:
                self._eval(expr)
            self.scopes.append(id(node))
            arguments = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
            for arg in arguments:
                annotated = self._annotation(arg.annotation)
                if annotated is not None and annotated.kind == "class":
                    self._bind_name(arg.arg, _Value("object", annotated.name))
            self._statements(node.body)
            self.scopes.pop()
        elif isinstance(node, ast.ClassDef):
            for base in node.bases:
                value = self._eval(base)
                if value is not None and value.kind == "class":
                    for item in node.body:
                        if isinstance(item, ast.FunctionDef) and not _dunder(item.name):
                            self._use(value.name, item.name, item)  # an override TensorRT calls by this name
            self._statements(node.body)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            value = self._eval(node.value) if node.value is not None else None
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                self._bind(target, None if isinstance(node, ast.AugAssign) else value)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            self._bind(node.target, _item(self._eval(node.iter)))
            self._statements(node.body + node.orelse)
        else:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.expr):
                    self._eval(child)
                elif not isinstance(child, (ast.expr_context, ast.operator)):
                    self._statement(child)

    def _bind(self, target: ast.expr, value: _Value | None) -> None:
        if isinstance(target, ast.Name):
            if value is not None:
                self._bind_name(target.id, value)
        elif isinstance(target, ast.Attribute) and (dotted := _dotted(target)) == f"self.{target.attr}":
            if value is not None and dotted not in self.aliases:
                self.env[(None, dotted)] = value
        elif isinstance(target, ast.Attribute):  # an attribute of a TensorRT object is set
            self._attribute(self._eval(target.value), target.attr, target)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self._bind(element, None)
        elif isinstance(target, ast.Starred):
            self._bind(target.value, None)
        else:
            self._eval(target)

    def _bind_name(self, name: str, value: _Value) -> None:
        self.env[(self.scopes[-1], name)] = value

    def _annotation(self, node: ast.expr | None) -> _Value | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            node = ast.parse(node.value, mode="eval").body
        return self._eval(node) if node is not None else None

    # expressions

    def _eval(self, node: ast.expr | None) -> _Value | None:
        if node is None:
            return None
        if _dotted(node) in self.aliases:
            return _Value("module")
        if isinstance(node, ast.Name):
            return next((self.env[(s, node.id)] for s in reversed(self.scopes) if (s, node.id) in self.env), None)
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id == "self":
                return self.env.get((None, f"self.{node.attr}"))
            return self._attribute(self._eval(node.value), node.attr, node)
        if isinstance(node, ast.Call):
            return self._call(node)
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            for comprehension in node.generators:
                self._bind(comprehension.target, _item(self._eval(comprehension.iter)))
                for condition in comprehension.ifs:
                    self._eval(condition)
            if isinstance(node, ast.DictComp):
                self._eval(node.key)
                self._eval(node.value)
                return None
            element = self._eval(node.elt)
            if element is not None and element.kind in ("object", "opaque"):
                return _Value("list" if element.kind == "object" else "opaque", element.name)
            return None
        if isinstance(node, ast.Lambda):
            self.scopes.append(id(node))
            self._eval(node.body)
            self.scopes.pop()
            return None
        if isinstance(node, ast.Subscript):
            value = self._eval(node.value)
            self._eval(node.slice)
            return _item(value)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self._eval(child)
            elif isinstance(child, ast.keyword):
                self._eval(child.value)
        return None

    def _call(self, node: ast.Call) -> _Value | None:
        if isinstance(node.func, ast.Name) and node.func.id in ("hasattr", "getattr") and len(node.args) >= 2:
            holder, name = self._eval(node.args[0]), node.args[1]
            for extra in node.args[2:]:
                self._eval(extra)
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                guarded = node.func.id == "hasattr" or len(node.args) == 3
                value = self._attribute(holder, name.value, node, guarded)
                return value if node.func.id == "getattr" else None
            self._eval(name)
            if holder is not None and holder.kind in ("module", "class", "object"):
                self.found.dynamic.append(holder.name or "tensorrt")
            return None
        function = self._eval(node.func)
        passed = [self._eval(arg) for arg in node.args]
        self._check_parameters(node, passed)
        for keyword in node.keywords:
            self._eval(keyword.value)
        if function is None:
            return None
        if function.kind == "class":
            return _Value("object", function.name)
        if function.kind == "function":
            named = tuple(k.arg for k in node.keywords if k.arg)
            if named:
                self.found.uses.append(Use(function.name, self._where(node), keywords=named))
            returns = self.return_types.get(function.name, function.returns)
            return self._typed(returns, f"what {function.name}() returns")
        return None

    def _check_parameters(self, node: ast.Call, passed: list[_Value | None]) -> None:
        """A TensorRT object passed to a function of this source must meet a parameter annotated with its class,
        or what the function does with it goes unchecked."""
        func = node.func
        if isinstance(func, ast.Name) and func.id in self.functions:
            callee, skip = self.functions[func.id], 0
        elif isinstance(func, ast.Attribute) and _dotted(func) == f"self.{func.attr}" and func.attr in self.functions:
            callee, skip = self.functions[func.attr], 1
        else:
            return
        params = (callee.args.posonlyargs + callee.args.args)[skip:]
        for param, value in zip(params, passed):
            if value is not None and value.kind in ("object", "list", "opaque") and param.annotation is None:
                self.found.untyped.append(f"{self._where(node)}: {value.name} passed to {callee.name}({param.arg}), "
                                          "a parameter not annotated with its TensorRT class")

    def _attribute(self, holder: _Value | None, attr: str, node: ast.AST, guarded: bool = False) -> _Value | None:
        if holder is None or holder.kind in ("function", "list"):
            return None
        if holder.kind == "opaque":
            self.found.untyped.append(f"{self._where(node)}: .{attr} on {holder.name}, whose TensorRT class the "
                                      "stubs do not say (annotate it, or declare the return type)")
            return None
        owner = holder.name  # "" for the module
        if _dunder(attr) and (owner or attr in _MODULE_ATTRIBUTES):
            return None  # Python's (__init__, a module's __file__), not TensorRT's; its __version__ is TensorRT's
        self._use(owner, attr, node, guarded)
        dotted = f"{owner}.{attr}" if owner else attr
        member = self.api.member(owner, attr) if owner else self.api.module_member(attr)
        if member is None:
            return None
        if member.kind == "class":
            return _Value("class", dotted)
        if member.kind == "function":
            return _Value("function", dotted, member.returns)
        return self._typed(member.returns, dotted)

    def _typed(self, annotation: str | None, what: str) -> _Value | None:
        """What a value annotated ``annotation`` in the stubs is."""
        if annotation is None:
            return None
        text = re.sub(r"^typing\.ClassVar\[(.*)\]$", r"\1", annotation.strip())
        text = re.sub(r"\btensorrt_bindings\.tensorrt\.", "", text).removesuffix(" | None")
        if self.api.is_class(text):
            return _Value("object", text)
        if (listed := re.fullmatch(r"list\[([\w.]+)\]", text)) and self.api.is_class(listed[1]):
            return _Value("list", listed[1])
        if text in _PLAIN or text.startswith(("list[", "tuple[", "dict[")):
            return None
        return _Value("opaque", what)

    def _use(self, owner: str, attr: str, node: ast.AST, guarded: bool = False) -> None:
        self.found.uses.append(Use(f"{owner}.{attr}" if owner else attr, self._where(node), guarded))

    def _where(self, node: ast.AST) -> str:
        return f"{self.filename}:{getattr(node, 'lineno', 0)}"


_PLAIN = {"str", "int", "bool", "float", "bytes", "None"}
_MODULE_ATTRIBUTES = set(dir(types.ModuleType("any"))) | {"__file__", "__path__", "__cached__", "__builtins__"}


def _item(value: _Value | None) -> _Value | None:
    """What iterating or indexing ``value`` gives."""
    if value is None:
        return None
    if value.kind == "list":
        return _Value("object", value.name)
    if value.kind == "opaque":
        return _Value("opaque", f"an item of {value.name}")
    return None


def _dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for a chain of names, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and (base := _dotted(node.value)) is not None:
        return f"{base}.{node.attr}"
    return None


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")
