"""The expression tree, and the one walk over it that every consumer uses.

A ``Fold`` says what each kind of node becomes, given what its operands became: PyTorch's
forward pass, SymPy's terms, the component-wise terms, shapes, text and constants are all
folds, so a new kind of node is added here (``operands`` and ``Fold.apply``) and in each
fold's method for it, and nowhere else.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")


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

    def roots(self) -> tuple[Node, ...]:
        """Every step's tree, then the output's."""
        return (*(s.node for s in self.steps), self.root)


def operands(node: Node) -> list[Node]:
    """The inputs of one operation of the tree, left to right."""
    if isinstance(node, Binary):
        return [node.left, node.right]
    if isinstance(node, Unary):
        return [node.operand]
    if isinstance(node, Call):
        return [node.arg] if node.other is None else [node.arg, node.other]
    return []


def walk(node: Node) -> Iterator[Node]:
    """All nodes of the tree, parents before children, left before right."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(operands(current)))


def walk_names(node: Node) -> Iterator[str]:
    """Names in the order they appear in the text."""
    return (n.id for n in walk(node) if isinstance(n, Name))


def direct_inputs(node: Node) -> list[str]:
    """Names a subtree uses directly, in order of appearance, without repeats."""
    return list(dict.fromkeys(walk_names(node)))


class Fold(Generic[T]):
    """One walk over the tree, bottom up: subclasses say what each node kind becomes."""

    def __call__(self, node: Node) -> T:
        return self.visit(node)

    def visit(self, node: Node) -> T:
        if isinstance(node, Num):
            return self.num(node)
        if isinstance(node, Name):
            return self.name(node)
        return self.apply(node, [self.visit(child) for child in operands(node)])

    def apply(self, node: Node, values: list[T]) -> T:
        """One operation on values its operands already have (the only dispatch on kinds)."""
        if isinstance(node, Unary):
            return self.unary(node, values[0])
        if isinstance(node, Binary):
            return self.binary(node, values[0], values[1])
        if isinstance(node, Call):
            return self.call(node, values[0], values[1] if len(values) > 1 else None)
        raise TypeError(f"not an operation: {node!r}")

    def num(self, node: Num) -> T:
        raise NotImplementedError

    def name(self, node: Name) -> T:
        raise NotImplementedError

    def unary(self, node: Unary, operand: T) -> T:
        raise NotImplementedError

    def binary(self, node: Binary, left: T, right: T) -> T:
        raise NotImplementedError

    def call(self, node: Call, arg: T, other: T | None) -> T:
        raise NotImplementedError


class Rebuild(Fold[Node]):
    """A fold that makes a new tree: each node with its operands replaced (the same node
    where nothing below it changed). Subclasses change what ``visit`` or ``rebuilt`` gives."""

    def num(self, node: Num) -> Node:
        return node

    def name(self, node: Name) -> Node:
        return node

    def unary(self, node: Unary, operand: Node) -> Node:
        return self.rebuilt(node, Unary(node.op, operand), [operand])

    def binary(self, node: Binary, left: Node, right: Node) -> Node:
        return self.rebuilt(node, Binary(node.op, left, right), [left, right])

    def call(self, node: Call, arg: Node, other: Node | None) -> Node:
        new = Call(node.func, arg, node.dim, other)
        return self.rebuilt(node, new, [arg] if other is None else [arg, other])

    def rebuilt(self, old: Node, new: Node, children: list[Node]) -> Node:
        same = all(a is b for a, b in zip(children, operands(old), strict=True))
        return old if same else new

    def program(self, expression: Expression, **changes: object) -> Expression:
        """The whole program rebuilt: every step and the output."""
        steps = tuple(Step(s.name, self.visit(s.node)) for s in expression.steps)
        fields = {
            "text": expression.text,
            "root": self.visit(expression.root),
            "variables": expression.variables,
            "steps": steps,
            "output": expression.output,
            **changes,
        }
        return Expression(**fields)  # type: ignore[arg-type]


class _Cut(Rebuild):
    def __init__(self, target: Node, name: str) -> None:
        self.target, self.new_name = target, name

    def visit(self, node: Node) -> Node:
        return Name(self.new_name) if node is self.target else super().visit(node)


def cut(expression: Expression, target: Node, name: str) -> Expression:
    """``expression`` with the subtree ``target`` (found by identity) replaced by a new
    input ``name``: the derivative with respect to ``name`` is the derivative with
    respect to that intermediate tensor."""
    return _Cut(target, name).program(expression, variables=(*expression.variables, name))
