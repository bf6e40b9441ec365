"""Parse expression text into a small tree by walking Python's ``ast`` with a whitelist.

Nothing here evaluates user text: ``ast.parse`` only builds a syntax tree, and every
node kind that is not numbers, names, ``+ - * / **``, unary minus and calls of the
vocabulary is refused. ``^`` means power. Constant arithmetic (``2**3``) is checked
for size before anything computes it.
"""

from __future__ import annotations

import ast
import math
import operator
import re
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from autogradcli.errors import ExpressionError, LimitError, ShapeError
from autogradcli.vocabulary import (
    CONSTANTS,
    FUNCTIONS,
    REDUCTIONS,
    TENSOR_FUNCTIONS,
    function_names,
)


@dataclass(frozen=True)
class Limits:
    """Bounds that stop abusive input before it costs time or memory."""

    max_length: int = 10_000
    max_depth: int = 200
    max_exponent: int = 1_000
    max_elements: int = 20_000_000
    sympy_seconds: float = 20.0  # SymPy's exact check; past it, the numeric check stands in


@dataclass(frozen=True)
class Num:
    value: int | float


@dataclass(frozen=True)
class Name:
    id: str


@dataclass(frozen=True)
class Unary:
    op: str
    operand: Node


@dataclass(frozen=True)
class Binary:
    op: str
    left: Node
    right: Node


@dataclass(frozen=True)
class Call:
    func: str
    arg: Node
    dim: int | None = None  # sum(x, 0), softmax(x, 1): PyTorch's dim argument
    other: Node | None = None  # the second tensor of dot(a, b)


Node = Num | Name | Unary | Binary | Call

NumberValue = int | float

BINARY_OPS: dict[type, str] = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.Pow: "**",
    ast.MatMult: "@",
}
UNARY_OPS: dict[type, str] = {ast.USub: "-", ast.UAdd: "+"}

# Python's own operators: the torch side applies exactly these, as a typed line would.
PY_BINARY: dict[str, Callable[[object, object], object]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "**": operator.pow,
    "@": operator.matmul,
}
PY_UNARY: dict[str, Callable[[object], object]] = {"-": operator.neg, "+": operator.pos}

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


@dataclass(frozen=True)
class Step:
    """One assignment of a program: ``name = node``."""

    name: str
    node: Node


@dataclass(frozen=True)
class Expression:
    """A parsed expression or program.

    ``steps`` are the program's assignments in order (none for a plain expression);
    ``root`` is the output: the final expression, or ``Name`` of the last assignment.
    ``variables`` are the free names (the inputs) in order of appearance; ``output`` is
    the name the output tensor is shown under.
    """

    text: str
    root: Node
    variables: tuple[str, ...] = field(default=())
    steps: tuple[Step, ...] = field(default=())
    output: str = "out"

    def step(self, name: str) -> Step | None:
        """The step that assigns ``name``, if any."""
        return next((s for s in self.steps if s.name == name), None)


def _allowed() -> str:
    return "numbers, variables, + - * / ** (or ^) @, parentheses and " + " ".join(function_names())


PROGRAM_HINT = (
    'a program is steps NAME = EXPR separated by ; or newlines, e.g. "y = x + 2; out = y*y"'
)


def parse_expression(
    text: str, limits: Limits | None = None, given: frozenset[str] = frozenset()
) -> Expression:
    """Parse an expression or a program of named steps.

    ``given`` names that have values (so ``pi``/``e`` become variables).
    """
    limits = limits or Limits()
    if len(text) > limits.max_length:
        raise LimitError(
            f"expression is {len(text)} characters long; the limit is {limits.max_length} "
            "(raise it with --max-length)"
        )
    if not text.strip():
        raise ExpressionError('the expression is empty; give one such as "2*x**2 + 1"')
    for word in re.findall(r"[^\W\d]\w*", text):
        plain = unicodedata.normalize("NFKC", word)
        if plain != word:  # Python would silently read it as another name
            raise ExpressionError(
                f"the name '{word}' has characters Python reads as '{plain}'; write '{plain}'"
            )
    source = "\n".join(line.strip() for line in text.replace("^", "**").strip().splitlines())
    try:
        module = ast.parse(source, mode="exec")
    except SyntaxError as exc:
        where = f" at column {exc.offset}" if exc.offset else ""
        if exc.lineno and exc.lineno > 1:
            where = f" at line {exc.lineno}, column {exc.offset}"
        raise ExpressionError(
            f"cannot parse the expression{where}: {exc.msg}; write it in Python syntax, "
            'e.g. "2*x**4 + 3*x + 1"'
        ) from None
    except (RecursionError, MemoryError):
        raise LimitError(
            "the expression is nested too deeply for Python's parser; write it with fewer "
            "nested parentheses"
        ) from None
    except ValueError as exc:
        raise ExpressionError(f"cannot parse the expression: {exc}") from None
    if not module.body:
        raise ExpressionError('the expression is empty; give one such as "2*x**2 + 1"')
    steps: list[Step] = []
    root: Node | None = None
    for index, statement in enumerate(module.body):
        last = index == len(module.body) - 1
        if isinstance(statement, ast.Expr) and last:
            root = _convert(statement.value, 0, limits)
        elif isinstance(statement, ast.Assign):
            steps.append(_assignment(statement, steps, limits))
        else:
            raise ExpressionError(_statement_error(statement, last))
    assigned = {s.name for s in steps}
    if root is None:
        root = Name(steps[-1].name)
    for node in (*(s.node for s in steps), root):
        _check_constants(node, limits)
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


def _assignment(statement: ast.Assign, steps: list[Step], limits: Limits) -> Step:
    target = statement.targets[0]
    if len(statement.targets) != 1 or not isinstance(target, ast.Name):
        what = ast.unparse(statement).strip()
        raise ExpressionError(
            f"cannot assign in '{what}': assign one plain name per step; {PROGRAM_HINT}"
        )
    name = target.id
    if name in FUNCTIONS or name in TENSOR_FUNCTIONS:
        raise ExpressionError(f"cannot assign to '{name}': it is a function; choose another name")
    if name in CONSTANTS:
        raise ExpressionError(f"cannot assign to '{name}': it is a constant; choose another name")
    if any(s.name == name for s in steps):
        raise ExpressionError(
            f"'{name}' is assigned twice; steps are not reassigned, so give the second one "
            f"a new name (e.g. {name}2 = ...)"
        )
    return Step(name, _convert(statement.value, 0, limits))


def _statement_error(statement: ast.stmt, last: bool) -> str:
    if isinstance(statement, ast.Expr):
        return (
            f"'{ast.unparse(statement).strip()}' is computed but not used: only the last line "
            f"may be a bare expression; {PROGRAM_HINT}"
        )
    kinds = {
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
    what = kinds.get(type(statement), f"'{type(statement).__name__.lower()}' statements")
    return f"{what} cannot be used; {PROGRAM_HINT}"


def _check_order(steps: list[Step], root: Node) -> None:
    """Every step is assigned before it is used, and every step is used."""
    assigned_at = {s.name: i for i, s in enumerate(steps)}
    used: set[str] = set()
    for index, step in enumerate([*steps, Step("", root)]):
        for name in walk_names(step.node):
            if name in assigned_at and assigned_at[name] >= index:
                where = f"'{step.name} = {unparse(step.node)}'" if step.name else "the output"
                raise ExpressionError(
                    f"'{name}' is used in {where} before it is assigned; put the steps in order "
                    f"(a name that is also an input needs a new name, e.g. {name}2)"
                )
            used.add(name)
    if isinstance(root, Name) and root.id in assigned_at:
        used.add(root.id)
    for step in steps:
        if step.name not in used:
            raise ExpressionError(
                f"step '{step.name}' is never used; use it in a later step or remove it"
            )


def _fresh(name: str, taken: set[str]) -> str:
    while name in taken:
        name += "_"
    return name


def _convert(node: ast.AST, depth: int, limits: Limits) -> Node:
    if depth > limits.max_depth:
        raise LimitError(
            f"the expression is nested more than {limits.max_depth} levels deep "
            "(raise it with --max-depth)"
        )
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
        raise ExpressionError(f"operator in '{symbol}' is not allowed; allowed are {_allowed()}")
    what = _REFUSED.get(type(node), type(node).__name__)
    raise ExpressionError(f"{what} cannot be used in an expression; allowed are {_allowed()}")


def _constant(value: object) -> Num:
    if isinstance(value, bool) or value is None or value is Ellipsis:
        raise ExpressionError(
            f"'{value}' is not allowed in an expression; allowed are {_allowed()}"
        )
    if isinstance(value, complex):
        raise ExpressionError("complex numbers are not supported; use real numbers")
    if isinstance(value, (str, bytes)):
        raise ExpressionError(f"strings are not allowed in an expression; allowed are {_allowed()}")
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise LimitError(
            f"integer constant with {len(str(value))} digits is too large; the limit is about 1e308"
        )
    if not isinstance(value, (int, float)):
        raise ExpressionError(f"constant {value!r} is not allowed in an expression")
    return Num(value)


def _call(node: ast.Call, depth: int, limits: Limits) -> Call:
    if not isinstance(node.func, ast.Name):
        raise ExpressionError(
            f"only plain function names can be called, not '{ast.unparse(node.func)}'; "
            f"functions: {' '.join(function_names())}"
        )
    name = node.func.id
    if name not in FUNCTIONS and name not in TENSOR_FUNCTIONS:
        raise ExpressionError(f"unknown function '{name}'; functions: {' '.join(function_names())}")
    if name in FUNCTIONS or TENSOR_FUNCTIONS[name].dim == "none":
        tensors = TENSOR_FUNCTIONS[name].arity if name in TENSOR_FUNCTIONS else 1
        example = f"{name}(a, b)" if tensors == 2 else f"{name}(x)"
        if node.keywords or len(node.args) != tensors or _starred(node.args):
            count = "two arguments" if tensors == 2 else "exactly one argument"
            raise ExpressionError(f"{name}() takes {count}, e.g. {example}")
        args = [_convert(a, depth + 1, limits) for a in node.args]
        return Call(name, args[0], other=args[1] if tensors == 2 else None)
    rule = TENSOR_FUNCTIONS[name].dim
    example = f"{name}(x, 0)" if rule == "required" else f"{name}(x) or {name}(x, 0)"
    dims = [*node.args[1:], *(k.value for k in node.keywords if k.arg == "dim")]
    wrong_keyword = any(k.arg != "dim" for k in node.keywords)
    if not node.args or len(node.args) > 2 or len(dims) > 1 or wrong_keyword or _starred(node.args):
        raise ExpressionError(f"{name}() takes a tensor and a dim, e.g. {example}")
    if rule == "required" and not dims:
        raise ExpressionError(f"{name}() needs the dim to work along, e.g. {example}")
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
    raise ExpressionError(
        f"the dim of {name}() must be a small integer such as 0, 1 or -1, not '{ast.unparse(node)}'"
    )


def walk(node: Node) -> Iterator[Node]:
    """All nodes of the tree, parents before children."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        if isinstance(current, Unary):
            stack.append(current.operand)
        elif isinstance(current, Binary):
            stack.extend((current.right, current.left))
        elif isinstance(current, Call):
            if current.other is not None:
                stack.append(current.other)
            stack.append(current.arg)


def operands(node: Node) -> list[Node]:
    """The inputs of one operation of the tree, left to right."""
    if isinstance(node, Binary):
        return [node.left, node.right]
    if isinstance(node, Unary):
        return [node.operand]
    if isinstance(node, Call):
        return [node.arg] if node.other is None else [node.arg, node.other]
    return []


def walk_names(node: Node) -> Iterator[str]:
    """Names in the order they appear in the text."""
    return (n.id for n in walk(node) if isinstance(n, Name))


def constant_binary(op: str, left: NumberValue, right: NumberValue, limits: Limits) -> NumberValue:
    """Python's arithmetic on two numbers, refusing results too large to represent."""
    if op == "**" and isinstance(left, int) and isinstance(right, int) and right > 0:
        bits = max(abs(left).bit_length() - 1, 0) * right
        if bits > MAX_INT_BITS:
            raise LimitError(
                f"integer constant {left}**{right} is too large (about 2**{bits}); "
                "the limit is about 1e308"
            )
    try:
        result = PY_BINARY[op](left, right)
    except ZeroDivisionError:
        raise ExpressionError(f"division by zero in the constant {left}{op}{right}") from None
    except OverflowError:
        raise LimitError(f"the constant {left}{op}{right} overflows a float") from None
    if isinstance(result, complex):
        raise ExpressionError(
            f"the constant {left}{op}{right} is a complex number; only real numbers are supported"
        )
    if isinstance(result, int) and result.bit_length() > MAX_INT_BITS:
        raise LimitError(
            f"integer constant {left}{op}{right} is too large; the limit is about 1e308"
        )
    return result  # type: ignore[return-value]


def constant_value(node: Node, limits: Limits) -> NumberValue | None:
    """The Python value of a subtree without variables (``pi``/``e`` included), else None."""
    if isinstance(node, Num):
        return node.value
    if isinstance(node, Name):
        return CONSTANTS[node.id][0] if node.id in CONSTANTS else None
    if isinstance(node, Unary):
        inner = constant_value(node.operand, limits)
        return None if inner is None else PY_UNARY[node.op](inner)  # type: ignore[return-value]
    if isinstance(node, Binary) and node.op != "@":
        left = constant_value(node.left, limits)
        right = constant_value(node.right, limits)
        if left is None or right is None:
            return None
        return constant_binary(node.op, left, right, limits)
    return None


def _check_constants(root: Node, limits: Limits) -> None:
    """Compute every constant subtree (with size checks) and bound the exponents."""
    for node in walk(root):
        if not isinstance(node, Binary):
            continue
        if node.op == "**" and constant_value(node.left, limits) is None:
            exponent = constant_value(node.right, limits)
            if exponent is not None and abs(exponent) > limits.max_exponent:
                raise LimitError(
                    f"exponent {exponent:g} is larger than the limit {limits.max_exponent} "
                    "(raise it with --max-exponent)"
                )
        constant_value(node, limits)


_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2, "@": 2, "**": 4}


def unparse(node: Node) -> str:
    """Text of a subtree with the parentheses it needs."""
    if isinstance(node, Num):
        return repr(node.value)
    if isinstance(node, Name):
        return node.id
    if isinstance(node, Call):
        args = [unparse(node.arg)]
        args += [unparse(node.other)] if node.other is not None else []
        args += [str(node.dim)] if node.dim is not None else []
        return f"{node.func}({', '.join(args)})"
    if isinstance(node, Unary):
        inner = unparse(node.operand)
        if isinstance(node.operand, Binary) and _PRECEDENCE[node.operand.op] < _PRECEDENCE["**"]:
            inner = f"({inner})"
        return f"{node.op}{inner}"
    left, right = unparse(node.left), unparse(node.right)
    mine = _PRECEDENCE[node.op]
    if _needs_parens(node.left, mine, right_side=node.op == "**"):
        left = f"({left})"
    if _needs_parens(node.right, mine, right_side=node.op != "**"):
        right = f"({right})"
    return f"{left} {node.op} {right}" if mine == 1 else f"{left}{node.op}{right}"


def _needs_parens(child: Node, parent: int, right_side: bool) -> bool:
    if isinstance(child, Unary):
        return parent >= _PRECEDENCE["**"]
    if not isinstance(child, Binary):
        return isinstance(child, Num) and child.value < 0
    mine = _PRECEDENCE[child.op]
    return mine < parent or (mine == parent and right_side)


Shape = tuple[int, ...]


def broadcast(left: Shape, right: Shape, where: str) -> Shape:
    """PyTorch's (and NumPy's) broadcasting rule, with an error that shows both shapes."""
    result = []
    for a, b in zip(
        reversed((1,) * (len(right) - len(left)) + left),
        reversed((1,) * (len(left) - len(right)) + right),
        strict=True,
    ):
        if a != b and a != 1 and b != 1:
            raise ShapeError(
                f"shapes {list(left)} and {list(right)} do not broadcast in '{where}'; "
                "give the variables matching shapes"
            )
        result.append(b if a == 1 else a)
    return tuple(reversed(result))


def is_full_reduction(node: Node) -> bool:
    """``sum(x)`` or ``mean(x)`` over all elements: what the elementwise model handles."""
    return isinstance(node, Call) and node.func in REDUCTIONS and node.dim is None


def is_elementwise(expression: Expression) -> bool:
    """Only elementwise operations and full sum/mean (no dims, products or matrix algebra)."""
    nodes = [n for s in expression.steps for n in walk(s.node)] + list(walk(expression.root))
    return all(
        not (isinstance(n, Binary) and n.op == "@")
        and not (isinstance(n, Call) and n.func in TENSOR_FUNCTIONS and not is_full_reduction(n))
        for n in nodes
    )


def infer_shape(node: Node, shapes: dict[str, Shape], limits: Limits) -> Shape:
    """The shape every subtree will have, checked before any tensor is built."""
    if isinstance(node, Num):
        return ()
    if isinstance(node, Name):
        return shapes.get(node.id, ())
    if isinstance(node, Unary):
        return infer_shape(node.operand, shapes, limits)
    if isinstance(node, Call):
        inner = infer_shape(node.arg, shapes, limits)
        if node.func in FUNCTIONS:
            return inner
        other = None if node.other is None else infer_shape(node.other, shapes, limits)
        return _tensor_function_shape(node, inner, other)
    left = infer_shape(node.left, shapes, limits)
    right = infer_shape(node.right, shapes, limits)
    if node.op == "@":
        shape = matmul_shape(left, right, unparse(node))
    else:
        shape = broadcast(left, right, unparse(node))
    size = math.prod(shape)
    if size > limits.max_elements:
        raise LimitError(
            f"'{unparse(node)}' would have {size} elements (shape {list(shape)}); "
            f"the limit is {limits.max_elements} (raise it with --max-elements)"
        )
    return shape


def _tensor_function_shape(node: Call, shape: Shape, other: Shape | None) -> Shape:
    where = unparse(node)
    if node.func == "T":
        if len(shape) != 2:
            raise ShapeError(
                f"T() transposes a matrix (2-D); '{unparse(node.arg)}' has shape {list(shape)}"
            )
        return (shape[1], shape[0])
    if node.func == "dot":
        if len(shape) != 1 or other is None or shape != other:
            raise ShapeError(
                f"dot(a, b) takes two 1-D tensors of the same length; '{where}' has shapes "
                f"{list(shape)} and {list(other or ())} (use @ for matrices)"
            )
        return ()
    if node.dim is None:
        return () if TENSOR_FUNCTIONS[node.func].dim != "required" else shape
    if not shape:  # PyTorch takes dim 0 or -1 of a single number as its one element
        if node.dim not in (0, -1):
            raise ShapeError(
                f"'{where}': '{unparse(node.arg)}' is a single number; its only dims are 0 "
                f"and -1; write {node.func}({unparse(node.arg)}, 0)"
            )
        return ()
    if not -len(shape) <= node.dim < len(shape):
        raise ShapeError(
            f"'{where}': dim {node.dim} is out of range for shape {list(shape)} "
            f"(use {-len(shape)}..{len(shape) - 1})"
        )
    if node.func in ("softmax", "log_softmax"):
        return shape
    axis = node.dim % len(shape)
    return shape[:axis] + shape[axis + 1 :]


def matmul_shape(left: Shape, right: Shape, where: str) -> Shape:
    """``torch.matmul``'s shape rule: 1-D operands gain and lose a dim, batches broadcast."""
    if not left or not right:
        raise ShapeError(
            f"'{where}': @ needs tensors of at least 1 dimension, not shapes {list(left)} and "
            f"{list(right)}; use * to scale"
        )
    a = (1, *left) if len(left) == 1 else left
    b = (*right, 1) if len(right) == 1 else right
    if a[-1] != b[-2]:
        raise ShapeError(
            f"'{where}': shapes {list(left)} @ {list(right)} do not match ({a[-1]} columns "
            f"against {b[-2]} rows)"
        )
    batch = broadcast(a[:-2], b[:-2], where)
    shape = (*batch, *(() if len(left) == 1 else (a[-2],)), *(() if len(right) == 1 else (b[-1],)))
    return tuple(shape)


def program_shapes(
    expression: Expression, shapes: dict[str, Shape], limits: Limits
) -> dict[str, Shape]:
    """The input shapes plus the shape of every step, in program order."""
    shapes = dict(shapes)
    for step in expression.steps:
        shapes[step.name] = infer_shape(step.node, shapes, limits)
    return shapes


def cut(expression: Expression, target: Node, name: str) -> Expression:
    """``expression`` with the subtree ``target`` (found by identity) replaced by a new
    input ``name``: the derivative with respect to ``name`` is the derivative with
    respect to that intermediate tensor."""

    def swap(node: Node) -> Node:
        if node is target:
            return Name(name)
        if isinstance(node, Unary):
            return Unary(node.op, swap(node.operand))
        if isinstance(node, Binary):
            return Binary(node.op, swap(node.left), swap(node.right))
        if isinstance(node, Call):
            other = None if node.other is None else swap(node.other)
            return Call(node.func, swap(node.arg), node.dim, other)
        return node

    steps = tuple(Step(s.name, swap(s.node)) for s in expression.steps)
    return Expression(
        expression.text,
        swap(expression.root),
        (*expression.variables, name),
        steps,
        expression.output,
    )


# Tensor functions that sum (or compare) many numbers: each adds rounding steps.
_REDUCING = frozenset(
    {"sum", "mean", "prod", "max", "min", "softmax", "log_softmax", "logsumexp", "norm", "dot"}
)


def rounding_steps(expression: Expression, shapes: dict[str, Shape], limits: Limits) -> int:
    """Rounded operations behind one number of the result (see ``verdict``): three per
    operation (forward, local derivative, product), plus ceil(log2 n) for each sum of n
    numbers: reductions, matrix products and the gradient of a broadcast input."""
    from autogradcli.verdict import reduction_steps

    shapes = program_shapes(expression, shapes, limits)
    steps = 0
    for root in (*(s.node for s in expression.steps), expression.root):
        for node in walk(root):
            if isinstance(node, (Unary, Binary, Call)):
                steps += 3
            if isinstance(node, Call) and node.func in _REDUCING:
                shape = infer_shape(node.arg, shapes, limits)
                count = math.prod(shape) if node.dim is None or not shape else shape[node.dim]
                steps += reduction_steps(count)
            elif isinstance(node, Binary) and node.op == "@":
                steps += reduction_steps(infer_shape(node.left, shapes, limits)[-1])
    out = math.prod(infer_shape(expression.root, shapes, limits))
    spread = max((out // max(math.prod(shapes[n]), 1) for n in expression.variables), default=1)
    return steps + reduction_steps(spread)


def direct_inputs(node: Node) -> list[str]:
    """Names a subtree uses directly, in order of appearance, without repeats."""
    return list(dict.fromkeys(walk_names(node)))
