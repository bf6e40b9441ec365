"""Shapes, checked before any tensor is built: PyTorch's broadcasting and matmul rules."""

from __future__ import annotations

import math

from autogradcli.errors import LimitError, ShapeError
from autogradcli.lang import ops
from autogradcli.lang.text import unparse
from autogradcli.lang.tree import Binary, Call, Fold, Index, Name, Node, Num, Program, Unary
from autogradcli.lang.vocabulary import OPS
from autogradcli.settings import Limits

Shape = tuple[int, ...]


def broadcast(left: Shape, right: Shape, where: str) -> Shape:
    """PyTorch's (and NumPy's) broadcasting rule, with an error that shows both shapes."""
    try:
        return ops.broadcast(left, right)
    except ShapeError as exc:
        raise ShapeError(exc.code, **{**exc.data, "where": where}) from None


def matmul_shape(left: Shape, right: Shape, where: str) -> Shape:
    """``torch.matmul``'s shape rule: 1-D operands gain and lose a dim, batches broadcast."""
    if not left or not right:
        raise ShapeError("matmul_scalar", where=where, left=list(left), right=list(right))
    a = (1, *left) if len(left) == 1 else left
    b = (*right, 1) if len(right) == 1 else right
    if a[-1] != b[-2]:
        raise ShapeError(
            "matmul_mismatch",
            where=where,
            left=list(left),
            right=list(right),
            columns=a[-1],
            rows=b[-2],
        )
    batch = broadcast(a[:-2], b[:-2], where)
    shape = (*batch, *(() if len(left) == 1 else (a[-2],)), *(() if len(right) == 1 else (b[-1],)))
    return tuple(shape)


def call_shape(node: Call, shapes: list[Shape]) -> Shape:
    """The shape of an operation's result, by its entry's rule (default: broadcast)."""
    op = OPS[node.func]
    try:
        if op.shape is None:
            return ops.broadcast_all(shapes)
        options = {k: v for k, v in node.options.items() if k != "given"}
        return op.shape(shapes, **options)
    except ShapeError as exc:
        data = dict(exc.data)
        if data.get("shape", 0) is None:  # a dim out of range: the argument's shape
            data["shape"] = list(shapes[0])
        raise ShapeError(exc.code, **{**data, "where": unparse(node), "func": node.func}) from None


class _Shapes(Fold[Shape]):
    """The shape every subtree will have; an operation past ``max_elements`` is refused."""

    def __init__(self, shapes: dict[str, Shape], limits: Limits) -> None:
        super().__init__()
        self.shapes, self.limits = shapes, limits

    def num(self, node: Num) -> Shape:
        return ()

    def name(self, node: Name) -> Shape:
        return self.shapes.get(node.id, ())

    def unary(self, node: Unary, operand: Shape) -> Shape:
        return operand

    def binary(self, node: Binary, left: Shape, right: Shape) -> Shape:
        try:  # the node's text only for the error: unparsing every node is quadratic
            shape = matmul_shape(left, right, "") if node.op == "@" else broadcast(left, right, "")
        except ShapeError as exc:
            raise ShapeError(exc.code, **{**exc.data, "where": unparse(node)}) from None
        return self.sized(node, shape)

    def call(self, node: Call, args: list[Shape]) -> Shape:
        return self.sized(node, call_shape(node, args))

    def index(self, node: Index, value: Shape) -> Shape:
        try:
            return ops.index_shape(value, node.python())
        except ShapeError as exc:
            raise ShapeError(exc.code, **{**exc.data, "where": unparse(node)}) from None

    def sized(self, node: Node, shape: Shape) -> Shape:
        """``shape``, unless it has more elements than the limit allows."""
        size = math.prod(shape)
        if size > self.limits.max_elements:
            raise LimitError(
                "operation_too_large",
                where=unparse(node),
                size=size,
                shape=list(shape),
                limit=self.limits.max_elements,
            )
        return shape


def infer_shape(node: Node, shapes: dict[str, Shape], limits: Limits) -> Shape:
    """The shape every subtree will have, checked before any tensor is built."""
    return _Shapes(shapes, limits)(node)


def program_shapes(
    expression: Program, shapes: dict[str, Shape], limits: Limits
) -> dict[str, Shape]:
    """The input shapes plus the shape of every step, in program order (a step's shape
    given in ``shapes``, as binding found it, is taken as it is)."""
    shapes = dict(shapes)
    for step in expression.steps:
        if step.name not in shapes:
            shapes[step.name] = infer_shape(step.node, shapes, limits)
    return shapes
