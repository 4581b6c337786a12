"""The hand-written stubs of the compiled module (``spdl_rs/_native.pyi``) against the module
itself: every name on one side is on the other, and every function's and method's parameters
(names, kinds, which have defaults) are the same. So a native op added, renamed or given a new
keyword without its stub fails here, not in a user's type checker."""

from __future__ import annotations

import ast
import inspect
import pathlib
import sys
from dataclasses import dataclass

import pytest

import spdl_rs._native as native

STUB = pathlib.Path(native.__file__).parent / "_native.pyi"
if not STUB.is_file():  # the wheel ships the stub beside the package, the source tree too
    STUB = pathlib.Path(__file__).resolve().parents[1] / "python" / "spdl_rs" / "_native.pyi"


@dataclass(frozen=True)
class Param:
    name: str
    kind: inspect._ParameterKind
    has_default: bool


def _stub_params(fn: ast.FunctionDef) -> list[Param]:
    a = fn.args
    out: list[Param] = []
    positional = a.posonlyargs + a.args
    first_default = len(positional) - len(a.defaults)
    for i, arg in enumerate(positional):
        kind = (
            inspect.Parameter.POSITIONAL_ONLY
            if i < len(a.posonlyargs)
            else inspect.Parameter.POSITIONAL_OR_KEYWORD
        )
        out.append(Param(arg.arg, kind, i >= first_default))
    if a.vararg:
        out.append(Param(a.vararg.arg, inspect.Parameter.VAR_POSITIONAL, False))
    for arg, default in zip(a.kwonlyargs, a.kw_defaults):
        out.append(Param(arg.arg, inspect.Parameter.KEYWORD_ONLY, default is not None))
    if a.kwarg:
        out.append(Param(a.kwarg.arg, inspect.Parameter.VAR_KEYWORD, False))
    return out


def _runtime_params(obj: object) -> list[Param] | None:
    """The parameters PyO3 declares (``__text_signature__``); ``None`` when it declares none."""
    if getattr(obj, "__text_signature__", None) is None:
        return None
    try:
        sig = inspect.signature(obj)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return [
        Param(p.name, p.kind, p.default is not inspect.Parameter.empty)
        for p in sig.parameters.values()
    ]


def _body(nodes: list[ast.stmt]) -> list[ast.stmt]:
    """Statements, with ``if sys.version_info ...`` blocks resolved for this interpreter."""
    out: list[ast.stmt] = []
    for node in nodes:
        if isinstance(node, ast.If):
            test = compile(ast.Expression(node.test), str(STUB), "eval")
            out += _body(node.body if eval(test, {"sys": sys}) else node.orelse)
        else:
            out.append(node)
    return out


def _decorators(node: ast.FunctionDef | ast.ClassDef) -> set[str]:
    names = set()
    for d in node.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        names.add(target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", ""))
    return names


def _stub() -> tuple[dict[str, ast.FunctionDef], dict[str, ast.ClassDef], set[str]]:
    tree = ast.parse(STUB.read_text())
    functions, classes, others = {}, {}, set()
    for node in _body(tree.body):
        if isinstance(node, ast.FunctionDef):
            functions[node.name] = node
        elif isinstance(node, ast.ClassDef):
            if "type_check_only" not in _decorators(node):  # stub-only helper types
                classes[node.name] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            others.add(node.target.id)
        elif isinstance(node, ast.Assign):
            others |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return functions, classes, others


FUNCTIONS, CLASSES, OTHERS = _stub()
STUB_TYPEVARS = {n for n in OTHERS if not hasattr(native, n)}  # `T = TypeVar("T")` and the like


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


RUNTIME = {n for n in dir(native) if not _dunder(n)}


def test_every_name_is_in_both() -> None:
    stubbed = {n for n in set(FUNCTIONS) | set(CLASSES) | (OTHERS - STUB_TYPEVARS) if not _dunder(n)}
    assert hasattr(native, "__version__") == ("__version__" in OTHERS)
    assert sorted(RUNTIME - stubbed) == [], "in spdl_rs._native but not in _native.pyi"
    assert sorted(stubbed - RUNTIME) == [], "in _native.pyi but not in spdl_rs._native"


def _mismatch(where: str, stub: ast.FunctionDef, runtime: list[Param]) -> str | None:
    stubbed = _stub_params(stub)
    if stubbed != runtime:
        return f"{where}: stub {[(p.name, p.kind.name, p.has_default) for p in stubbed]} != " \
            f"module {[(p.name, p.kind.name, p.has_default) for p in runtime]}"
    return None


def test_function_signatures_match() -> None:
    problems = []
    for name, stub in sorted(FUNCTIONS.items()):
        runtime = _runtime_params(getattr(native, name, None))
        if runtime is not None and (m := _mismatch(name, stub, runtime)):
            problems.append(m)
    assert problems == [], "\n".join(problems)


def _methods(cls: ast.ClassDef) -> dict[str, ast.FunctionDef]:
    return {
        n.name: n
        for n in _body(cls.body)
        if isinstance(n, ast.FunctionDef) and "overload" not in _decorators(n)
    }


def test_method_signatures_match() -> None:
    problems = []
    for cls_name, stub_cls in sorted(CLASSES.items()):
        cls = getattr(native, cls_name, None)
        if cls is None:
            continue  # reported by test_every_name_is_in_both
        methods = _methods(stub_cls)
        # The constructor: the class's own signature against the stub's __new__ or __init__,
        # its own or a stubbed base class's.
        ctor = _runtime_params(cls)
        stub_ctor = _constructor(stub_cls)
        if ctor is not None:
            if stub_ctor is None:
                problems.append(f"{cls_name}: the stub has no __init__ for {ctor}")
            else:
                # The stub lists `self` (or `cls`); the class's signature does not.
                m = _mismatch(f"{cls_name}()", stub_ctor, _as_method([_SELF] + ctor, stub_ctor))
                problems += [m] if m else []
        for name, stub in sorted(methods.items()):
            if name in ("__new__", "__init__"):
                continue
            member = inspect.getattr_static(cls, name, None)
            if member is None:
                problems.append(f"{cls_name}.{name}: in the stub, not in the module")
                continue
            # Properties have no parameters; PyO3 gives protocol slots (`__getitem__`,
            # `__exit__`, `__call__`, ...) generic signatures of its own, called positionally.
            if _decorators(stub) & {"property", "setter"} or name.startswith("__"):
                continue
            runtime = _runtime_params(getattr(cls, name))
            if runtime is not None:
                m = _mismatch(f"{cls_name}.{name}", stub, _as_method(runtime, stub))
                problems += [m] if m else []
    assert problems == [], "\n".join(problems)


_SELF = Param("self", inspect.Parameter.POSITIONAL_OR_KEYWORD, False)


def _constructor(cls: ast.ClassDef) -> ast.FunctionDef | None:
    methods = _methods(cls)
    if found := methods.get("__new__") or methods.get("__init__"):
        return found
    for base in cls.bases:
        if isinstance(base, ast.Name) and base.id in CLASSES:
            if found := _constructor(CLASSES[base.id]):
                return found
    return None


def _as_method(runtime: list[Param], stub: ast.FunctionDef) -> list[Param]:
    """PyO3 spells the receiver `$self`/`$cls`, positional-only; the stub's first parameter is
    a plain `self`/`cls`: compare the rest, and the receiver by its position only."""
    stubbed = _stub_params(stub)
    if runtime and stubbed and runtime[0].name in ("self", "cls") and stubbed[0].name in ("self", "cls"):
        return [stubbed[0]] + runtime[1:]
    return runtime


@pytest.mark.parametrize("name", ["list_files", "CPUBuffer"])
def test_the_checks_see_real_entries(name: str) -> None:
    # Guards the test itself: the stub parser finds the entries it must compare.
    assert name in FUNCTIONS or name in CLASSES
    assert name in RUNTIME
