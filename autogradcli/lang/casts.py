"""A cast written on a new value (``torch.arange(3).float()``): the constructor with its
``dtype=``, as PyTorch would make it, or a refusal that names that spelling."""

from __future__ import annotations

import ast
import re

from autogradcli.errors import ExpressionError
from autogradcli.lang.constructors import DTYPES

# cast methods and the dtype each makes
CASTS = {"float": "float32", "double": "float64", "half": "float16", "bfloat16": "bfloat16"}
# a text that may hold a cast (the tree is walked only then)
CAST_CALL = re.compile(r"\.\s*(?:float|double|half|bfloat16|to|type)\s*\(")
# dtype= as written (torch.float64, torch.double, ...): the floating ones of the constructors
_DTYPE_NAMES = {k: v for k, v in DTYPES.items() if v != "integer"}


def cast_target(method: str, node: ast.Call) -> str | None:
    """The dtype ``.float()``/``.double()``/``.half()``/``.to(torch.float64)`` casts to,
    None when the call is not such a cast."""
    if method in CASTS and not node.args and not node.keywords:
        return CASTS[method]
    if method not in ("to", "type"):
        return None
    given = [*node.args, *(k.value for k in node.keywords if k.arg == "dtype")]
    others = [k for k in node.keywords if k.arg != "dtype"]
    if len(given) != 1 or others:
        return None
    found = given[0]
    written = isinstance(found, ast.Attribute) and isinstance(found.value, ast.Name)
    if written and found.value.id == "torch":  # type: ignore[attr-defined]
        return _DTYPE_NAMES.get(found.attr)  # type: ignore[attr-defined]
    return None


def cast_constructor(constructor: ast.Call, target: str, cast: ast.Call) -> ast.Call:
    """``torch.arange(3).float()`` read as ``torch.arange(3, dtype=torch.float32)``.

    PyTorch's default dtype is float32, so a cast to float32 of a constructor without
    ``dtype=`` is exact (a float32 tensor unchanged, or integers made floats). Any other cast
    rounds the values once more than the constructor with ``dtype=`` would, so it is refused
    with that spelling."""
    written = next((k for k in constructor.keywords if k.arg == "dtype"), None)
    keywords = [k for k in constructor.keywords if k.arg != "dtype"]
    torch = ast.copy_location(ast.Name(id="torch", ctx=ast.Load()), constructor)
    dtype = ast.copy_location(ast.Attribute(value=torch, attr=target, ctx=ast.Load()), constructor)
    fixed = ast.Call(
        func=constructor.func,
        args=constructor.args,
        keywords=[*keywords, ast.copy_location(ast.keyword(arg="dtype", value=dtype), constructor)],
    )
    ast.copy_location(fixed, constructor)
    if written is None and target == "float32":
        return fixed
    if written is not None and ast.unparse(written.value) in (f"torch.{target}",):
        return constructor  # a cast to the dtype it already has: the same tensor
    raise ExpressionError("constructor_cast", text=ast.unparse(cast), fixed=ast.unparse(fixed))


def _made_by_constructor(node: ast.Call, constructors: frozenset[str], modules: set[str]) -> bool:
    root: ast.AST = node.func
    if not isinstance(root, ast.Attribute) or root.attr not in constructors:
        return False
    while isinstance(root, ast.Attribute):
        root = root.value
    return isinstance(root, ast.Name) and root.id in modules


def casts_in_constructors(
    module: ast.Module, constructors: frozenset[str], text: str
) -> ast.Module:
    """The module of ``text`` with each cast of a new value read as its constructor's
    ``dtype=`` (``torch.arange(3).float()``), or the error that names that spelling. The
    tree is walked only where the text has a cast, with a stack of its own: a sum of 1,000
    terms is a tree 1,000 deep."""
    if not CAST_CALL.search(text):
        return module
    modules = {"torch", "np", "numpy"}
    for node in ast.walk(module):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            modules.update((a.asname or a.name).split(".")[0] for a in node.names)

    def read(node: ast.AST) -> ast.AST:
        func = getattr(node, "func", None)
        if isinstance(node, ast.Call) and isinstance(func, ast.Attribute):
            made = func.value
            target = cast_target(func.attr, node)
            if (
                target is not None
                and isinstance(made, ast.Call)
                and _made_by_constructor(made, constructors, modules)
            ):
                return read(cast_constructor(made, target, node))
        return node

    stack: list[ast.AST] = [module]
    while stack:
        parent = stack.pop()
        for field, value in ast.iter_fields(parent):
            if isinstance(value, list):
                value[:] = [read(v) if isinstance(v, ast.AST) else v for v in value]
                stack.extend(v for v in value if isinstance(v, ast.AST))
            elif isinstance(value, ast.AST):
                setattr(parent, field, read(value))
                stack.append(getattr(parent, field))
    return module
