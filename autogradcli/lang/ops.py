"""The schema of the vocabulary's entries (``Op``, ``Param``) and the shape rules they
name: PyTorch's broadcasting, reductions, reshapes, joins, indexing and losses, on shapes
alone (no tensor exists yet)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from autogradcli.errors import ShapeError
from autogradcli.lang.tree import Node, Subscript

if TYPE_CHECKING:
    import torch
    from numpy import ndarray
    from sympy import Expr

Shape = tuple[int, ...]
# A reduction's or an operation's ``dim``: one, several, or None (every dim).
Dims = int | tuple[int, ...] | None
# A parameter's value as written: an integer, a number, a flag, a word or a shape.
Value = int | float | bool | str | tuple[int, ...] | None


class _Required:
    """The default of a parameter that must be given."""

    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED = _Required()
REDUCTION = ("mean", "sum", "none")
T = TypeVar("T")


@dataclass(frozen=True)
class Param:
    """A non-tensor argument, by PyTorch's name: ``int``, ``dims`` (an int or a tuple of
    ints), ``ints`` (a shape or a permutation), ``float``, ``bool`` or ``text``."""

    name: str
    kind: str
    default: Value | _Required = REQUIRED
    choices: tuple[Value, ...] = ()


@dataclass(frozen=True)
class Op:
    """One operation. ``torch(torch, *tensors, **params)`` runs it; the reference side uses
    ``sympy(sympy, *terms, **params)`` (elementwise), ``components(sympy, numpy, *arrays,
    **params)`` (object arrays of terms) or ``expand(*placeholders, **params)`` (a
    definition through other operations); ``build(*nodes, **params)`` means the spelling is
    only another way to write operators (``x.pow(2)`` is ``x**2``). ``shape(shapes,
    **params)`` gives the result's shape (default: the tensors broadcast).

    ``spelled``: ``bare``, ``torch``, ``Tensor`` (a method), ``F`` (torch.nn.functional),
    ``np``, ``math``, or ``prefix.name`` where the name differs. ``kink``: where it is not
    differentiable, and ``kink_atoms`` the SymPy jumps that show it in a derivative."""

    name: str
    torch: Callable[..., torch.Tensor] | None = None
    sympy: Callable[..., Expr] | None = None
    components: Callable[..., ndarray] | None = None
    expand: Callable[..., Node] | None = None
    build: Callable[..., Node] | None = None
    shape: Callable[..., Shape] | None = None
    tensors: tuple[str, ...] = ("input",)
    optional: frozenset[str] = frozenset()
    params: tuple[Param, ...] = ()
    spelled: tuple[str, ...] = ("bare", "torch", "Tensor")
    varargs: str = ""  # the parameter that gathers trailing integers: x.view(2, 3)
    sequence: bool = False  # the tensors come as one list: cat([a, b], dim)
    kink: str = ""
    kink_atoms: tuple[str, ...] = ()
    note: str = ""
    reduces: bool = False
    kind: str = "elementwise"  # elementwise, reduction, structural, constant, detach
    aliases: tuple[str, ...] = field(default=())
    # args[start:stop] are integer indices (class targets, gather's index): constants whose
    # numbers the reference picks by; none by default (stop None: to the last argument)
    indices: tuple[int, int | None] = (0, 0)
    # PyTorch's positional order where a parameter sits between tensors: gather(x, dim, index)
    order: tuple[str, ...] = ()

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)

    @property
    def elementwise(self) -> bool:
        return self.kind in ("elementwise", "constant")


# --- shapes ----------------------------------------------------------------------------------


def broadcast_all(shapes: list[Shape]) -> Shape:
    """PyTorch's broadcasting of several shapes (``no_broadcast`` names the first clash)."""
    result: Shape = ()
    for shape in shapes:
        result = broadcast(result, shape)
    return result


def broadcast(left: Shape, right: Shape) -> Shape:
    out = []
    for a, b in zip(
        reversed((1,) * (len(right) - len(left)) + left),
        reversed((1,) * (len(left) - len(right)) + right),
        strict=True,
    ):
        if a != b and a != 1 and b != 1:
            raise ShapeError("no_broadcast", left=list(left), right=list(right))
        out.append(b if a == 1 else a)
    return tuple(reversed(out))


def axis(dim: int, ndim: int) -> int:
    """A dim as a non-negative axis; a single number's dims are 0 and -1, as in PyTorch."""
    size = max(ndim, 1)
    if not -size <= dim < size:
        raise ShapeError("dim_out_of_range", dim=dim, shape=None, low=-size, high=size - 1)
    return dim % size


def _axes(dim: Dims, ndim: int) -> tuple[int, ...] | None:
    if dim is None:
        return None
    dims = dim if isinstance(dim, tuple) else (dim,)
    found = tuple(axis(d, ndim) for d in dims)
    if len(set(found)) != len(found):
        raise ShapeError("dim_repeated", dim=list(dims))
    return found


def every_dim(dim: Dims) -> Dims:
    """A reduction's ``dim`` as the reference reads it: PyTorch reduces over every dim
    when ``dim`` is None or empty (``sum(x, ())``, ``torch.sum(x, [])``)."""
    return None if dim == () else dim


def reduced(shape: Shape, dim: Dims = None, keepdim: bool = False) -> Shape:
    """The shape after reducing ``dim`` (all dims when None or empty)."""
    axes = _axes(every_dim(dim), len(shape))
    if not shape:
        return ()
    if axes is None:
        return (1,) * len(shape) if keepdim else ()
    if keepdim:
        return tuple(1 if i in axes else n for i, n in enumerate(shape))
    return tuple(n for i, n in enumerate(shape) if i not in axes)


def np_axes(dim: Dims, ndim: int) -> tuple[int, ...] | None:
    """A reduction's dim for NumPy on an object array (a 0-d array has no axes: all of it;
    an empty dim is every dim, as in PyTorch)."""
    dim = every_dim(dim)
    return None if dim is None or ndim == 0 else _axes(dim, ndim)


def reduce_shape(shapes: list[Shape], dim: Dims = None, keepdim: bool = False, **_: Value) -> Shape:
    return reduced(shapes[0], dim, keepdim)


def same_shape(shapes: list[Shape], dim: int | None = None, **_: Value) -> Shape:
    if dim is not None:
        axis(dim, len(shapes[0]))
    return shapes[0]


def dot_shape(shapes: list[Shape], **_: Value) -> Shape:
    a, b = shapes
    if len(a) != 1 or a != b:
        raise ShapeError("dot_shapes", left=list(a), right=list(b))
    return ()


def t_shape(shapes: list[Shape], **_: Value) -> Shape:
    (shape,) = shapes
    if len(shape) > 2:
        raise ShapeError("transpose_not_2d", shape=list(shape))
    return tuple(reversed(shape))


def transpose_shape(shapes: list[Shape], dim0: int, dim1: int) -> Shape:
    shape = list(shapes[0])
    a, b = axis(dim0, len(shape)), axis(dim1, len(shape))
    if shape:
        shape[a], shape[b] = shape[b], shape[a]
    return tuple(shape)


def permute_shape(shapes: list[Shape], dims: tuple[int, ...]) -> Shape:
    shape = shapes[0]
    order = tuple(axis(d, len(shape)) for d in dims)
    if sorted(order) != list(range(len(shape))):
        raise ShapeError("bad_permutation", dims=list(dims), shape=list(shape))
    return tuple(shape[i] for i in order)


def reshape_shape(shapes: list[Shape], shape: tuple[int, ...]) -> Shape:
    size = math.prod(shapes[0])
    unknown = [i for i, n in enumerate(shape) if n == -1]
    if len(unknown) > 1 or any(n < -1 for n in shape):
        raise ShapeError("reshape_size", size=size, shape=list(shape))
    known = math.prod(n for n in shape if n != -1)
    if unknown:
        if known == 0 or size % known:
            raise ShapeError("reshape_size", size=size, shape=list(shape))
        shape = tuple(size // known if n == -1 else n for n in shape)
    if math.prod(shape) != size:
        raise ShapeError("reshape_size", size=size, shape=list(shape))
    return shape


def flatten_shape(shapes: list[Shape], start_dim: int = 0, end_dim: int = -1) -> Shape:
    shape = shapes[0]
    if not shape:
        return (1,)
    a, b = axis(start_dim, len(shape)), axis(end_dim, len(shape))
    if a > b:
        raise ShapeError("flatten_order", start=start_dim, end=end_dim)
    return (*shape[:a], math.prod(shape[a : b + 1]), *shape[b + 1 :])


def _squeeze_axes(shape: Shape, dim: Dims) -> tuple[int, ...]:
    if dim is None:
        return tuple(i for i, n in enumerate(shape) if n == 1)
    axes = _axes(dim, len(shape)) or ()
    return tuple(i for i in axes if shape and shape[i] == 1)


def squeeze_shape(shapes: list[Shape], dim: Dims = None) -> Shape:
    shape = shapes[0]
    gone = _squeeze_axes(shape, dim)
    return tuple(n for i, n in enumerate(shape) if i not in gone)


def unsqueeze_axis(ndim: int, dim: int) -> int:
    if not -(ndim + 1) <= dim <= ndim:
        raise ShapeError("dim_out_of_range", dim=dim, shape=None, low=-(ndim + 1), high=ndim)
    return dim % (ndim + 1)


def unsqueeze_shape(shapes: list[Shape], dim: int) -> Shape:
    shape = shapes[0]
    at = unsqueeze_axis(len(shape), dim)
    return (*shape[:at], 1, *shape[at:])


def cat_kept(items: list[T], shapes: list[Shape]) -> list[T]:
    """What ``cat`` joins: PyTorch skips 1-D tensors of no elements (its legacy rule)."""
    kept = [item for item, shape in zip(items, shapes, strict=True) if shape != (0,)]
    return kept or items[:1]


def cat_shape(shapes: list[Shape], dim: int = 0) -> Shape:
    shapes = cat_kept(shapes, shapes)
    first = shapes[0]
    if not first:
        raise ShapeError("cat_number")
    at = axis(dim, len(first))
    for other in shapes[1:]:
        if len(other) != len(first) or any(
            a != b for i, (a, b) in enumerate(zip(first, other, strict=True)) if i != at
        ):
            raise ShapeError("cat_shapes", shapes=[list(s) for s in shapes], dim=dim)
    return (*first[:at], sum(s[at] for s in shapes), *first[at + 1 :])


def stack_shape(shapes: list[Shape], dim: int = 0) -> Shape:
    first = shapes[0]
    if any(s != first for s in shapes):
        raise ShapeError("stack_shapes", shapes=[list(s) for s in shapes])
    at = unsqueeze_axis(len(first), dim)
    return (*first[:at], len(shapes), *first[at:])


def index_shape(shape: Shape, items: tuple[Subscript, ...]) -> Shape:
    """The shape of ``value[items]`` (PyTorch's basic indexing and integer lists)."""
    import numpy as np

    probe = np.broadcast_to(np.empty((), dtype=bool), shape)
    try:
        return tuple(probe[items].shape)
    except IndexError as exc:
        raise ShapeError("bad_index", shape=list(shape), detail=str(exc)) from None


def loss_shape(shapes: list[Shape], reduction: str = "mean", **_: Value) -> Shape:
    out = broadcast_all(shapes)
    return out if reduction == "none" else ()


def without_classes(shape: Shape) -> Shape:
    """A class input's shape without its class dim: (C,) -> (), (N, C, d1, ...) -> (N, d1, ...)."""
    return shape[:0] if len(shape) == 1 else (*shape[:1], *shape[2:])


def class_shape(shapes: list[Shape], reduction: str = "mean", **_: Value) -> Shape:
    """cross_entropy/nll_loss: input (C,), (N, C) or (N, C, d1, ...); target of class
    indices (input's shape without dim 1) or of class probabilities (input's shape);
    ``weight`` (C,)."""
    x, t, *weight = shapes
    if not x:
        raise ShapeError("class_input", shape=list(x))
    if t != x and t != without_classes(x):
        raise ShapeError("class_target", input=list(x), target=list(t))
    classes = x[0] if len(x) == 1 else x[1]
    if weight and weight[0] != (classes,):
        raise ShapeError("class_weight", weight=list(weight[0]), classes=classes)
    return without_classes(x) if reduction == "none" else ()


def nll_shape(shapes: list[Shape], reduction: str = "mean", **_: Value) -> Shape:
    x, t = shapes[:2]
    if not x or t != without_classes(x):
        raise ShapeError("class_target", input=list(x), target=list(t))
    return class_shape(shapes, reduction)
