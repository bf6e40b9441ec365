"""SymPy's side, shared by the element-wise and the component-wise models: terms built by
the one fold over the tree, derivatives, where a jump sits at its jump, and reduction of
broadcast results. Every derivative comes from ``sympy.diff``; nothing from PyTorch.

A program's steps as SymPy *patterns* (the step-wise model makes and differentiates one
SymPy term per kind of step, not one per step): a step's pattern is its tree with the
names it uses numbered in order of first appearance (``_0``, ``_1``, ...) and each
floating-point constant that is an operand of ``+ - * /`` a symbol of its own (``_c0``,
...): ``y2 = y1*0.5 + sin(y1)`` and ``y3 = y2*0.7 + sin(y2)`` are both
``_0*_c0 + sin(_0)``. SymPy makes each pattern's term and its derivatives once (kept for
the process, up to ``KEPT`` of each); a step evaluates them at its own inputs' values and
its own constants (``Binding``). Integer constants, zero, and constants elsewhere (an
exponent, a function's argument, a comparison, a constant beside another constant) stay
in the pattern as written, where SymPy may simplify with them (``x**2``, ``0*x``,
``2*3``). Steps with a reduction, a detached copy or indexing have no pattern (None): the
model makes their terms itself.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Generic, TypeVar

import numpy as np
import sympy as sp

from autogradcli.errors import ComputationError
from autogradcli.lang.analysis import is_full_reduction
from autogradcli.lang.text import unparse
from autogradcli.lang.tree import (
    COMPARISONS,
    Binary,
    Call,
    Fold,
    Index,
    Name,
    Node,
    Num,
    Program,
    Unary,
    operands,
    walk,
    walk_names,
)
from autogradcli.lang.vocabulary import CONSTANTS, OPS, arguments, definition, kink_codes
from autogradcli.reference.evaluate import _PLANS, FLOAT64, Arith, evaluate
from autogradcli.reference.expected import Expected

Shape = tuple[int, ...]

SYMPY_BINARY = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": lambda a, b: a / b,
    "**": lambda a, b: a**b,
}
RELATIONS = {
    "<": lambda a, b: sp.Lt(a, b),
    "<=": lambda a, b: sp.Le(a, b),
    ">": lambda a, b: sp.Gt(a, b),
    ">=": lambda a, b: sp.Ge(a, b),
    "==": lambda a, b: sp.Eq(a, b),
    "!=": lambda a, b: sp.Ne(a, b),
}
assert set(RELATIONS) == set(COMPARISONS)
# Operations whose first argument is a condition (kept as a relation, not made 0 or 1).
CONDITIONS = frozenset({"where"})


def numeric(term: sp.Basic | bool) -> sp.Basic:
    """A term as a number: a comparison as 1 where it holds, 0 elsewhere (PyTorch's
    True and False in arithmetic)."""
    if term is sp.true or term is True:
        return sp.Integer(1)
    if term is sp.false or term is False:
        return sp.Integer(0)
    if isinstance(term, sp.core.relational.Relational):
        return sp.Piecewise((1, term), (0, True))
    return term


def relation(op: str, left: sp.Basic | bool, right: sp.Basic | bool) -> sp.Basic | bool:
    """A comparison of two terms (a SymPy relation, or True/False for two numbers)."""
    return RELATIONS[op](numeric(left), numeric(right))


def op_term(node: Call, args: list[sp.Expr]) -> sp.Expr:
    """An elementwise operation's SymPy term from its arguments' terms (the vocabulary's)."""
    op = OPS[node.func]
    if op.sympy is None:
        raise ComputationError("not_elementwise", text=unparse(node))
    values = [a if k == 0 and node.func in CONDITIONS else numeric(a) for k, a in enumerate(args)]
    positional, keywords = arguments(node, values)
    return op.sympy(sp, *positional, **keywords)


def number(node: Num) -> sp.Expr:
    """A literal as SymPy keeps it: an Integer, or the float's exact binary value."""
    return sp.Integer(node.value) if isinstance(node.value, int) else sp.Float(node.value)


class SympyTerms(Fold[sp.Expr]):
    """Each operation as one SymPy term (elementwise operations only); subclasses say what
    names are. ``apply`` on placeholders gives an operation's local form (--explain).
    Operations the vocabulary defines through others (losses) are folded as that
    definition."""

    def num(self, node: Num) -> sp.Expr:
        return number(node)

    def unary(self, node: Unary, operand: sp.Expr) -> sp.Expr:
        operand = numeric(operand)
        return -operand if node.op == "-" else operand

    def binary(self, node: Binary, left: sp.Expr, right: sp.Expr) -> sp.Expr:
        if node.op in RELATIONS:
            return relation(node.op, left, right)
        if node.op not in SYMPY_BINARY:
            raise ComputationError("not_elementwise", text=unparse(node))
        return SYMPY_BINARY[node.op](numeric(left), numeric(right))

    def expansion(self, node: Call, placeholders: list[Name]) -> Node | None:
        return definition(node, placeholders)

    def call(self, node: Call, args: list[sp.Expr]) -> sp.Expr:
        if OPS[node.func].kind == "detach":  # a constant copy: no derivative through it
            return sp.Symbol(f"detach({args[0]})", real=True)
        return op_term(node, args)

    def index(self, node: Index, value: sp.Expr) -> sp.Expr:
        raise ComputationError("not_elementwise", text=unparse(node))


_CHAIN_GROUPS = {"+": "+", "-": "+", "*": "*", "/": "*"}


def _link(node: Node, group: str) -> bool:
    """Whether ``node`` is one more link of a chain of ``group`` (+ - or * /)."""
    return isinstance(node, Binary) and _CHAIN_GROUPS.get(node.op) == group


class ChainTerms(SympyTerms):
    """``SympyTerms`` with a chain ``a + b - c + ...`` (or ``a * b / c * ...``) made one
    ``sp.Add`` (``sp.Mul``) of its flattened terms: adding them one at a time re-sorts the
    sum each time (quadratic in its length)."""

    def enter(self, node: Node) -> sp.Expr | object:
        group = _CHAIN_GROUPS.get(node.op) if isinstance(node, Binary) else None
        if group is None or not _link(node.left, group):  # type: ignore[union-attr]
            return super().enter(node)
        spine: list[Binary] = [node]  # type: ignore[list-item]
        while _link(spine[-1].left, group):
            spine.append(spine[-1].left)  # type: ignore[arg-type]
        terms = [numeric(self.visit(spine[-1].left))]
        for link in reversed(spine):
            term = numeric(self.visit(link.right))
            terms.append(term if link.op in ("+", "*") else -term if group == "+" else 1 / term)
        return sp.Add(*terms) if group == "+" else sp.Mul(*terms)


def diff(expr: sp.Expr, symbol: sp.Symbol, order: int = 1) -> sp.Expr:
    """``sympy.diff``, with SymPy's ``u/sign(u)`` for ``Abs(u)`` written back as ``Abs(u)``
    (the same number where u != 0; at u = 0 it is 0 where the quotient is 0/0)."""
    return abs_form(sp.diff(expr, symbol, order))


def abs_form(expr: sp.Expr) -> sp.Expr:
    """``expr`` with each product ``u * sign(u)**-1`` written as ``Abs(u)``."""

    def split(product: sp.Expr) -> tuple[sp.Expr, list[sp.Expr]] | None:
        factors = list(product.args)
        for factor in product.args:
            if factor.is_Pow and isinstance(factor.base, sp.sign) and factor.exp == -1:
                inner = list(sp.Mul.make_args(factor.base.args[0]))
                rest = [f for f in factors if f is not factor]
                if all(f in rest for f in inner):
                    for f in inner:
                        rest.remove(f)
                    return factor.base.args[0], rest
        return None

    return expr.replace(
        lambda e: e.is_Mul and split(e) is not None,
        lambda e: sp.Mul(sp.Abs(split(e)[0]), *split(e)[1]),  # type: ignore[index]
    )


def reduce_to_shape(
    array: np.ndarray, shape: Shape, ufunc: np.ufunc = np.add, own: bool = False
) -> np.ndarray:
    """Sum (or OR) a broadcast result back to the shape of the input it came from: a new
    array (``own``: ``array`` is the caller's to give away, returned as it is when it has
    the shape already)."""
    array = np.asarray(array)
    extra = array.ndim - len(shape)
    out = ufunc.reduce(array, axis=tuple(range(extra))) if extra > 0 else array
    axes = tuple(i for i, size in enumerate(shape) if size == 1 and out.shape[i] != 1)
    if axes:
        out = ufunc.reduce(out, axis=axes, keepdims=True)
    if isinstance(out, np.ndarray) and out.shape == tuple(shape) and (out is not array or own):
        return out
    return np.array(np.broadcast_to(out, shape))


def find_kinks(
    derivative: sp.Expr,
    env: dict[sp.Symbol, Any],
    shape: Shape,
    arith: Arith = FLOAT64,
    uses: set[str] | frozenset[str] = frozenset(),
) -> tuple[np.ndarray, set[str]]:
    """Where a jump function in ``derivative`` sits exactly at its jump, and which note
    applies (``uses``: the operations the expression calls, which claim their jumps)."""
    mask = np.zeros(shape, dtype=bool)
    notes: set[str] = set()
    for atom, at_jump in kink_sites(derivative, env, shape, arith):
        mask |= at_jump
        notes |= kink_codes(type(atom).__name__, set(uses))
    return mask, notes


def path_calls(expression: Program, name: str) -> set[str]:
    """The functions on a path from input ``name`` to the output: the calls whose subtree
    uses ``name``, directly or through the program's steps (the kinks a note on ``name``
    may name)."""
    reach = {name}
    for step in expression.steps:  # in order: a step uses earlier ones
        if reach.intersection(walk_names(step.node)):
            reach.add(step.name)
    return {
        node.func
        for root in expression.roots()
        for node in walk(root)
        if isinstance(node, Call) and reach.intersection(walk_names(node))
    }


JUMPS = (sp.Heaviside, sp.sign, sp.DiracDelta, sp.Piecewise)


def switches(atom: sp.Expr) -> list[sp.Expr]:
    """What a jump switches on: the argument of Heaviside, sign and DiracDelta, and
    ``lhs - rhs`` of each comparison a Piecewise branches on (0 at the switch)."""
    if isinstance(atom, sp.Piecewise):
        conditions = [c for _, c in atom.args if isinstance(c, sp.core.relational.Relational)]
        return [c.lhs - c.rhs for c in conditions]
    return [atom.args[0]]


def kink_sites(
    derivative: sp.Expr,
    env: dict[sp.Symbol, Any],
    shape: Shape,
    arith: Arith = FLOAT64,
    ties: bool = False,
    atoms: set[sp.Expr] | None = None,
) -> list[tuple[sp.Expr, np.ndarray]]:
    """Each jump function in ``derivative`` that sits exactly at its jump somewhere, with
    the mask of those elements. ``ties``: the expression has max/min, whose tie of
    infinities (inf - inf, NaN, with no NaN among the inputs) is on neither side.
    ``atoms``: the jump functions of ``derivative``, where the caller has them."""
    sites = []
    whole = None
    for atom in derivative.atoms(*JUMPS) if atoms is None else atoms:  # order is immaterial
        arguments = [evaluate(a, env, arith) for a in switches(atom)]
        if not arguments:
            continue
        argument = arguments[0]
        at_jump = np.zeros(np.broadcast(*arguments).shape, dtype=bool)
        for value in arguments:
            at_jump = at_jump | np.asarray(value == 0, dtype=bool)
        at_jump = np.broadcast_to(at_jump, shape)
        undefined = arith.isnan(argument)
        if (
            ties
            and undefined.any()
            and not isinstance(atom, sp.DiracDelta)
            and not any(arith.isnan(v).any() for v in env.values())
        ):
            at_jump = at_jump | np.broadcast_to(undefined, shape)
        if isinstance(atom, sp.DiracDelta):  # only where it is not multiplied away
            if whole is None:
                whole = np.broadcast_to(arith.isfinite(evaluate(derivative, env, arith)), shape)
            at_jump = at_jump & ~whole
        elif at_jump.any():  # a jump that does not change the value (x*sign(x)) is no kink
            at_jump = at_jump & _jumps(derivative, atom, env, shape, arith)
        if at_jump.any():
            sites.append((atom, at_jump))
    return sites


def _jumps(
    derivative: sp.Expr, atom: sp.Expr, env: dict[sp.Symbol, Any], shape: Shape, arith: Arith
) -> np.ndarray:
    """Where ``derivative`` differs on the two sides of ``atom``'s jump."""
    if isinstance(atom, sp.Piecewise):
        low, high = atom.args[0][0], atom.args[1][0] if len(atom.args) > 1 else atom.args[0][0]
    else:
        low, high = (0, 1) if isinstance(atom, sp.Heaviside) else (-1, 1)
    left = np.broadcast_to(arith.floats(evaluate(derivative.subs(atom, low), env, arith)), shape)
    right = np.broadcast_to(arith.floats(evaluate(derivative.subs(atom, high), env, arith)), shape)
    return ~((left == right) & np.isfinite(left))


def expected_from(
    arith: Arith,
    output: Any,
    grads: dict[str, Any],
    kinks: dict[str, np.ndarray],
    notes: dict[str, set[str]],
    fresh: bool = False,
) -> Expected:
    """An ``Expected`` of float64 arrays from numbers in ``arith`` (values past float64's
    range become ±inf and are marked ``huge``); ``fresh``: the gradients are arrays of
    their own, kept as they are when they are float64 already."""

    out, out_huge = in_range(arith, output)
    ranged = {n: in_range(arith, g, fresh) for n, g in grads.items()}
    return Expected(
        output=out,
        grads={n: r[0] for n, r in ranged.items()},
        kinks=kinks,
        kink_notes=notes,
        output_huge=out_huge,
        huge={n: r[1] for n, r in ranged.items()},
        arithmetic=arith.name,
    )


def in_range(arith: Arith, values: Any, fresh: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``values`` as a new float64 array (``fresh``: float64 ``values`` of their own are
    not copied), and where they are finite but past float64's range (nowhere, when they
    were float64 already)."""
    floats = arith.floats(values)
    if floats is values or np.may_share_memory(floats, values):  # float64 already
        if not (fresh and isinstance(values, np.ndarray) and values.flags.writeable):
            floats = np.array(floats, dtype=np.float64)
        return floats, np.zeros(floats.shape, dtype=bool)
    floats = np.asarray(floats, dtype=np.float64)
    return floats, np.asarray(arith.isfinite(values) & ~np.isfinite(floats), dtype=bool)


def owned(value: np.ndarray, env: dict[sp.Symbol, Any]) -> bool:
    """Whether ``value`` is an array of its own, made by this evaluation (not an input's
    array, a view or a constant), so that it may be overwritten."""
    return (
        isinstance(value, np.ndarray)
        and value.ndim > 0
        and value.flags.owndata
        and value.flags.writeable
        and not any(np.may_share_memory(value, v) for v in env.values())
    )


def accumulate(grads: dict[Any, Any], name: Any, contribution: np.ndarray, arith: Arith) -> None:
    """``grads[name] += contribution`` (``contribution`` is an array of its own): in place.
    The first contribution is added to 0 as before (0 + -0.0 is 0.0), in its own array."""
    total = grads[name]
    if total is not None:
        arith.check_sum([total, contribution], np.shape(total))  # contributions that cancel
    if total is None:
        zero = arith.number(sp.Integer(0))
        if (
            isinstance(contribution, np.ndarray)
            and contribution.ndim
            and contribution.flags.writeable
        ):
            grads[name] = np.add(zero, contribution, out=contribution)
        else:
            grads[name] = zero + contribution
    elif (
        isinstance(total, np.ndarray)
        and isinstance(contribution, np.ndarray)
        and total.ndim
        and total.shape == contribution.shape
        and total.dtype == contribution.dtype
    ):
        np.add(total, contribution, out=total)
    else:
        grads[name] = np.add(total, contribution)  # mpf + array: NumPy's, not mpmath's


# --- a program's steps as patterns -------------------------------------------------------

KEPT = 4096  # patterns (and derivatives of them) kept for the process
ARITHMETIC = frozenset({"+", "-", "*", "/"})

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class _Kept(Generic[K, V]):
    """The last ``size`` values made, by key (least recently used dropped first); safe
    across threads (the reference runs in one under a time limit)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.items: OrderedDict[K, V] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: K, make: Callable[[], V]) -> V:
        with self.lock:
            if key in self.items:
                self.items.move_to_end(key)
                return self.items[key]
        value = make()  # outside the lock: SymPy's work may take a while
        with self.lock:
            self.items[key] = value
            while len(self.items) > self.size:
                self.items.popitem(last=False)
        return value


@dataclass(frozen=True)
class Pattern:
    """A kind of step: its term in the pattern's symbols, the symbols standing for the
    names it uses (in order of first appearance) and for its constants."""

    expr: sp.Expr
    names: tuple[sp.Symbol, ...]
    params: tuple[sp.Symbol, ...]


@dataclass(frozen=True, eq=False)
class Binding:
    """One step's pattern bound to the step: the model's symbols the pattern's names
    stand for, and the step's constants (floats, exact as written) for its params."""

    pattern: Pattern
    inputs: tuple[sp.Symbol, ...]
    constants: tuple[float, ...]

    @cached_property
    def order(self) -> tuple[sp.Symbol, ...]:
        """``inputs`` in the order their contributions are summed (by name)."""
        return tuple(sorted(self.inputs, key=str))

    @cached_property
    def symbol_for(self) -> dict[sp.Symbol, sp.Symbol]:
        """The pattern's symbol for each of the model's ``inputs``."""
        return dict(zip(self.inputs, self.pattern.names, strict=True))


_PATTERNS: _Kept[tuple[object, ...], Pattern] = _Kept(KEPT)
_DERIVATIVES: _Kept[tuple[sp.Expr, sp.Symbol], sp.Expr] = _Kept(KEPT)


def forget_patterns() -> None:
    """Drop the patterns, derivatives and evaluation plans kept for the process (a
    benchmark times a program as a first sight of it)."""
    for kept in (_PATTERNS, _DERIVATIVES):
        with kept.lock:
            kept.items.clear()
    _PLANS.clear()


def pattern_derivative(expr: sp.Expr, symbol: sp.Symbol) -> sp.Expr:
    """``diff(expr, symbol)`` of a pattern's term (or part of one), kept for the process."""
    return _DERIVATIVES.get((expr, symbol), lambda: diff(expr, symbol))


def bind(
    node: Node, symbol_of: Callable[[str], sp.Symbol | None]
) -> tuple[sp.Expr, Binding] | None:
    """A step's pattern term and its binding (``symbol_of``: the model's symbol for a
    name, None for a name that is not an input or an earlier step); None for a step no
    pattern stands for."""
    read = _read(node, lambda name: symbol_of(name) is not None)
    if read is None:
        return None
    key, names, slots = read
    pattern = _PATTERNS.get(key, lambda: _made(node, names, slots))
    inputs = tuple(symbol_of(n) for n in names)
    constants = tuple(float(s.value) for s in slots)
    return pattern.expr, Binding(pattern, inputs, constants)  # type: ignore[arg-type]


def _read(
    node: Node, known: Callable[[str], bool]
) -> tuple[tuple[object, ...], list[str], list[Num]] | None:
    """The step's key (its nodes in order, names and constants numbered), the names it
    uses in order of first appearance, and the constants that become params (one object
    reached twice is one param); None where no pattern stands for the step."""
    tokens: list[object] = []
    names: dict[str, int] = {}
    slots: dict[int, int] = {}
    found: list[Num] = []
    stack: list[tuple[Node, bool]] = [(node, False)]
    while stack:
        current, arithmetic = stack.pop()
        if isinstance(current, Name):
            if known(current.id):
                tokens.append(("n", names.setdefault(current.id, len(names))))
            elif current.id in CONSTANTS:
                tokens.append(("k", current.id))
            else:
                return None
            continue
        if isinstance(current, Num):
            if arithmetic and _slot(current.value):
                if id(current) not in slots:
                    slots[id(current)] = len(slots)
                    found.append(current)
                tokens.append(("c", slots[id(current)]))
            else:
                tokens.append(("v", repr(current.value)))
            continue
        children = operands(current)
        if isinstance(current, Unary):
            tokens.append(("u", current.op))
            flags = [arithmetic]
        elif isinstance(current, Binary):  # a constant in + - * / beside a non-constant
            tokens.append(("b", current.op))
            flags = [current.op in ARITHMETIC and not _constant(c) for c in reversed(children)]
        elif isinstance(current, Call):
            op = OPS.get(current.func)
            if op is None or not op.elementwise or is_full_reduction(current):
                return None
            tokens.append(("f", current.func, len(current.args), repr(current.params)))
            flags = [False] * len(children)
        else:  # indexing: not elementwise
            return None
        stack.extend(zip(reversed(children), reversed(flags), strict=True))
    return tuple(tokens), list(names), found


def _slot(value: object) -> bool:
    """Whether a constant becomes a param: a finite float other than zero."""
    return isinstance(value, float) and math.isfinite(value) and value != 0


def _constant(sibling: Node) -> bool:
    """Whether the other operand is a constant as written (a number, ``pi``, ``-2``): a
    constant beside it stays in the pattern, where SymPy folds the two."""
    while isinstance(sibling, Unary):
        sibling = sibling.operand
    return isinstance(sibling, Num) or (isinstance(sibling, Name) and sibling.id in CONSTANTS)


class _PatternTerms(ChainTerms):
    """The step's terms with its names and constants as the pattern's symbols."""

    def __init__(self, names: dict[str, sp.Symbol], params: dict[int, sp.Symbol]) -> None:
        super().__init__()
        self.names, self.params = names, params

    def name(self, node: Name) -> sp.Expr:
        if node.id in self.names:
            return self.names[node.id]
        return getattr(sp, CONSTANTS[node.id][1])

    def num(self, node: Num) -> sp.Expr:
        param = self.params.get(id(node))
        return number(node) if param is None else param


def _made(node: Node, names: list[str], slots: list[Num]) -> Pattern:
    """The pattern's term, made by SymPy once for every step of its kind."""
    symbols = tuple(sp.Symbol(f"_{k}", real=True) for k in range(len(names)))
    params = tuple(sp.Symbol(f"_c{k}", real=True) for k in range(len(slots)))
    terms = _PatternTerms(dict(zip(names, symbols, strict=True)), {})
    terms.params = {id(s): p for s, p in zip(slots, params, strict=True)}
    return Pattern(terms(node), symbols, params)
