"""Facts about a tree that need no tensors: constants, kinds of operation, rounding steps."""

from __future__ import annotations

import math

from autogradcli.errors import ExpressionError, LimitError
from autogradcli.lang.ops import every_dim
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
    NumberValue,
    Program,
    Unary,
    walk,
)
from autogradcli.lang.vocabulary import CONSTANTS, KINKED, OPS, definition
from autogradcli.settings import Limits

MAX_INT_BITS = 1024  # integer constants stay below the float range
# Rounding steps counted at most: past the bound's largest band in every dtype (2**60 unit
# roundoffs); a step that uses the one before twice doubles the count (2**1024 overflows)
MANY_STEPS = 2**60


def constant_binary(op: str, left: NumberValue, right: NumberValue) -> NumberValue:
    """Python's arithmetic on two numbers, refusing results too large to represent."""
    text = f"{left}{op}{right}"
    if op == "**" and isinstance(left, int) and isinstance(right, int) and right > 0:
        bits = max(abs(left).bit_length() - 1, 0) * right
        if bits > MAX_INT_BITS:
            raise LimitError("power_too_large", left=left, right=right, bits=bits)
    try:
        result = PY_BINARY[op](left, right)
    except ZeroDivisionError:
        raise ExpressionError("constant_division_by_zero", text=text) from None
    except OverflowError:
        raise LimitError("constant_overflow", text=text) from None
    if isinstance(result, complex):
        raise ExpressionError("constant_complex", text=text)
    if isinstance(result, int) and result.bit_length() > MAX_INT_BITS:
        raise LimitError("constant_too_large", text=text)
    return result  # type: ignore[return-value]


class _Constant(Fold[NumberValue | None]):
    """The Python value of a subtree without variables (``pi``/``e`` included), else None."""

    def num(self, node: Num) -> NumberValue | None:
        return node.value

    def name(self, node: Name) -> NumberValue | None:
        return CONSTANTS[node.id][0] if node.id in CONSTANTS else None

    def unary(self, node: Unary, operand: NumberValue | None) -> NumberValue | None:
        return None if operand is None else PY_UNARY[node.op](operand)  # type: ignore[return-value]

    def binary(
        self, node: Binary, left: NumberValue | None, right: NumberValue | None
    ) -> NumberValue | None:
        if node.op == "@" or left is None or right is None:
            return None
        return constant_binary(node.op, left, right)

    def call(self, node: Call, args: list[NumberValue | None]) -> NumberValue | None:
        return None

    def index(self, node: Index, value: NumberValue | None) -> NumberValue | None:
        return None


constant_value = _Constant()


class _Recorded(_Constant):
    """``_Constant`` that keeps every subtree's value (one walk, not one per subtree)."""

    def __init__(self) -> None:
        super().__init__()
        self.values: dict[int, NumberValue | None] = {}

    def leave(self, node: Node, value: NumberValue | None) -> NumberValue | None:
        self.values[id(node)] = value
        return value


class _Exponents(_Constant):
    """``_Constant`` that notes whether a power of a variable base has a constant
    exponent past ``limit`` (then ``check_constants`` finds the first, as written)."""

    def __init__(self, limit: float) -> None:
        super().__init__()
        self.limit, self.over = limit, False

    def binary(
        self, node: Binary, left: NumberValue | None, right: NumberValue | None
    ) -> NumberValue | None:
        if node.op == "**" and left is None and right is not None and abs(right) > self.limit:
            self.over = True
        return super().binary(node, left, right)


def check_constants(root: Node, limits: Limits) -> None:
    """Compute every constant subtree (with size checks) and bound the exponents."""
    exponents = _Exponents(limits.max_exponent)
    exponents(root)
    if not exponents.over:  # one walk where nothing is past the limit (every line's case)
        return
    found = _Recorded()
    found(root)
    for node in walk(root):
        if isinstance(node, Binary) and node.op == "**" and found.values[id(node.left)] is None:
            exponent = found.values[id(node.right)]
            if exponent is not None and abs(exponent) > limits.max_exponent:
                raise LimitError("exponent_too_large", exponent=exponent, limit=limits.max_exponent)


def is_full_reduction(node: Node) -> bool:
    """``sum(x)`` or ``mean(x)`` over all elements: what the elementwise model handles."""
    return (
        isinstance(node, Call)
        and node.func in ("sum", "mean")
        and every_dim(node.dim) is None
        and not node.options.get("keepdim")
    )


class _Elementwise(Fold[bool]):
    """Whether a subtree is elementwise but for full sums and means (losses through their
    definitions): what the elementwise SymPy model can take."""

    def num(self, node: Num) -> bool:
        return True

    def name(self, node: Name) -> bool:
        return True

    def unary(self, node: Unary, operand: bool) -> bool:
        return operand

    def binary(self, node: Binary, left: bool, right: bool) -> bool:
        return left and right and node.op != "@"

    def expansion(self, node: Call, placeholders: list[Name]) -> Node | None:
        return definition(node, placeholders)

    def call(self, node: Call, args: list[bool]) -> bool:
        op = OPS[node.func]
        fits = op.elementwise or op.kind == "detach" or is_full_reduction(node)
        return fits and all(args)

    def index(self, node: Index, value: bool) -> bool:
        return False


def is_elementwise(expression: Program) -> bool:
    """Only elementwise operations and full sum/mean (no dims, products or matrix algebra)."""
    fold = _Elementwise()
    return all(fold(root) for root in expression.roots())


def calls(expression: Program) -> set[str]:
    """The functions an expression calls."""
    return {n.func for root in expression.roots() for n in walk(root) if isinstance(n, Call)}


def has_kink(expression: Program) -> bool:
    """Whether the expression calls a function with a kink (vocabulary.KINKED)."""
    return bool(calls(expression) & KINKED)


def reduction_steps(elements: int) -> int:
    """Rounding steps a pairwise sum of ``elements`` numbers adds (``verdict``'s rule)."""
    from autogradcli.policy.verdict import reduction_steps as steps

    return steps(elements)


_LEAVES = (Num, Name)  # a leaf's constant value is read without a walk


class _Rounding(Fold[int]):
    """Rounded operations behind one number of a subtree (see ``rounding_steps``); an
    operation the vocabulary defines through others (a loss) counts as its definition."""

    def __init__(self, shapes: dict[str, tuple[int, ...]], limits: Limits) -> None:
        super().__init__()
        self.shapes, self.limits = shapes, limits
        # the constant value of every node of the program's own trees, by id (one walk;
        # ``record``): a chain of products asks for each link's, quadratic one by one
        self.constants = _Recorded()
        self.unrecorded: Node | None = None

    def record(self, root: Node) -> None:
        """Keep the constant value of every subtree of ``root`` (a tree of the program,
        alive while the fold runs, so that no id is reused), walked the first time a
        product asks for an operand's other than a number's or a name's."""
        self.unrecorded = root

    def zero(self, node: Node) -> bool:
        """Whether ``node`` is the constant 0 (a node made by a definition is folded)."""
        values = self.constants.values
        if id(node) not in values and type(node) in _LEAVES:
            return self.constants.enter(node) == 0  # a number's or a name's: no walk
        if self.unrecorded is not None and id(node) not in values:
            self.constants(self.unrecorded)
            self.unrecorded = None
        return (values[id(node)] if id(node) in values else constant_value(node)) == 0

    def shape(self, node: Node) -> tuple[int, ...]:
        from autogradcli.lang.shapes import infer_shape

        return infer_shape(node, self.shapes, self.limits)

    def num(self, node: Num) -> int:
        return 0

    def name(self, node: Name) -> int:
        return 0  # an input (a step's name is bound to its own count)

    def unary(self, node: Unary, operand: int) -> int:
        return 3 + operand

    def binary(self, node: Binary, left: int, right: int) -> int:
        if node.op == "*" and (self.zero(node.left) or self.zero(node.right)):
            return 0  # a dead term: exactly 0, and so is its gradient
        if node.op == "@":
            inner = self.shape(node.left)
            return 3 + left + right + reduction_steps(inner[-1] if inner else 1)
        return 3 + left + right

    def call(self, node: Call, args: list[int]) -> int:
        names = [Name(f"#{k}") for k in range(len(args))]
        body = definition(node, names)
        if body is not None:  # the placeholders take the arguments' shapes and counts
            saved = self.shapes
            given = {n.id: self.shape(a) for n, a in zip(names, node.args, strict=True)}
            self.shapes = {**saved, **given}
            try:
                return self.within(body, {n.id: v for n, v in zip(names, args, strict=True)})
            finally:
                self.shapes = saved
        op = OPS[node.func]
        if op.kind == "constant":
            return 0  # ones_like(x), zeros_like(x): exact
        if not op.reduces:
            return 3 + sum(args)
        count = self.count(node)
        if node.func == "prod":  # n - 1 roundings, and each factor's error counted n times
            return 3 + count * sum(args) + max(count - 1, 0)
        return 3 + sum(args) + reduction_steps(count)

    def index(self, node: Index, value: int) -> int:
        return value

    def count(self, node: Call) -> int:
        """How many numbers the reduction combines into one."""
        shape = self.shape(node.arg)
        dim = every_dim(node.dim)
        if dim is None or not shape:
            return math.prod(shape)
        dims = dim if isinstance(dim, tuple) else (dim,)
        return math.prod(shape[d] for d in dims)


def rounding_steps(expression: Program, shapes: dict[str, tuple[int, ...]], limits: Limits) -> int:
    """Rounded operations behind one number of the result (see ``verdict``), counted over
    the operations whose value reaches the output: three per operation (forward, local
    derivative, product); ceil(log2 n) more for each sum of n numbers (reductions, matrix
    products, the gradient of a broadcast input); for a product of n numbers n - 1 more,
    and its factors' own steps n times. A step the output does not use, and a term
    multiplied by a constant 0, count nothing."""
    from autogradcli.lang.shapes import infer_shape, program_shapes

    shapes = program_shapes(expression, shapes, limits)
    fold = _Rounding(shapes, limits)
    counts: dict[str, int] = {}
    for step in expression.steps:
        fold.record(step.node)
        counts[step.name] = min(fold.within(step.node, counts), MANY_STEPS)
    fold.record(expression.root)
    steps = fold.within(expression.root, counts)
    out = math.prod(infer_shape(expression.root, shapes, limits))
    spread = max((out // max(math.prod(shapes[n]), 1) for n in expression.variables), default=1)
    return min(steps + reduction_steps(spread), MANY_STEPS)


def class_targets(expression: Program, shapes: dict[str, tuple[int, ...]]) -> set[str]:
    """Inputs used as integer indices (an entry's ``indices``: the target of nll_loss, of
    cross_entropy when it has one dim fewer than the input, gather's index, ...): integers
    in PyTorch, so they take no gradient."""
    found = set()
    for root in expression.roots():
        for node in walk(root):
            if not isinstance(node, Call) or node.func not in OPS:
                continue
            start, stop = OPS[node.func].indices
            for target in node.args[start:stop]:
                if not isinstance(target, Name) or target.id not in expression.variables:
                    continue
                if node.func != "cross_entropy" or len(shapes[target.id]) < len(
                    _shape(node.arg, shapes)
                ):
                    found.add(target.id)
    return found


def _shape(node: Node, shapes: dict[str, tuple[int, ...]]) -> tuple[int, ...]:
    from autogradcli.lang.shapes import infer_shape

    return infer_shape(node, shapes, Limits())
