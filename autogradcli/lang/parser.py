"""Parse expression text into a tree by walking Python's ``ast`` with a whitelist.

Nothing here evaluates user text: ``ast.parse`` only builds a syntax tree, and every
node kind that is not numbers, names, ``+ - * / **``, unary minus and calls of the
vocabulary is refused. ``^`` means power. Constant arithmetic (``2**3``) is checked
for size before anything computes it.
"""

from __future__ import annotations

import ast
import re
import unicodedata

from autogradcli.errors import ExpressionError, LimitError
from autogradcli.lang.analysis import check_constants
from autogradcli.lang.text import unparse
from autogradcli.lang.tree import Binary, Call, Expression, Name, Node, Num, Step, Unary, walk_names
from autogradcli.lang.vocabulary import CONSTANTS, FUNCTIONS, TENSOR_FUNCTIONS, function_names
from autogradcli.settings import Limits

BINARY_OPS: dict[type, str] = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.Pow: "**",
    ast.MatMult: "@",
}
UNARY_OPS: dict[type, str] = {ast.USub: "-", ast.UAdd: "+"}

# Integer constants are kept below the float range so every side can represent them.
MAX_INT_BITS = 1024

_REFUSED: dict[type, str] = {
    ast.Attribute: "attribute access",
    ast.Subscript: "subscripts",
    ast.Lambda: "lambda",
    ast.ListComp: "comprehensions",
    ast.SetComp: "comprehensions",
    ast.DictComp: "comprehensions",
    ast.GeneratorExp: "comprehensions",
    ast.Compare: "comparisons",
    ast.BoolOp: "'and'/'or'",
    ast.IfExp: "conditional expressions",
    ast.List: "lists",
    ast.Tuple: "tuples",
    ast.Dict: "dicts",
    ast.Set: "sets",
    ast.JoinedStr: "strings",
    ast.NamedExpr: "assignments",
    ast.Starred: "starred arguments",
    ast.Await: "await",
    ast.Yield: "yield",
    ast.YieldFrom: "yield",
    ast.Slice: "slices",
}

_STATEMENTS: dict[type, str] = {
    ast.AugAssign: "augmented assignments (+= and the like)",
    ast.AnnAssign: "annotated assignments",
    ast.Import: "import statements",
    ast.ImportFrom: "import statements",
    ast.FunctionDef: "function definitions",
    ast.ClassDef: "class definitions",
    ast.For: "loops",
    ast.While: "loops",
    ast.If: "if statements",
    ast.With: "with statements",
    ast.Delete: "del statements",
}


def allowed() -> str:
    """What an expression may contain, for error messages."""
    return "numbers, variables, + - * / ** (or ^) @, parentheses and " + " ".join(function_names())


def parse_expression(
    text: str, limits: Limits | None = None, given: frozenset[str] = frozenset()
) -> Expression:
    """Parse an expression or a program of named steps.

    ``given`` names that have values (so ``pi``/``e`` become variables).
    """
    limits = limits or Limits()
    module = _module(text, limits)
    steps: list[Step] = []
    root: Node | None = None
    for index, statement in enumerate(module.body):
        last = index == len(module.body) - 1
        if isinstance(statement, ast.Expr) and last:
            root = _convert(statement.value, 0, limits)
        elif isinstance(statement, ast.Assign):
            steps.append(_assignment(statement, steps, limits))
        else:
            raise _statement_error(statement)
    assigned = {s.name for s in steps}
    if root is None:
        root = Name(steps[-1].name)
    for node in (*(s.node for s in steps), root):
        check_constants(node, limits)
    _check_order(steps, root)
    names = [n for node in (*(s.node for s in steps), root) for n in walk_names(node)]
    variables = tuple(
        dict.fromkeys(n for n in names if n not in assigned and (n in given or n not in CONSTANTS))
    )
    if isinstance(root, Name) and root.id in assigned:
        output = root.id
    else:
        output = _fresh("out", assigned | set(variables))
    return Expression(text, root, variables, tuple(steps), output)


def _module(text: str, limits: Limits) -> ast.Module:
    """Python's syntax tree of the text, after the checks that come before parsing."""
    if len(text) > limits.max_length:
        raise LimitError("expression_too_long", length=len(text), limit=limits.max_length)
    if not text.strip():
        raise ExpressionError("expression_empty")
    for word in re.findall(r"[^\W\d]\w*", text):
        plain = unicodedata.normalize("NFKC", word)
        if plain != word:  # Python would silently read it as another name
            raise ExpressionError("name_normalized", word=word, plain=plain)
    source = "\n".join(line.strip() for line in text.replace("^", "**").strip().splitlines())
    try:
        module = ast.parse(source, mode="exec")
    except SyntaxError as exc:
        where = f" at column {exc.offset}" if exc.offset else ""
        if exc.lineno and exc.lineno > 1:
            where = f" at line {exc.lineno}, column {exc.offset}"
        raise ExpressionError("syntax", where=where, detail=exc.msg) from None
    except (RecursionError, MemoryError):
        raise LimitError("nested_for_parser") from None
    except ValueError as exc:
        raise ExpressionError("unparsable", detail=str(exc)) from None
    if not module.body:
        raise ExpressionError("expression_empty")
    return module


def _assignment(statement: ast.Assign, steps: list[Step], limits: Limits) -> Step:
    target = statement.targets[0]
    if len(statement.targets) != 1 or not isinstance(target, ast.Name):
        raise ExpressionError("bad_assignment", text=ast.unparse(statement).strip())
    name = target.id
    if name in FUNCTIONS or name in TENSOR_FUNCTIONS:
        raise ExpressionError("assign_function", name=name)
    if name in CONSTANTS:
        raise ExpressionError("assign_constant", name=name)
    if any(s.name == name for s in steps):
        raise ExpressionError("assigned_twice", name=name)
    return Step(name, _convert(statement.value, 0, limits))


def _statement_error(statement: ast.stmt) -> ExpressionError:
    if isinstance(statement, ast.Expr):
        return ExpressionError("unused_expression", text=ast.unparse(statement).strip())
    what = _STATEMENTS.get(type(statement), f"'{type(statement).__name__.lower()}' statements")
    return ExpressionError("statement_not_allowed", what=what)


def _check_order(steps: list[Step], root: Node) -> None:
    """Every step is assigned before it is used, and every step is used."""
    assigned_at = {s.name: i for i, s in enumerate(steps)}
    used: set[str] = set()
    for index, step in enumerate([*steps, Step("", root)]):
        for name in walk_names(step.node):
            if name in assigned_at and assigned_at[name] >= index:
                where = f"'{step.name} = {unparse(step.node)}'" if step.name else "the output"
                raise ExpressionError("used_before_assigned", name=name, where=where)
            used.add(name)
    if isinstance(root, Name) and root.id in assigned_at:
        used.add(root.id)
    for step in steps:
        if step.name not in used:
            raise ExpressionError("step_unused", name=step.name)


def _fresh(name: str, taken: set[str]) -> str:
    while name in taken:
        name += "_"
    return name


def _convert(node: ast.AST, depth: int, limits: Limits) -> Node:
    if depth > limits.max_depth:
        raise LimitError("too_deep", limit=limits.max_depth)
    if isinstance(node, ast.Constant):
        return _constant(node.value)
    if isinstance(node, ast.Name):
        return Name(node.id)
    if isinstance(node, ast.UnaryOp) and type(node.op) in UNARY_OPS:
        return Unary(UNARY_OPS[type(node.op)], _convert(node.operand, depth + 1, limits))
    if isinstance(node, ast.BinOp) and type(node.op) in BINARY_OPS:
        return Binary(
            BINARY_OPS[type(node.op)],
            _convert(node.left, depth + 1, limits),
            _convert(node.right, depth + 1, limits),
        )
    if isinstance(node, ast.Call):
        return _call(node, depth, limits)
    if isinstance(node, ast.Attribute) and node.attr == "T":  # A.T, the one attribute allowed
        return Call("T", _convert(node.value, depth + 1, limits))
    if isinstance(node, (ast.BinOp, ast.UnaryOp)):
        symbol = ast.unparse(node).strip()
        raise ExpressionError("operator_not_allowed", symbol=symbol, allowed=allowed())
    what = _REFUSED.get(type(node), type(node).__name__)
    raise ExpressionError("syntax_not_allowed", what=what, allowed=allowed())


def _constant(value: object) -> Num:
    if isinstance(value, bool) or value is None or value is Ellipsis:
        raise ExpressionError("constant_not_allowed", value=str(value), allowed=allowed())
    if isinstance(value, complex):
        raise ExpressionError("complex_number")
    if isinstance(value, (str, bytes)):
        raise ExpressionError("string_not_allowed", allowed=allowed())
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise LimitError("integer_too_large", digits=len(str(value)))
    if not isinstance(value, (int, float)):
        raise ExpressionError("constant_kind", value=repr(value))
    return Num(value)


def _call(node: ast.Call, depth: int, limits: Limits) -> Call:
    functions = " ".join(function_names())
    if not isinstance(node.func, ast.Name):
        raise ExpressionError("call_not_plain", text=ast.unparse(node.func), functions=functions)
    name = node.func.id
    if name not in FUNCTIONS and name not in TENSOR_FUNCTIONS:
        raise ExpressionError("unknown_function", name=name, functions=functions)
    if name in FUNCTIONS or TENSOR_FUNCTIONS[name].dim == "none":
        tensors = TENSOR_FUNCTIONS[name].arity if name in TENSOR_FUNCTIONS else 1
        example = f"{name}(a, b)" if tensors == 2 else f"{name}(x)"
        if node.keywords or len(node.args) != tensors or _starred(node.args):
            count = "two arguments" if tensors == 2 else "exactly one argument"
            raise ExpressionError("wrong_arguments", name=name, count=count, example=example)
        args = [_convert(a, depth + 1, limits) for a in node.args]
        return Call(name, args[0], other=args[1] if tensors == 2 else None)
    rule = TENSOR_FUNCTIONS[name].dim
    example = f"{name}(x, 0)" if rule == "required" else f"{name}(x) or {name}(x, 0)"
    dims = [*node.args[1:], *(k.value for k in node.keywords if k.arg == "dim")]
    wrong_keyword = any(k.arg != "dim" for k in node.keywords)
    if not node.args or len(node.args) > 2 or len(dims) > 1 or wrong_keyword or _starred(node.args):
        raise ExpressionError("tensor_and_dim", name=name, example=example)
    if rule == "required" and not dims:
        raise ExpressionError("dim_needed", name=name, example=example)
    dim = _dim(dims[0], name) if dims else None
    return Call(name, _convert(node.args[0], depth + 1, limits), dim=dim)


def _starred(args: list[ast.expr]) -> bool:
    return any(isinstance(a, ast.Starred) for a in args)


def _dim(node: ast.expr, name: str) -> int:
    """A dim argument: an integer written as such (``1``, ``-1``)."""
    sign = 1
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        sign, node = (-1 if isinstance(node.op, ast.USub) else 1), node.operand
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, int)
        and not isinstance(node.value, bool)
        and node.value < 64
    ):
        return sign * node.value
    raise ExpressionError("bad_dim", name=name, text=ast.unparse(node))
