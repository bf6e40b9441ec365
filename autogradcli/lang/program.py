"""Programs and notebook cells: the lines around the maths, read without running any.

A line is one of: an assignment (``y = x * 2``, ``c += c + 1``; a name assigned again is a
new step, as in Python), a value the program defines (``x = torch.tensor([2., 3.],
requires_grad=True)``; without ``requires_grad=True`` it is a constant), a backward call
(``Q.backward(gradient=v, retain_graph=True)``), ``x.grad.zero_()`` or ``x.grad = None``,
``print(...)`` or a bare line (shown at that point), ``import`` of the known modules
(``torch``, ``torch.nn.functional as F``, ``numpy as np``, ``math``),
``torch.manual_seed(n)``, and ``with torch.no_grad():`` or ``with
torch.inference_mode():`` around assignments. Anything
else is refused with what to write instead.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from autogradcli.errors import ExpressionError
from autogradcli.lang.analysis import check_constants
from autogradcli.lang.converter import BINARY_OPS, CONSTRUCTORS, NAMESPACES, Converter, module_of
from autogradcli.lang.tree import (
    Backward,
    Binary,
    Call,
    Expression,
    Hook,
    InPlace,
    Leaf,
    Name,
    Node,
    Num,
    Rebuild,
    Reset,
    Show,
    Statement,
    Step,
    Unhook,
    walk,
    walk_names,
)
from autogradcli.lang.values import is_len
from autogradcli.lang.vocabulary import BARE, CONSTANTS, SPELLINGS
from autogradcli.settings import Limits

AUGMENTED = BINARY_OPS  # y += x is y = y + x
# y += x on a tensor changes it in place, as Python does (Tensor.__iadd__); @= makes a new one
IN_PLACE_OPERATORS = {"+": "add_", "-": "sub_", "*": "mul_", "/": "div_", "**": "pow_"}
# import lines a cell may have, as (module, name it is bound to): nothing is imported.
IMPORTS: dict[tuple[str, str], str] = {
    ("torch", "torch"): "torch",
    ("torch.nn.functional", "F"): "F",
    ("torch.nn.functional", "functional"): "F",
    ("numpy", "np"): "np",
    ("numpy", "numpy"): "np",
    ("math", "math"): "math",
    ("torch.nn", "nn"): "nn",
}
# the blocks a cell may open, and the operation each wraps its assignments in: under
# no_grad a result is a constant copy (as detach() makes); under inference_mode an inference tensor,
# which PyTorch refuses to save for backward later (its own error).
GRAD_MODES: dict[str, str] = {
    "torch.no_grad": "no_grad",
    "torch.inference_mode": "inference_mode",
}
# elementwise methods whose trailing-underscore form PyTorch does not have
NO_IN_PLACE = frozenset({"maximum", "minimum", "clone", "matmul"})
_STATEMENTS: dict[type, str] = {
    ast.AnnAssign: "annotated assignments",
    ast.FunctionDef: "function definitions",
    ast.AsyncFunctionDef: "function definitions",
    ast.ClassDef: "class definitions",
    ast.For: "loops",
    ast.While: "loops",
    ast.If: "if statements",
    ast.Delete: "del statements",
    ast.Return: "return",
    ast.Try: "try statements",
    ast.Raise: "raise",
    ast.Global: "global",
    ast.Assert: "assert",
}


@dataclass(frozen=True)
class Guard:
    """A point of a cell's line where Python itself raises, or may, before the line has a
    value, checked on the tensors of that moment: ``a ^ b`` (``xor``: bitwise, which
    PyTorch refuses for floating point), ``np.f(t)`` (``numpy``: NumPy reads
    ``t.numpy()``, refused for a tensor that requires grad), ``math.f(t)`` (``math``:
    ``float(t)``, refused past one element, then Python's ``math.f``). ``operands`` are
    trees (or numbers) read under ``mode`` (the grad mode of a ``with`` block); ``func``
    is the ``math`` function's name."""

    kind: str
    operands: tuple[Node | float, ...]
    text: str
    mode: str = ""
    func: str = ""


class _Python(ast.NodeTransformer):
    """A cell's expression as Python runs it: ``^`` between numbers folded as Python does
    (or Python's TypeError), ``math.f`` of numbers folded with Python's ``math`` (only the
    vocabulary's names, on literals); what needs the tensors of that moment is recorded
    (kind, argument nodes, function), in evaluation order. Nothing is evaluated from
    text: the numbers are literals read from the syntax tree."""

    def __init__(self, path: Callable[[ast.AST], str | None]) -> None:
        self.path = path
        self.found: list[tuple[str, list[ast.expr], str]] = []

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        if not isinstance(node.op, ast.BitXor):
            return node
        left, right = _literal(node.left), _literal(node.right)
        if left is not None and right is not None:
            if type(left) is int and type(right) is int:
                return ast.copy_location(ast.Constant(left ^ right), node)
            raise ExpressionError(
                "xor_numbers",
                text=ast.unparse(node),
                left=type(left).__name__,
                right=type(right).__name__,
            )
        self.found.append(("xor", [node.left, node.right], ""))
        return ast.copy_location(ast.BinOp(node.left, ast.Pow(), node.right), node)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        path = self.path(node.func) or ""
        space, _, func = path.partition(".")
        if space not in ("np", "math") or path not in SPELLINGS:
            return node
        args = [
            e for a in node.args for e in (a.elts if isinstance(a, ast.List | ast.Tuple) else [a])
        ]
        numbers = [_literal(a) for a in args]
        if space == "np":
            if any(n is None for n in numbers):
                self.found.append(("numpy", args, func))
            return node
        if numbers and not node.keywords and all(n is not None for n in numbers):
            value = _math(func, numbers)  # type: ignore[arg-type]
            if value is not None:
                return ast.copy_location(ast.Constant(value), node)
        self.found.append(("math", args, func))
        if all(n is not None for n in numbers):
            return node  # Python raises here: the guard says so when the line runs
        # a Python float outside the graph: one element, no gradient through it
        summed = ast.Call(ast.Attribute(node, "sum", ast.Load()), [], [])
        return ast.Call(ast.Attribute(summed, "detach", ast.Load()), [], [])


def _literal(node: ast.AST) -> int | float | None:
    """A number written as such (``2``, ``-0.5``), or None."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        inner = _literal(node.operand)
        return None if inner is None else (-inner if isinstance(node.op, ast.USub) else inner)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value  # type: ignore[no-any-return]
    return None


def _math(func: str, numbers: list[float]) -> float | None:
    """Python's ``math.func(*numbers)`` where it is a finite number, else None (where it
    raises, the line raises when it runs)."""
    function = getattr(math, func, None)
    if function is None or func.startswith("_"):
        return None
    try:
        value = function(*numbers)
    except (ValueError, OverflowError, TypeError):
        return None
    if type(value) not in (int, float) or not math.isfinite(value):
        return None
    return value  # type: ignore[no-any-return]


@dataclass
class _Builder:
    """Reads a cell line by line: names to their current step, leaves, and statements."""

    text: str
    limits: Limits
    given: frozenset[str]
    namespaces: dict[str, str] = field(default_factory=lambda: dict(NAMESPACES))
    current: dict[str, str] = field(default_factory=dict)  # written name -> step or leaf
    taken: set[str] = field(default_factory=set)
    steps: list[Step] = field(default_factory=list)
    leaves: dict[str, Leaf] = field(default_factory=dict)
    statements: list[Statement] = field(default_factory=list)
    free: list[str] = field(default_factory=list)
    names: dict[str, str] = field(default_factory=dict)
    used: set[str] = field(default_factory=set)
    idents: set[str] = field(default_factory=set)
    lifted: int = 0
    seed: int | None = None
    root: Node | None = None
    handles: dict[str, Hook] = field(default_factory=dict)  # h = y.register_hook(...)
    hooked: set[str] = field(default_factory=set)  # the tensors a hook is on
    functions: dict[str, ast.Lambda] = field(default_factory=dict)  # hook functions, by name
    registered: set[str] = field(default_factory=set)  # those register_hook was given
    cell: bool = False  # read as Python runs it: ^ is xor, np./math. see the tensors
    guards: list[Guard] = field(default_factory=list)  # the line's, before its statement
    mode: str = ""  # the grad mode of the line being read
    line_text: str = ""
    lifts: dict[int, Name] = field(default_factory=dict)  # a constructor lifted once

    def written(self, stmt: ast.AST) -> str:
        """The line as the cell writes it (its spacing kept), for showing."""
        return (ast.get_source_segment(self.text, stmt) or _text(stmt)).strip()

    # --- names -------------------------------------------------------------------------

    def fresh(self, written: str) -> str:
        """The name for a new binding of ``written``: itself the first time, then
        ``written_2``, ``written_3``, ... (never a name the text uses)."""
        name, k = written, 1
        if written in self.current or written in self.free or written in self.taken:
            k, name = 2, f"{written}_2"
            while name in self.taken or name in self.idents:
                k += 1
                name = f"{written}_{k}"
        self.taken.add(name)
        self.names[name] = written
        return name

    def resolve(self, node: Node) -> Node:
        """A converted tree with each written name replaced by its current binding."""
        builder = self

        class _Current(Rebuild):
            def name(self, found: Name) -> Node:
                if found.id in builder.leaves and found.id not in builder.current:
                    return found  # a constructor lifted out of the expression
                base, dot, attr = found.id.partition(".")
                if base in builder.current:
                    target = builder.current[base]
                    builder.used.add(target)
                    return Name(f"{target}{dot}{attr}")
                if dot:
                    raise ExpressionError("read_unknown", name=base, text=found.id)
                constant = found.id in CONSTANTS and found.id not in builder.given
                if not constant and found.id not in builder.free:
                    builder.free.append(found.id)
                return found

        return _Current()(node)

    def converter(self, readable: bool = False) -> Converter:
        return Converter(self.limits, self.namespaces, self.lift, readable)

    def expression(self, node: ast.AST, readable: bool = False) -> Node:
        for part in ast.walk(node):
            called = part.func if isinstance(part, ast.Call) else None
            if isinstance(called, ast.Name) and called.id in self.functions:
                raise ExpressionError("function_not_hook", name=called.id)
        found: list[tuple[str, list[ast.expr], str]] = []
        if self.cell:
            python = _Python(self.converter().path)
            node = python.visit(node)
            found = python.found
        tree = self.resolve(self.converter(readable)(node))
        check_constants(tree, self.limits)
        for kind, args, func in found:
            operands = tuple(self.operand(a, readable) for a in args)
            self.guards.append(Guard(kind, operands, self.line_text, self.mode, func))
        return tree

    def operand(self, node: ast.expr, readable: bool) -> Node | float:
        """One operand of a guard: a number as it is, else its tree (a constructor in it
        is the value the line itself lifted)."""
        number = _literal(node)
        if number is not None:
            return number
        tree = self.resolve(self.converter(readable)(node))
        return tree.value if isinstance(tree, Num) else tree

    def lift(self, node: ast.Call) -> Name:
        """A constructor inside an expression: a constant the program defines."""
        if id(node) in self.lifts:  # read again as a guard's operand: the same value
            return self.lifts[id(node)]
        original = node
        node = copy.deepcopy(node)
        for part in ast.walk(node):  # len(y) reads the y of this line, not an earlier one
            if is_len(part):
                arg = part.args[0]  # type: ignore[attr-defined]
                arg.id = self.current.get(arg.id, arg.id)
        source = ast.unparse(node)
        flag = _flag(node, "requires_grad")
        name = source
        if "rand" in source or flag:  # each draw (and each leaf) is a value of its own
            self.lifted += 1
            name = f"{source}#{self.lifted}"
        if name not in self.leaves:
            self.leaves[name] = Leaf(name, source, flag)
            self.taken.add(name)
        self.lifts[id(original)] = Name(name)
        return Name(name)

    # --- lines -------------------------------------------------------------------------

    def line(self, stmt: ast.stmt, last: bool, no_grad: str = "") -> None:
        """One line; in a cell, the points where Python raises go just before it."""
        start = len(self.statements)
        self.guards, self.mode, self.line_text = [], no_grad, self.written(stmt)
        self.read_line(stmt, last, no_grad)
        if self.guards:
            self.statements[start:start] = self.guards  # type: ignore[assignment]
            self.guards = []

    def read_line(self, stmt: ast.stmt, last: bool, no_grad: str = "") -> None:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            self.imports(stmt)
        elif isinstance(stmt, ast.Assign):
            self.assign(stmt, no_grad)
        elif isinstance(stmt, ast.AugAssign):
            self.augmented(stmt, no_grad)
        elif isinstance(stmt, ast.Expr):
            self.bare(stmt, last, no_grad)
        elif isinstance(stmt, ast.With):
            self.with_block(stmt)
        elif isinstance(stmt, ast.Pass):
            return
        elif isinstance(stmt, ast.FunctionDef) and (fn := _as_lambda(stmt)) is not None:
            self.functions[stmt.name] = fn  # def hook(g): return g * 2
        else:
            what = _STATEMENTS.get(type(stmt), f"'{type(stmt).__name__.lower()}' statements")
            raise ExpressionError("statement_not_allowed", what=what)

    def imports(self, stmt: ast.Import | ast.ImportFrom) -> None:
        """Known modules under known names; nothing is imported."""
        if isinstance(stmt, ast.Import):
            pairs = [
                (a.name, a.asname) if a.asname else (a.name.split(".")[0],) * 2 for a in stmt.names
            ]
        else:
            base = "." * stmt.level + (stmt.module or "")
            pairs = [(f"{base}.{a.name}", a.asname or a.name) for a in stmt.names]
        for module, alias in pairs:
            known = IMPORTS.get((module, alias))
            if known is None:
                raise ExpressionError("import_not_allowed", text=_text(stmt))
            self.namespaces[alias] = known

    def assign(self, stmt: ast.Assign, no_grad: str) -> None:
        if len(stmt.targets) != 1:
            raise ExpressionError("bad_assignment", text=ast.unparse(stmt).strip())
        target = stmt.targets[0]
        if isinstance(target, ast.Attribute):
            return self.set_attribute(target, stmt)
        if not isinstance(target, ast.Name):
            raise ExpressionError("bad_assignment", text=ast.unparse(stmt).strip())
        written = target.id
        if written in BARE and written not in self.current:
            raise ExpressionError("assign_function", name=written)
        if written in self.namespaces:
            raise ExpressionError("assign_namespace", name=written)
        if isinstance(stmt.value, ast.Lambda):  # hook = lambda g: g * 2
            self.functions[written] = stmt.value
            return None
        if _method(stmt.value) == "register_hook":
            assert isinstance(stmt.value, ast.Call)
            return self.hook(stmt.value, stmt, written)
        if self.constructor(stmt.value):
            assert isinstance(stmt.value, ast.Call)
            name = self.fresh(written)
            flag = _flag(stmt.value, "requires_grad")
            self.leaves[name] = Leaf(name, ast.unparse(stmt.value), flag)
            self.statements.append(self.leaves[name])
            self.current[written] = name
            return None
        node = self.expression(stmt.value)
        # k = x under no_grad binds the same tensor (nothing is computed, nothing detached)
        alias = isinstance(node, Name) and "." not in node.id
        self.add_step(written, Call(no_grad, (node,)) if no_grad and not alias else node)
        return None

    def add_step(self, written: str, node: Node, in_place: InPlace | None = None) -> None:
        name = self.fresh(written)
        step = Step(name, node, in_place)
        self.steps.append(step)
        self.statements.append(step)
        self.current[written] = name

    def augmented(self, stmt: ast.AugAssign, no_grad: str) -> None:
        """``y += e``: in place on a tensor (as Python runs it), else ``y = y + e``."""
        if self.cell and isinstance(stmt.op, ast.BitXor) and isinstance(stmt.target, ast.Name):
            # y ^= e is y = y ^ e as Python runs it (bitwise; PyTorch refuses floats)
            value = ast.BinOp(ast.Name(stmt.target.id, ast.Load()), ast.BitXor(), stmt.value)
            node = self.expression(value)
            self.add_step(stmt.target.id, Call(no_grad, (node,)) if no_grad else node)
            return None
        if not isinstance(stmt.target, ast.Name) or type(stmt.op) not in AUGMENTED:
            raise ExpressionError("bad_assignment", text=ast.unparse(stmt).strip())
        written = stmt.target.id
        op = AUGMENTED[type(stmt.op)]
        method = IN_PLACE_OPERATORS.get(op)
        in_place = method is not None and self.is_tensor(written)
        if in_place:
            self.allow_in_place(written, _text(stmt), no_grad)
        node = Binary(op, self.expression(ast.Name(written)), self.expression(stmt.value))
        if method is not None and in_place:
            return self.in_place_step(written, node, method, _text(stmt), no_grad)
        self.add_step(written, Call(no_grad, (node,)) if no_grad else node)
        return None

    def is_tensor(self, written: str) -> bool:
        """Whether ``written`` holds a tensor (an input, a value the program defines, or a
        step computed from one) rather than a Python number."""
        name = self.current.get(written)
        if name is None:
            return written not in CONSTANTS
        if name in self.leaves:
            return True
        step = next(s for s in self.steps if s.name == name)
        return any(n not in CONSTANTS for n in walk_names(step.node))

    def in_place_call(self, node: ast.Call, stmt: ast.Expr, no_grad: str) -> None:
        """``y.add_(1)``, ``y.exp_()``, ``y.clamp_(min=0)``: an elementwise method, in place."""
        assert isinstance(node.func, ast.Attribute)
        owner, method, text = node.func.value, node.func.attr, self.written(stmt)
        if not isinstance(owner, ast.Name):
            raise ExpressionError("in_place_target", text=text)
        op = SPELLINGS.get(f"Tensor.{method[:-1]}")
        if op is None or not op.elementwise or op.name in NO_IN_PLACE:
            raise ExpressionError("in_place_unknown", text=text, method=method)
        self.allow_in_place(owner.id, text, no_grad)
        plain = ast.Call(ast.Attribute(owner, method[:-1], ast.Load()), node.args, node.keywords)
        self.in_place_step(owner.id, self.expression(plain), method, text, no_grad)

    def allow_in_place(self, written: str, text: str, no_grad: str) -> None:
        """Under a no_grad block only a constant may change in place here; nor may a tensor
        with a hook on it."""
        if self.current.get(written, written) in self.hooked:
            raise ExpressionError("in_place_hooked", text=text, name=written)
        leaf = self.leaves.get(self.current.get(written, written))
        if no_grad and (leaf is None or leaf.requires_grad):
            given = written not in self.current  # an input from outside: a leaf
            code = "in_place_leaf_no_grad" if leaf is not None or given else "in_place_no_grad"
            raise ExpressionError(code, text=text, name=written)

    def in_place_step(self, written: str, node: Node, method: str, text: str, no_grad: str) -> None:
        name = self.current.get(written, written)
        live = [b for w, b in self.current.items() if w != written]
        live += [n for n in self.free if n != written and n not in self.current]
        wrapped = Call(no_grad, (node,)) if no_grad else node
        self.add_step(written, wrapped, InPlace(method, name, text, tuple(live)))

    def set_attribute(self, target: ast.Attribute, stmt: ast.Assign) -> None:
        """``x.grad = None`` and ``x.requires_grad = True``."""
        value = stmt.value
        owner = target.value
        if not isinstance(owner, ast.Name) or not isinstance(value, ast.Constant):
            raise ExpressionError("attribute_assignment", text=_text(stmt))
        if target.attr == "grad" and value.value is None:
            self.statements.append(Reset(self.leaf_of(owner.id), "none", self.written(stmt)))
            return
        if target.attr == "requires_grad" and isinstance(value.value, bool):
            self.require_grad(owner.id, value.value, _text(stmt))
            return
        raise ExpressionError("attribute_assignment", text=_text(stmt))

    def leaf_of(self, written: str) -> str:
        """The input a ``.grad`` line names (a value given from outside if not defined)."""
        name = self.current.get(written)
        if name is not None:
            return name
        if written not in self.free:
            self.free.append(written)
        return written

    def require_grad(self, written: str, flag: bool, text: str) -> None:
        name = self.current.get(written)
        leaf = self.leaves.get(name or "")
        if leaf is None:
            raise ExpressionError("requires_grad_not_leaf", name=written, text=text)
        if name in self.used:
            raise ExpressionError("requires_grad_after_use", name=written, text=text)
        self.leaves[leaf.name] = Leaf(leaf.name, leaf.source, flag)
        self.statements = [self.leaves[leaf.name] if s is leaf else s for s in self.statements]

    def bare(self, stmt: ast.Expr, last: bool, no_grad: str = "") -> None:
        value = stmt.value
        if isinstance(value, ast.Call):
            method = value.func.attr if isinstance(value.func, ast.Attribute) else None
            path = self.converter().path(value.func)
            if method == "backward" and path is None:
                return self.backward(value, stmt)
            if method == "zero_" and path is None:
                return self.zero(value, stmt)
            if method == "requires_grad_" and path is None:
                return self.requires_grad_call(value, stmt)
            if method == "register_hook" and path is None:
                return self.hook(value, stmt, "")
            if method == "remove" and _owner(value) in self.handles and not value.args:
                return self.unhook(value, stmt)
            if method and method.endswith("_") and not method.startswith("_") and path is None:
                return self.in_place_call(value, stmt, no_grad)
            if isinstance(value.func, ast.Name) and value.func.id == "print":
                return self.show(value.args, value.keywords, stmt)
            if path == "torch.manual_seed":
                return self.manual_seed(value)
        if last and not self.is_cell():
            self.root = self.expression(value)
            return None
        used = set(self.used)
        self.statements.append(Show((self.expression(value, readable=True),), self.written(stmt)))
        self.used = used  # showing a tensor builds nothing on it
        return None

    def is_cell(self) -> bool:
        return any(isinstance(s, Backward) for s in self.statements)

    def backward(self, node: ast.Call, stmt: ast.Expr) -> None:
        assert isinstance(node.func, ast.Attribute)
        target = self.expression(node.func.value)
        keywords = {k.arg: k.value for k in node.keywords if k.arg}
        if any(k.arg is None for k in node.keywords) or len(node.args) > 2:
            raise ExpressionError("backward_arguments", text=_text(stmt))
        for key in keywords:
            if key not in ("gradient", "retain_graph", "create_graph", "inputs"):
                raise ExpressionError("backward_arguments", text=_text(stmt))
        if keywords.get("create_graph") is not None and _truth(keywords["create_graph"]):
            raise ExpressionError("create_graph_here", text=_text(stmt))
        if "inputs" in keywords:
            raise ExpressionError("backward_inputs", text=_text(stmt))
        gradient_node = node.args[0] if node.args else keywords.get("gradient")
        retain = node.args[1] if len(node.args) > 1 else keywords.get("retain_graph")
        gradient = None
        if gradient_node is not None and not _none(gradient_node):
            gradient = self.expression(gradient_node)
        flag = retain is not None and _truth(retain, _text(stmt))
        self.statements.append(Backward(target, gradient, flag, self.written(stmt)))

    def zero(self, node: ast.Call, stmt: ast.Expr) -> None:
        """``x.grad.zero_()`` (or ``x.grad.data.zero_()``)."""
        owner = node.func.value if isinstance(node.func, ast.Attribute) else None
        if isinstance(owner, ast.Attribute) and owner.attr == "data":
            owner = owner.value
        if (
            isinstance(owner, ast.Attribute)
            and owner.attr == "grad"
            and isinstance(owner.value, ast.Name)
            and not node.args
        ):
            self.statements.append(Reset(self.leaf_of(owner.value.id), "zero", self.written(stmt)))
            return
        raise ExpressionError("in_place", text=_text(stmt))

    def requires_grad_call(self, node: ast.Call, stmt: ast.Expr) -> None:
        owner = node.func.value if isinstance(node.func, ast.Attribute) else None
        if not isinstance(owner, ast.Name) or len(node.args) > 1 or node.keywords:
            raise ExpressionError(
                "requires_grad_not_leaf", name=ast.unparse(node), text=_text(stmt)
            )
        flag = _truth(node.args[0], _text(stmt)) if node.args else True
        self.require_grad(owner.id, flag, _text(stmt))

    def show(self, args: list[ast.expr], keywords: list[ast.keyword], stmt: ast.Expr) -> None:
        used = set(self.used)
        items: list[Node | str] = []
        for arg in args:
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                items.append(arg.value)
            elif isinstance(arg, ast.JoinedStr):
                raise ExpressionError("print_format", text=_text(stmt))
            else:
                items.append(self.expression(arg, readable=True))
        if any(k.arg not in ("sep", "end", "flush") for k in keywords):
            raise ExpressionError("print_format", text=_text(stmt))
        self.statements.append(Show(tuple(items), self.written(stmt)))
        self.used = used  # showing a tensor builds nothing on it

    def hook(self, node: ast.Call, stmt: ast.stmt, handle: str) -> None:
        """``y.register_hook(lambda g: g * 2)``: the body is an expression in its argument
        (converted like any expression, never run), or ``print(g)``."""
        text = self.written(stmt)
        fn = node.args[0] if len(node.args) == 1 and not node.keywords else None
        if isinstance(fn, ast.Name) and fn.id in self.functions:  # defined before, by name
            self.registered.add(fn.id)
            fn = self.functions[fn.id]
        owner = _owner(node)
        if owner is None or not isinstance(fn, ast.Lambda) or not _one_argument(fn.args):
            raise ExpressionError("hook_form", text=text)
        param = fn.args.args[0].arg
        body: Node | None = None
        if _is_print(fn.body):
            assert isinstance(fn.body, ast.Call)
            for arg in fn.body.args:
                if not (_is_text(arg) or (isinstance(arg, ast.Name) and arg.id == param)):
                    raise ExpressionError("hook_print", text=text, param=param)
        else:
            body = self.converter()(fn.body)
            check_constants(body, self.limits)
            for name in walk_names(body):
                if name != param and name not in CONSTANTS:
                    raise ExpressionError("hook_body", text=text, param=param, name=name)
        target = self.leaf_of(owner)
        if target in self.current.values():
            self.used.add(target)
        hook = Hook(target, param, body, ast.unparse(fn), handle, text)
        self.hooked.add(target)
        self.statements.append(hook)
        if handle:
            self.handles[handle] = hook

    def unhook(self, node: ast.Call, stmt: ast.Expr) -> None:
        handle = _owner(node)
        assert handle is not None
        self.statements.append(Unhook(handle, self.written(stmt)))

    def manual_seed(self, node: ast.Call) -> None:
        if len(node.args) != 1 or node.keywords:
            raise ExpressionError("manual_seed", text=ast.unparse(node))
        arg = node.args[0]
        if not (isinstance(arg, ast.Constant) and type(arg.value) is int and arg.value >= 0):
            raise ExpressionError("manual_seed", text=ast.unparse(node))
        self.seed = arg.value

    def with_block(self, stmt: ast.With) -> None:
        if len(stmt.items) != 1 or stmt.items[0].optional_vars is not None:
            raise ExpressionError("with_not_allowed", text=_text(stmt).split("\n")[0])
        context = stmt.items[0].context_expr
        path = self.converter().path(context.func) if isinstance(context, ast.Call) else None
        block = GRAD_MODES.get(path or "")
        if block is None or context.args or context.keywords:  # type: ignore[union-attr]
            raise ExpressionError("with_not_allowed", text=_text(stmt).split("\n")[0])
        for inner in stmt.body:
            if not isinstance(inner, (ast.Assign, ast.AugAssign, ast.Expr, ast.Pass)):
                raise ExpressionError("with_not_allowed", text=_text(stmt).split("\n")[0])
            self.line(inner, last=False, no_grad=block)

    def constructor(self, node: ast.AST) -> bool:
        """Whether a right-hand side makes a new value (torch.tensor, torch.ones, ...)."""
        if not isinstance(node, ast.Call):
            return False
        path = self.converter().path(node.func)
        if path is None and isinstance(node.func, ast.Name):
            path = node.func.id
        return path is not None and path.split(".")[-1] in CONSTRUCTORS and path not in SPELLINGS

    # --- the whole -----------------------------------------------------------------------

    def build(self, module: ast.Module) -> Expression:
        self.idents = {n.id for n in ast.walk(module) if isinstance(n, ast.Name)}
        body = module.body
        for index, stmt in enumerate(body):
            self.line(stmt, last=index == len(body) - 1)
        for name in self.functions:
            if name not in self.registered:
                raise ExpressionError("function_not_hook", name=name)
        if self.root is None:
            self.root = self.output_root()
        if not any(isinstance(s, (Backward, Show)) for s in self.statements):
            self.name_last_bindings()
        cell = self.is_cell()
        if not cell and not any(isinstance(s, (Show, Reset)) for s in self.statements):
            self.check_used()
        leaves = tuple(self.leaves.values())
        free = [n for n in self.free if n not in self.leaves]
        variables = tuple(dict.fromkeys([*(v.name for v in leaves), *free]))
        root = self.root
        if isinstance(root, Name) and any(s.name == root.id for s in self.steps):
            output = root.id
        else:
            output = _fresh("out", set(self.taken) | set(variables))
        return Expression(
            self.text,
            root,
            variables,
            tuple(self.steps),
            output,
            leaves,
            tuple(self.statements),
            tuple(self.names.items()),
            self.seed,
            active_hooks(self.statements),
        )

    def name_last_bindings(self) -> None:
        """A program that runs as a whole (not line by line) ends with each written name
        on its last binding: ``y`` is the tensor ``y`` holds after the last line (as
        PyTorch holds it), and an earlier binding takes ``y_1``, ``y_2``, ... (shown as
        ``y``). An input, or a value the program defines, keeps its name."""
        renames: dict[str, str] = {}
        chosen: set[str] = set()
        for written in dict.fromkeys(self.names.values()):
            bindings = [n for n, w in self.names.items() if w == written]
            if len(bindings) < 2 or bindings[-1] == written or written in self.free:
                continue
            if any(b in self.leaves for b in bindings) or self._in_leaf_source(bindings):
                continue
            earlier: list[str] = []
            k = 0
            for _ in bindings[:-1]:
                k += 1
                while (
                    f"{written}_{k}" in self.idents
                    or f"{written}_{k}" in chosen
                    or (f"{written}_{k}" in self.taken and f"{written}_{k}" not in bindings)
                ):
                    k += 1
                earlier.append(f"{written}_{k}")
            chosen.update(earlier)
            renames.update(zip(bindings, [*earlier, written], strict=True))
        if renames:
            self.apply_renames(renames)

    def _in_leaf_source(self, names: list[str]) -> bool:
        """Whether a constructor's text reads one of ``names`` (``len(y_2)``)."""
        words = {w for leaf in self.leaves.values() for w in re.findall(r"\w+", leaf.source)}
        return any(n in words for n in names)

    def apply_renames(self, renames: dict[str, str]) -> None:
        """Every step, reference and statement with its step renamed by ``renames``."""

        def new(name: str) -> str:
            base, dot, attr = name.partition(".")
            return renames.get(base, base) + dot + attr

        class _Renamed(Rebuild):
            def name(self, found: Name) -> Node:
                return Name(new(found.id)) if new(found.id) != found.id else found

        rename = _Renamed()
        changed: dict[int, Statement] = {}
        for step in self.steps:
            in_place = step.in_place
            if in_place is not None:
                live = tuple(new(n) for n in in_place.live)
                in_place = InPlace(in_place.method, new(in_place.target), in_place.text, live)
            changed[id(step)] = Step(new(step.name), rename(step.node), in_place)
        statements: list[Statement] = []
        for statement in self.statements:
            if isinstance(statement, Step):
                statement = changed[id(statement)]
            elif isinstance(statement, Hook):
                statement = dataclasses.replace(statement, target=new(statement.target))
            elif isinstance(statement, Reset):
                statement = dataclasses.replace(statement, name=new(statement.name))
            statements.append(statement)
        self.steps = [changed[id(s)] for s in self.steps]
        self.statements = statements
        if self.root is not None:
            self.root = rename(self.root)
        self.names = {new(n): w for n, w in self.names.items()}
        self.taken = {new(n) for n in self.taken}
        self.hooked = {new(n) for n in self.hooked}
        self.current = {w: new(n) for w, n in self.current.items()}

    def output_root(self) -> Node:
        """Without a last bare expression: the last backward's target, else the last step."""
        targets = [s.target for s in self.statements if isinstance(s, Backward)]
        if targets:
            return targets[-1]
        if self.steps:
            return Name(self.steps[-1].name)
        raise ExpressionError("nothing_computed")

    def check_used(self) -> None:
        """In a program without backward() or print(...), every step feeds the output."""
        used = {n for step in self.steps for n in walk_names(step.node)}
        used |= set(walk_names(self.root)) if self.root is not None else set()
        for step in self.steps:
            if step.in_place is not None:  # it changes a tensor: not a value left unused
                continue
            if step.name not in used and not (
                isinstance(self.root, Name) and self.root.id == step.name
            ):
                raise ExpressionError("step_unused", name=self.names.get(step.name, step.name))


def active_hooks(statements: list[Statement] | tuple[Statement, ...]) -> tuple[Hook, ...]:
    """The hooks registered and not removed by the end of ``statements``."""
    active: list[Hook] = []
    for statement in statements:
        if isinstance(statement, Hook):
            active.append(statement)
        elif isinstance(statement, Unhook):
            active = [h for h in active if h.handle != statement.handle]
    return tuple(active)


def _as_lambda(stmt: ast.FunctionDef) -> ast.Lambda | None:
    """``def hook(g): return g * 2`` (or a body that prints ``g``) as the lambda it is;
    None for any other function."""
    if stmt.decorator_list or not _one_argument(stmt.args):
        return None
    param = stmt.args.args[0].arg
    body = list(stmt.body)
    if body and isinstance(body[0], ast.Expr) and _is_text(body[0].value):
        body = body[1:]  # a docstring
    if len(body) == 2 and isinstance(body[1], ast.Return):  # print(g), then return g or None
        back = body[1].value
        if back is None or _is_none(back) or (isinstance(back, ast.Name) and back.id == param):
            body = body[:1]
    if len(body) != 1 or not isinstance(body[0], ast.Return | ast.Expr):
        return None
    value = body[0].value
    if value is None or (isinstance(body[0], ast.Expr) and not _is_print(value)):
        return None
    one = ast.arguments(
        posonlyargs=[], args=[ast.arg(arg=param)], kwonlyargs=[], kw_defaults=[], defaults=[]
    )
    return ast.Lambda(args=one, body=value)


def _is_none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _method(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr
    return None


def _owner(node: ast.Call) -> str | None:
    """``y`` of ``y.method(...)``."""
    func = node.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        return func.value.id
    return None


def _one_argument(args: ast.arguments) -> bool:
    plain = not (args.posonlyargs or args.kwonlyargs or args.vararg or args.kwarg)
    return plain and len(args.args) == 1 and not args.defaults


def _is_print(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "print"
        and not node.keywords
    )


def _is_text(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _fresh(name: str, taken: set[str]) -> str:
    while name in taken:
        name += "_"
    return name


def _text(stmt: ast.AST) -> str:
    return ast.unparse(stmt).strip()


def _none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _truth(node: ast.AST, text: str = "") -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, bool):
        return node.value
    raise ExpressionError("flag_value", text=text or ast.unparse(node))


def _flag(node: ast.Call, name: str) -> bool:
    for keyword in node.keywords:
        if keyword.arg == name:
            return _truth(keyword.value, ast.unparse(node))
    return False


def parse_program(text: str, limits: Limits, given: frozenset[str] = frozenset()) -> Expression:
    """Parse an expression, a program of named steps, or a notebook cell. A cell (it calls
    backward() or print(...)) is PyTorch code and means what Python means: ``^`` is
    bitwise xor, ``np.f``/``math.f`` of a tensor do what NumPy and ``math`` do. In an
    expression ``^`` is power and ``np.``/``math.`` name the same functions as ``torch.``."""
    cell = _looks_like_cell(module_of(text, limits, caret_power=False))
    program = _build(text, limits, given, cell)
    if program.is_cell != cell:
        program = _build(text, limits, given, program.is_cell)
    return program


def _build(text: str, limits: Limits, given: frozenset[str], cell: bool) -> Expression:
    module = module_of(text, limits, caret_power=not cell)
    return _Builder(text, limits, given, cell=cell).build(module)


def _looks_like_cell(module: ast.Module) -> bool:
    """Whether the text calls backward() or print(...) (what makes a cell)."""
    for node in ast.walk(module):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr == "backward":
                return True
            if isinstance(func, ast.Name) and func.id == "print":
                return True
    return False


def caret_power(text: str) -> bool:
    """Whether an expression's text writes ``^`` outside strings (read there as ``**``)."""
    import io
    import tokenize

    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return "^" in text
    return any(t.type == tokenize.OP and t.string in ("^", "^=") for t in tokens)


def used_names(node: Node) -> set[str]:
    """Every name a subtree reads (steps and inputs)."""
    return {n.id for n in walk(node) if isinstance(n, Name)}
