"""The element-wise SymPy model: the expression as SymPy terms, split into blocks.

The expression is split into *blocks*: the output, and one block per reduction
(``sum(...)``/``mean(...)``). Inside a block everything is elementwise, so one SymPy
derivative per (block, symbol) is evaluated over the whole tensor at once. A reduction
appears in its parent block as a real symbol named after its text (``sum(x)``), and the
chain rule through it is the multivariate one:
``d out/d x = del out/del x + (del out/del sum(x)) * d sum(x)/d x``. Every derivative
here comes from ``sympy.diff``; nothing is taken from PyTorch."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import sympy as sp

from autogradcli.lang.analysis import calls, is_full_reduction
from autogradcli.lang.shapes import Shape, infer_shape, program_shapes
from autogradcli.lang.text import unparse
from autogradcli.lang.tree import Call, Name, Node, Program
from autogradcli.lang.vocabulary import CONSTANTS, OPS, broadcast_all, kink_codes
from autogradcli.reference.bounds import reference
from autogradcli.reference.evaluate import Arith, close_floats, evaluate, evaluate_quiet
from autogradcli.reference.expected import Expected
from autogradcli.reference.terms import (
    JUMPS,
    Binding,
    ChainTerms,
    accumulate,
    bind,
    diff,
    expected_from,
    in_range,
    kink_sites,
    numeric,
    owned,
    path_calls,
    pattern_derivative,
    reduce_to_shape,
    switches,
)
from autogradcli.settings import Limits

# The derivative text of a step-wise model is written from the program substituted into
# one expression only up to this many steps and this many nodes of SymPy's tree (a step
# that uses the one before twice doubles it); past them it is not written (None).
TEXT_STEPS = 32
TEXT_NODES = 2_000
Env = dict[Any, Any]  # numbers by symbol; Kept: a pass's ``_local`` of each step's pattern
Kept = dict[Binding, Env]


def stepwise(expression: Program) -> bool:
    """Whether SymPy's model of ``expression`` is made step by step: any program of
    steps (the reference's numbers; the text is written from the substituted program)."""
    return bool(expression.steps)


def tree_size(expr: sp.Expr, limit: int) -> int:
    """How many nodes SymPy's tree of ``expr`` has written out (shared subtrees counted
    each time they appear), or ``limit + 1`` once it is past ``limit``; no recursion."""
    sizes: dict[sp.Basic, int] = {}
    stack: list[tuple[sp.Basic, bool]] = [(expr, False)]
    while stack:
        node, ready = stack.pop()
        if node in sizes:
            continue
        if ready:
            sizes[node] = min(limit + 1, 1 + sum(sizes[a] for a in node.args))
            continue
        stack.append((node, True))
        stack.extend((a, False) for a in node.args if a not in sizes)
    return sizes[expr]


@dataclass
class Block:
    """One elementwise piece: its SymPy expression and the shape it broadcasts to."""

    expr: sp.Expr
    shape: Shape
    # "sum" or "mean" for a reduction block, "step" for a program's step (a step-wise
    # model), "detach" for a value held constant, None for the output
    kind: str | None = None
    # a step made from a pattern: ``expr`` is in the pattern's symbols, bound to the step
    binding: Binding | None = None


@dataclass
class _Pass:
    """One reverse pass of the model: the inputs' values (and the reductions' as they are
    evaluated), the gradients summed so far (None: nothing added yet), the inputs wanted,
    the arithmetic, and where kinks are marked (``kinks`` None: not marked)."""

    env: dict[sp.Symbol, Any]
    grads: dict[str, Any]
    differentiate: frozenset[str]
    arith: Arith
    kinks: dict[str, np.ndarray] | None = None
    notes: dict[str, set[str]] = field(default_factory=dict)
    names: dict[sp.Symbol, str] = field(default_factory=dict)  # the inputs wanted, by symbol
    locals: Kept = field(default_factory=dict)  # the steps' ``_local`` numbers, made once


class _Terms(ChainTerms):
    """Names are the inputs' symbols, a step's terms (substituted), or a constant; a full
    sum or mean becomes a symbol of its own, a block of the model."""

    def __init__(self, model: SymbolicModel) -> None:
        super().__init__()
        self.model = model
        self.steps: dict[str, sp.Expr] = {}

    def name(self, node: Name) -> sp.Expr:
        model = self.model
        if node.id in model.symbols:
            return model.symbols[node.id]
        if node.id in model.step_symbols:  # a step-wise model: the step's own symbol
            return model.step_symbols[node.id]
        step = model.expression.step(node.id)
        if step is not None:  # a program's steps are substituted
            if node.id not in self.steps:
                self.steps[node.id] = self(step.node)
            return self.steps[node.id]
        return getattr(sp, CONSTANTS[node.id][1])

    def call(self, node: Call, args: list[sp.Expr]) -> sp.Expr:
        detach = OPS[node.func].kind == "detach"
        if not is_full_reduction(node) and not detach:
            return super().call(node, args)
        model, arg = self.model, numeric(args[0])
        # steps substituted: mean(y) of y = 2*x is mean(2*x) (step-wise: mean(y))
        plain = not model.expression.steps and not self._bound and not detach
        text = unparse(node.arg) if plain else str(arg)
        kind = "detach" if detach else node.func  # no_grad and inference_mode: detach
        symbol = sp.Symbol(f"{kind}({text})", real=True)
        if symbol not in model.reductions:
            shape = self.shape_of(node.arg, arg)
            model.reductions[symbol] = Block(arg, shape, kind)
        return symbol

    def shape_of(self, node: Node, term: sp.Expr) -> Shape:
        """The shape a subtree (or, inside a definition, its term) broadcasts to."""
        if not self._bound:
            return infer_shape(node, self.model.shapes, self.model.limits)
        shapes = [
            self.model.shapes[str(s)] for s in term.free_symbols if str(s) in self.model.shapes
        ]
        shapes += [
            self.model.reductions[s].shape
            for s in term.free_symbols
            if s in self.model.reductions and self.model.reductions[s].kind == "detach"
        ]
        return broadcast_all(shapes)


class SymbolicModel:
    """The expression in SymPy terms, split into elementwise blocks at each reduction.

    ``stepwise``: each step of a program is a block of its own, in terms of the symbols of
    the steps it uses (the chain rule is applied step by step with numbers, each step's
    value and partial derivatives computed once), instead of one expression with every
    step substituted: the cost grows with the program, not with the size of its
    substituted expression. Its derivative text is not written out (None)."""

    by = "SymPy"

    def __init__(
        self,
        expression: Program,
        shapes: dict[str, Shape],
        limits: Limits | None = None,
        stepwise: bool = False,
    ) -> None:
        self.limits = limits or Limits()
        self.expression = expression
        self.shapes = program_shapes(expression, shapes, self.limits)
        self.symbols = {name: sp.Symbol(name, real=True) for name in expression.variables}
        # blocks in the order they are made: every block after the blocks it uses
        self.reductions: dict[sp.Symbol, Block] = {}
        self.uses = calls(expression)
        self.stepwise = stepwise and bool(expression.steps)
        self.step_symbols: dict[str, sp.Symbol] = {}
        self._terms = _Terms(self)
        if self.stepwise:
            for step in expression.steps:  # in order: a step's inputs are made before it
                shape, found = self.shapes[step.name], bind(step.node, self._symbol)
                block = Block(found[0], shape, "step", found[1]) if found else None
                symbol = sp.Symbol(f"{step.name}", real=True)
                self.reductions[symbol] = block or Block(self._terms(step.node), shape, "step")
                self.step_symbols[step.name] = symbol
        self.output = Block(
            self._build(expression.root), infer_shape(expression.root, self.shapes, self.limits)
        )
        self._derivatives: dict[tuple[sp.Expr, sp.Symbol], sp.Expr] = {}
        self._patterns: dict[tuple[sp.Expr, sp.Symbol], sp.Expr] = {}
        self._exact_zeros = False
        self._marked: set[tuple[int, sp.Expr, bytes]] = set()  # kink sites already marked
        self._text_model: SymbolicModel | bool | None = False  # False: not made yet
        self._paths: dict[str, set[str]] = {}
        self._constants: dict[tuple[Arith, float], Any] = {}
        self._jumpy: dict[sp.Expr, set[sp.Expr]] = {}
        self._needed: dict[sp.Expr, set[sp.Symbol]] = {}  # _under's

    def _build(self, node: Node) -> sp.Expr:
        return self._terms(node)

    def _symbol(self, name: str) -> sp.Symbol | None:
        """The symbol of an input or of a step made so far (None for any other name)."""
        return self.symbols.get(name) or self.step_symbols.get(name)

    def _jumps(self, derivative: sp.Expr) -> set[sp.Expr]:
        """The jump functions in a derivative (cached: one look per term)."""
        if derivative not in self._jumpy:
            self._jumpy[derivative] = derivative.atoms(*JUMPS)
        return self._jumpy[derivative]

    def _inputs(self, block: Block) -> tuple[sp.Symbol, ...]:
        """The model's symbols a block uses (inputs, steps, reductions), in the order
        their contributions are summed (by name)."""
        if block.binding is not None:
            return block.binding.order
        return tuple(sorted(block.expr.free_symbols, key=str))

    def _local(self, block: Block, env: Env, arith: Arith, kept: Kept) -> Env:
        """The numbers a block's terms are evaluated at: ``env``, or a pattern's step's own
        (its inputs' values, its constants exact as written), made once a pass (``kept``)."""
        binding = block.binding
        if binding is None or binding in kept:
            return env if binding is None else kept[binding]
        pattern, constants = binding.pattern, binding.constants
        local = {p: env[s] for p, s in zip(pattern.names, binding.inputs, strict=True)}
        for param, value in zip(pattern.params, constants, strict=True):
            if (arith, value) not in self._constants:
                self._constants[(arith, value)] = arith.array(value)
            local[param] = self._constants[(arith, value)]
        kept[binding] = local
        return local

    def _path_calls(self, name: str) -> set[str]:
        """The functions on a path from ``name`` to the output (cached)."""
        if name not in self._paths:
            self._paths[name] = path_calls(self.expression, name)
        return self._paths[name]

    def for_program(self, expression: Program, shapes: dict[str, Shape]) -> SymbolicModel:
        """The same kind of model for another program (a cut of this one)."""
        return SymbolicModel(expression, shapes, self.limits, self.stepwise)

    def derivative(self, block: Block, symbol: sp.Symbol) -> sp.Expr:
        """SymPy's partial derivative of one block, cached by its term; blocks that are the
        same up to the names of their symbols (reductions of an unrolled loop) share one
        ``diff`` (the output's is its own: renaming a large term costs as much as a diff)."""
        if block.binding is not None:  # one diff per pattern, for the process
            symbol = block.binding.symbol_for[symbol]
            if (block.expr, symbol) not in self._patterns:
                self._patterns[(block.expr, symbol)] = pattern_derivative(block.expr, symbol)
            return self._patterns[(block.expr, symbol)]
        key = (block.expr, symbol)  # not id(block): a kink's block is made and dropped
        if key not in self._derivatives and block.kind is None:
            self._derivatives[key] = diff(block.expr, symbol)
        if key not in self._derivatives:
            free = sorted(block.expr.free_symbols | {symbol}, key=str)
            canonical = {s: sp.Symbol(f"_{k}", **s.assumptions0) for k, s in enumerate(free)}
            pattern = (block.expr.xreplace(canonical), canonical[symbol])
            if pattern not in self._patterns:
                self._patterns[pattern] = diff(*pattern)
            back = {c: s for s, c in canonical.items()}
            self._derivatives[key] = self._patterns[pattern].xreplace(back)
        return self._derivatives[key]

    def substituted(self) -> SymbolicModel | None:
        """The model that writes the derivative text: this one, or for a step-wise model
        the program substituted into one expression (None past ``TEXT_STEPS`` steps or
        ``TEXT_NODES`` nodes: too long to write out)."""
        if not self.stepwise:
            return self
        if self._text_model is False:
            made = None
            if len(self.expression.steps) <= TEXT_STEPS:
                made = SymbolicModel(self.expression, self.shapes, self.limits)
                if tree_size(made.output.expr, TEXT_NODES) > TEXT_NODES:
                    made = None
            self._text_model = made
        return self._text_model  # type: ignore[return-value]

    def derivative_latex(self, name: str, weights_are_ones: bool = True) -> str | None:
        """The same derivative as LaTeX (SymPy's printer)."""
        model = self.substituted()
        return None if model is None else sp.latex(model.total(name, weights_are_ones))

    def derivative_text(self, name: str, weights_are_ones: bool = True) -> str | None:
        """The derivative of the number ``.grad`` holds, per element of ``name`` (see
        ``total``); None where the program is too long to write out (``substituted``)."""
        model = self.substituted()
        return None if model is None else str(model.total(name, weights_are_ones))

    def local_text(self, name: str, latex: bool = False) -> str:
        """d out_i / d name_j, a factor of the chain-rule line (which sums over broadcasts
        itself); for an output of several elements its elementwise part, and the
        reductions it goes through named."""
        if math.prod(self.output.shape) == 1:
            expr = self.total(name, True)
            return sp.latex(expr) if latex else str(expr)
        symbol = self.symbols[name]
        expr = self.derivative(self.output, symbol)
        if latex:
            return sp.latex(expr)
        free = self.output.expr.free_symbols
        through = sorted(str(r) for r in free if r in self.reductions and self._flows(r, symbol))
        return str(expr) + (f"  [+ chain rule through {', '.join(through)}]" if through else "")

    def total(self, name: str, weights_are_ones: bool = True) -> sp.Expr:
        """d (sum_i w_i out_i) / d name_j, one SymPy term: each block's partial derivatives
        times what reaches it, summed over the elements broadcast to name_j, and through
        each reduction (users first). Sums are symbols ``sum(...)``; w: 1 or ``weights``."""
        symbol, shape = self.symbols[name], self.shapes[name]
        used = {*self.symbols, *(s.name for s in self.expression.steps)}
        weight = "weights"
        while weight in used:
            weight += "_"
        upstream = sp.Integer(1) if weights_are_ones else sp.Symbol(weight, real=True)
        shapes: dict[sp.Symbol, Shape] = {s: self.shapes[n] for n, s in self.symbols.items()}
        shapes.update({s: b.shape for s, b in self.reductions.items() if b.kind == "detach"})
        shapes[sp.Symbol(weight, real=True)] = self.output.shape
        found: list[sp.Expr] = []
        pending: dict[sp.Symbol, sp.Expr] = {}
        block: Block | None = self.output
        order = reversed([s for s in self.reductions if self._flows(s, symbol)])
        while block is not None:
            for used_symbol in sorted(block.expr.free_symbols, key=str):
                flows = used_symbol in self.reductions and self._flows(used_symbol, symbol)
                if used_symbol != symbol and not flows:
                    continue
                term = upstream * self.derivative(block, used_symbol)
                if used_symbol == symbol:
                    found.append(_summed(term, block.shape, shape, shapes))
                else:
                    reached = _summed(term, block.shape, (), shapes)
                    pending[used_symbol] = pending.get(used_symbol, sp.Integer(0)) + reached
            block = None
            for reduction in order:
                if reduction in pending:
                    block, upstream = self.reductions[reduction], pending.pop(reduction)
                    if block.kind == "mean":
                        upstream /= max(math.prod(block.shape), 1)
                    break
        return sp.Add(*found)

    def _flows(self, reduction: sp.Symbol, symbol: sp.Symbol) -> bool:
        """Whether a gradient flows from ``reduction`` back to ``symbol``: it uses it, and
        not only through a detached copy (detach(), no_grad, inference_mode), which is a
        constant to autograd."""
        inner = self.reductions[reduction]
        if inner.kind == "detach":
            return False
        free = inner.expr.free_symbols
        return symbol in free or any(self._flows(r, symbol) for r in free if r in self.reductions)

    def value(self, node: Node, values: dict[str, np.ndarray]) -> np.ndarray:
        """SymPy's value of any subtree (a step, an operation) at ``values``, precise (see
        ``bounds.reference``), as float64."""
        return self.value_range(node, values)[0]

    def value_range(
        self, node: Node, values: dict[str, np.ndarray]
    ) -> tuple[np.ndarray, np.ndarray]:
        """``value``, and where it is finite but past float64's range (shown as ±inf)."""
        expr = self._build(node)
        shape = infer_shape(node, self.shapes, self.limits)

        def compute(arith: Arith) -> tuple[np.ndarray, np.ndarray]:
            env = {self.symbols[n]: arith.array(v) for n, v in values.items()}
            with np.errstate(all="ignore"):
                self._reduce_all(expr, env, arith, {})
            return in_range(arith, np.broadcast_to(evaluate(expr, env, arith), shape))

        size = self._size(values, shape)
        return reference(compute, size, lambda a, b: close_floats(a[0], b[0]))

    def _size(self, values: dict[str, np.ndarray], *shapes: Shape) -> int:
        sizes = [np.size(v) for v in values.values()] + [math.prod(s) for s in shapes]
        sizes += [math.prod(b.shape) for b in self.reductions.values()]
        return max(sizes, default=1)

    def evaluate(
        self,
        values: dict[str, np.ndarray],
        weights: np.ndarray,
        differentiate: frozenset[str],
        exact_zeros: bool = False,
        arith: Arith | None = None,
    ) -> Expected:
        """Output value and the vector-Jacobian product ``sum_i w_i d out_i / d x`` per variable,
        precise (see ``bounds.reference``) unless ``arith`` is given.

        ``exact_zeros``: a zero weight contributes exactly 0 even where a derivative is
        infinite (for Jacobian rows: out_i does not depend on x_j at all); without it,
        0 * inf is NaN, as in PyTorch's ``backward(w)``."""

        def compute(arith: Arith) -> Expected:
            return self._evaluate(values, weights, differentiate, exact_zeros, arith)

        if arith is not None:
            return compute(arith)
        size = self._size(values, self.output.shape)
        return reference(compute, size, Expected.settled_with)

    def _evaluate(
        self,
        values: dict[str, np.ndarray],
        weights: np.ndarray,
        differentiate: frozenset[str],
        exact_zeros: bool,
        arith: Arith,
    ) -> Expected:
        env = {self.symbols[n]: arith.array(v) for n, v in values.items()}
        ordered = [n for n in self.expression.variables if n in differentiate]
        kept: Kept = {}
        with np.errstate(all="ignore"):
            self._reduce_all(self.output.expr, env, arith, kept)
        output = np.broadcast_to(evaluate(self.output.expr, env, arith), self.output.shape)
        grads: dict[str, Any] = dict.fromkeys(ordered)  # None: nothing added yet (0)
        kinks = {n: np.zeros(self.shapes[n], dtype=bool) for n in ordered}
        notes: dict[str, set[str]] = {n: set() for n in ordered}
        upstream = np.broadcast_to(arith.array(weights), self.output.shape)
        self._exact_zeros = exact_zeros
        self._marked = set()
        names = {s: n for n, s in self.symbols.items() if n in differentiate}
        run = _Pass(env, grads, differentiate, arith, kinks, notes, names, kept)
        with np.errstate(all="ignore"):
            self._vjp(self.output, upstream, run)
        for name, grad in grads.items():
            if grad is None:  # no path from the output to this input: its gradient is 0
                grads[name] = arith.array(np.zeros(self.shapes[name]))
        return expected_from(arith, output, grads, kinks, notes, fresh=True)

    def _under(self, expr: sp.Expr) -> set[sp.Symbol]:
        """The blocks ``expr`` uses, directly or through others (no recursion; kept)."""
        found: set[sp.Symbol] = self._needed.setdefault(expr, set())  # the same each pass
        stack = [] if found else [expr.free_symbols]
        while stack:
            for symbol in stack.pop():
                if symbol in self.reductions and symbol not in found:
                    found.add(symbol)
                    stack.append(self._inputs(self.reductions[symbol]))
        return found

    def _reduce_all(self, expr: sp.Expr, env: Env, arith: Arith, kept: Kept) -> None:
        """Evaluate every block under ``expr`` (reductions, steps), innermost first, into
        ``env``: in the order the blocks were made, each after those it uses (within
        ``np.errstate(all="ignore")``)."""
        needed = self._under(expr)
        for symbol, block in self.reductions.items():
            if symbol in needed and symbol not in env:
                local = self._local(block, env, arith, kept)
                inner = _shaped(evaluate_quiet(block.expr, local, arith), block.shape)
                if block.kind in ("detach", "step"):  # the values themselves
                    env[symbol] = inner
                    continue
                total = arith.total(inner)
                if block.kind == "mean" and block.shape:
                    total = total * arith.number(sp.Rational(1, math.prod(block.shape)))
                env[symbol] = total

    def _vjp(self, block: Block, upstream: np.ndarray, run: _Pass) -> None:
        """Add ``upstream``'s vector-Jacobian product through ``block`` to the pass's
        ``grads``, on through the blocks it uses (reductions, steps) in reverse order of
        making, each once with the sum of what reached it (no recursion); with its
        ``kinks``, also mark the inputs that move a kink."""
        pending: dict[sp.Symbol, Any] = {}
        self._vjp_block(block, upstream, run, pending)
        arith = run.arith
        for symbol in reversed(list(self.reductions)):  # users before what they use
            if symbol not in pending:
                continue
            inner, reached = self.reductions[symbol], pending.pop(symbol)
            if inner.kind == "mean" and inner.shape:
                reached = reached * arith.number(sp.Rational(1, math.prod(inner.shape)))
            self._vjp_block(inner, _shaped(reached, inner.shape), run, pending)

    def _vjp_block(
        self, block: Block, upstream: np.ndarray, run: _Pass, pending: dict[sp.Symbol, Any]
    ) -> None:
        """One block of ``_vjp``: its inputs' gradients added to ``grads``, and what
        reaches each block it uses added to ``pending`` (a step's elementwise, reduced to
        its shape; a reduction's summed)."""
        env, arith, names, kinks = run.env, run.arith, run.names, run.kinks
        local_env = self._local(block, env, arith, run.locals)
        for symbol in self._inputs(block):  # a fixed order of sums
            if symbol not in names and symbol not in self.reductions:
                continue
            if symbol in self.reductions and self.reductions[symbol].kind == "detach":
                continue  # no gradient flows into a detached copy
            derivative = self.derivative(block, symbol)
            local = evaluate_quiet(derivative, local_env, arith)
            if local.shape == block.shape and owned(local, local_env):  # a new array: reused
                contribution = np.multiply(upstream, local, out=local)
            else:
                contribution = np.multiply(upstream, _shaped(local, block.shape))
            del local
            if self._exact_zeros:
                zero = arith.number(sp.S.Zero)
                contribution = np.where(np.asarray(upstream == 0, dtype=bool), zero, contribution)
            jumps = self._jumps(derivative) if kinks is not None else None
            if jumps:
                sites = kink_sites(derivative, local_env, block.shape, arith, atoms=jumps)
                for atom, at in sites:
                    site = (id(block), atom, at.tobytes())
                    if site not in self._marked:  # the same jump in several derivatives
                        self._marked.add(site)
                        moved = Block(switches(atom)[0], block.shape, binding=block.binding)
                        for name, mask in self._movers(moved, at, run).items():
                            kinks[name] |= mask
                            uses = self._path_calls(name)
                            run.notes[name] |= kink_codes(type(atom).__name__, uses)
            if symbol in names:
                name = names[symbol]
                arith.check_sum([contribution], self.shapes[name])  # broadcast sums that cancel
                reduced = reduce_to_shape(contribution, self.shapes[name], own=True)
                accumulate(run.grads, name, reduced, arith)
                continue
            inner = self.reductions[symbol]
            if inner.kind == "step":
                arith.check_sum([contribution], inner.shape)
                reached = reduce_to_shape(contribution, inner.shape, own=True)
            else:
                reached = arith.total(contribution)
            pending.setdefault(symbol, None)
            accumulate(pending, symbol, reached, arith)

    def _movers(self, block: Block, at: np.ndarray, run: _Pass) -> dict[str, np.ndarray]:
        """The input elements whose change moves a jump's argument (``block``) at the
        elements ``at`` where it sits at its jump: a nonzero total derivative, through
        reductions too (in abs(sum(y) - y) the first argument, y1 + y2, does not move with
        y0). Random positive weights keep different kink elements from cancelling."""
        weights = np.where(at, np.random.default_rng(0).uniform(1.0, 2.0, block.shape), 0.0)
        arith = run.arith
        moved: dict[str, Any] = dict.fromkeys(run.grads)
        exact_zeros, self._exact_zeros = self._exact_zeros, True
        try:
            upstream = arith.array(weights)
            self._vjp(block, upstream, replace(run, grads=moved, kinks=None, notes={}))
        finally:
            self._exact_zeros = exact_zeros
        found = {}
        for name, grad in moved.items():
            if grad is None:  # nothing flowed to it: it does not move the argument
                continue
            mask = np.asarray(grad != 0, dtype=bool) | arith.isnan(grad)  # NaN counts as moved
            if mask.any():
                found[name] = mask
        return found


def _shape_of(expr: sp.Expr, shapes: dict[sp.Symbol, Shape]) -> Shape:
    """The shape a term broadcasts to: its symbols' shapes (a reduction's: a number)."""
    return tuple(np.broadcast_shapes(*(shapes.get(s, ()) for s in expr.free_symbols)))


def _summed(term: sp.Expr, shape: Shape, to: Shape, shapes: dict[sp.Symbol, Shape]) -> sp.Expr:
    """``term`` over a block of ``shape`` summed to the shape ``to`` it was broadcast
    from, as a term: each product's factors that do not vary along the summed dimensions
    outside the sum, a count where nothing varies, the rest as a symbol ``sum(...)``
    (``dim=`` where ``to`` keeps some dimensions)."""
    if tuple(shape) == tuple(to):
        return term
    lead = len(shape) - len(to)
    summed = [d for d in range(len(shape)) if d < lead or (to[d - lead] == 1 and shape[d] != 1)]
    pieces = []
    for piece in sp.Add.make_args(term):
        outside, inside = [], []
        for factor in sp.Mul.make_args(piece):
            own = _shape_of(factor, shapes)
            padded = (1,) * (len(shape) - len(own)) + own
            (inside if any(padded[d] > 1 for d in summed) else outside).append(factor)
        own = _shape_of(sp.Mul(*inside), shapes)
        offset = len(shape) - len(own)
        varying = [d for d in summed if d >= offset and own[d - offset] > 1]
        count = math.prod(shape[d] for d in summed if d not in varying)
        if not inside:
            pieces.append(count * piece)
            continue
        text, whole = str(sp.Mul(*inside)), math.prod(to) == 1
        keep = [d - offset for d in varying if d >= lead and not whole]
        drop = [d - offset for d in varying if d < lead and not whole]
        for dims, tail in ((keep, ", keepdim=True"), (drop, "")):
            if dims:  # keepdim first: the dimensions dropped after it keep their numbers
                text = f"sum({text}, dim={dims[0] if len(dims) == 1 else tuple(dims)}{tail})"
        text = f"sum({text})" if whole else text
        pieces.append(count * sp.Mul(*outside) * sp.Symbol(text, real=True))
    return sp.Add(*pieces)


def _shaped(value: Any, shape: Shape) -> Any:
    """``value`` broadcast to ``shape`` (a read-only view); a number as it is."""
    return value if shape == () and np.asarray(value).ndim == 0 else np.broadcast_to(value, shape)
