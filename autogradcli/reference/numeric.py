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

# Richardson extrapolation (``extrapolated_slopes``): central differences per element at the
# steps s/2, s/8, ..., s/2/4**(LEVELS-1) with s the power of two at or above max(|x|, 1)
# (and further down for small |x|, ``_grid``); 2 forward passes each. Fewer levels (the
# middle ones) where the budget is short; below MIN_LEVELS there is no error estimate.
LEVELS = 12
SMALL = 8  # more steps for 0 < |x| < 1, one per factor 4 below 1
MIN_LEVELS = 4
ROUNDING_ULPS = 2.0  # the float64 forward pass's own error, in units of u * |f|
UNIT = float(np.finfo(np.float64).eps) / 2  # float64's unit roundoff


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
    loss = _loss(f, weights)
    return {n: _slopes(loss, work, n, eps) for n in names}


def _loss(f: Forward, weights: np.ndarray | None) -> Forward:
    """sum(f(values) * weights) as a 0-d array (weights None: f's one element)."""

    def loss(v: Values) -> np.ndarray:
        out = np.asarray(f(v), dtype=np.float64)
        if weights is None:
            return np.asarray(_scalar(out, "a gradient without weights"))
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != out.shape:
            raise ValueError(f"weights of shape {list(w.shape)} for an output of {list(out.shape)}")
        return np.asarray(np.sum(out * w))

    return loss


def _slopes(loss: Forward, work: Values, name: str, eps: float) -> Slopes:
    rows = list(_differences(loss, work, name, eps))
    return Slopes(
        *(
            np.array([getattr(r, part) for r in rows], dtype=np.float64).reshape(work[name].shape)
            for part in ("central", "left", "right")
        )
    )


@dataclass(frozen=True)
class Extrapolated:
    """Per input element: Richardson's estimate of the derivative (``value``), an estimate
    of its absolute error (``error``; inf where there is none: the differences never
    settle, or are not finite), and the part of that error float64's rounding of the
    forward pass accounts for (``rounding``)."""

    value: np.ndarray
    error: np.ndarray
    rounding: np.ndarray

    def loose(self, rtol: float, atol: float, scale: float = 1.0) -> np.ndarray:
        """Elements whose estimated error (times ``scale``) is more than a tenth of
        ``atol + rtol * |scale * value|``: too loose to check at that tolerance."""
        with np.errstate(invalid="ignore", over="ignore"):
            room = (atol + rtol * np.abs(scale * self.value)) / 10
            return ~(scale * self.error <= room)

    def coarse(self) -> np.ndarray:
        """Elements where float64's rounding of the forward pass is at least half the
        estimated error: the forward pass in float64 is too coarse to say more there."""
        with np.errstate(invalid="ignore"):
            return np.isfinite(self.error) & (2 * self.rounding >= self.error)


def extrapolate(central: np.ndarray, steps: np.ndarray, size: np.ndarray) -> Extrapolated:
    """Richardson's table along the last axis of ``central``: central differences at steps
    that shrink by 4 (``steps``, same shape), so that D(h) = f' + a h^2 + b h^4 + c h^6 ...
    R1_k = (16 D_k - D_(k-1)) / 15 and R2_k = (256 R1_k - R1_(k-1)) / 255 remove the h^2
    and h^4 terms. The error of R2_k is estimated as max(|R2_k - R1_k|, |R2_k - R2_(k-1)|)
    plus rounding: 2 * ROUNDING_ULPS * u * size / h_k, where ``size`` is the largest |f|
    seen at that element (the differences divide f's rounding by the step). The level with
    the smallest estimate is taken; fewer than MIN_LEVELS levels give no estimate (inf)."""
    central = np.asarray(central, dtype=np.float64)
    count, levels = central.shape[0], central.shape[-1]
    if levels < MIN_LEVELS:
        last = central[..., -1] if levels else np.full(count, math.nan)
        nowhere = np.full(count, math.inf)
        return Extrapolated(np.array(last), nowhere, nowhere.copy())
    rows = np.arange(count)
    with np.errstate(all="ignore"):
        r1 = (16 * central[:, 1:] - central[:, :-1]) / 15  # r1[:, j]: level j + 1
        r2 = (256 * r1[:, 1:] - r1[:, :-1]) / 255  # r2[:, j]: level j + 2
        settled = np.maximum(np.abs(r2[:, 1:] - r1[:, 2:]), np.abs(r2[:, 1:] - r2[:, :-1]))
        rounding = 2 * ROUNDING_ULPS * UNIT * np.asarray(size)[:, None] / steps[:, 3:]
        error = settled + rounding
        error = np.where(np.isfinite(error), error, math.inf)
    best = np.argmin(error, axis=1)
    return Extrapolated(r2[:, 1:][rows, best], error[rows, best], rounding[rows, best])


def _grid(x: float) -> list[float]:
    """Richardson's steps for an element at ``x``: from s/2 (s the power of two at or above
    max(|x|, 1)) down by 4, LEVELS of them, and where 0 < |x| < 1 one more per factor 4
    that |x| is below 1 (at most SMALL more), so that some steps are below |x| itself."""
    scale = 2.0 ** math.ceil(math.log2(max(abs(x), 1.0)))
    extra = 0
    if 0 < abs(x) < 1:
        extra = min(SMALL, math.ceil(-math.log(abs(x), 4)))
    return [scale / 2 / 4**k for k in range(LEVELS + extra)]


def _middle(grid: list[float], levels: int) -> list[float]:
    """The middle ``levels`` steps of ``grid`` (all of it when it has no more)."""
    first = max(0, (len(grid) - levels) // 2)
    return grid[first : first + levels]


def _plan(flats: list[np.ndarray], names: int) -> list[list[list[float]]]:
    """Each element's steps within MAX_EVALUATIONS (after 2 forward passes per element and
    1 per name for the plain differences): its whole grid when every grid fits, else the
    middle levels of each, as many as fit for all (none below MIN_LEVELS)."""
    grids = [[_grid(float(x)) if math.isfinite(x) else [] for x in flat] for flat in flats]
    elements = sum(flat.size for flat in flats)
    spare = MAX_EVALUATIONS - 2 * elements - names
    if 2 * sum(len(g) for grid in grids for g in grid) <= spare:
        return grids
    levels = min(LEVELS, spare // (2 * elements)) if elements else 0
    levels = levels if levels >= MIN_LEVELS else 0
    return [[_middle(g, levels) for g in grid] for grid in grids]


def _richardson(loss: Forward, work: Values, name: str, grid: list[list[float]]) -> Extrapolated:
    """Central differences of ``loss`` along each element of ``work[name]`` at its steps
    (``grid``), extrapolated. The step actually taken is half (x + h) - (x - h) as float64
    rounds them."""
    flat = work[name].reshape(-1)
    count, width = flat.size, max((len(g) for g in grid), default=0)
    central = np.full((count, width), math.nan)
    steps = np.ones((count, width))
    size = np.zeros(count)
    for i, hs in enumerate(grid):
        x0 = float(flat[i])
        for j, h in enumerate(hs):
            up, down = x0 + h, x0 - h
            flat[i] = up
            plus = float(_evaluate(loss, work))
            flat[i] = down
            minus = float(_evaluate(loss, work))
            flat[i] = x0
            with np.errstate(all="ignore"):
                central[i, j] = (plus - minus) / (up - down)
            steps[i, j] = (up - down) / 2
            size[i] = max([size[i], *(abs(v) for v in (plus, minus) if math.isfinite(v))])
    shape = work[name].shape
    found = extrapolate(central, steps, size)
    return Extrapolated(*(np.reshape(a, shape) for a in (found.value, found.error, found.rounding)))


def extrapolated_slopes(
    f: Forward,
    values: Values,
    weights: np.ndarray | None,
    names: Sequence[str],
    eps: float = DEFAULT.eps,
) -> dict[str, tuple[Slopes, Extrapolated]]:
    """``numeric_slopes`` (at ``eps``: kinks and the domain's edges), and Richardson's
    extrapolation of central differences with an error estimate per element (``_grid``).
    Cost: 2 forward passes per element and 1 per name, plus 2 per element and step: 2 + 2 *
    12 = 26 per element with |x| >= 1/4, up to 2 + 2 * 20 = 42 for |x| near 0 (about 769
    elements within MAX_EVALUATIONS). Larger inputs get fewer steps, the middle ones, and
    from about MAX_EVALUATIONS / 10 elements on none: no estimate (error inf)."""
    work = _copy(values)
    plain = 2 * sum(work[n].size for n in names) + len(names)
    if plain > MAX_EVALUATIONS:
        _check_budget(plain, "gradient")  # raises, counting the plain differences
    plans = _plan([work[n].reshape(-1) for n in names], len(names))
    _check_budget(plain + 2 * sum(len(g) for p in plans for g in p), "gradient")
    loss = _loss(f, weights)
    return {
        n: (_slopes(loss, work, n, eps), _richardson(loss, work, n, plan))
        for n, plan in zip(names, plans, strict=True)
    }


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
