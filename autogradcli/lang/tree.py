"""The expression tree, and the one walk over it that every consumer uses.

A ``Fold`` says what each kind of node becomes, given what its operands became: PyTorch's
forward pass, SymPy's terms, the component-wise terms, shapes, text and constants are all
folds, so a new kind of node is added here (``operands`` and ``Fold.apply``) and in each
fold's method for it, and nowhere else.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import EllipsisType
from typing import Any, Generic, TypeVar

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


Param = tuple[str, Any]


@dataclass(frozen=True)
class Call:
    """An operation of the vocabulary: its tensor arguments (numbers are ``Num``) and its
    other arguments by PyTorch's names (``dim``, ``keepdim``, ``reduction``, ...)."""

    func: str
    args: tuple[Node, ...]
    params: tuple[Param, ...] = ()

    @property
    def arg(self) -> Node:
        return self.args[0]

    @property
    def other(self) -> Node | None:
        return self.args[1] if len(self.args) > 1 else None

    @property
    def options(self) -> dict[str, Any]:
        return dict(self.params)

    @property
    def dim(self) -> Any:
        return self.options.get("dim")


def call(func: str, *args: Node, **params: Any) -> Call:
    """``Call(func, args, params)`` with the parameters given by name (None ones left out)."""
    return Call(func, args, tuple((k, v) for k, v in params.items() if v is not None))


@dataclass(frozen=True)
class Slice:
    """``start:stop:step`` of a subscript, each an integer or None."""

    start: int | None = None
    stop: int | None = None
    step: int | None = None

    def python(self) -> slice:
        return slice(self.start, self.stop, self.step)


# One item of a subscript: an integer, a slice, ``...``, ``None`` (a new axis of size 1),
# or a tuple of integers (picking those positions along the axis).
IndexItem = int | Slice | EllipsisType | None | tuple[int, ...]
# An item of Python's own subscript, as NumPy and torch take it.
Subscript = int | slice | EllipsisType | None | list[int]


@dataclass(frozen=True)
class Index:
    """``value[items]``: PyTorch's basic indexing (and integer lists), items known as written."""

    value: Node
    items: tuple[IndexItem, ...]

    def python(self) -> tuple[Subscript, ...]:
        """The items as Python's subscript (a tuple) for NumPy and torch."""
        return tuple(
            i.python() if isinstance(i, Slice) else list(i) if isinstance(i, tuple) else i
            for i in self.items
        )


Node = Num | Name | Unary | Binary | Call | Index
NumberValue = int | float

COMPARISONS: dict[str, Callable[[object, object], object]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
}
# Python's own operators: the torch side applies exactly these, as a typed line would.
PY_BINARY: dict[str, Callable[[object, object], object]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "**": operator.pow,
    "@": operator.matmul,
    **COMPARISONS,
}
PY_UNARY: dict[str, Callable[[object], object]] = {"-": operator.neg, "+": operator.pos}


@dataclass(frozen=True)
class InPlace:
    """How a step changes a tensor in place (``y.add_(1)``, ``y += 1``): PyTorch's
    ``method`` on the tensor of step or leaf ``target``; ``live`` are the other names bound
    at that line (none may share the tensor's memory); ``text`` is the line as written."""

    method: str
    target: str
    text: str
    live: tuple[str, ...] = ()


@dataclass(frozen=True)
class Step:
    """One assignment of a program: ``name = node``. With ``in_place`` the torch side
    changes ``in_place.target``'s tensor by PyTorch's in-place method (the version counter
    moves) while ``node`` is the same value written out of place, for the reference."""

    name: str
    node: Node
    in_place: InPlace | None = None


@dataclass(frozen=True)
class Leaf:
    """A value the program defines, ``x = torch.tensor([2., 3.], requires_grad=True)``:
    ``source`` is the constructor as written (read by ``values.py``, nothing is run)."""

    name: str
    source: str
    requires_grad: bool = False


@dataclass(frozen=True)
class Backward:
    """``target.backward(gradient, retain_graph=...)`` as a line of the program."""

    target: Node
    gradient: Node | None = None
    retain_graph: bool = False
    text: str = ""


@dataclass(frozen=True)
class Reset:
    """``x.grad.zero_()`` (``to="zero"``) or ``x.grad = None`` (``to="none"``)."""

    name: str
    to: str
    text: str = ""


@dataclass(frozen=True)
class Show:
    """``print(...)`` or a bare line of a cell: values shown at that point (text shown as is)."""

    items: tuple[Node | str, ...]
    text: str = ""


@dataclass(frozen=True)
class Hook:
    """``target.register_hook(lambda g: body)``: each backward() hands the gradient arriving
    at the tensor to ``body`` (an expression in ``param``) and sends on what it returns;
    ``body`` None is a hook that only looks (``lambda g: print(g)``). ``handle`` is the name
    the line keeps it under (``h = y.register_hook(...)``), ``text`` the lambda as written,
    ``line`` the whole line."""

    target: str
    param: str
    body: Node | None
    text: str
    handle: str = ""
    line: str = ""


@dataclass(frozen=True)
class Unhook:
    """``h.remove()``: the hook kept under ``handle`` no longer runs."""

    handle: str
    text: str = ""


Statement = Step | Leaf | Backward | Reset | Show | Hook | Unhook


@dataclass(frozen=True)
class Program:
    """A parsed expression, program or notebook cell.

    ``steps`` are the program's assignments in order (none for a plain expression; a name
    assigned again gets a new step, ``y_2``); ``root`` is the output: the final expression,
    or ``Name`` of the last assignment. ``variables`` are the inputs: the values the
    program defines (``leaves``) and the free names, in order of appearance; ``output`` is
    the name the output tensor is shown under. A cell's lines, backward() calls and
    print(...)s included, are ``statements`` in order; ``names`` maps a step's name to the
    name it was written with; ``hooks`` are the gradient hooks in force at the end."""

    text: str
    root: Node
    variables: tuple[str, ...] = field(default=())
    steps: tuple[Step, ...] = field(default=())
    output: str = "out"
    leaves: tuple[Leaf, ...] = field(default=())
    statements: tuple[Statement, ...] = field(default=())
    names: tuple[tuple[str, str], ...] = field(default=())
    seed: int | None = None
    hooks: tuple[Hook, ...] = field(default=())  # registered (and not removed) at the end

    def step(self, name: str) -> Step | None:
        """The step that assigns ``name``, if any."""
        return next((s for s in self.steps if s.name == name), None)

    def leaf(self, name: str) -> Leaf | None:
        """The value the program defines under ``name``, if any."""
        return next((v for v in self.leaves if v.name == name), None)

    def roots(self) -> tuple[Node, ...]:
        """Every step's tree, then the output's."""
        return (*(s.node for s in self.steps), self.root)

    @property
    def is_cell(self) -> bool:
        """Whether the program runs line by line: it calls backward() or print(...) itself."""
        return any(isinstance(s, Backward | Show) for s in self.statements)

    def shown(self, name: str) -> str:
        """The name a step was written with (``y`` for ``y_2``)."""
        return self._written.get(name, name)

    @functools.cached_property
    def _written(self) -> dict[str, str]:
        return dict(self.names)  # once: a long program asks for each of its steps


def operands(node: Node) -> list[Node]:
    """The inputs of one operation of the tree, left to right."""
    kind = type(node)
    if kind is Binary:
        return [node.left, node.right]  # type: ignore[union-attr]
    if kind is Call:
        return list(node.args)  # type: ignore[union-attr]
    if kind is Unary:
        return [node.operand]  # type: ignore[union-attr]
    if kind is Index:
        return [node.value]  # type: ignore[union-attr]
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


_OPEN = object()  # ``Fold.enter``: fold the node's operands first


class Fold(Generic[T]):
    """One walk over the tree, bottom up: subclasses say what each node kind becomes.

    An operation the vocabulary defines through others (a loss through means and logs) is
    folded as its definition when ``expansion`` gives one (the reference side does; torch
    runs the real function): the definition's placeholders ``#0``, ``#1``, ... stand for
    the values the operation's arguments already have."""

    def __init__(self) -> None:
        self._bound: dict[str, T] = {}

    def __call__(self, node: Node) -> T:
        return self.visit(node)

    def visit(self, node: Node) -> T:
        """Fold ``node`` bottom up, operands left to right, with an explicit stack (no
        recursion: a chain of a thousand ``+`` is as safe as one)."""
        fold = type(self)
        if fold.enter is not Fold.enter or fold.apply is not Fold.apply:
            return self._visit(node)
        # ``enter`` and ``apply`` as Fold writes them, inlined (a long program is folded
        # a dozen times over, node by node): the same calls in the same order
        results: list[T] = []
        stack: list[Any] = [node, -1]  # node, -1: not entered; node, k: k operands folded
        push, pop, keep = stack.append, stack.pop, results.append
        leave = None if fold.leave is Fold.leave else self.leave  # None: records nothing
        bound = self.__dict__.get("_bound")
        expands = fold.expansion is not Fold.expansion
        while stack:
            count = pop()
            current = pop()
            kind = type(current)
            if count >= 0:
                if kind is Binary:
                    right = results.pop()
                    value = self.binary(current, results.pop(), right)
                elif kind is Unary:
                    value = self.unary(current, results.pop())
                elif kind is Call and not expands:
                    values = results[-count:] if count else []
                    del results[len(results) - count :]
                    value = self.call(current, values)
                elif kind is Index:
                    value = self.index(current, results.pop())
                else:
                    values = results[-count:] if count else []
                    del results[len(results) - count :]
                    value = self.apply(current, values)
            elif kind is Name:
                found = bound is not None and current.id in bound
                value = bound[current.id] if found else self.name(current)  # type: ignore[index]
            elif kind is Num:
                value = self.num(current)
            else:
                children = operands(current)
                push(current)
                push(len(children))
                for child in reversed(children):
                    push(child)
                    push(-1)
                continue
            keep(value if leave is None else leave(current, value))
        return results[0]

    def _visit(self, node: Node) -> T:
        """``visit`` for a fold that overrides ``enter`` or ``apply``."""
        results: list[T] = []
        # node, -1: not entered yet; node, k: its k operands' values are on ``results``
        # (two entries, not a tuple: no object made per node for the collector to track)
        stack: list[Any] = [node, -1]
        enter, apply = self.enter, self.apply
        leave = None if type(self).leave is Fold.leave else self.leave  # None: records nothing
        push, pop, keep = stack.append, stack.pop, results.append
        while stack:
            count = pop()
            current = pop()
            if count >= 0:
                values = results[-count:] if count else []
                del results[len(results) - count :]
                value = apply(current, values)
                keep(value if leave is None else leave(current, value))
                continue
            early = enter(current)
            if early is not _OPEN:
                keep(early if leave is None else leave(current, early))  # type: ignore[arg-type]
                continue
            children = operands(current)
            push(current)
            push(len(children))
            for child in reversed(children):
                push(child)
                push(-1)
        return results[0]

    def enter(self, node: Node) -> T | object:
        """A node's value before its operands are folded (a number, a name), or ``_OPEN``
        to fold its operands first. Subclasses that replace a whole subtree override it."""
        kind = type(node)
        if kind is Name:
            bound = self.__dict__.get("_bound")
            return bound[node.id] if bound and node.id in bound else self.name(node)  # type: ignore[union-attr]
        if kind is Num:
            return self.num(node)  # type: ignore[arg-type]
        return _OPEN

    def leave(self, node: Node, value: T) -> T:
        """Called with each node's value as it is made (subclasses may record it)."""
        return value

    def apply(self, node: Node, values: list[T]) -> T:
        """One operation on values its operands already have (the only dispatch on kinds)."""
        kind = type(node)
        if kind is Binary:
            return self.binary(node, values[0], values[1])  # type: ignore[arg-type]
        if kind is Unary:
            return self.unary(node, values[0])  # type: ignore[arg-type]
        if kind is Call:
            if type(self).expansion is Fold.expansion:  # no definitions: no placeholders
                return self.call(node, values)  # type: ignore[arg-type]
            definition = self.expansion(node, [Name(f"#{k}") for k in range(len(values))])  # type: ignore[arg-type]
            if definition is None:
                return self.call(node, values)  # type: ignore[arg-type]
            return self.within(
                definition, dict(zip((f"#{k}" for k in range(len(values))), values, strict=True))
            )
        if kind is Index:
            return self.index(node, values[0])  # type: ignore[arg-type]
        raise TypeError(f"not an operation: {node!r}")

    def within(self, node: Node, bound: dict[str, T]) -> T:
        """Fold ``node`` with some names standing for values already folded."""
        saved = getattr(self, "_bound", {})
        self._bound = {**saved, **bound} if saved else bound  # read only: no copy needed
        try:
            return self.visit(node)
        finally:
            self._bound = saved

    def expansion(self, node: Call, placeholders: list[Name]) -> Node | None:
        """The operation's definition through others, or None to fold it as itself."""
        return None

    def num(self, node: Num) -> T:
        raise NotImplementedError

    def name(self, node: Name) -> T:
        raise NotImplementedError

    def unary(self, node: Unary, operand: T) -> T:
        raise NotImplementedError

    def binary(self, node: Binary, left: T, right: T) -> T:
        raise NotImplementedError

    def call(self, node: Call, args: list[T]) -> T:
        raise NotImplementedError

    def index(self, node: Index, value: T) -> T:
        raise NotImplementedError


class Rebuild(Fold[Node]):
    """A fold that makes a new tree: each node with its operands replaced (the same node
    where nothing below it changed, made only where something did). Subclasses change
    what ``enter``, ``name`` or ``visit`` gives."""

    def num(self, node: Num) -> Node:
        return node

    def name(self, node: Name) -> Node:
        return node

    def unary(self, node: Unary, operand: Node) -> Node:
        return node if operand is node.operand else Unary(node.op, operand)

    def binary(self, node: Binary, left: Node, right: Node) -> Node:
        if left is node.left and right is node.right:
            return node
        return Binary(node.op, left, right)

    def call(self, node: Call, args: list[Node]) -> Node:
        if all(a is b for a, b in zip(args, node.args, strict=True)):
            return node
        return Call(node.func, tuple(args), node.params)

    def index(self, node: Index, value: Node) -> Node:
        return node if value is node.value else Index(value, node.items)

    def program(self, expression: Program, **changes: object) -> Program:
        """The whole program rebuilt: every step and the output."""
        steps = tuple(Step(s.name, self.visit(s.node), s.in_place) for s in expression.steps)
        fields = {
            "text": expression.text,
            "root": self.visit(expression.root),
            "variables": expression.variables,
            "steps": steps,
            "output": expression.output,
            **changes,
        }
        return Program(**fields)  # type: ignore[arg-type]


class _Cut(Rebuild):
    def __init__(self, target: Node, name: str) -> None:
        super().__init__()
        self.target, self.new_name = target, name

    def enter(self, node: Node) -> Node | object:
        return Name(self.new_name) if node is self.target else super().enter(node)


def cut(expression: Program, target: Node, name: str) -> Program:
    """``expression`` with the subtree ``target`` (found by identity) replaced by a new
    input ``name``: the derivative with respect to ``name`` is the derivative with
    respect to that intermediate tensor."""
    return _Cut(target, name).program(expression, variables=(*expression.variables, name))
