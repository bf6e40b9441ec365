"""A call's arguments as written: integers, numbers, flags and words read from Python's
``ast`` without evaluating anything, matched to a vocabulary entry's parameters."""

from __future__ import annotations

import ast
import math
from typing import Any

from autogradcli.errors import ExpressionError
from autogradcli.lang.ops import REQUIRED, Op, Param
from autogradcli.lang.tree import Node


def is_int(node: ast.AST) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    return isinstance(node, ast.Constant) and type(node.value) is int


def given_params(op: Op, given: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    """The parameters that differ from their defaults, in the entry's order."""
    return tuple(
        (p.name, given[p.name]) for p in op.params if p.name in given and given[p.name] != p.default
    )


def built(op: Op, nodes: list[Node | None], params: dict[str, Any]) -> Node:
    """A spelling of operators (x.pow(2), torch.add(a, b, alpha=2))."""
    present = [n for n in nodes if n is not None]
    assert op.build is not None
    return op.build(*present, **params)


def example_call(op: Op) -> str:
    tensors = ["[a, b]"] if op.sequence else ["x", "y", "z"][: len(op.tensors) - len(op.optional)]
    needed = [p for p in op.params if p.default is REQUIRED]
    shown = [*tensors, *(sample(p) for p in needed)]
    return f"{op.name}({', '.join(shown)})"


def sample(param: Param) -> str:
    return {"int": "0", "dims": "0", "ints": "(2, 3)", "float": "1.0", "bool": "True"}.get(
        param.kind, repr(param.choices[0]) if param.choices else "..."
    )


def integer(node: ast.AST, what: str) -> int:
    sign = 1
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        sign, node = (-1 if isinstance(node.op, ast.USub) else 1), node.operand
    if isinstance(node, ast.Constant) and type(node.value) is int and abs(node.value) < 2**31:
        return sign * node.value
    raise ExpressionError("bad_integer", what=what, text=ast.unparse(node))


def integers(node: ast.AST, what: str) -> tuple[int, ...]:
    if isinstance(node, (ast.Tuple, ast.List)):
        return tuple(integer(e, what) for e in node.elts)
    return (integer(node, what),)


def number(node: ast.AST, what: str) -> float:
    sign = 1.0
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        sign, node = (-1.0 if isinstance(node.op, ast.USub) else 1.0), node.operand
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return sign * float(node.value)
    raise ExpressionError("bad_number_argument", what=what, text=ast.unparse(node))


# Where PyTorch code finds infinity: math.inf, np.inf, torch.inf, float('inf').
_INFINITY_MODULES = ("math", "np", "numpy", "torch")


def order(node: ast.AST, what: str) -> float | str:
    """A norm's order as written: a number, ±inf (``math.inf``, ``float('inf')``, ...) or
    'fro' / 'nuc'."""
    sign, inner = 1, node
    if isinstance(inner, ast.UnaryOp) and isinstance(inner.op, (ast.USub, ast.UAdd)):
        sign, inner = (-1 if isinstance(inner.op, ast.USub) else 1), inner.operand
    if isinstance(inner, ast.Constant) and type(inner.value) in (int, float):
        return sign * inner.value
    if isinstance(inner, ast.Constant) and inner.value in ("fro", "nuc") and inner is node:
        return str(inner.value)
    if (
        isinstance(inner, ast.Attribute)
        and inner.attr == "inf"
        and isinstance(inner.value, ast.Name)
        and inner.value.id in _INFINITY_MODULES
    ):
        return sign * math.inf
    if (
        isinstance(inner, ast.Call)
        and isinstance(inner.func, ast.Name)
        and inner.func.id == "float"
        and len(inner.args) == 1
        and not inner.keywords
        and isinstance(inner.args[0], ast.Constant)
        and str(inner.args[0].value).strip().lower() in ("inf", "+inf", "-inf", "infinity")
    ):
        word = str(inner.args[0].value).strip()
        return sign * (-math.inf if word.startswith("-") else math.inf)
    raise ExpressionError("bad_order", what=what, text=ast.unparse(node))


def torch_attribute(param: Param, node: ast.AST, op: Op) -> str | None:
    """``torch.float64``, ``torch.contiguous_format``: the attribute's name, one of the
    parameter's choices (None as written stays None)."""
    if isinstance(node, ast.Constant) and node.value is None:
        return None
    if (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "torch"
        and node.attr in param.choices
    ):
        return node.attr
    choices = ", ".join(f"torch.{c}" for c in param.choices)
    raise ExpressionError(
        "bad_choice", name=op.name, param=param.name, text=ast.unparse(node), choices=choices
    )


def param_value(param: Param, node: ast.AST, op: Op) -> Any:
    """A parameter's value as written: integers, numbers, True/False or a word."""
    if param.kind == "order":
        return order(node, f"{param.name} of {op.name}()")
    if param.kind == "attr":
        return torch_attribute(param, node, op)
    if param.kind == "int":
        return integer(node, f"{param.name} of {op.name}()")
    if param.kind == "dims":
        if isinstance(node, (ast.Tuple, ast.List)):
            return integers(node, f"{param.name} of {op.name}()")
        return integer(node, f"{param.name} of {op.name}()")
    if param.kind == "ints":
        return integers(node, f"{param.name} of {op.name}()")
    if param.kind == "float":
        return number(node, f"{param.name} of {op.name}()")
    if param.kind == "bool":
        if isinstance(node, ast.Constant) and isinstance(node.value, bool):
            return node.value
        raise ExpressionError("bad_flag", name=op.name, param=param.name, text=ast.unparse(node))
    value: Any = node.value if isinstance(node, ast.Constant) else None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if value not in param.choices:
        choices = ", ".join(repr(c) for c in param.choices)
        raise ExpressionError(
            "bad_choice", name=op.name, param=param.name, text=ast.unparse(node), choices=choices
        )
    return value


def keyword_name(op: Op, key: str) -> str:
    """A keyword as the entry names it: ``axis`` is ``dim``; vector_norm's ``ord`` is ``p``."""
    if key == "axis":
        return "dim"
    if key == "ord" and op.param("ord") is None and op.param("p") is not None:
        return "p"
    return key


def tensor_item(node: ast.AST) -> bool:
    """Whether a subscript's item is an index tensor (a name or a call: x[idx],
    x[torch.arange(4), ys]) rather than an integer, slice or list written out."""
    return isinstance(node, (ast.Name, ast.Call, ast.Attribute, ast.Subscript))


def modern_tensor(node: ast.Call) -> ast.Call:
    """``torch.Tensor([1., 2.])``, PyTorch's legacy constructor, as ``torch.tensor`` of the
    same float data; sizes (``torch.Tensor(2, 3)``, uninitialized memory) or whole numbers
    (which torch.tensor would make integers) are refused."""
    data = node.args[0] if len(node.args) == 1 and not node.keywords else None
    floats = data is not None and any(
        isinstance(n, ast.Constant) and isinstance(n.value, float) for n in ast.walk(data)
    )
    if not isinstance(data, (ast.List, ast.Tuple)) or not floats:
        raise ExpressionError("legacy_tensor", text=ast.unparse(node))
    func = ast.Attribute(ast.Name("torch", ast.Load()), "tensor", ast.Load())
    return ast.copy_location(ast.Call(func, [data], []), node)
