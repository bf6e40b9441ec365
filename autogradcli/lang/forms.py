"""The reference side's forms shared by the vocabulary's entries: object-array
reductions and joins for SymPy terms (NumPy holding the terms), losses and activations
defined through other operations, and the builders of the common kinds of entry
(``math_op``, ``reduction``, ``extreme_op``, ``loss``). Like the table, every form takes
the module (``sympy``, ``numpy``, ``torch``) as an argument and imports none of them."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from autogradcli.errors import ShapeError
from autogradcli.lang import jumps
from autogradcli.lang.ops import (
    REDUCTION,
    Dims,
    Op,
    Param,
    axis,
    cat_kept,
    flatten_shape,
    loss_shape,
    np_axes,
    reduce_shape,
    same_shape,
    squeeze_shape,
    unsqueeze_shape,
)
from autogradcli.lang.tree import Binary, Node, Num, Unary, call

if TYPE_CHECKING:  # the modules come as arguments: none is imported to run
    from types import ModuleType

    import sympy
    import torch as torch_
    from numpy import ndarray

# --- the reference side's helpers --------------------------------------------------------------


def objects(np: ModuleType, value: object) -> ndarray:
    return np.array(value, dtype=object)


def sum_of(
    sp: ModuleType, np: ModuleType, a: ndarray, dim: Dims = None, keepdim: bool = False
) -> ndarray:
    return objects(np, np.sum(a, axis=np_axes(dim, a.ndim), keepdims=keepdim and a.ndim > 0))


def mean(
    sp: ModuleType, np: ModuleType, a: ndarray, dim: Dims = None, keepdim: bool = False
) -> ndarray:
    axes = np_axes(dim, a.ndim)
    count = a.size if axes is None else math.prod(a.shape[i] for i in axes)
    total = np.sum(a, axis=axes, keepdims=keepdim and a.ndim > 0)
    return objects(np, total * sp.Rational(1, max(count, 1)))


def prod(
    sp: ModuleType, np: ModuleType, a: ndarray, dim: Dims = None, keepdim: bool = False
) -> ndarray:
    return objects(np, np.prod(a, axis=np_axes(dim, a.ndim), keepdims=keepdim and a.ndim > 0))


def _extreme(pick: str) -> Callable[..., ndarray]:
    def fold(
        sp: ModuleType, np: ModuleType, a: ndarray, dim: Dims = None, keepdim: bool = False
    ) -> ndarray:
        combine = np.frompyfunc(lambda u, v: getattr(sp, pick)(u, v), 2, 1)
        axes = np_axes(dim, a.ndim)
        if a.ndim == 0:
            return objects(np, a)
        if axes is None:
            out = combine.reduce(a.reshape(-1), axis=0)
            return objects(np, np.full((1,) * a.ndim, out, dtype=object) if keepdim else out)
        out = combine.reduce(a, axis=axes[0])
        return objects(np, np.expand_dims(out, axes[0]) if keepdim else out)

    return fold


def _exp(sp: ModuleType, np: ModuleType, a: ndarray) -> ndarray:
    return np.vectorize(sp.exp, otypes=[object])(a)


def _log(sp: ModuleType, np: ModuleType, a: ndarray) -> ndarray:
    return np.vectorize(sp.log, otypes=[object])(a)


def softmax(
    sp: ModuleType, np: ModuleType, a: ndarray, dim: int, dtype: str | None = None
) -> ndarray:
    """exp(x_i) / sum_j exp(x_j) along ``dim`` (``dtype``: exact terms have none)."""
    e = _exp(sp, np, a)
    return e / np.sum(e, axis=np_axes(dim, a.ndim), keepdims=True)


def log_softmax(
    sp: ModuleType, np: ModuleType, a: ndarray, dim: int, dtype: str | None = None
) -> ndarray:
    e = _exp(sp, np, a)
    return a - _log(sp, np, objects(np, np.sum(e, axis=np_axes(dim, a.ndim), keepdims=True)))


def logsumexp(
    sp: ModuleType, np: ModuleType, a: ndarray, dim: Dims, keepdim: bool = False
) -> ndarray:
    e = _exp(sp, np, a)
    total = np.sum(e, axis=np_axes(dim, a.ndim), keepdims=keepdim and a.ndim > 0)
    empty = sp.S.NegativeInfinity  # log of an empty sum: PyTorch's -inf (SymPy's log(0) is zoo)
    return np.vectorize(lambda t: empty if t == 0 else sp.log(t), otypes=[object])(
        objects(np, total)
    )


def _over_axes(
    np: ModuleType, a: ndarray, dim: Dims, keepdim: bool, combine: Callable[..., ndarray]
) -> ndarray:
    """``combine`` (a NumPy ufunc's ``reduce`` on object arrays) over the axes of ``dim``
    (every axis when None or empty), as a reduction keeping or dropping them."""
    if a.ndim == 0:
        return objects(np, a)
    axes = np_axes(dim, a.ndim) or tuple(range(a.ndim))
    rest = [i for i in range(a.ndim) if i not in axes]
    moved = np.transpose(a, [*rest, *axes]).reshape(*(a.shape[i] for i in rest), -1)
    out = objects(np, combine(moved, axis=-1))
    kept = tuple(1 if i in axes else n for i, n in enumerate(a.shape))
    return out.reshape(kept) if keepdim else out


def largest(sp: ModuleType, np: ModuleType, a: ndarray, dim: Dims, keepdim: bool) -> ndarray:
    """amax: SymPy's Max over the dims (at a tie its derivative splits, as PyTorch's does)."""
    return _over_axes(np, a, dim, keepdim, np.frompyfunc(sp.Max, 2, 1).reduce)


def smallest(sp: ModuleType, np: ModuleType, a: ndarray, dim: Dims, keepdim: bool) -> ndarray:
    return _over_axes(np, a, dim, keepdim, np.frompyfunc(sp.Min, 2, 1).reduce)


def norm(
    sp: ModuleType,
    np: ModuleType,
    a: ndarray,
    p: float = 2,
    dim: Dims = None,
    keepdim: bool = False,
) -> ndarray:
    """``torch.linalg.vector_norm(a, p, dim)``: (sum |x|**p)**(1/p); p 0 counts the
    non-zero elements, p ±inf is the largest (smallest) |x|."""
    keep = keepdim and a.ndim > 0
    axes = np_axes(dim, a.ndim)
    if p == 2:
        total = np.sum(a * a, axis=axes, keepdims=keep)
        return np.vectorize(sp.sqrt, otypes=[object])(objects(np, total))
    size = np.vectorize(sp.Abs, otypes=[object])(a)
    if math.isinf(p):
        return (largest if p > 0 else smallest)(sp, np, size, dim, keepdim)
    if p == 0:
        nonzero = np.vectorize(jumps.nonzero(sp), otypes=[object])(a)
        return objects(np, np.sum(nonzero, axis=axes, keepdims=keep))
    if p == 1:
        return objects(np, np.sum(size, axis=axes, keepdims=keep))
    power = sp.nsimplify(p)
    total = np.sum(
        np.vectorize(lambda x: x**power, otypes=[object])(size), axis=axes, keepdims=keep
    )
    return np.vectorize(lambda t: t ** (1 / power), otypes=[object])(objects(np, total))


def linalg_norm(
    sp: ModuleType,
    np: ModuleType,
    a: ndarray,
    ord: float | str | None = None,
    dim: Dims = None,
    keepdim: bool = False,
) -> ndarray:
    """``torch.linalg.norm``: a vector norm, or with ``ord`` of a matrix (2-D, or two dims)
    its matrix norm: 'fro', 1 / -1 (largest / smallest column sum of |x|), ±inf (rows)."""
    if not matrix_norm(a.shape, ord, dim):
        return norm(sp, np, a, 2 if ord is None or ord == "fro" else float(ord), dim, keepdim)
    rows, cols = (-2, -1) if dim is None else dim
    if ord == "fro":
        return norm(sp, np, a, 2, (rows, cols), keepdim)
    assert isinstance(ord, (int, float))
    size = np.vectorize(sp.Abs, otypes=[object])(a)
    summed, other = (rows, cols) if abs(ord) == 1 else (cols, rows)
    sums = sum_of(sp, np, size, summed, True)
    pick = largest if ord > 0 else smallest
    out = pick(sp, np, sums, other, True)
    if keepdim:
        return out
    return out.reshape(reduce_shape([a.shape], (rows, cols), False))


def matrix_norm(shape: tuple[int, ...], ord: float | str | None, dim: Dims) -> bool:
    """Whether ``torch.linalg.norm(x, ord, dim)`` is a matrix norm (else a vector norm)."""
    if isinstance(dim, tuple) and len(dim) == 2:
        return True
    return ord is not None and dim is None and len(shape) == 2


# The matrix norms SymPy can write (2, -2 and 'nuc' need singular values).
MATRIX_ORDERS = ("fro", 1, -1, math.inf, -math.inf)


def linalg_norm_shape(
    shapes: list[tuple[int, ...]],
    ord: float | str | None = None,
    dim: Dims = None,
    keepdim: bool = False,
) -> tuple[int, ...]:
    (shape,) = shapes
    if ord is not None and dim is None and len(shape) not in (1, 2):
        raise ShapeError("linalg_norm_dims", shape=list(shape))
    if isinstance(dim, tuple) and len(dim) not in (1, 2):
        raise ShapeError("linalg_norm_dims", shape=list(shape))
    if matrix_norm(shape, ord, dim):
        if ord is not None and ord not in MATRIX_ORDERS:
            raise ShapeError("linalg_norm_order", ord=str(ord))
        return reduce_shape(shapes, dim if dim is not None else (-2, -1), keepdim)
    if ord == "fro" or ord == "nuc":
        raise ShapeError("linalg_norm_order", ord=repr(ord))
    return reduce_shape(shapes, dim, keepdim)


def cat(sp: ModuleType, np: ModuleType, *arrays: ndarray, dim: int = 0) -> ndarray:
    kept = cat_kept(list(arrays), [a.shape for a in arrays])
    return np.concatenate(kept, axis=axis(dim, kept[0].ndim))


def flatten(
    sp: ModuleType, np: ModuleType, a: ndarray, start_dim: int = 0, end_dim: int = -1
) -> ndarray:
    return a.reshape(flatten_shape([a.shape], start_dim, end_dim))


def squeeze(sp: ModuleType, np: ModuleType, a: ndarray, dim: Dims = None) -> ndarray:
    return a.reshape(squeeze_shape([a.shape], dim))


def unsqueeze(sp: ModuleType, np: ModuleType, a: ndarray, dim: int) -> ndarray:
    return a.reshape(unsqueeze_shape([a.shape], dim))


def transpose(sp: ModuleType, np: ModuleType, a: ndarray, dim0: int, dim1: int) -> ndarray:
    if a.ndim == 0:
        return a
    return np.swapaxes(a, axis(dim0, a.ndim), axis(dim1, a.ndim))


# --- the spellings of issue 26: running sums, picks by integer indices (rounded division: jumps.py)


def running(name: str) -> Callable[..., ndarray]:
    """cumsum / cumprod along ``dim`` (NumPy's on the object array of terms)."""

    def fold(
        sp: ModuleType, np: ModuleType, a: ndarray, dim: int, dtype: str | None = None
    ) -> ndarray:
        if a.ndim == 0:
            return objects(np, a)
        return objects(np, getattr(np, name)(a, axis=axis(dim, a.ndim)))

    return fold


def inner(sp: ModuleType, np: ModuleType, a: ndarray, b: ndarray) -> ndarray:
    """``torch.inner``: sums over the last dims (a number scales the other)."""
    if a.ndim == 0 or b.ndim == 0:
        return objects(np, a * b)
    return objects(np, np.tensordot(a, b, axes=([-1], [-1])))


def inner_shape(shapes: list[tuple[int, ...]], **_: object) -> tuple[int, ...]:
    a, b = shapes
    if not a or not b:
        return a or b
    if a[-1] != b[-1]:
        raise ShapeError("inner_shapes", left=list(a), right=list(b))
    return (*a[:-1], *b[:-1])


# --- definitions through other operations (the reference side of losses and activations) --


def _reduce(node: Node, reduction: str) -> Node:
    return node if reduction == "none" else call(reduction, node)


def _times(weight: Node | None, node: Node) -> Node:
    return node if weight is None else Binary("*", weight, node)


def _half(node: Node) -> Node:
    return Binary("*", Num(0.5), node)


def mse(a: Node, t: Node, reduction: str = "mean") -> Node:
    return _reduce(Binary("**", Binary("-", a, t), Num(2)), reduction)


def l1(a: Node, t: Node, reduction: str = "mean") -> Node:
    return _reduce(call("abs", Binary("-", a, t)), reduction)


def smooth_l1(a: Node, t: Node, reduction: str = "mean", beta: float = 1.0) -> Node:
    d = Binary("-", a, t)
    size = call("abs", d)
    if beta == 0:
        return _reduce(size, reduction)
    inside = Binary("/", _half(Binary("**", d, Num(2))), Num(beta))
    outside = Binary("-", size, Num(0.5 * beta))
    return _reduce(call("where", Binary("<", size, Num(beta)), inside, outside), reduction)


def huber(a: Node, t: Node, reduction: str = "mean", delta: float = 1.0) -> Node:
    d = Binary("-", a, t)
    size = call("abs", d)
    inside = _half(Binary("**", d, Num(2)))
    outside = Binary("*", Num(delta), Binary("-", size, Num(0.5 * delta)))
    return _reduce(call("where", Binary("<", size, Num(delta)), inside, outside), reduction)


def bce(a: Node, t: Node, weight: Node | None = None, reduction: str = "mean") -> Node:
    # PyTorch clamps each log at -100 so that a prediction of exactly 0 or 1 stays finite.
    log_p = call("maximum", call("log", a), Num(-100))
    log_q = call("maximum", call("log", Binary("-", Num(1), a)), Num(-100))
    both = Binary("+", Binary("*", t, log_p), Binary("*", Binary("-", Num(1), t), log_q))
    return _reduce(_times(weight, Unary("-", both)), reduction)


def bce_logits(
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


def softplus(
    sp: ModuleType, a: sympy.Expr, beta: float = 1.0, threshold: float = 20.0
) -> sympy.Expr:
    """PyTorch's softplus: log(1 + exp(beta*x))/beta, and x itself where beta*x > threshold
    (its derivative 1 there)."""
    b, t = sp.nsimplify(beta), sp.nsimplify(threshold)
    return sp.Piecewise((a, b * a > t), (sp.log(1 + sp.exp(b * a)) / b, True))


def gelu(sp: ModuleType, a: sympy.Expr, approximate: str = "none") -> sympy.Expr:
    if approximate == "tanh":  # PyTorch's constants: sqrt(2/pi) and 0.044715
        inner = sp.sqrt(2 / sp.pi) * (a + sp.Rational(44715, 1000000) * a**3)
        return a * (1 + sp.tanh(inner)) / 2
    return a * (1 + sp.erf(a / sp.sqrt(2))) / 2


def where_term(sp: ModuleType, c: sympy.Expr, a: sympy.Expr, b: sympy.Expr) -> sympy.Expr:
    condition = c if isinstance(c, sp.core.relational.Relational) else sp.Ne(c, 0)
    if condition is sp.true:
        return a
    if condition is sp.false:
        return b
    return sp.Piecewise((a, condition), (b, True))


def clamp_term(
    sp: ModuleType,
    a: sympy.Expr,
    low: sympy.Expr | float | None = None,
    high: sympy.Expr | float | None = None,
) -> sympy.Expr:
    if low is not None:
        a = sp.Max(a, low)
    if high is not None:
        a = sp.Min(a, high)
    return a


# --- the table ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Names:
    """How the libraries name an element-wise function where it is not by the entry's own
    name: SymPy's function, NumPy's, ``math``'s (None: ``math`` has none), and PyTorch's
    other spellings (``torch.arcsin``)."""

    sympy: str = ""
    numpy: str = ""
    math: str | None = ""
    also: tuple[str, ...] = ()


@dataclass(frozen=True)
class Kink:
    """Where an entry is not differentiable (a sentence), and the SymPy jumps that show it
    in a derivative (``Heaviside``, ``sign``, ``Piecewise``)."""

    text: str
    atoms: tuple[str, ...] = ()


NO_KINK = Kink("")


def math_op(name: str, names: Names = Names(), *, kink: Kink = NO_KINK, note: str = "") -> Op:
    """An elementwise function that torch, SymPy, NumPy and math all call by a name."""
    sympy_attr = names.sympy or name
    spelled = ["bare", "torch", "Tensor", f"np.{names.numpy or name}", *names.also]
    if names.math is not None:
        spelled.append(f"math.{names.math or name}")
    return Op(
        name,
        torch=lambda torch, a: getattr(torch, name)(a),
        sympy=lambda sp, a: getattr(sp, sympy_attr)(a),
        spelled=tuple(spelled),
        kink=kink.text,
        kink_atoms=kink.atoms,
        note=note,
    )


def operator(op: str) -> Callable[..., Node]:
    return lambda a, b: Binary(op, a, b)


def scaled(op: str) -> Callable[..., Node]:
    """add/sub with ``alpha``: ``a + alpha*b`` as PyTorch defines it."""

    def build(a: Node, b: Node, alpha: float = 1.0) -> Node:
        factor = Num(int(alpha) if float(alpha).is_integer() else alpha)
        return Binary(op, a, b if alpha == 1 else Binary("*", factor, b))

    return build


def divided(a: Node, b: Node, rounding_mode: str | None = None) -> Node:
    """div: ``a / b``, or the rounded division (``div_rounded``) with a rounding_mode."""
    if rounding_mode is None:
        return Binary("/", a, b)
    return call("div_rounded", a, b, rounding_mode=rounding_mode)


# dtype= of softmax, log_softmax, cumsum, ...: torch's floating dtypes, by attribute.
DTYPES = ("float32", "float64", "float16", "bfloat16", "float", "double", "half")
# memory_format= of clone: the layouts PyTorch names.
MEMORY_FORMATS = ("preserve_format", "contiguous_format", "channels_last", "channels_last_3d")


def torch_dtype(torch: ModuleType, name: str | None) -> torch_.dtype | None:
    """``torch.float64`` from its name (None stays None)."""
    return None if name is None else getattr(torch, name)


def vector_norm_shape(
    shapes: list[tuple[int, ...]], p: float | str = 2, dim: Dims = None, keepdim: bool = False
) -> tuple[int, ...]:
    if p == "nuc":  # the sum of singular values: no closed form for SymPy
        raise ShapeError("linalg_norm_order", ord="'nuc'")
    return reduce_shape(shapes, dim, keepdim)


def extreme_of_dims(name: str, fold: Callable[..., ndarray]) -> Op:
    """amax / amin: over one or several dims (all by default); ties share the gradient."""
    return Op(
        name,
        torch=lambda torch, a, dim=(), keepdim=False: getattr(torch, name)(
            a, dim=dim, keepdim=keepdim
        ),
        components=lambda sp, np, a, dim=(), keepdim=False: fold(sp, np, a, dim, keepdim),
        shape=reduce_shape,
        params=(Param("dim", "dims", ()), Param("keepdim", "bool", False)),
        spelled=("bare", "torch", "Tensor", f"np.{name}"),
        reduces=True,
        kind="reduction",
        kink=f"{name} is not differentiable at a tie (PyTorch shares the gradient evenly)",
        kink_atoms=("Heaviside",),
    )


def running_op(name: str) -> Op:
    """cumsum / cumprod along ``dim`` (``dtype=`` as PyTorch takes it)."""
    return Op(
        name,
        torch=lambda torch, a, dim, dtype=None: getattr(torch, name)(
            a, dim, dtype=torch_dtype(torch, dtype)
        ),
        components=running(name),
        shape=same_shape,
        params=(Param("dim", "int"), Param("dtype", "attr", None, DTYPES)),
        spelled=("bare", "torch", "Tensor", f"np.{name}"),
        kind="reduction",
        reduces=True,
    )


def reduction(name: str, function: Callable[..., ndarray], dims: str = "dims") -> Op:
    return Op(
        name,
        torch=lambda torch, a, dim=None, keepdim=False: (
            getattr(torch, name)(a) if dim is None else getattr(torch, name)(a, dim, keepdim)
        ),
        components=function,
        shape=reduce_shape,
        params=(Param("dim", dims, None), Param("keepdim", "bool", False)),
        spelled=("bare", "torch", "Tensor", f"np.{name}"),
        reduces=True,
        kind="reduction",
    )


def extreme_op(name: str) -> Op:
    return Op(
        name,
        torch=lambda torch, a, dim=None, keepdim=False: (
            getattr(torch, name)(a) if dim is None else getattr(torch, name)(a, dim, keepdim).values
        ),
        components=_extreme(name.capitalize()),
        shape=reduce_shape,
        params=(Param("dim", "int", None), Param("keepdim", "bool", False)),
        spelled=("bare", "torch", "Tensor", f"np.{name}"),
        reduces=True,
        kind="reduction",
        kink=f"{name} is not differentiable at a tie",
        kink_atoms=("Heaviside",),
    )


def loss(
    name: str,
    expand: Callable[..., Node],
    *params: Param,
    optional: tuple[str, ...] = (),
    kink: Kink = NO_KINK,
    note: str = "",
) -> Op:
    """A loss of ``torch.nn.functional`` (input, target, optional weights, ``reduction``),
    its reference a definition through other operations (``expand``)."""
    tensors = ("input", "target", *optional)

    def run(
        torch: ModuleType, a: torch_.Tensor, t: torch_.Tensor, **kwargs: float | str
    ) -> torch_.Tensor:
        return getattr(torch.nn.functional, name)(a, t, **kwargs)

    return Op(
        name,
        torch=run,
        expand=expand,
        shape=loss_shape,
        tensors=tensors,
        optional=frozenset(optional),
        params=(*params, Param("reduction", "text", "mean", REDUCTION)),
        spelled=("bare", "F"),
        kink=kink.text,
        kink_atoms=kink.atoms,
        note=note,
        reduces=True,
        kind="loss",
    )
