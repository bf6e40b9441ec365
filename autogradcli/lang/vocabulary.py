"""The one table of the language's operations. Each entry holds, side by side: how PyTorch
computes it, how SymPy writes it (one term per element, or a definition through other
operations), its shape rule, the ways PyTorch code spells it (``torch.sin``, ``x.sin()``,
``F.relu``, ``np.sin``, ...), and its caveats.

Entries take the module (``torch``, ``sympy``, ``numpy``) as an argument, so this table
imports none of them and the parser can use it without loading them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from autogradcli.errors import ShapeError
from autogradcli.lang.tree import Binary, Call, Node, Num, Unary, call

Shape = tuple[int, ...]
REQUIRED: Any = type("Required", (), {"__repr__": lambda self: "REQUIRED"})()
REDUCTION = ("mean", "sum", "none")


@dataclass(frozen=True)
class Param:
    """A non-tensor argument, by PyTorch's name: ``int``, ``dims`` (an int or a tuple of
    ints), ``ints`` (a shape or a permutation), ``float``, ``bool`` or ``text``."""

    name: str
    kind: str
    default: Any = REQUIRED
    choices: tuple[Any, ...] = ()


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
    torch: Callable[..., Any] | None = None
    sympy: Callable[..., Any] | None = None
    components: Callable[..., Any] | None = None
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


def _axes(dim: Any, ndim: int) -> tuple[int, ...] | None:
    if dim is None:
        return None
    dims = dim if isinstance(dim, tuple) else (dim,)
    found = tuple(axis(d, ndim) for d in dims)
    if len(set(found)) != len(found):
        raise ShapeError("dim_repeated", dim=list(dims))
    return found


def every_dim(dim: Any) -> Any:
    """A reduction's ``dim`` as the reference reads it: PyTorch reduces over every dim
    when ``dim`` is None or empty (``sum(x, ())``, ``torch.sum(x, [])``)."""
    return None if dim == () else dim


def reduced(shape: Shape, dim: Any = None, keepdim: bool = False) -> Shape:
    """The shape after reducing ``dim`` (all dims when None or empty)."""
    axes = _axes(every_dim(dim), len(shape))
    if not shape:
        return ()
    if axes is None:
        return (1,) * len(shape) if keepdim else ()
    if keepdim:
        return tuple(1 if i in axes else n for i, n in enumerate(shape))
    return tuple(n for i, n in enumerate(shape) if i not in axes)


def _np_axes(dim: Any, ndim: int) -> Any:
    """A reduction's dim for NumPy on an object array (a 0-d array has no axes: all of it;
    an empty dim is every dim, as in PyTorch)."""
    dim = every_dim(dim)
    return None if dim is None or ndim == 0 else _axes(dim, ndim)


def _reduce_shape(shapes: list[Shape], dim: Any = None, keepdim: bool = False, **_: Any) -> Shape:
    return reduced(shapes[0], dim, keepdim)


def _same_shape(shapes: list[Shape], dim: Any = None, **_: Any) -> Shape:
    if dim is not None:
        axis(dim, len(shapes[0]))
    return shapes[0]


def _dot_shape(shapes: list[Shape], **_: Any) -> Shape:
    a, b = shapes
    if len(a) != 1 or a != b:
        raise ShapeError("dot_shapes", left=list(a), right=list(b))
    return ()


def _t_shape(shapes: list[Shape], **_: Any) -> Shape:
    (shape,) = shapes
    if len(shape) > 2:
        raise ShapeError("transpose_not_2d", shape=list(shape))
    return tuple(reversed(shape))


def _transpose_shape(shapes: list[Shape], dim0: int, dim1: int) -> Shape:
    shape = list(shapes[0])
    a, b = axis(dim0, len(shape)), axis(dim1, len(shape))
    if shape:
        shape[a], shape[b] = shape[b], shape[a]
    return tuple(shape)


def _permute_shape(shapes: list[Shape], dims: tuple[int, ...]) -> Shape:
    shape = shapes[0]
    order = tuple(axis(d, len(shape)) for d in dims)
    if sorted(order) != list(range(len(shape))):
        raise ShapeError("bad_permutation", dims=list(dims), shape=list(shape))
    return tuple(shape[i] for i in order)


def _reshape_shape(shapes: list[Shape], shape: tuple[int, ...]) -> Shape:
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


def _flatten_shape(shapes: list[Shape], start_dim: int = 0, end_dim: int = -1) -> Shape:
    shape = shapes[0]
    if not shape:
        return (1,)
    a, b = axis(start_dim, len(shape)), axis(end_dim, len(shape))
    if a > b:
        raise ShapeError("flatten_order", start=start_dim, end=end_dim)
    return (*shape[:a], math.prod(shape[a : b + 1]), *shape[b + 1 :])


def _squeeze_axes(shape: Shape, dim: Any) -> tuple[int, ...]:
    if dim is None:
        return tuple(i for i, n in enumerate(shape) if n == 1)
    axes = _axes(dim, len(shape)) or ()
    return tuple(i for i in axes if shape and shape[i] == 1)


def _squeeze_shape(shapes: list[Shape], dim: Any = None) -> Shape:
    shape = shapes[0]
    gone = _squeeze_axes(shape, dim)
    return tuple(n for i, n in enumerate(shape) if i not in gone)


def _unsqueeze_axis(ndim: int, dim: int) -> int:
    if not -(ndim + 1) <= dim <= ndim:
        raise ShapeError("dim_out_of_range", dim=dim, shape=None, low=-(ndim + 1), high=ndim)
    return dim % (ndim + 1)


def _unsqueeze_shape(shapes: list[Shape], dim: int) -> Shape:
    shape = shapes[0]
    at = _unsqueeze_axis(len(shape), dim)
    return (*shape[:at], 1, *shape[at:])


def _kept(items: list[Any], shapes: list[Shape]) -> list[Any]:
    """What ``cat`` joins: PyTorch skips 1-D tensors of no elements (its legacy rule)."""
    kept = [item for item, shape in zip(items, shapes, strict=True) if shape != (0,)]
    return kept or items[:1]


def _cat_shape(shapes: list[Shape], dim: int = 0) -> Shape:
    shapes = _kept(shapes, shapes)
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


def _stack_shape(shapes: list[Shape], dim: int = 0) -> Shape:
    first = shapes[0]
    if any(s != first for s in shapes):
        raise ShapeError("stack_shapes", shapes=[list(s) for s in shapes])
    at = _unsqueeze_axis(len(first), dim)
    return (*first[:at], len(shapes), *first[at:])


def index_shape(shape: Shape, items: tuple[Any, ...]) -> Shape:
    """The shape of ``value[items]`` (PyTorch's basic indexing and integer lists)."""
    import numpy as np

    probe = np.broadcast_to(np.empty((), dtype=bool), shape)
    try:
        return tuple(probe[items].shape)
    except IndexError as exc:
        raise ShapeError("bad_index", shape=list(shape), detail=str(exc)) from None


def _loss_shape(shapes: list[Shape], reduction: str = "mean", **_: Any) -> Shape:
    out = broadcast_all(shapes)
    return out if reduction == "none" else ()


def _class_shape(shapes: list[Shape], reduction: str = "mean", **_: Any) -> Shape:
    """cross_entropy/nll_loss: input (C,) or (N, C); target of class indices (N,) or of
    class probabilities (N, C)."""
    x, t = shapes
    if len(x) not in (1, 2):
        raise ShapeError("class_input", shape=list(x))
    if t != x and t != x[:-1]:
        raise ShapeError("class_target", input=list(x), target=list(t))
    return x[:-1] if reduction == "none" else ()


def _nll_shape(shapes: list[Shape], reduction: str = "mean", **_: Any) -> Shape:
    x, t = shapes
    if len(x) not in (1, 2) or t != x[:-1]:
        raise ShapeError("class_target", input=list(x), target=list(t))
    return x[:-1] if reduction == "none" else ()


# --- the reference side's helpers --------------------------------------------------------------


def _objects(np: Any, value: Any) -> Any:
    return np.array(value, dtype=object)


def _sum(sp: Any, np: Any, a: Any, dim: Any = None, keepdim: bool = False) -> Any:
    return _objects(np, np.sum(a, axis=_np_axes(dim, a.ndim), keepdims=keepdim and a.ndim > 0))


def _mean(sp: Any, np: Any, a: Any, dim: Any = None, keepdim: bool = False) -> Any:
    axes = _np_axes(dim, a.ndim)
    count = a.size if axes is None else math.prod(a.shape[i] for i in axes)
    total = np.sum(a, axis=axes, keepdims=keepdim and a.ndim > 0)
    return _objects(np, total * sp.Rational(1, max(count, 1)))


def _prod(sp: Any, np: Any, a: Any, dim: Any = None, keepdim: bool = False) -> Any:
    return _objects(np, np.prod(a, axis=_np_axes(dim, a.ndim), keepdims=keepdim and a.ndim > 0))


def _extreme(pick: str) -> Callable[..., Any]:
    def fold(sp: Any, np: Any, a: Any, dim: Any = None, keepdim: bool = False) -> Any:
        combine = np.frompyfunc(lambda u, v: getattr(sp, pick)(u, v), 2, 1)
        axes = _np_axes(dim, a.ndim)
        if a.ndim == 0:
            return _objects(np, a)
        if axes is None:
            out = combine.reduce(a.reshape(-1), axis=0)
            return _objects(np, np.full((1,) * a.ndim, out, dtype=object) if keepdim else out)
        out = combine.reduce(a, axis=axes[0])
        return _objects(np, np.expand_dims(out, axes[0]) if keepdim else out)

    return fold


def _exp(sp: Any, np: Any, a: Any) -> Any:
    return np.vectorize(sp.exp, otypes=[object])(a)


def _log(sp: Any, np: Any, a: Any) -> Any:
    return np.vectorize(sp.log, otypes=[object])(a)


def _softmax(sp: Any, np: Any, a: Any, dim: int) -> Any:
    e = _exp(sp, np, a)
    return e / np.sum(e, axis=_np_axes(dim, a.ndim), keepdims=True)


def _log_softmax(sp: Any, np: Any, a: Any, dim: int) -> Any:
    e = _exp(sp, np, a)
    return a - _log(sp, np, _objects(np, np.sum(e, axis=_np_axes(dim, a.ndim), keepdims=True)))


def _logsumexp(sp: Any, np: Any, a: Any, dim: Any, keepdim: bool = False) -> Any:
    e = _exp(sp, np, a)
    total = np.sum(e, axis=_np_axes(dim, a.ndim), keepdims=keepdim and a.ndim > 0)
    empty = sp.S.NegativeInfinity  # log of an empty sum: PyTorch's -inf (SymPy's log(0) is zoo)
    return np.vectorize(lambda t: empty if t == 0 else sp.log(t), otypes=[object])(
        _objects(np, total)
    )


def _norm(sp: Any, np: Any, a: Any, p: Any = 2, dim: Any = None, keepdim: bool = False) -> Any:
    total = np.sum(a * a, axis=_np_axes(dim, a.ndim), keepdims=keepdim and a.ndim > 0)
    return np.vectorize(sp.sqrt, otypes=[object])(_objects(np, total))


def _cat(sp: Any, np: Any, *arrays: Any, dim: int = 0) -> Any:
    kept = _kept(list(arrays), [a.shape for a in arrays])
    return np.concatenate(kept, axis=axis(dim, kept[0].ndim))


def _flatten(sp: Any, np: Any, a: Any, start_dim: int = 0, end_dim: int = -1) -> Any:
    return a.reshape(_flatten_shape([a.shape], start_dim, end_dim))


def _squeeze(sp: Any, np: Any, a: Any, dim: Any = None) -> Any:
    return a.reshape(_squeeze_shape([a.shape], dim))


def _unsqueeze(sp: Any, np: Any, a: Any, dim: int) -> Any:
    return a.reshape(_unsqueeze_shape([a.shape], dim))


def _transpose(sp: Any, np: Any, a: Any, dim0: int, dim1: int) -> Any:
    if a.ndim == 0:
        return a
    return np.swapaxes(a, axis(dim0, a.ndim), axis(dim1, a.ndim))


def _numbers(sp: Any, np: Any, target: Any, what: str) -> Any:
    """A target's values as Python numbers (it must be a constant known as a number)."""
    flat = []
    for cell in np.asarray(target, dtype=object).reshape(-1):
        if not (isinstance(cell, (int, float)) or getattr(cell, "is_Number", False)):
            raise ShapeError("target_not_constant", what=what)
        flat.append(float(cell))
    return np.array(flat, dtype=float).reshape(np.shape(target))


def _reduce_loss(sp: Any, np: Any, losses: Any, reduction: str) -> Any:
    if reduction == "none":
        return _objects(np, losses)
    if reduction == "sum":
        return _objects(np, np.sum(losses))
    return _objects(np, np.sum(losses) * sp.Rational(1, max(losses.size, 1)))


def _classes(sp: Any, np: Any, x: Any, target: Any, log_probs: Any, what: str) -> Any:
    """-log p of each sample's class: ``log_probs`` shaped like ``x``, ``target`` indices."""
    picks = _numbers(sp, np, target, what)
    count = x.shape[-1]
    rows = log_probs.reshape(-1, count)
    losses = []
    for n, cls in enumerate(picks.reshape(-1)):
        if cls != int(cls) or not 0 <= cls < count:
            raise ShapeError("class_out_of_range", value=float(cls), classes=count)
        losses.append(-rows[n, int(cls)])
    return np.array(losses, dtype=object).reshape(picks.shape)


def _cross_entropy(
    sp: Any,
    np: Any,
    x: Any,
    target: Any,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> Any:
    log_probs = _log_softmax(sp, np, x, -1)
    smooth = sp.nsimplify(label_smoothing) if label_smoothing else 0
    count = x.shape[-1]
    if target.shape == x.shape:  # class probabilities
        t = target * (1 - smooth) + smooth * sp.Rational(1, count) if smooth else target
        losses = -np.sum(t * log_probs, axis=-1)
        if reduction == "mean":  # PyTorch divides by the batch size here
            batch = x.shape[0] if x.ndim == 2 else 1
            return _objects(np, np.sum(losses) * sp.Rational(1, max(batch, 1)))
        return _reduce_loss(sp, np, np.asarray(losses, dtype=object), reduction)
    losses = _classes(sp, np, x, target, log_probs, "cross_entropy's target of class indices")
    if smooth:
        uniform = -np.sum(log_probs, axis=-1) * sp.Rational(1, count)
        losses = losses * (1 - smooth) + smooth * uniform
    return _reduce_loss(sp, np, np.asarray(losses, dtype=object), reduction)


def _nll_loss(sp: Any, np: Any, x: Any, target: Any, reduction: str = "mean") -> Any:
    losses = _classes(sp, np, x, target, x, "nll_loss's target")
    return _reduce_loss(sp, np, np.asarray(losses, dtype=object), reduction)


def _cross_entropy_torch(
    torch: Any, x: Any, t: Any, reduction: str = "mean", label_smoothing: float = 0.0
) -> Any:
    indices = t.dim() == x.dim() - 1
    target = t.long() if indices else t
    f = torch.nn.functional.cross_entropy
    return f(x, target, reduction=reduction, label_smoothing=label_smoothing)


# --- definitions through other operations (the reference side of losses and activations) --


def _reduce(node: Node, reduction: str) -> Node:
    return node if reduction == "none" else call(reduction, node)


def _times(weight: Node | None, node: Node) -> Node:
    return node if weight is None else Binary("*", weight, node)


def _half(node: Node) -> Node:
    return Binary("*", Num(0.5), node)


def _mse(a: Node, t: Node, reduction: str = "mean") -> Node:
    return _reduce(Binary("**", Binary("-", a, t), Num(2)), reduction)


def _l1(a: Node, t: Node, reduction: str = "mean") -> Node:
    return _reduce(call("abs", Binary("-", a, t)), reduction)


def _smooth_l1(a: Node, t: Node, reduction: str = "mean", beta: float = 1.0) -> Node:
    d = Binary("-", a, t)
    size = call("abs", d)
    if beta == 0:
        return _reduce(size, reduction)
    inside = Binary("/", _half(Binary("**", d, Num(2))), Num(beta))
    outside = Binary("-", size, Num(0.5 * beta))
    return _reduce(call("where", Binary("<", size, Num(beta)), inside, outside), reduction)


def _huber(a: Node, t: Node, reduction: str = "mean", delta: float = 1.0) -> Node:
    d = Binary("-", a, t)
    size = call("abs", d)
    inside = _half(Binary("**", d, Num(2)))
    outside = Binary("*", Num(delta), Binary("-", size, Num(0.5 * delta)))
    return _reduce(call("where", Binary("<", size, Num(delta)), inside, outside), reduction)


def _bce(a: Node, t: Node, weight: Node | None = None, reduction: str = "mean") -> Node:
    # PyTorch clamps each log at -100 so that a prediction of exactly 0 or 1 stays finite.
    log_p = call("maximum", call("log", a), Num(-100))
    log_q = call("maximum", call("log", Binary("-", Num(1), a)), Num(-100))
    both = Binary("+", Binary("*", t, log_p), Binary("*", Binary("-", Num(1), t), log_q))
    return _reduce(_times(weight, Unary("-", both)), reduction)


def _bce_logits(
    a: Node,
    t: Node,
    weight: Node | None = None,
    pos_weight: Node | None = None,
    reduction: str = "mean",
) -> Node:
    softplus = call("log", Binary("+", Num(1), call("exp", Unary("-", a))))  # -log sigmoid(a)
    scale: Node = Num(1)
    if pos_weight is not None:
        scale = Binary("+", Num(1), Binary("*", Binary("-", pos_weight, Num(1)), t))
    loss = Binary("+", Binary("*", Binary("-", Num(1), t), a), Binary("*", scale, softplus))
    return _reduce(_times(weight, loss), reduction)


def _softplus(sp: Any, a: Any, beta: float = 1.0, threshold: float = 20.0) -> Any:
    """PyTorch's softplus: log(1 + exp(beta*x))/beta, and x itself where beta*x > threshold
    (its derivative 1 there)."""
    b, t = sp.nsimplify(beta), sp.nsimplify(threshold)
    return sp.Piecewise((a, b * a > t), (sp.log(1 + sp.exp(b * a)) / b, True))


def _gelu(sp: Any, a: Any, approximate: str = "none") -> Any:
    if approximate == "tanh":  # PyTorch's constants: sqrt(2/pi) and 0.044715
        inner = sp.sqrt(2 / sp.pi) * (a + sp.Rational(44715, 1000000) * a**3)
        return a * (1 + sp.tanh(inner)) / 2
    return a * (1 + sp.erf(a / sp.sqrt(2))) / 2


def _where_term(sp: Any, c: Any, a: Any, b: Any) -> Any:
    condition = c if isinstance(c, sp.core.relational.Relational) else sp.Ne(c, 0)
    if condition is sp.true:
        return a
    if condition is sp.false:
        return b
    return sp.Piecewise((a, condition), (b, True))


def _clamp_term(sp: Any, a: Any, low: Any = None, high: Any = None) -> Any:
    if low is not None:
        a = sp.Max(a, low)
    if high is not None:
        a = sp.Min(a, high)
    return a


# --- the table ---------------------------------------------------------------------------------


def _math(
    name: str,
    sympy_name: str | None = None,
    *,
    np_name: str | None = None,
    math_name: str | None = "",
    also: tuple[str, ...] = (),
    kink: str = "",
    atoms: tuple[str, ...] = (),
    note: str = "",
) -> Op:
    """An elementwise function that torch, SymPy, NumPy and math all call by a name."""
    sympy_attr = sympy_name or name
    spelled = ["bare", "torch", "Tensor", f"np.{np_name or name}", *also]
    if math_name is not None:
        spelled.append(f"math.{math_name or name}")
    return Op(
        name,
        torch=lambda torch, a: getattr(torch, name)(a),
        sympy=lambda sp, a: getattr(sp, sympy_attr)(a),
        spelled=tuple(spelled),
        kink=kink,
        kink_atoms=atoms,
        note=note,
    )


def _operator(op: str) -> Callable[..., Node]:
    return lambda a, b: Binary(op, a, b)


def _reduction(name: str, function: Callable[..., Any], dims: str = "dims") -> Op:
    return Op(
        name,
        torch=lambda torch, a, dim=None, keepdim=False: (
            getattr(torch, name)(a) if dim is None else getattr(torch, name)(a, dim, keepdim)
        ),
        components=function,
        shape=_reduce_shape,
        params=(Param("dim", dims, None), Param("keepdim", "bool", False)),
        spelled=("bare", "torch", "Tensor", f"np.{name}"),
        reduces=True,
        kind="reduction",
    )


def _extreme_op(name: str) -> Op:
    return Op(
        name,
        torch=lambda torch, a, dim=None, keepdim=False: (
            getattr(torch, name)(a) if dim is None else getattr(torch, name)(a, dim, keepdim).values
        ),
        components=_extreme(name.capitalize()),
        shape=_reduce_shape,
        params=(Param("dim", "int", None), Param("keepdim", "bool", False)),
        spelled=("bare", "torch", "Tensor", f"np.{name}"),
        reduces=True,
        kind="reduction",
        kink=f"{name} is not differentiable at a tie",
        kink_atoms=("Heaviside",),
    )


def _loss(
    name: str,
    expand: Callable[..., Node],
    *params: Param,
    optional: tuple[str, ...] = (),
    kink: str = "",
    atoms: tuple[str, ...] = (),
    note: str = "",
) -> Op:
    tensors = ("input", "target", *optional)

    def run(torch: Any, a: Any, t: Any, **kwargs: Any) -> Any:
        return getattr(torch.nn.functional, name)(a, t, **kwargs)

    return Op(
        name,
        torch=run,
        expand=expand,
        shape=_loss_shape,
        tensors=tensors,
        optional=frozenset(optional),
        params=(*params, Param("reduction", "text", "mean", REDUCTION)),
        spelled=("bare", "F"),
        kink=kink,
        kink_atoms=atoms,
        note=note,
        reduces=True,
        kind="loss",
    )


_OPS: tuple[Op, ...] = (
    _math("sin"),
    _math("cos"),
    _math("tan"),
    _math("asin", np_name="arcsin", also=("torch.arcsin", "Tensor.arcsin")),
    _math("acos", np_name="arccos", also=("torch.arccos", "Tensor.arccos")),
    _math("atan", np_name="arctan", also=("torch.arctan", "Tensor.arctan")),
    _math("sinh"),
    _math("cosh"),
    _math("tanh", also=("F.tanh",)),
    _math("asinh", np_name="arcsinh", also=("torch.arcsinh", "Tensor.arcsinh")),
    _math("acosh", np_name="arccosh", also=("torch.arccosh", "Tensor.arccosh")),
    _math("atanh", np_name="arctanh", also=("torch.arctanh", "Tensor.arctanh")),
    _math("exp"),
    _math("log", note="natural logarithm"),
    Op(
        "log2",
        torch=lambda torch, a: torch.log2(a),
        sympy=lambda sp, a: sp.log(a, 2),
        spelled=("bare", "torch", "Tensor", "np", "math"),
    ),
    Op(
        "log10",
        torch=lambda torch, a: torch.log10(a),
        sympy=lambda sp, a: sp.log(a, 10),
        spelled=("bare", "torch", "Tensor", "np", "math"),
    ),
    _math("sqrt", note="sqrt'(0) is infinite"),
    _math(
        "abs",
        "Abs",
        math_name="fabs",
        also=("np.absolute", "torch.absolute", "Tensor.absolute"),
        kink="abs'(0) is undefined (SymPy's sign(0) is 0)",
        atoms=("sign",),
    ),
    Op(
        "erf",
        torch=lambda torch, a: torch.erf(a),
        sympy=lambda sp, a: sp.erf(a),
        spelled=("bare", "torch", "Tensor", "math", "torch.special.erf"),
        note="the error function",
    ),
    Op(
        "sigmoid",
        torch=lambda torch, a: torch.sigmoid(a),
        sympy=lambda sp, a: 1 / (1 + sp.exp(-a)),
        spelled=("bare", "torch", "Tensor", "F", "torch.special.expit"),
    ),
    Op(
        "relu",
        torch=lambda torch, a: torch.relu(a),
        sympy=lambda sp, a: sp.Max(0, a),
        spelled=("bare", "torch", "Tensor", "F"),
        kink="relu'(0) is undefined (SymPy's Heaviside(0) is 1/2)",
        kink_atoms=("Heaviside",),
    ),
    Op(
        "log1p",
        torch=lambda torch, a: torch.log1p(a),
        sympy=lambda sp, a: sp.log(1 + a),
        spelled=("bare", "torch", "Tensor", "np", "math"),
        note="log(1 + x), accurate for small x",
    ),
    Op(
        "expm1",
        torch=lambda torch, a: torch.expm1(a),
        sympy=lambda sp, a: sp.exp(a) - 1,
        spelled=("bare", "torch", "Tensor", "np", "math"),
        note="exp(x) - 1, accurate for small x",
    ),
    Op(
        "softplus",
        torch=lambda torch, a, beta=1.0, threshold=20.0: torch.nn.functional.softplus(
            a, beta=beta, threshold=threshold
        ),
        sympy=_softplus,
        params=(Param("beta", "float", 1.0), Param("threshold", "float", 20.0)),
        spelled=("bare", "F"),
        note="log(1 + exp(beta*x))/beta; PyTorch returns x itself where beta*x > threshold",
        kink="softplus switches to x itself at beta*x = threshold",
        kink_atoms=("Piecewise",),
    ),
    Op(
        "logsigmoid",
        torch=lambda torch, a: torch.nn.functional.logsigmoid(a),
        sympy=lambda sp, a: -sp.log(1 + sp.exp(-a)),
        spelled=("bare", "F"),
        note="log(sigmoid(x)), without rounding sigmoid(x) to 0 or 1 first",
    ),
    Op(
        "gelu",
        torch=lambda torch, a, approximate="none": torch.nn.functional.gelu(
            a, approximate=approximate
        ),
        sympy=_gelu,
        params=(Param("approximate", "text", "none", ("none", "tanh")),),
        spelled=("bare", "F"),
        note="x·Φ(x), Φ the normal distribution's CDF (approximate='tanh': its tanh form)",
    ),
    Op(
        "silu",
        torch=lambda torch, a: torch.nn.functional.silu(a),
        sympy=lambda sp, a: a / (1 + sp.exp(-a)),
        spelled=("bare", "F"),
        note="x·sigmoid(x)",
    ),
    Op(
        "elu",
        torch=lambda torch, a, alpha=1.0: torch.nn.functional.elu(a, alpha=alpha),
        sympy=lambda sp, a, alpha=1.0: sp.Piecewise(
            (a, a > 0), (sp.nsimplify(alpha) * (sp.exp(a) - 1), True)
        ),
        params=(Param("alpha", "float", 1.0),),
        spelled=("bare", "F"),
        kink="elu is not differentiable at 0 unless alpha is 1",
        kink_atoms=("Piecewise",),
    ),
    Op(
        "leaky_relu",
        torch=lambda torch, a, negative_slope=0.01: torch.nn.functional.leaky_relu(
            a, negative_slope=negative_slope
        ),
        sympy=lambda sp, a, negative_slope=0.01: sp.Piecewise(
            (a, a > 0), (sp.nsimplify(negative_slope) * a, True)
        ),
        params=(Param("negative_slope", "float", 0.01),),
        spelled=("bare", "F"),
        kink="leaky_relu'(0) is undefined",
        kink_atoms=("Piecewise",),
    ),
    Op(
        "hardtanh",
        torch=lambda torch, a, min_val=-1.0, max_val=1.0: torch.nn.functional.hardtanh(
            a, min_val=min_val, max_val=max_val
        ),
        sympy=lambda sp, a, min_val=-1.0, max_val=1.0: _clamp_term(
            sp, a, sp.nsimplify(min_val), sp.nsimplify(max_val)
        ),
        params=(Param("min_val", "float", -1.0), Param("max_val", "float", 1.0)),
        spelled=("bare", "F"),
        kink="hardtanh is not differentiable at min_val and max_val",
        kink_atoms=("Heaviside",),
    ),
    Op(
        "clamp",
        torch=lambda torch, a, min=None, max=None: torch.clamp(a, min, max),
        sympy=lambda sp, a, min=None, max=None: _clamp_term(sp, a, min, max),
        tensors=("input", "min", "max"),
        optional=frozenset({"min", "max"}),
        spelled=("bare", "torch", "Tensor", "torch.clip", "Tensor.clip", "np.clip"),
        aliases=("clip",),
        kink="clamp is not differentiable at its bounds",
        kink_atoms=("Heaviside",),
    ),
    Op(
        "maximum",
        torch=lambda torch, a, b: torch.maximum(a, b),
        sympy=lambda sp, a, b: sp.Max(a, b),
        tensors=("input", "other"),
        spelled=("bare", "torch", "Tensor", "np"),
        kink="maximum is not differentiable where its arguments are equal",
        kink_atoms=("Heaviside",),
    ),
    Op(
        "minimum",
        torch=lambda torch, a, b: torch.minimum(a, b),
        sympy=lambda sp, a, b: sp.Min(a, b),
        tensors=("input", "other"),
        spelled=("bare", "torch", "Tensor", "np"),
        kink="minimum is not differentiable where its arguments are equal",
        kink_atoms=("Heaviside",),
    ),
    Op(
        "where",
        torch=lambda torch, c, a, b: torch.where(c.bool(), a, b),
        sympy=_where_term,
        tensors=("condition", "input", "other"),
        spelled=("bare", "torch", "np"),
        kink="where switches branches here",
        kink_atoms=("Piecewise",),
    ),
    Op(
        "ones_like",
        torch=lambda torch, a: torch.ones_like(a),
        sympy=lambda sp, a: sp.Integer(1),
        spelled=("bare", "torch", "np"),
        kind="constant",
    ),
    Op(
        "zeros_like",
        torch=lambda torch, a: torch.zeros_like(a),
        sympy=lambda sp, a: sp.Integer(0),
        spelled=("bare", "torch", "np"),
        kind="constant",
    ),
    Op(
        "clone",
        torch=lambda torch, a: a.clone(),
        sympy=lambda sp, a: a,
        spelled=("bare", "torch", "Tensor"),
    ),
    Op(
        "detach",
        torch=lambda torch, a: a.detach(),
        spelled=("bare", "torch", "Tensor"),
        kind="detach",
        note="the same values (and memory) outside the graph: no gradient through it",
    ),
    Op(  # a line under 'with torch.no_grad():' (written only that way)
        "no_grad",
        torch=lambda torch, a: a.detach(),
        spelled=(),
        kind="detach",
        note="made under torch.no_grad(): a constant outside the graph",
    ),
    Op(  # a line under 'with torch.inference_mode():' (written only that way)
        "inference_mode",
        torch=lambda torch, a: _inference_tensor(torch, a),
        spelled=(),
        kind="detach",
        note="made under torch.inference_mode(): an inference tensor, outside the graph",
    ),
    # operators, as PyTorch's functions and methods write them
    Op("add", build=_operator("+"), tensors=("input", "other"), spelled=("torch", "Tensor", "np")),
    Op(
        "sub",
        build=_operator("-"),
        tensors=("input", "other"),
        spelled=("torch", "Tensor", "torch.subtract", "Tensor.subtract", "np.subtract"),
    ),
    Op(
        "mul",
        build=_operator("*"),
        tensors=("input", "other"),
        spelled=("torch", "Tensor", "torch.multiply", "Tensor.multiply", "np.multiply"),
    ),
    Op(
        "div",
        build=_operator("/"),
        tensors=("input", "other"),
        spelled=(
            "torch",
            "Tensor",
            "torch.divide",
            "Tensor.divide",
            "torch.true_divide",
            "Tensor.true_divide",
            "np.divide",
            "np.true_divide",
        ),
    ),
    Op(
        "pow",
        build=_operator("**"),
        tensors=("input", "exponent"),
        spelled=("torch", "Tensor", "np.power", "math.pow", "Tensor.float_power"),
    ),
    Op(
        "matmul",
        build=_operator("@"),
        tensors=("input", "other"),
        spelled=("torch", "Tensor", "torch.mm", "Tensor.mm", "torch.mv", "Tensor.mv", "np"),
    ),
    Op("neg", build=lambda a: Unary("-", a), spelled=("torch", "Tensor", "torch.negative")),
    Op("square", build=lambda a: Binary("**", a, Num(2)), spelled=("torch", "Tensor", "np")),
    Op(
        "reciprocal",
        build=lambda a: Binary("/", Num(1), a),
        spelled=("torch", "Tensor", "np"),
    ),
    Op(
        "rsqrt",
        build=lambda a: Binary("/", Num(1), call("sqrt", a)),
        spelled=("torch", "Tensor"),
    ),
    # reductions and functions of whole tensors
    _reduction("sum", _sum),
    _reduction("mean", _mean),
    _reduction("prod", _prod, dims="int"),
    _extreme_op("max"),
    _extreme_op("min"),
    Op(
        "softmax",
        torch=lambda torch, a, dim: torch.softmax(a, dim=dim),
        components=_softmax,
        shape=_same_shape,
        params=(Param("dim", "int"),),
        spelled=("bare", "torch", "Tensor", "F"),
        reduces=True,
        kind="reduction",
    ),
    Op(
        "log_softmax",
        torch=lambda torch, a, dim: torch.log_softmax(a, dim=dim),
        components=_log_softmax,
        shape=_same_shape,
        params=(Param("dim", "int"),),
        spelled=("bare", "torch", "Tensor", "F"),
        reduces=True,
        kind="reduction",
    ),
    Op(
        "logsumexp",
        torch=lambda torch, a, dim, keepdim=False: torch.logsumexp(a, dim=dim, keepdim=keepdim),
        components=_logsumexp,
        shape=_reduce_shape,
        params=(Param("dim", "dims"), Param("keepdim", "bool", False)),
        spelled=("bare", "torch", "Tensor"),
        reduces=True,
        kind="reduction",
    ),
    Op(
        "norm",
        torch=lambda torch, a, p=2, dim=None, keepdim=False: torch.linalg.vector_norm(
            a, 2, dim=dim, keepdim=keepdim
        ),
        components=_norm,
        shape=_reduce_shape,
        params=(
            Param("p", "text", 2, (2, "fro")),
            Param("dim", "dims", None),
            Param("keepdim", "bool", False),
        ),
        spelled=("bare", "torch", "Tensor", "torch.linalg.norm", "torch.linalg.vector_norm"),
        note="the 2-norm of all elements (or along dim)",
        kink="norm is not differentiable at the zero vector",
        kink_atoms=("Heaviside",),
        reduces=True,
        kind="reduction",
    ),
    Op(
        "dot",
        torch=lambda torch, a, b: torch.dot(a, b),
        components=lambda sp, np, a, b: _objects(np, np.dot(a, b)),
        shape=_dot_shape,
        tensors=("input", "other"),
        spelled=("bare", "torch", "Tensor", "torch.inner", "Tensor.inner"),
        reduces=True,
        kind="structural",
    ),
    # shapes
    Op(
        "T",
        torch=lambda torch, a: a.t(),
        components=lambda sp, np, a: a.T,
        shape=_t_shape,
        spelled=("bare", "torch.t", "Tensor.t"),
        kind="structural",
    ),
    Op(
        "transpose",
        torch=lambda torch, a, dim0, dim1: torch.transpose(a, dim0, dim1),
        components=_transpose,
        shape=_transpose_shape,
        params=(Param("dim0", "int"), Param("dim1", "int")),
        spelled=("bare", "torch", "Tensor", "torch.swapaxes", "Tensor.swapaxes", "np.swapaxes"),
        kind="structural",
    ),
    Op(
        "permute",
        torch=lambda torch, a, dims: a.permute(dims),
        components=lambda sp, np, a, dims: np.transpose(a, [axis(d, a.ndim) for d in dims]),
        shape=_permute_shape,
        params=(Param("dims", "ints"),),
        varargs="dims",
        spelled=("bare", "torch", "Tensor", "np.transpose"),
        kind="structural",
    ),
    Op(
        "reshape",
        torch=lambda torch, a, shape: a.reshape(shape),
        components=lambda sp, np, a, shape: a.reshape(_reshape_shape([a.shape], shape)),
        shape=_reshape_shape,
        params=(Param("shape", "ints"),),
        varargs="shape",
        spelled=("bare", "torch", "Tensor", "Tensor.view", "np"),
        kind="structural",
    ),
    Op(
        "flatten",
        torch=lambda torch, a, start_dim=0, end_dim=-1: torch.flatten(a, start_dim, end_dim),
        components=_flatten,
        shape=_flatten_shape,
        params=(Param("start_dim", "int", 0), Param("end_dim", "int", -1)),
        spelled=("bare", "torch", "Tensor"),
        kind="structural",
    ),
    Op(
        "squeeze",
        torch=lambda torch, a, dim=None: a.squeeze() if dim is None else a.squeeze(dim),
        components=_squeeze,
        shape=_squeeze_shape,
        params=(Param("dim", "dims", None),),
        spelled=("bare", "torch", "Tensor", "np"),
        kind="structural",
    ),
    Op(
        "unsqueeze",
        torch=lambda torch, a, dim: a.unsqueeze(dim),
        components=_unsqueeze,
        shape=_unsqueeze_shape,
        params=(Param("dim", "int"),),
        spelled=("bare", "torch", "Tensor", "np.expand_dims"),
        kind="structural",
    ),
    Op(
        "cat",
        torch=lambda torch, *tensors, dim=0: torch.cat(tensors, dim=dim),
        components=_cat,
        shape=_cat_shape,
        tensors=("tensors",),
        params=(Param("dim", "int", 0),),
        sequence=True,
        spelled=("bare", "torch", "torch.concat", "torch.concatenate", "np.concatenate"),
        kind="structural",
    ),
    Op(
        "stack",
        torch=lambda torch, *tensors, dim=0: torch.stack(tensors, dim=dim),
        components=lambda sp, np, *arrays, dim=0: np.stack(
            arrays, axis=_unsqueeze_axis(arrays[0].ndim, dim)
        ),
        shape=_stack_shape,
        tensors=("tensors",),
        params=(Param("dim", "int", 0),),
        sequence=True,
        spelled=("bare", "torch", "np"),
        kind="structural",
    ),
    # losses, as torch.nn.functional defines them
    _loss("mse_loss", _mse),
    _loss(
        "l1_loss",
        _l1,
        kink="l1_loss is not differentiable where input equals target",
        atoms=("sign",),
    ),
    _loss(
        "smooth_l1_loss",
        _smooth_l1,
        Param("beta", "float", 1.0),
        kink="smooth_l1_loss with beta 0 is not differentiable where input equals target",
        atoms=("sign", "Piecewise"),
    ),
    _loss(
        "huber_loss",
        _huber,
        Param("delta", "float", 1.0),
        kink="huber_loss switches from squares to lines at |input - target| = delta",
        atoms=("Piecewise",),
    ),
    _loss(
        "binary_cross_entropy",
        _bce,
        optional=("weight",),
        note="PyTorch clamps each log at -100",
        kink="binary_cross_entropy's logs are clamped at -100 here",
        atoms=("Heaviside",),
    ),
    _loss("binary_cross_entropy_with_logits", _bce_logits, optional=("weight", "pos_weight")),
    Op(
        "cross_entropy",
        torch=_cross_entropy_torch,
        components=_cross_entropy,
        shape=_class_shape,
        tensors=("input", "target"),
        params=(
            Param("reduction", "text", "mean", REDUCTION),
            Param("label_smoothing", "float", 0.0),
        ),
        spelled=("bare", "F"),
        note="target: class indices (N,) or class probabilities (N, C)",
        reduces=True,
        kind="structural",
    ),
    Op(
        "nll_loss",
        torch=lambda torch, x, t, reduction="mean": torch.nn.functional.nll_loss(
            x, t.long(), reduction=reduction
        ),
        components=_nll_loss,
        shape=_nll_shape,
        tensors=("input", "target"),
        params=(Param("reduction", "text", "mean", REDUCTION),),
        spelled=("bare", "F"),
        note="input: log-probabilities; target: class indices",
        reduces=True,
        kind="structural",
    ),
)

OPS: dict[str, Op] = {op.name: op for op in _OPS}

# The ways code may name a function: "torch.sin", "Tensor.sin", "F.relu", "np.sin", "sin".
_PREFIXES = ("torch", "Tensor", "F", "np", "math")


def _inference_tensor(torch: Any, a: Any) -> Any:
    """The value as ``torch.inference_mode()`` makes it: an inference tensor, which
    PyTorch refuses to save for backward (its own error, raised where it is used)."""
    with torch.inference_mode():
        return a.clone()


def _spellings() -> dict[str, Op]:
    table: dict[str, Op] = {}
    for op in _OPS:
        for way in op.spelled:
            key = f"{way}.{op.name}" if way in _PREFIXES else op.name if way == "bare" else way
            table.setdefault(key, op)
        for alias in op.aliases:
            table.setdefault(alias, op)
    return table


SPELLINGS: dict[str, Op] = _spellings()

# Operations that only stand for operators (the parser writes them as such).
SUGAR = frozenset(op.name for op in _OPS if op.build is not None)

# The language's own names: what a bare call may name.
BARE = frozenset(k for k in SPELLINGS if "." not in k)


def function_names() -> list[str]:
    """The bare names of the language, in the table's order."""
    return [op.name for op in _OPS if op.build is None and op.name in BARE]


def elementwise_names() -> list[str]:
    return [op.name for op in _OPS if op.sympy is not None and op.name in BARE]


# Named constants, used unless a value is given for the name: (Python value, SymPy name).
CONSTANTS: dict[str, tuple[float, str]] = {
    "pi": (math.pi, "pi"),
    "e": (math.e, "E"),
}

# Non-differentiable points by code: what SymPy knows of them. What PyTorch gives there is
# read from its .grad and shown beside (see messages.kink_note).
KINK_POINTS: dict[str, str] = {
    **{op.name: op.kink for op in _OPS if op.kink},
    "second": "the second derivative at a kink (relu or abs at 0, max or min at a tie) is "
    "undefined (a jump in the first)",
    "zero_over_zero": "the derivative is 0/0 here (undefined)",
}

# The code a jump stands for when no operation of the expression claims it.
KINKS: dict[str, str] = {
    "Heaviside": "relu",
    "sign": "abs",
    "DiracDelta": "second",
    "Piecewise": "where",
}

# Operations with a kink: only an expression using one lets a numeric check accept a value
# between its one-sided slopes.
KINKED: frozenset[str] = frozenset(op.name for op in _OPS if op.kink)


def definition(node: Any, placeholders: list[Any]) -> Any:
    """The operation's definition through others (a loss through means and logs), with the
    placeholders standing for its arguments; None when it is folded as itself."""
    op = OPS[node.func]
    if op.expand is None:
        return None
    positional, keywords = arguments(node, list(placeholders))
    return op.expand(*positional, **keywords)


def arguments(node: Call, values: list[Any]) -> tuple[list[Any], dict[str, Any]]:
    """How an entry's functions take a call's folded arguments: the required tensors by
    position, the optional tensors that are there and the parameters by name."""
    op = OPS[node.func]
    options = node.options
    names = options.pop("given", None)
    if op.sequence or names is None:
        return list(values), options
    positional = [v for n, v in zip(names, values, strict=True) if n not in op.optional]
    optional = {n: v for n, v in zip(names, values, strict=True) if n in op.optional}
    return positional, {**optional, **options}


def kink_codes(atom: str, uses: set[str]) -> set[str]:
    """The note codes for a jump (a SymPy class name) in a derivative of an expression that
    calls ``uses``: the operations whose kink shows as that jump, else ``KINKS``'s code."""
    found = {name for name in uses if name in OPS and atom in OPS[name].kink_atoms}
    return found or {KINKS[atom]}


__all__ = [
    "BARE",
    "CONSTANTS",
    "KINKED",
    "KINKS",
    "KINK_POINTS",
    "OPS",
    "REQUIRED",
    "SPELLINGS",
    "SUGAR",
    "Op",
    "Param",
    "arguments",
    "index_shape",
]
