"""Shapes, checked before any tensor is built: PyTorch's broadcasting and matmul rules."""

from __future__ import annotations

import math

from autogradcli.errors import LimitError, ShapeError
from autogradcli.lang.text import unparse
from autogradcli.lang.tree import Binary, Call, Expression, Fold, Name, Node, Num, Unary
from autogradcli.lang.vocabulary import FUNCTIONS, TENSOR_FUNCTIONS
from autogradcli.settings import Limits

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
            raise ShapeError("no_broadcast", left=list(left), right=list(right), where=where)
        result.append(b if a == 1 else a)
    return tuple(reversed(result))


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


def tensor_function_shape(node: Call, shape: Shape, other: Shape | None) -> Shape:
    """The shape of a tensor function's result (sum, softmax, dot, T, ...)."""
    where = unparse(node)
    if node.func == "T":
        if len(shape) != 2:
            raise ShapeError("transpose_not_2d", arg=unparse(node.arg), shape=list(shape))
        return (shape[1], shape[0])
    if node.func == "dot":
        if len(shape) != 1 or other is None or shape != other:
            raise ShapeError("dot_shapes", where=where, left=list(shape), right=list(other or ()))
        return ()
    if node.dim is None:
        return () if TENSOR_FUNCTIONS[node.func].dim != "required" else shape
    if not shape:  # PyTorch takes dim 0 or -1 of a single number as its one element
        if node.dim not in (0, -1):
            raise ShapeError("dim_of_number", where=where, arg=unparse(node.arg), func=node.func)
        return ()
    if not -len(shape) <= node.dim < len(shape):
        raise ShapeError(
            "dim_out_of_range",
            where=where,
            dim=node.dim,
            shape=list(shape),
            low=-len(shape),
            high=len(shape) - 1,
        )
    if node.func in ("softmax", "log_softmax"):
        return shape
    axis = node.dim % len(shape)
    return shape[:axis] + shape[axis + 1 :]


class _Shapes(Fold[Shape]):
    """The shape every subtree will have; an operation past ``max_elements`` is refused."""

    def __init__(self, shapes: dict[str, Shape], limits: Limits) -> None:
        self.shapes, self.limits = shapes, limits

    def num(self, node: Num) -> Shape:
        return ()

    def name(self, node: Name) -> Shape:
        return self.shapes.get(node.id, ())

    def unary(self, node: Unary, operand: Shape) -> Shape:
        return operand

    def binary(self, node: Binary, left: Shape, right: Shape) -> Shape:
        where = unparse(node)
        shape = (
            matmul_shape(left, right, where) if node.op == "@" else broadcast(left, right, where)
        )
        size = math.prod(shape)
        if size > self.limits.max_elements:
            raise LimitError(
                "operation_too_large",
                where=where,
                size=size,
                shape=list(shape),
                limit=self.limits.max_elements,
            )
        return shape

    def call(self, node: Call, arg: Shape, other: Shape | None) -> Shape:
        return arg if node.func in FUNCTIONS else tensor_function_shape(node, arg, other)


def infer_shape(node: Node, shapes: dict[str, Shape], limits: Limits) -> Shape:
    """The shape every subtree will have, checked before any tensor is built."""
    return _Shapes(shapes, limits)(node)


def program_shapes(
    expression: Expression, shapes: dict[str, Shape], limits: Limits
) -> dict[str, Shape]:
    """The input shapes plus the shape of every step, in program order."""
    shapes = dict(shapes)
    for step in expression.steps:
        shapes[step.name] = infer_shape(step.node, shapes, limits)
    return shapes
