"""In-place lines of a program: ``y += e``, ``y.add_(1)``, ``y.exp_()``: each a new step
that records what it overwrote (``InPlace``), refused where PyTorch would refuse it."""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

from autogradcli.errors import ExpressionError
from autogradcli.lang.cellstatements import Update
from autogradcli.lang.converter import BINARY_OPS
from autogradcli.lang.syntax import (
    statement_text,
)
from autogradcli.lang.tree import (
    Binary,
    Call,
    InPlace,
    Leaf,
    Node,
    Step,
    walk_names,
)
from autogradcli.lang.vocabulary import CONSTANTS, SPELLINGS

AUGMENTED = BINARY_OPS  # y += x is y = y + x


# y += x on a tensor changes it in place, as Python does (Tensor.__iadd__); @= makes a new one
IN_PLACE_OPERATORS = {"+": "add_", "-": "sub_", "*": "mul_", "/": "div_", "**": "pow_"}


# elementwise methods whose trailing-underscore form PyTorch does not have
NO_IN_PLACE = frozenset({"maximum", "minimum", "clone", "matmul"})


class InPlaceLines:
    """The program builder's in-place handling (mixed into ``program._Builder``)."""

    # the builder's state these methods read and write (see program._Builder)
    add_step: Callable[..., None]
    cell: bool
    current: dict[str, str]
    expression: Callable[..., Node]
    free: list[str]
    hooked: set[str]
    leaves: dict[str, Leaf]
    statements: list[Any]
    steps: list[Step]
    written: Callable[[ast.AST], str]

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
        leaf = self.leaves.get(self.current.get(written, ""))
        if in_place and no_grad == "no_grad" and leaf is not None and leaf.requires_grad:
            # p -= lr * p.grad under no_grad: the parameter itself changes, as in PyTorch
            assert method is not None
            operand = self.expression(stmt.value, readable=True)
            self.statements.append(Update(leaf.name, method, operand, self.written(stmt)))
            return None
        if in_place:
            self.allow_in_place(written, statement_text(stmt), no_grad)
        node = Binary(op, self.expression(ast.Name(written)), self.expression(stmt.value))
        if method is not None and in_place:
            return self.in_place_step(written, node, method, statement_text(stmt), no_grad)
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
