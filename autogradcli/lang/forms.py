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


def softmax(sp: ModuleType, np: ModuleType, a: ndarray, dim: int) -> ndarray:
    e = _exp(sp, np, a)
    return e / np.sum(e, axis=np_axes(dim, a.ndim), keepdims=True)


def log_softmax(sp: ModuleType, np: ModuleType, a: ndarray, dim: int) -> ndarray:
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


def norm(
    sp: ModuleType,
    np: ModuleType,
    a: ndarray,
    p: int | str = 2,
    dim: Dims = None,
    keepdim: bool = False,
) -> ndarray:
    total = np.sum(a * a, axis=np_axes(dim, a.ndim), keepdims=keepdim and a.ndim > 0)
    return np.vectorize(sp.sqrt, otypes=[object])(objects(np, total))


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


def _numbers(sp: ModuleType, np: ModuleType, target: ndarray, what: str) -> ndarray:
    """A target's values as Python numbers (it must be a constant known as a number)."""
    flat = []
    for cell in np.asarray(target, dtype=object).reshape(-1):
        if not (isinstance(cell, (int, float)) or getattr(cell, "is_Number", False)):
            raise ShapeError("target_not_constant", what=what)
        flat.append(float(cell))
    return np.array(flat, dtype=float).reshape(np.shape(target))


def _reduce_loss(sp: ModuleType, np: ModuleType, losses: ndarray, reduction: str) -> ndarray:
    if reduction == "none":
        return objects(np, losses)
    if reduction == "sum":
        return objects(np, np.sum(losses))
    return objects(np, np.sum(losses) * sp.Rational(1, max(losses.size, 1)))


def _classes(
    sp: ModuleType, np: ModuleType, x: ndarray, target: ndarray, log_probs: ndarray, what: str
) -> ndarray:
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


def cross_entropy(
    sp: ModuleType,
    np: ModuleType,
    x: ndarray,
    target: ndarray,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> ndarray:
    log_probs = log_softmax(sp, np, x, -1)
    smooth = sp.nsimplify(label_smoothing) if label_smoothing else 0
    count = x.shape[-1]
    if target.shape == x.shape:  # class probabilities
        t = target * (1 - smooth) + smooth * sp.Rational(1, count) if smooth else target
        losses = -np.sum(t * log_probs, axis=-1)
        if reduction == "mean":  # PyTorch divides by the batch size here
            batch = x.shape[0] if x.ndim == 2 else 1
            return objects(np, np.sum(losses) * sp.Rational(1, max(batch, 1)))
        return _reduce_loss(sp, np, np.asarray(losses, dtype=object), reduction)
    losses = _classes(sp, np, x, target, log_probs, "cross_entropy's target of class indices")
    if smooth:
        uniform = -np.sum(log_probs, axis=-1) * sp.Rational(1, count)
        losses = losses * (1 - smooth) + smooth * uniform
    return _reduce_loss(sp, np, np.asarray(losses, dtype=object), reduction)


def nll_loss(
    sp: ModuleType, np: ModuleType, x: ndarray, target: ndarray, reduction: str = "mean"
) -> ndarray:
    losses = _classes(sp, np, x, target, x, "nll_loss's target")
    return _reduce_loss(sp, np, np.asarray(losses, dtype=object), reduction)


def cross_entropy_torch(
    torch: ModuleType,
    x: torch_.Tensor,
    t: torch_.Tensor,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> torch_.Tensor:
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
