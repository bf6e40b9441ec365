"""The SymPy side for tensor algebra: one SymPy term per element.

Every input element gets its own real symbol (``W[0,1]``); the expression is built with
NumPy arrays of SymPy terms (``@`` is NumPy's matmul on those terms, ``softmax`` is
``exp(x_i) / sum_j exp(x_j)``, see ``TENSOR_FUNCTIONS``), and every derivative is
``sympy.diff`` of one output term by one input symbol. Nothing is taken from PyTorch.
This is exact but grows with the sizes, so it runs up to ``MAX_EXACT_ENTRIES`` Jacobian
entries (output elements times input elements); beyond that the caller checks numerically.
Products and reductions alone (``@``, ``sum``, ``+``, ``*``, see ``PRODUCT_CALLS``) cost
the terms of each output element, not its symbols: they run up to ``MAX_PRODUCT_INPUTS``
and ``MAX_PRODUCT_ENTRIES``, and a sum is differentiated term by term (only the terms that
hold the symbol), so ``sum(x @ W)`` with W of 64x64 is checked exactly.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import sympy as sp

from autogradcli.errors import LimitError
from autogradcli.lang.analysis import calls
from autogradcli.lang.shapes import Shape, infer_shape, program_shapes
from autogradcli.lang.tree import (
    PY_BINARY,
    PY_UNARY,
    Binary,
    Call,
    Fold,
    Index,
    Name,
    Node,
    Num,
    Program,
    Unary,
    walk,
)
from autogradcli.lang.vocabulary import CONSTANTS, OPS, arguments, definition, kink_codes
from autogradcli.reference.bounds import reference
from autogradcli.reference.evaluate import Arith, close_floats, evaluate
from autogradcli.reference.expected import Expected
from autogradcli.reference.terms import (
    CONDITIONS,
    RELATIONS,
    abs_form,
    diff,
    expected_from,
    in_range,
    kink_sites,
    number,
    numeric,
    op_term,
    path_calls,
)
from autogradcli.settings import Limits

MAX_EXACT_ENTRIES = 4096  # output elements x input elements, for the exact SymPy check
MAX_EXACT_INPUTS = 256  # input elements, checked before any SymPy term is built
MAX_EXACT_WORK = 200_000  # nodes of all output terms x input elements (what sympy.diff walks)
# products and reductions alone: a Jacobian entry is the few terms of a sum that hold its
# symbol, so symbols are cheap; what counts is the dense Jacobian (each entry evaluated)
MAX_PRODUCT_INPUTS = 8192  # input elements (x of 64 and W of 64x64: 4,160)
MAX_PRODUCT_ENTRIES = 8192  # output elements x input elements
PRODUCT_CALLS = frozenset(
    {"sum", "mean", "dot", "inner", "matmul", "add", "sub", "mul", "neg", "clone", "T"}
    | {"transpose", "permute", "reshape", "flatten", "squeeze", "unsqueeze", "cat", "stack"}
)
PRODUCT_OPERATORS = frozenset({"+", "-", "*", "@"})


class TooLarge(LimitError):
    """The component-wise check would be too large; the caller falls back to numerics."""


def element_symbols(name: str, shape: Shape) -> np.ndarray:
    """``x`` -> array of symbols ``x[0]``, ``x[1]``, ... (``x`` itself for a 0-d input)."""
    if not shape:
        return np.array(sp.Symbol(name, real=True), dtype=object)
    cells = [
        sp.Symbol(f"{name}[{','.join(map(str, index))}]", real=True)
        for index in itertools.product(*(range(n) for n in shape))
    ]
    return np.array(cells, dtype=object).reshape(shape)


def _objects(value: Any) -> np.ndarray:
    return np.array(value, dtype=object)


def _each(function: Any, *arrays: np.ndarray) -> np.ndarray:
    """``function`` on each element (the arrays broadcast), as an object array."""
    return _objects(np.vectorize(function, otypes=[object])(*arrays))


def add_over(
    a: np.ndarray, axis: int | tuple[int, ...] | None = None, keepdims: bool = False
) -> Any:
    """``np.sum`` of an object array of SymPy terms, each sum made by one ``sympy.Add``
    (NumPy adds one term at a time, and each addition sorts the growing sum again)."""
    a = np.asarray(a, dtype=object)
    if axis is None:
        axes = tuple(range(a.ndim))
    else:
        axes = tuple(sorted(k % a.ndim for k in (axis if isinstance(axis, tuple) else (axis,))))
    kept = [k for k in range(a.ndim) if k not in axes]
    moved = np.transpose(a, kept + list(axes))
    rows = moved.reshape(math.prod(a.shape[k] for k in kept), -1)
    flat = np.empty(rows.shape[0], dtype=object)
    for i, row in enumerate(rows):
        flat[i] = sp.Add(*row)
    shape = [1 if k in axes else n for k, n in enumerate(a.shape)] if keepdims else None
    out = flat.reshape(shape if shape is not None else [a.shape[k] for k in kept])
    return out[()] if out.ndim == 0 else out


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` of object arrays (NumPy's rules for 1-d and batched operands), each
    element one ``sympy.Add`` of its products."""
    left = a[None, :] if a.ndim == 1 else a
    right = b[:, None] if b.ndim == 1 else b
    products = left[..., :, :, None] * right[..., None, :, :]
    out = np.asarray(add_over(products, axis=-2), dtype=object)
    if a.ndim == 1:
        out = out[..., 0, :]
    if b.ndim == 1:
        out = out[..., 0]
    return _objects(out)


class _TermsNumPy:
    """NumPy for the vocabulary's component forms, with ``sum`` as ``add_over`` on
    object arrays (numbers are summed by NumPy itself)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(np, name)

    @staticmethod
    def sum(a: Any, axis: Any = None, keepdims: bool = False, **options: Any) -> Any:
        data = np.asarray(a)
        if data.dtype != object or options:
            return np.sum(a, axis=axis, keepdims=keepdims, **options)
        return add_over(data, axis, keepdims)


TERMS_NUMPY = _TermsNumPy()


class _Terms(Fold[np.ndarray]):
    """Each node as an object array of SymPy terms, one per element (the one fold)."""

    def __init__(self, model: ComponentModel) -> None:
        super().__init__()
        self.model = model
        self.steps: dict[str, np.ndarray] = {}

    def num(self, node: Num) -> np.ndarray:
        return _objects(number(node))

    def name(self, node: Name) -> np.ndarray:
        model = self.model
        if node.id in model.constants:
            return model.constants[node.id]
        if node.id in model.symbols:
            return model.symbols[node.id]
        step = model.expression.step(node.id)
        if step is not None:
            if node.id not in self.steps:
                self.steps[node.id] = self(step.node)
            return self.steps[node.id]
        return _objects(getattr(sp, CONSTANTS[node.id][1]))

    def unary(self, node: Unary, operand: np.ndarray) -> np.ndarray:
        return _objects(PY_UNARY[node.op](_each(numeric, operand)))

    def binary(self, node: Binary, left: np.ndarray, right: np.ndarray) -> np.ndarray:
        if node.op in RELATIONS:
            return _each(RELATIONS[node.op], _each(numeric, left), _each(numeric, right))
        left, right = _each(numeric, left), _each(numeric, right)
        if node.op == "**":
            return _each(sp.Pow, left, right)
        if node.op == "@" and left.ndim and right.ndim:
            return matmul(left, right)
        return _objects(PY_BINARY[node.op](left, right))

    def expansion(self, node: Call, placeholders: list[Name]) -> Node | None:
        return definition(node, placeholders)

    def call(self, node: Call, args: list[np.ndarray]) -> np.ndarray:
        op = OPS[node.func]
        if op.kind == "detach":
            return self.model.freeze(args[0])
        if op.components is None:  # elementwise: the vocabulary's term for each element
            return _each(lambda *terms: op_term(node, list(terms)), *args)
        values = [
            a if k == 0 and node.func in CONDITIONS else _each(numeric, a)
            for k, a in enumerate(args)
        ]
        positional, keywords = arguments(node, values)
        return _objects(op.components(sp, TERMS_NUMPY, *positional, **keywords))

    def index(self, node: Index, value: np.ndarray) -> np.ndarray:
        return _objects(value[node.python()])


class ComponentModel:
    """The expression as an array of SymPy terms over per-element input symbols."""

    by = "SymPy"

    def __init__(
        self,
        expression: Program,
        shapes: dict[str, Shape],
        limits: Limits | None = None,
        max_entries: int = MAX_EXACT_ENTRIES,
        constants: dict[str, np.ndarray] | None = None,
    ) -> None:
        self.expression = expression
        self.limits = limits or Limits()
        self.shapes = program_shapes(expression, shapes, self.limits)
        inputs = sum(math.prod(shapes[n]) for n in expression.variables)
        self.products = products_only(expression)
        most = MAX_PRODUCT_INPUTS if self.products else MAX_EXACT_INPUTS
        if inputs > most:  # before a single symbol is made
            raise TooLarge("exact_inputs", limit=most, inputs=inputs)
        self.inputs = inputs
        self.symbols = {n: element_symbols(n, shapes[n]) for n in expression.variables}
        self.given = dict(constants or {})  # inputs known as numbers (class indices)
        self.constants = {n: _objects(_as_terms(v)) for n, v in self.given.items()}
        self.frozen: dict[sp.Symbol, Any] = {}  # detach(...): a symbol per element, its term
        self._terms = _Terms(self)
        self.uses = calls(expression)

        out_shape = infer_shape(expression.root, self.shapes, self.limits)
        entries = math.prod(out_shape) * inputs
        if self.products:
            max_entries = max(max_entries, MAX_PRODUCT_ENTRIES)
        if entries > max_entries:
            raise TooLarge("exact_entries", limit=max_entries, entries=entries)
        self.output = self.build(expression.root)
        if self.products:
            if _product_work(self.output) > MAX_EXACT_WORK:
                raise TooLarge("exact_work", limit=MAX_EXACT_WORK, inputs=inputs)
        else:
            nodes = 0
            for term in self.output.reshape(-1):
                for _ in sp.preorder_traversal(term):
                    nodes += 1
                    if nodes * inputs > MAX_EXACT_WORK:
                        raise TooLarge("exact_work", limit=MAX_EXACT_WORK, inputs=inputs)
        self._jacobians: dict[str, np.ndarray] = {}

    def build(self, node: Node) -> np.ndarray:
        """The object array of SymPy terms for a subtree."""
        return self._terms(node)

    def for_program(self, expression: Program, shapes: dict[str, Shape]) -> ComponentModel:
        """The same kind of model for another program (a cut of this one)."""
        constants = {n: v for n, v in self.given.items() if n in expression.variables}
        return ComponentModel(expression, shapes, self.limits, constants=constants)

    def freeze(self, terms: np.ndarray) -> np.ndarray:
        """``detach(terms)``: a new symbol per element, its value the term's, no derivative."""
        k = len(self.frozen)
        flat = []
        for j, term in enumerate(terms.reshape(-1)):
            symbol = sp.Symbol(f"detach{k + j}", real=True)
            self.frozen[symbol] = term
            flat.append(symbol)
        return np.array(flat, dtype=object).reshape(terms.shape)

    def jacobian(self, name: str) -> np.ndarray:
        """SymPy's ``d out_i / d name_j``, shaped ``out.shape + name.shape``, cached."""
        if name not in self._jacobians:
            outs = self.output.reshape(-1)
            ins = self.symbols[name].reshape(-1)
            table = np.full((outs.size, ins.size), sp.Integer(0), dtype=object)
            for i, term in enumerate(outs):
                if not isinstance(term, sp.Basic):
                    continue
                holding = _holding(term)
                for j, symbol in enumerate(ins):
                    if symbol in holding:
                        parts = (_part_diff(a, symbol) for a in holding[symbol])
                        table[i, j] = abs_form(sp.Add(*parts))
            self._jacobians[name] = table.reshape(self.output.shape + self.symbols[name].shape)
        return self._jacobians[name]

    def environment(self, values: dict[str, np.ndarray], arith: Arith) -> dict[sp.Symbol, Any]:
        """Every input symbol's number, and each detached element's value (in order)."""
        env: dict[sp.Symbol, Any] = {}
        for name, symbols in self.symbols.items():
            data = arith.array(values[name]).reshape(-1)
            for symbol, element in zip(symbols.reshape(-1), data, strict=True):
                env[symbol] = element
        for symbol, term in self.frozen.items():
            env[symbol] = np.asarray(evaluate(_term(term), env, arith), dtype=object).reshape(-1)[0]
        return env

    def numbers(
        self, terms: np.ndarray, env: dict[sp.Symbol, Any], arith: Arith
    ) -> tuple[np.ndarray, np.ndarray, set[str]]:
        """Values of an array of terms (in ``arith``), where a jump sits at its jump, and
        the notes."""
        flat = terms.reshape(-1)
        out = np.empty(flat.size, dtype=object)
        kinks = np.zeros(flat.size, dtype=bool)
        notes: set[str] = set()
        ties = bool(self.uses & {"max", "min"})
        for k, term in enumerate(flat):
            expr = _term(term)
            out[k] = np.asarray(evaluate(expr, env, arith), dtype=object).reshape(-1)[0]
            if arith.isnan(out[k]) and self._zero_over_zero(expr, env, arith):
                kinks[k] = True
                notes.add("norm" if "norm" in self.uses else "zero_over_zero")
            for atom, _ in kink_sites(expr, env, (), arith, ties):
                kinks[k] = True
                notes |= _kink_notes(atom, self.uses)
        return out.reshape(terms.shape), kinks.reshape(terms.shape), notes

    @staticmethod
    def _zero_over_zero(expr: Any, env: dict[sp.Symbol, Any], arith: Arith) -> bool:
        """Whether a negative power of something that is 0 here sits in ``expr``."""
        return any(
            atom.exp.is_negative and bool(evaluate(atom.base, env, arith) == 0)
            for atom in expr.atoms(sp.Pow)
        )

    def values_of(
        self, terms: np.ndarray, values: dict[str, np.ndarray]
    ) -> tuple[np.ndarray, np.ndarray, set[str]]:
        """Precise float64 values of an array of terms at ``values`` (numbers, kinks, notes)."""

        def compute(arith: Arith) -> tuple[np.ndarray, np.ndarray, set[str]]:
            numbers, kinks, notes = self.numbers(terms, self.environment(values, arith), arith)
            return arith.floats(numbers), kinks, notes

        return reference(compute, self.inputs, lambda a, b: close_floats(a[0], b[0]))

    def value(self, node: Node, values: dict[str, np.ndarray]) -> np.ndarray:
        """SymPy's value of any subtree at ``values``, precise, as float64."""
        return self.values_of(self.build(node), values)[0]

    def value_range(
        self, node: Node, values: dict[str, np.ndarray]
    ) -> tuple[np.ndarray, np.ndarray]:
        """``value``, and where it is finite but past float64's range (shown as ±inf)."""
        terms = self.build(node)

        def compute(arith: Arith) -> tuple[np.ndarray, np.ndarray]:
            env = self.environment(values, arith)
            return in_range(arith, self.numbers(terms, env, arith)[0])

        return reference(compute, self.inputs, lambda a, b: close_floats(a[0], b[0]))

    def jacobian_values(
        self, values: dict[str, np.ndarray], name: str
    ) -> tuple[np.ndarray, np.ndarray, set[str]]:
        """The Jacobian with respect to ``name`` at ``values`` (numbers, kinks, notes)."""
        return self.values_of(self.jacobian(name), values)

    def evaluate(
        self,
        values: dict[str, np.ndarray],
        weights: np.ndarray,
        differentiate: frozenset[str],
        exact_zeros: bool = False,
    ) -> Expected:
        """Output value and ``J^T w`` per variable (as ``backward(w)`` computes it), precise;
        ``exact_zeros``: a zero weight contributes 0 even against an infinite entry."""

        def compute(arith: Arith) -> Expected:
            return self._evaluate(values, weights, differentiate, exact_zeros, arith)

        return reference(compute, self.inputs, Expected.settled_with)

    def _evaluate(
        self,
        values: dict[str, np.ndarray],
        weights: np.ndarray,
        differentiate: frozenset[str],
        exact_zeros: bool,
        arith: Arith,
    ) -> Expected:
        env = self.environment(values, arith)
        output = self.numbers(self.output, env, arith)[0]
        w = np.broadcast_to(arith.array(weights), output.shape).reshape(-1)
        zero = arith.number(sp.Integer(0))
        grads, kinks, notes = {}, {}, {}
        for name in self.expression.variables:
            if name not in differentiate:
                continue
            jac, marks, found = self.numbers(self.jacobian(name), env, arith)
            rows = jac.reshape(w.size, -1)
            products = w[:, None] * rows
            if exact_zeros:
                products = np.where(np.asarray(w == 0, dtype=bool)[:, None], zero, products)
            shape = self.shapes[name]
            arith.check_sum([products], (products.shape[1],))  # J^T w's sums that cancel
            grads[name] = np.add.reduce(products, axis=0).reshape(shape)
            mask = (marks.reshape(w.size, -1) & np.asarray(w != 0, dtype=bool)[:, None]).any(0)
            kinks[name] = mask.reshape(shape)
            notes[name] = on_path(found, path_calls(self.expression, name)) if mask.any() else set()
        return expected_from(arith, output, grads, kinks, notes)

    def derivative_latex(self, name: str, weights_are_ones: bool = True) -> str | None:
        """SymPy's Jacobian with respect to ``name`` as LaTeX: one entry, or the matrix of
        d out_i / d name_j when it has at most 64 entries (else None)."""
        jac = self.jacobian(name)
        if jac.size > 64 or jac.size == 0:
            return None
        whole = (
            jac.reshape(-1)[0] if jac.size == 1 else sp.Matrix(jac.reshape(self.output.size, -1))
        )
        return latex(whole)

    def derivative_text(self, name: str, weights_are_ones: bool = True) -> str:
        """A readable SymPy derivative: the whole one for small cases, else one entry."""
        jac = self.jacobian(name)
        outs = self.output.size
        if jac.size == 0:
            return "(no elements)"
        if outs == 1 and jac.size == 1:
            return str(jac.reshape(-1)[0])
        first = self.symbols[name].reshape(-1)[0]
        if outs == 1:
            return f"∂out/∂{first} = {jac.reshape(-1)[0]} (component-wise; one per element)"
        total = sum(jac.reshape(outs, -1)[:, 0]) if weights_are_ones else None
        if total is not None:
            return f"∂sum(out)/∂{first} = {total} (component-wise)"
        return f"J = ∂out/∂{name}: {jac.size} entries (component-wise; see autograd-cli jacobian)"


def products_only(expression: Program) -> bool:
    """Whether the program is products and reductions alone: ``+ - * @``, a sign, and the
    calls in ``PRODUCT_CALLS`` (each output element a sum of products of input elements)."""
    for root in expression.roots():
        for node in walk(root):
            if isinstance(node, Binary) and node.op not in PRODUCT_OPERATORS:
                return False
            if isinstance(node, Unary) and node.op not in ("-", "+"):
                return False
            if isinstance(node, Call) and node.func not in PRODUCT_CALLS:
                return False
    return True


def _holding(term: sp.Basic) -> dict[sp.Basic, list[sp.Basic]]:
    """Each free symbol of ``term`` -> the terms of its sum (``term`` itself if it is no
    sum) that hold it: ``d term / d s`` is the sum of their derivatives alone."""
    holding: dict[sp.Basic, list[sp.Basic]] = {}
    for part in sp.Add.make_args(term):
        for symbol in part.free_symbols:
            holding.setdefault(symbol, []).append(part)
    return holding


def _part_diff(part: sp.Basic, symbol: sp.Symbol) -> sp.Basic:
    """``sympy.diff(part, symbol)``; for a product ``symbol * rest`` whose rest is free of
    it, ``rest`` directly (what ``sympy.diff`` gives, without its product rule)."""
    if part.is_Mul:
        rest = [f for f in part.args if f != symbol]
        if len(rest) == len(part.args) - 1 and not any(f.has(symbol) for f in rest):
            return sp.Mul(*rest)
    return sp.diff(part, symbol)


def _product_work(output: np.ndarray) -> int:
    """What the term-by-term Jacobian walks: each term of each output element's sum, its
    nodes times the symbols it holds."""
    work = 0
    for term in output.reshape(-1):
        if isinstance(term, sp.Basic):
            for part in sp.Add.make_args(term):
                symbols = len(part.free_symbols)
                if symbols:
                    work += symbols * sum(1 for _ in sp.preorder_traversal(part))
    return work


def _term(term: sp.Basic | float | int) -> sp.Expr:
    """An array cell as a SymPy term (NumPy sums of no terms leave a plain 0)."""
    if isinstance(term, sp.Basic):
        return term
    return sp.Float(term) if isinstance(term, float) else sp.Integer(int(term))


def latex(expr: sp.Basic) -> str:
    """SymPy's LaTeX with element symbols as subscripts: ``A[0,1]`` as ``A_{0,1}``."""
    names = {
        symbol: symbol.name.replace("[", "_{").replace("]", "}")
        for symbol in getattr(expr, "free_symbols", ())
        if "[" in symbol.name
    }
    return sp.latex(expr, symbol_names=names)


def hessian_terms(model: ComponentModel, a: str, b: str) -> np.ndarray:
    """SymPy's second derivatives of a one-element output, shaped ``a.shape + b.shape``."""
    first = model.jacobian(a).reshape(-1)
    rows = []
    for term in first:
        free = term.free_symbols if isinstance(term, sp.Basic) else set()
        rows.append(
            [diff(term, s) if s in free else sp.Integer(0) for s in model.symbols[b].reshape(-1)]
        )
    table = np.array(rows, dtype=object)
    return table.reshape(model.symbols[a].shape + model.symbols[b].shape)


def on_path(codes: set[str], path: set[str]) -> set[str]:
    """The kink codes of operations on an input's path (all of them if none is)."""
    kept = {c for c in codes if c not in OPS or c in path}
    return kept or codes


def _kink_notes(atom: sp.Basic, uses: set[str]) -> set[str]:
    """Notes for a jump: the operations whose kink it is (vocabulary.kink_codes)."""
    return kink_codes(type(atom).__name__, uses)


def _as_terms(values: np.ndarray) -> np.ndarray:
    """A constant's numbers as SymPy numbers (integers stay integers: class indices)."""
    flat = [
        sp.Integer(int(v)) if float(v).is_integer() else sp.Float(float(v))
        for v in np.asarray(values, dtype=np.float64).reshape(-1)
    ]
    return np.array(flat, dtype=object).reshape(np.shape(values))
