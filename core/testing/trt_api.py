"""TensorRT's published Python API, read on a machine without TensorRT or a GPU, and the names a source uses
checked against it: TensorRT 10's type stubs (the ``tensorrt-stubs`` distribution, its .pyi files parsed with
``ast``, nothing imported) and TensorRT 11's lean runtime (``tensorrt_lean``: it imports without a GPU and has the
runtime half of the API, no builder, network or parser). cmpx.testing.trt_names reads the names from the source.

A name is claimed for every major version asked about, except a *guarded* one (the source asks for it first, with
``hasattr(x, "NAME")`` or ``getattr(x, "NAME", default)``): that one, and what is reached through it, is claimed
only where it exists, and it must exist in one of them.
"""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import keyword
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

DEPRECATED = "[DEPRECATED]"


@dataclass(frozen=True)
class Member:
    kind: str  # "class", "function" (a module function or a method) or "value" (attribute, property, enum member)
    returns: str | None = None  # a value's type, a function's return type, as the API writes it
    params: frozenset[str] | None = None  # a function's parameter names over its overloads; None where unknown
    deprecated: bool = False


@dataclass(frozen=True)
class Use:
    name: str  # dotted from the module: "Builder", "Builder.create_network", "ILogger.Severity.WARNING"
    where: str  # "backend.py:87"
    guarded: bool = False
    keywords: tuple[str, ...] = ()

    @property
    def root(self) -> str:
        return self.name.split(".", 1)[0]


class PublishedAPI(Protocol):
    label: str  # "TensorRT 10.13.0.35 type stubs"
    major: int

    def covers(self, root: str) -> bool: ...  # whether this source can say anything about names under ``root``
    def module_member(self, name: str) -> Member | None: ...
    def member(self, owner: str, name: str) -> Member | None: ...  # ``owner``: a class, dotted if nested


def lookup(api: PublishedAPI, name: str) -> Member | None:
    """The member a dotted name (module-level name, then class members) is in ``api``, or None."""
    first, *rest = name.split(".")
    found, owner = api.module_member(first), first
    for part in rest:
        if found is None or found.kind != "class":
            return None
        found, owner = api.member(owner, part), f"{owner}.{part}"
    return found


class StubsAPI:
    """TensorRT's API as the tensorrt-stubs distribution types it."""

    def __init__(self, package_init: str, bindings: str):
        self._classes: dict[str, tuple[list[str], dict[str, Member]]] = {}  # name -> (bases, members)
        self._top: dict[str, Member] = {}
        for node in _parse_stub(bindings).body:
            if isinstance(node, ast.ClassDef):
                self._top[node.name] = Member("class")
                self._read_class(node, node.name)
            elif isinstance(node, ast.FunctionDef):
                self._top[node.name] = _function(node)
        self._module: dict[str, Member] = {}  # the names ``import tensorrt`` gives
        self.version = ""
        for node in _parse_stub(package_init).body:
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    imported = self._top.get(alias.name) if node.module == "tensorrt_bindings.tensorrt" else None
                    self._module[alias.asname or alias.name] = imported or Member("value")
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                self._module[node.target.id] = Member("value", ast.unparse(node.annotation))
                if node.target.id == "__version__" and node.value is not None:
                    self.version = ast.literal_eval(node.value)
        self.label = f"TensorRT {self.version} type stubs"
        self.major = int(self.version.split(".")[0])

    @classmethod
    def installed(cls) -> StubsAPI | None:
        try:
            dist = importlib.metadata.distribution("tensorrt-stubs")
        except importlib.metadata.PackageNotFoundError:
            return None
        files = {str(f): f for f in dist.files or ()}
        if not {"tensorrt/__init__.pyi", "tensorrt_bindings/tensorrt.pyi"} <= set(files):
            return None

        def read(path: str) -> str:
            return Path(str(dist.locate_file(files[path]))).read_text(encoding="utf-8")

        return cls(read("tensorrt/__init__.pyi"), read("tensorrt_bindings/tensorrt.pyi"))

    def covers(self, root: str) -> bool:
        return True

    def is_class(self, name: str) -> bool:
        return name in self._classes

    def module_member(self, name: str) -> Member | None:
        return self._module.get(name)

    def member(self, owner: str, name: str) -> Member | None:
        bases, members = self._classes.get(owner, ([], {}))
        if name in members:
            return members[name]
        return next((m for base in bases if (m := self.member(base, name)) is not None), None)

    def _read_class(self, node: ast.ClassDef, qualname: str) -> None:
        doc = ast.get_docstring(node) or ""
        deprecated_members = _deprecated_enum_members(doc) | {  # and the attributes its ":ivar" lines mark
            m[1] for m in re.finditer(rf":ivar (\w+):\s*(?::class:`[^`]*`\s*)?{re.escape(DEPRECATED)}", doc)}
        members: dict[str, Member] = {}
        for item in node.body:
            if isinstance(item, ast.ClassDef):
                members[item.name] = Member("class")
                self._read_class(item, f"{qualname}.{item.name}")
            elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                members[item.target.id] = Member("value", ast.unparse(item.annotation),
                                                 deprecated=item.target.id in deprecated_members)
            elif isinstance(item, ast.FunctionDef):
                decorators = {ast.unparse(d) for d in item.decorator_list}
                if any(d.endswith((".setter", ".deleter")) for d in decorators):
                    continue
                if "property" in decorators:
                    flagged = item.name in deprecated_members or _is_deprecated(item)
                    members[item.name] = Member("value", _returns(item), deprecated=flagged)
                else:
                    members[item.name] = _merge(members.get(item.name), _function(item))
        self._classes[qualname] = ([ast.unparse(b) for b in node.bases], members)


def _parse_stub(text: str) -> ast.Module:
    """A stub file parsed, though generated stubs may write what Python does not accept: a parameter without a
    default after ones with defaults (the line's defaults are dropped), a parameter named ``in`` (renamed ``in_``);
    failing that, the line's parameters are read as unknown (``*args, **kwargs``)."""
    lines = text.splitlines()
    for _ in range(len(lines)):
        try:
            return ast.parse("\n".join(lines))
        except SyntaxError as error:
            index = (error.lineno or 0) - 1
            if not 0 <= index < len(lines):
                raise
            lines[index] = _readable(lines[index], error)
    raise SyntaxError("the stub file could not be read")


def _readable(line: str, error: SyntaxError) -> str:
    fixed = re.sub(r"\s*=\s*(?:None|\.\.\.|'[^']*'|\"[^\"]*\"|[\w.+-]+)(?=\s*[,)])", "", line)
    if fixed == line:
        fixed = re.sub(r"\b(%s)(?=\s*:)" % "|".join(keyword.kwlist), r"\1_", line)
    if fixed == line:
        fixed = re.sub(r"^(\s*def\s+\w+)\(.*\)(\s*->.*)?:\s*$", r"\1(*args, **kwargs)\2:", line)
    if fixed == line:
        raise error
    return fixed


def _returns(node: ast.FunctionDef) -> str | None:
    return ast.unparse(node.returns) if node.returns is not None else None


def _is_deprecated(node: ast.FunctionDef) -> bool:
    return _marked_deprecated(ast.get_docstring(node) or "")


def _marked_deprecated(text: str) -> bool:
    """Whether a line of ``text`` opens with the mark (a mention of some other deprecated API mid-line is not)."""
    return any(line.lstrip().startswith(DEPRECATED) for line in text.splitlines())


def _function(node: ast.FunctionDef) -> Member:
    args = node.args
    names = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
    if names and names[0] in ("self", "this"):
        names = names[1:]
    params = None if args.vararg or args.kwarg else frozenset(names)
    return Member("function", _returns(node), params, _is_deprecated(node))


def _merge(earlier: Member | None, overload: Member) -> Member:
    """One member for a method's overloads: any overload's parameters, the return type they agree on, deprecated
    only if every overload is."""
    if earlier is None:
        return overload
    params = None if earlier.params is None or overload.params is None else earlier.params | overload.params
    returns = earlier.returns if earlier.returns == overload.returns else "..."
    return Member("function", returns, params, earlier.deprecated and overload.deprecated)


def _deprecated_enum_members(doc: str) -> set[str]:
    """The members a pybind11 enum's docstring ("Members:", then ``NAME : text`` entries) marks deprecated."""
    entries: dict[str, str] = {}
    current = None
    for line in doc.partition("Members:")[2].splitlines():
        if match := re.match(r"\s*([A-Z][A-Z0-9_]*) : ?(.*)$", line):
            current = match[1]
            entries[current] = match[2]
        elif current is not None:
            entries[current] += "\n" + line
    return {name for name, text in entries.items() if _marked_deprecated(text)}


class LeanRuntimeAPI:
    """TensorRT's runtime API as the installed lean runtime (``tensorrt_lean``) has it."""

    def __init__(self, module: Any):
        self._module = module
        self.version = module.__version__
        self.label = f"TensorRT {self.version} lean runtime"
        self.major = int(self.version.split(".")[0])

    @classmethod
    def installed(cls) -> LeanRuntimeAPI | None:
        try:
            return cls(importlib.import_module("tensorrt_lean"))
        except (ImportError, OSError):  # not installed, or its libraries do not load here
            return None

    def covers(self, root: str) -> bool:
        return hasattr(self._module, root)

    def module_member(self, name: str) -> Member | None:
        return _live_member(self._module, name)

    def member(self, owner: str, name: str) -> Member | None:
        cls: Any = self._module
        for part in owner.split("."):
            cls = getattr(cls, part, None)
        return None if cls is None else _live_member(cls, name)


def _live_member(holder: Any, name: str) -> Member | None:
    if not hasattr(holder, name):
        return None
    value = getattr(holder, name)
    if isinstance(value, type):
        return Member("class")
    if callable(value):
        return Member("function", params=_signature_params(name, getattr(value, "__doc__", None) or ""))
    return Member("value")


def _signature_params(name: str, doc: str) -> frozenset[str] | None:
    """Parameter names from the pybind11 signatures in a docstring (``name(self: T, a: int, b: X = 1) -> R``; an
    overloaded one has ``name(*args, **kwargs)``, then numbered signatures); None where it has none to read."""
    signatures = []
    for match in re.finditer(rf"^\s*(?:\d+\.\s*)?{re.escape(name)}\((.*)\)\s*(?:->.*)?$", doc, re.MULTILINE):
        depth, start, text, pieces = 0, 0, match[1], []
        for i, char in enumerate(text + ","):
            depth += char in "([<{"
            depth -= char in ")]>}"
            if char == "," and depth == 0:
                pieces.append(text[start:i].strip())
                start = i + 1
        signatures.append([piece.split(":", 1)[0].split("=", 1)[0].strip() for piece in pieces if piece])
    overloads = [names for names in signatures if names != ["*args", "**kwargs"]]
    if not overloads or any(n.startswith("*") for names in overloads for n in names):
        return None
    return frozenset(n for names in overloads for n in names if n != "self")


def problems(uses: Sequence[Use], apis: Sequence[PublishedAPI], majors: Sequence[int]) -> list[str]:
    """What is wrong with ``uses`` in the APIs of the claimed ``majors``: a name one lacks where the source claims
    it, a keyword argument the member does not take; and a guarded name that none of ``apis`` has at all."""
    guards = {use.name for use in uses if use.guarded}
    found = []
    for use in uses:
        present = False
        for api in apis:
            if not api.covers(use.root):
                continue
            if any(_within(use.name, g) and lookup(api, g) is None for g in guards):
                continue  # asked for first, and not there: not claimed for this version
            member = lookup(api, use.name)
            present = present or member is not None
            if api.major not in majors:
                continue
            if member is None:
                found.append(f"{use.name} ({use.where}) is not in {api.label}")
                continue
            for name in use.keywords:
                if member.params is not None and name not in member.params:
                    found.append(f"{use.name} ({use.where}) takes no keyword {name!r} in {api.label}")
        if use.guarded and not present:
            labels = ", ".join(api.label for api in apis)
            found.append(f"{use.name} ({use.where}) is asked for with hasattr/getattr but is in none of: {labels}")
    return sorted(set(found))


def _within(name: str, guard: str) -> bool:
    return name == guard or name.startswith(guard + ".")


def deprecated(uses: Sequence[Use], api: PublishedAPI) -> list[str]:
    """The names ``api`` marks deprecated (the next major's removed ones) that ``uses`` claims unguarded."""
    guards = {use.name for use in uses if use.guarded}
    return sorted({f"{u.name} ({u.where})" for u in uses if not any(_within(u.name, g) for g in guards)
                   and (m := lookup(api, u.name)) is not None and m.deprecated})


def uncovered_roots(uses: Sequence[Use], api: PublishedAPI) -> set[str]:
    return {use.root for use in uses if not api.covers(use.root)}


def declared_members(members: Mapping[str, Sequence[str]], where: str) -> list[Use]:
    """Uses for enum members a source names by string: {"DataType": ("FLOAT", ...)}."""
    return [Use(f"{owner}.{name}", where) for owner, names in members.items() for name in names]
