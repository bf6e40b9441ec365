"""A numerical third opinion: central finite differences in float64 over plain callables.

No autograd here: ``f`` is any forward pass that takes ``{name: array}`` and returns an array.
Inputs are perturbed in a private float64 copy; ``f`` must not modify the arrays it is given.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from autogradcli.errors import LimitError
from autogradcli.progress import step

Values = dict[str, np.ndarray]
Forward = Callable[[Values], np.ndarray]


@dataclass(frozen=True)
class NumericTolerance:
    """Perturbation and tolerances, torch.autograd.gradcheck's defaults."""

    eps: float = 1e-6
    atol: float = 1e-5
    rtol: float = 1e-3


DEFAULT = NumericTolerance()
MAX_EVALUATIONS = 20_000  # forward passes; a numeric gradient needs 2 per input element


def _copy(values: Values) -> Values:
    """Contiguous float64 copies, so that ``reshape(-1)`` is a view we can perturb."""
    return {name: np.array(v, dtype=np.float64, order="C", copy=True) for name, v in values.items()}


def _check_budget(evaluations: int, what: str) -> None:
    if evaluations > MAX_EVALUATIONS:
        raise LimitError(
            "numeric_budget", what=what, evaluations=evaluations, limit=MAX_EVALUATIONS
        )
    _COUNT.update(what=f"numeric {what}", done=0, total=evaluations)


# Forward passes of the numeric check under way, for a front end's progress bar.
_COUNT: dict[str, object] = {"what": "", "done": 0, "total": 0}


def _counted() -> None:
    """One more forward pass of the numeric check, told to the front end now and then."""
    done, total = int(_COUNT["done"]) + 1, int(_COUNT["total"])  # type: ignore[call-overload]
    _COUNT["done"] = done
    if total and (done == total or done % max(1, total // 100) == 0):
        step(str(_COUNT["what"]), done, total)


def _evaluate(f: Forward, work: Values) -> np.ndarray:
    """``f(work)`` as a float64 array that does not alias ``work``."""
    _counted()
    return np.array(f(work), dtype=np.float64, copy=True)


def _scalar(out: np.ndarray, what: str) -> float:
    if out.size != 1:
        raise ValueError(f"{what} needs a one-element output; f returned shape {list(out.shape)}")
    return float(out.reshape(()))


@dataclass(frozen=True)
class Slopes:
    """Per input element: the central difference (the estimate) and the two one-sided ones,
    (f(x) - f(x - eps)) / eps and (f(x + eps) - f(x)) / eps, which come from the same
    evaluations plus f(x). Where the one-sided slopes disagree the step crosses a kink;
    where one of them is NaN the step leaves the function's domain."""

    central: np.ndarray
    left: np.ndarray
    right: np.ndarray

    def across_kink(self, tol: NumericTolerance = DEFAULT) -> np.ndarray:
        """Elements whose one-sided slopes differ by more than the tolerance allows."""
        with np.errstate(invalid="ignore"):
            size = np.maximum(np.abs(self.left), np.abs(self.right))
            return np.abs(self.left - self.right) > tol.atol + tol.rtol * size

    def off_domain(self) -> np.ndarray:
        """Elements where the function is NaN on a side of the step (outside its domain, or
        at a domain edge within eps), so that the central difference is NaN."""
        return np.isnan(self.central) & (np.isnan(self.left) | np.isnan(self.right))


def _differences(
    f: Forward, work: Values, name: str, eps: float, one_sided: bool = True
) -> Iterator[Slopes]:
    """For each element i of ``work[name]``: the slopes of f at x along e_i (without
    ``one_sided``, f(x) is not evaluated and the one-sided slopes are NaN)."""
    flat = work[name].reshape(-1)
    here = _evaluate(f, work) if one_sided and flat.size else np.asarray(math.nan)
    for i in range(flat.size):
        x0 = flat[i]
        flat[i] = x0 + eps
        plus = _evaluate(f, work)
        flat[i] = x0 - eps
        minus = _evaluate(f, work)
        flat[i] = x0
        with np.errstate(all="ignore"):
            yield Slopes((plus - minus) / (2 * eps), (here - minus) / eps, (plus - here) / eps)


def _central(f: Forward, work: Values, name: str, eps: float) -> Iterator[np.ndarray]:
    """For each element i of ``work[name]``: (f(x + eps e_i) - f(x - eps e_i)) / (2 eps)."""
    return (s.central for s in _differences(f, work, name, eps, one_sided=False))


def numeric_slopes(
    f: Forward,
    values: Values,
    weights: np.ndarray | None,
    names: Sequence[str],
    eps: float = DEFAULT.eps,
) -> dict[str, Slopes]:
    """Slopes of sum(f(values) * weights) (weights None: f must return one element) w.r.t.
    each element of each name, shaped like values[name] (2 forward passes per element, and
    one at the point per name)."""
    work = _copy(values)
    _check_budget(2 * sum(work[n].size for n in names) + len(names), "gradient")

    def loss(v: Values) -> np.ndarray:
        out = np.asarray(f(v), dtype=np.float64)
        if weights is None:
            return np.asarray(_scalar(out, "a gradient without weights"))
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != out.shape:
            raise ValueError(f"weights of shape {list(w.shape)} for an output of {list(out.shape)}")
        return np.asarray(np.sum(out * w))

    result = {}
    for n in names:
        rows = list(_differences(loss, work, n, eps))
        result[n] = Slopes(
            *(
                np.array([getattr(r, part) for r in rows], dtype=np.float64).reshape(work[n].shape)
                for part in ("central", "left", "right")
            )
        )
    return result


def numeric_vjp(
    f: Forward,
    values: Values,
    weights: np.ndarray | None,
    names: Sequence[str],
    eps: float = DEFAULT.eps,
) -> dict[str, np.ndarray]:
    """Gradient of sum(f(values) * weights) (weights None: f must return one element) w.r.t.
    each name, by central differences, shaped like values[name]."""
    return {n: s.central for n, s in numeric_slopes(f, values, weights, names, eps).items()}


def numeric_jacobian(
    f: Forward, values: Values, names: Sequence[str], eps: float = DEFAULT.eps
) -> dict[str, np.ndarray]:
    """d f / d values[name], shaped f_shape + x_shape (2 forward calls per input element,
    plus one for the output shape when there are no input elements)."""
    work = _copy(values)
    total = sum(work[n].size for n in names)
    _check_budget(2 * total + (total == 0), "Jacobian")
    columns = {n: list(_central(f, work, n, eps)) for n in names}
    firsts = [c[0] for c in columns.values() if c]
    out_shape = firsts[0].shape if firsts else _evaluate(f, work).shape
    return {
        n: (np.stack(c, axis=-1) if c else np.zeros((*out_shape, 0))).reshape(
            out_shape + work[n].shape
        )
        for n, c in columns.items()
    }


def numeric_hessian(
    f: Forward, values: Values, names: Sequence[str], eps: float = 1e-4
) -> dict[tuple[str, str], np.ndarray]:
    """Second derivatives of a one-element f for every ordered pair (a, b) of names, shaped
    a_shape + b_shape, by (f(+,+) - f(+,-) - f(-,+) + f(-,-)) / (4 eps^2); on the diagonal both
    steps fall on one element. Each unordered element pair is computed once, so (a, a) is
    symmetric and (b, a) is the transpose of (a, b)."""
    work = _copy(values)
    slots = [(work[n].reshape(-1), i) for n in names for i in range(work[n].size)]
    size = len(slots)
    _check_budget(4 * size * (size + 1) // 2, "Hessian")
    hessian = np.zeros((size, size))
    for p, (xp, i) in enumerate(slots):
        for q in range(p, size):
            xq, j = slots[q]
            xp0, xq0 = xp[i], xq[j]
            total = 0.0
            for sp, sq in ((1, 1), (1, -1), (-1, 1), (-1, -1)):
                xp[i] = xp0 + sp * eps
                xq[j] = xq[j] + sq * eps  # the same element when p == q: steps add up
                total += sp * sq * _scalar(_evaluate(f, work), "a Hessian")
                xq[j], xp[i] = xq0, xp0
            hessian[p, q] = hessian[q, p] = total / (4 * eps**2)
    starts = np.cumsum([0] + [work[n].size for n in names])
    return {
        (a, b): hessian[starts[ia] : starts[ia + 1], starts[ib] : starts[ib + 1]].reshape(
            work[a].shape + work[b].shape
        )
        for ia, a in enumerate(names)
        for ib, b in enumerate(names)
    }


def numeric_derivative(
    f: Callable[[np.ndarray], np.ndarray], x: np.ndarray, order: int, eps: float | None = None
) -> np.ndarray:
    """Elementwise k-th derivative of an elementwise f at x: the binomial central difference
    D(h) = sum_j (-1)^j C(k, j) f(x + (k/2 - j) h) / h^k, Richardson-extrapolated as
    (4 D(h/2) - D(h)) / 3; h defaults to 0.01 * 1.5**(k-1), which keeps orders 1..8 within
    about 1e-4 relative for smooth functions at moderate x."""
    return numeric_derivative_with_error(f, x, order, eps)[0]


def numeric_derivative_with_error(
    f: Callable[[np.ndarray], np.ndarray], x: np.ndarray, order: int, eps: float | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``numeric_derivative`` and, per element, a bound on what float64 rounding of the
    f values costs it: the differences divide by h^k, so an error of one unit in the last
    place of |f| grows to about 2^k |f| u / h^k (times 10 for safety). x**2 at 100 has a
    5th derivative of 0 that the differences give as about 0.2."""
    if order < 1:
        raise ValueError(f"the order of a derivative must be at least 1, not {order}")
    h = 0.01 * 1.5 ** (order - 1) if eps is None else eps
    x = np.asarray(x, dtype=np.float64)
    scale = np.zeros(x.shape)

    def central(step: float) -> np.ndarray:
        nonlocal scale
        terms = []
        for j in range(order + 1):
            value = np.asarray(f(x + (order / 2 - j) * step), dtype=np.float64)
            with np.errstate(invalid="ignore"):
                scale = np.fmax(scale, np.abs(value))
            terms.append((-1) ** j * math.comb(order, j) * value)
        return np.asarray(sum(terms) / step**order, dtype=np.float64)

    value = (4 * central(h / 2) - central(h)) / 3
    unit = np.finfo(np.float64).eps
    amplification = 2**order * (4 / 3 * (2 / h) ** order + 1 / 3 / h**order)
    return value, 10 * unit * scale * amplification


def agree(
    numeric: np.ndarray, other: np.ndarray, tol: NumericTolerance = DEFAULT
) -> tuple[bool, float]:
    """(every entry has |a - b| <= atol + rtol * |b|, NaN matching NaN and infinities matching
    equal infinities; the largest |a - b| over entries finite in both, 0.0 if none)."""
    a, b = np.asarray(numeric, dtype=np.float64), np.asarray(other, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"cannot compare shapes {list(a.shape)} and {list(b.shape)}")
    finite = np.isfinite(a) & np.isfinite(b)
    with np.errstate(invalid="ignore"):
        error = np.abs(a - b)
        close = finite & (error <= tol.atol + tol.rtol * np.abs(b))
    special = (np.isnan(a) & np.isnan(b)) | (np.isinf(a) & (a == b))
    return bool(np.all(close | special)), float(error[finite].max()) if finite.any() else 0.0
