"""The reference forms that pick SymPy terms by integer indices (constants whose numbers
the reference reads): the class losses (``cross_entropy``, ``nll_loss`` with ``weight`` and
``ignore_index``, over (C), (N, C) or (N, C, d1, ...)), ``gather``, ``F.one_hot`` and indexing
with integer tensors (``take``: ``x[torch.arange(4), ys]``). Like ``forms.py``, every form
takes the module (``sympy``, ``numpy``, ``torch``) as an argument and imports none of them."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from autogradcli.errors import ShapeError
from autogradcli.lang.forms import log_softmax, objects
from autogradcli.lang.ops import axis

if TYPE_CHECKING:  # the modules come as arguments: none is imported to run
    from types import ModuleType

    import torch as torch_
    from numpy import ndarray

# The place of an index tensor in a ``take`` pattern (x[torch.arange(4), ys]).
TENSOR = "#"


def _numbers(sp: ModuleType, np: ModuleType, target: ndarray, what: str) -> ndarray:
    """A target's values as Python numbers (it must be a constant known as a number)."""
    flat = []
    for cell in np.asarray(target, dtype=object).reshape(-1):
        if not (isinstance(cell, (int, float)) or getattr(cell, "is_Number", False)):
            raise ShapeError("target_not_constant", what=what)
        flat.append(float(cell))
    return np.array(flat, dtype=float).reshape(np.shape(target))


def _reduce_loss(
    sp: ModuleType, np: ModuleType, losses: ndarray, reduction: str, total: object = None
) -> ndarray:
    """The losses as ``reduction`` says; 'mean' divides by ``total`` (default: their count)."""
    if reduction == "none":
        return objects(np, losses)
    if reduction == "sum":
        return objects(np, np.sum(losses))
    if total is None:
        return objects(np, np.sum(losses) * sp.Rational(1, max(losses.size, 1)))
    return objects(np, sp.Add(*losses.reshape(-1)) / total)


def _class_dim(x: ndarray) -> int:
    """PyTorch's class dim: 0 of an input (C,), else 1 of (N, C, d1, ...)."""
    return 0 if x.ndim == 1 else 1


def _rows(np: ModuleType, x: ndarray) -> ndarray:
    """One row of classes per sample, in the order of the target's elements."""
    return np.moveaxis(x, _class_dim(x), -1).reshape(-1, x.shape[_class_dim(x)])


def _classes(
    sp: ModuleType,
    np: ModuleType,
    target: ndarray,
    log_probs: ndarray,
    what: str,
    weight: ndarray | None = None,
    ignore_index: int = -100,
) -> tuple[ndarray, ndarray]:
    """-w[t] log p[t] of each sample (0 where its target is ``ignore_index``), and the
    weights w[t] (0 there): ``log_probs`` shaped like the input, ``target`` indices."""
    picks = _numbers(sp, np, target, what)
    count = log_probs.shape[_class_dim(log_probs)]
    rows = _rows(np, log_probs)
    losses, weights = [], []
    for n, cls in enumerate(picks.reshape(-1)):
        if cls == ignore_index:
            losses.append(sp.Integer(0))
            weights.append(sp.Integer(0))
            continue
        if cls != int(cls) or not 0 <= cls < count:
            raise ShapeError("class_out_of_range", value=float(cls), classes=count)
        w = sp.Integer(1) if weight is None else weight[int(cls)]
        losses.append(-w * rows[n, int(cls)])
        weights.append(w)
    shape = picks.shape
    return (
        np.array(losses, dtype=object).reshape(shape),
        np.array(weights, dtype=object).reshape(shape),
    )


def _along_classes(np: ModuleType, x: ndarray, weight: ndarray) -> ndarray:
    """``weight`` (C,) shaped to multiply ``x`` along its class dim."""
    shape = [1] * x.ndim
    shape[_class_dim(x)] = x.shape[_class_dim(x)]
    return weight.reshape(shape)


def cross_entropy(
    sp: ModuleType,
    np: ModuleType,
    x: ndarray,
    target: ndarray,
    weight: ndarray | None = None,
    reduction: str = "mean",
    ignore_index: int = -100,
    label_smoothing: float = 0.0,
) -> ndarray:
    """PyTorch's cross_entropy (``cross_entropy_loss_prob_target`` and
    ``cross_entropy_loss_label_smoothing`` in ATen's LossNLL.cpp), over the class dim."""
    dim = _class_dim(x)
    log_probs = log_softmax(sp, np, x, dim)
    smooth = sp.nsimplify(label_smoothing) if label_smoothing else 0
    count = x.shape[dim]
    scale = 1 if weight is None else _along_classes(np, x, weight)
    if target.shape == x.shape:  # class probabilities
        t = target * (1 - smooth) + smooth * sp.Rational(1, count) if smooth else target
        losses = -np.sum(t * log_probs * scale, axis=dim)
        if reduction == "mean":  # PyTorch divides by the elements less the class dim
            batch = max(x.size // max(count, 1), 1)
            return objects(np, np.sum(losses) * sp.Rational(1, batch))
        return _reduce_loss(sp, np, np.asarray(losses, dtype=object), reduction)
    what = "cross_entropy's target of class indices"
    losses, weights = _classes(sp, np, target, log_probs, what, weight, ignore_index)
    total = np.sum(weights) if reduction == "mean" else None
    out = _reduce_loss(sp, np, losses, reduction, total)
    if not smooth:
        return out
    uniform = -np.sum(log_probs * scale, axis=dim)
    kept = _numbers(sp, np, target, what) != ignore_index
    uniform = np.where(kept, uniform, sp.Integer(0))
    spread = _reduce_loss(sp, np, np.asarray(uniform, dtype=object), reduction, total)
    return objects(np, out * (1 - smooth) + spread * (smooth * sp.Rational(1, count)))


def nll_loss(
    sp: ModuleType,
    np: ModuleType,
    x: ndarray,
    target: ndarray,
    weight: ndarray | None = None,
    reduction: str = "mean",
    ignore_index: int = -100,
) -> ndarray:
    """-w[t] x[n, t] per sample; 'mean' divides by the sum of the weights taken."""
    losses, weights = _classes(sp, np, target, x, "nll_loss's target", weight, ignore_index)
    total = np.sum(weights) if reduction == "mean" else None
    return _reduce_loss(sp, np, losses, reduction, total)


def cross_entropy_torch(
    torch: ModuleType,
    x: torch_.Tensor,
    t: torch_.Tensor,
    weight: torch_.Tensor | None = None,
    reduction: str = "mean",
    ignore_index: int = -100,
    label_smoothing: float = 0.0,
) -> torch_.Tensor:
    indices = t.dim() == x.dim() - 1
    target = t.long() if indices else t
    f = torch.nn.functional.cross_entropy
    return f(
        x,
        target,
        weight=weight,
        reduction=reduction,
        ignore_index=ignore_index,
        label_smoothing=label_smoothing,
    )


def nll_loss_torch(
    torch: ModuleType,
    x: torch_.Tensor,
    t: torch_.Tensor,
    weight: torch_.Tensor | None = None,
    reduction: str = "mean",
    ignore_index: int = -100,
) -> torch_.Tensor:
    f = torch.nn.functional.nll_loss
    return f(x, t.long(), weight=weight, reduction=reduction, ignore_index=ignore_index)


def _indices(sp: ModuleType, np: ModuleType, index: ndarray, what: str) -> ndarray:
    """An index tensor's numbers as integers (each must be a whole number)."""
    found = _numbers(sp, np, index, what)
    if (found != np.round(found)).any():
        raise ShapeError("target_not_constant", what=what)
    return found.astype(np.int64)


def one_hot(sp: ModuleType, np: ModuleType, a: ndarray, num_classes: int = -1) -> ndarray:
    """``F.one_hot``: 1 at each index, 0 elsewhere (constants: no derivative)."""
    picks = _indices(sp, np, a, "one_hot's input")
    out = np.full((*picks.shape, num_classes), sp.Integer(0), dtype=object)
    for pos in np.ndindex(picks.shape):
        k = int(picks[pos])
        if not 0 <= k < num_classes:
            raise ShapeError("class_out_of_range", value=float(k), classes=num_classes)
        out[(*pos, k)] = sp.Integer(1)
    return out


def one_hot_shape(shapes: list[tuple[int, ...]], num_classes: int = -1) -> tuple[int, ...]:
    if num_classes < 0:  # PyTorch counts the classes from the values, unknown here
        raise ShapeError("one_hot_classes")
    return (*shapes[0], num_classes)


def gather(sp: ModuleType, np: ModuleType, a: ndarray, index: ndarray, dim: int) -> ndarray:
    """``torch.gather(a, dim, index)``: out[i][j] = a[index[i][j]][j] (for dim 0)."""
    picks = _indices(sp, np, index, "gather's index")
    d = axis(dim, a.ndim)
    out = np.empty(picks.shape, dtype=object)
    for pos in np.ndindex(picks.shape):
        k = int(picks[pos])
        size = a.shape[d] if a.ndim else 1
        if not -size <= k < size:
            raise ShapeError("gather_index", value=k, size=size, dim=dim)
        where = list(pos) or [0] * a.ndim  # a 0-d index of a 1-d input
        if a.ndim:
            where[d] = k % size
        out[pos] = a[tuple(where)] if a.ndim else a[()]
    return out


def gather_shape(shapes: list[tuple[int, ...]], dim: int) -> tuple[int, ...]:
    """The index's shape: as many dims as the input (a number counts as one), no larger in
    the others; an index of no elements takes any shape, as in PyTorch."""
    a, index = shapes
    d = axis(dim, len(a))
    if math.prod(index) == 0:
        return index
    wide, deep = a or (1,), index or (1,)
    if len(wide) != len(deep) or any(
        n > m for i, (n, m) in enumerate(zip(deep, wide, strict=True)) if i != d
    ):
        raise ShapeError("gather_shapes", input=list(a), index=list(index), dim=dim)
    return index


def subscript(pattern: tuple[object, ...], tensors: list[object]) -> tuple[object, ...]:
    """Python's subscript of ``value[items]`` with index tensors at the ``TENSOR`` places."""
    given = iter(tensors)
    items: list[object] = []
    for item in pattern:
        if item == TENSOR:
            items.append(next(given))
        elif isinstance(item, tuple):
            items.append(list(item))
        elif hasattr(item, "python"):
            items.append(item.python())  # type: ignore[attr-defined]
        else:
            items.append(item)
    return tuple(items)


def take(
    sp: ModuleType, np: ModuleType, a: ndarray, *index: ndarray, pattern: tuple[object, ...]
) -> ndarray:
    """``a[..., index tensors, ...]``: NumPy's advanced indexing, PyTorch's rules."""
    picks = [_indices(sp, np, i, "an index tensor") for i in index]
    try:
        return objects(np, a[subscript(pattern, picks)])
    except IndexError as exc:
        raise ShapeError("bad_index", shape=list(a.shape), detail=str(exc)) from None


def take_shape(shapes: list[tuple[int, ...]], pattern: tuple[object, ...]) -> tuple[int, ...]:
    import numpy as np

    probe = np.broadcast_to(np.empty((), dtype=bool), shapes[0])
    zeros = [np.zeros(s, dtype=np.int64) for s in shapes[1:]]
    try:
        return tuple(probe[subscript(pattern, zeros)].shape)
    except IndexError as exc:
        raise ShapeError("bad_index", shape=list(shapes[0]), detail=str(exc)) from None


def take_torch(
    torch: ModuleType, a: torch_.Tensor, *index: torch_.Tensor, pattern: tuple[object, ...]
) -> torch_.Tensor:
    return a[subscript(pattern, [i.long() for i in index])]
