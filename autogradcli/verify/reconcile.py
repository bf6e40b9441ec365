"""Stage 5: reconcile the reference with what IEEE arithmetic does at the edges of a
function's domain, and with what the function does where an operation sits at its kink;
each returns a new reference (and the notes that say what happened)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from autogradcli.notes import Note
from autogradcli.reference import Model, NumericModel
from autogradcli.reference.evaluate import FLOAT64, Arith
from autogradcli.reference.expected import Expected
from autogradcli.reference.precise import Precise, precise

if TYPE_CHECKING:
    from autogradcli.reference.components import ComponentModel


def domain_edges(
    model: NumericModel, seen: dict[str, np.ndarray], weights: np.ndarray | None, expected: Expected
) -> tuple[Expected, list[Note]]:
    """Points where SymPy's formula needs help or a word.

    - The output is NaN in the reference (outside the real domain), or an input is not
      finite: said in a note.
    - SymPy's derivative is 0/0 or 0*inf where the function is defined (``x**y`` at x = 0,
      ``(x**2)**0.5`` at 0): the one-sided slopes decide. Where they agree their limit, by
      central differences in float64, is the reference; where they differ the point is a
      kink (left out of the check while autograd is finite there).

    ``model`` is the numeric model of the same program (used only where it is needed).
    """
    notes: list[Note] = []
    finite_inputs = all(np.all(np.isfinite(v)) for v in seen.values())
    output = expected.output
    if np.isnan(output).any() and finite_inputs:
        notes.append(Note("output_nan", {"elements": int(np.isnan(output).sum())}))
    if not finite_inputs:
        notes.append(Note("nonfinite_input"))
    names = [n for n in model.expression.variables if n in expected.grads]  # a fixed order
    undefined = {n: np.isnan(expected.grads[n]) & ~expected.kinks[n] for n in names}
    defined = bool(np.all(np.isfinite(output)))
    if not (defined and finite_inputs) or not any(m.any() for m in undefined.values()):
        return expected, notes
    limits = model.evaluate(seen, weights, frozenset(names))
    grads, kinks, unknown = dict(expected.grads), dict(expected.kinks), dict(expected.unknown)
    kink_notes = dict(expected.kink_notes)
    for name, mask in undefined.items():
        if not mask.any():
            continue
        low, _ = limits.bounds[name]
        across = mask & ~np.isnan(low)
        grads[name] = np.where(mask, np.broadcast_to(limits.grads[name], mask.shape), grads[name])
        off = mask & limits.unknown[name]  # no limit from one side only: left out
        kinks[name] = kinks[name] | across
        unknown[name] = unknown.get(name, np.zeros(mask.shape, bool)) | off
        kink_notes[name] = kink_notes[name] | ({"off_domain"} if off.any() else set())
        kink_notes[name] = kink_notes[name] | ({"one_sided"} if across.any() else set())
        notes.append(Note("domain_edge_limit", {"name": name, "elements": int(mask.sum())}))
    changed = replace(expected, grads=grads, kinks=kinks, kink_notes=kink_notes, unknown=unknown)
    return changed, notes


KINK_BITS = 320  # working precision beside a kink
STEP_BITS = 160  # the step beside it: 2**-160 of the element's size (at least 1)
SIDES_RTOL = 2.0**-40  # one-sided derivatives this close are one number
PRECISE_SIDES = 1 << 14  # input elements up to which the sides are taken in mpmath
ONE_BY_ONE = 32  # elements at a kink moved one at a time (each costs two evaluations)


def kink_sides(
    model: Model, seen: dict[str, np.ndarray], weights: np.ndarray | None, expected: Expected
) -> Expected:
    """Decide each element where an operation sits at its kink from the one-sided partial
    derivatives of the whole function there: SymPy's derivative just beside the point on
    each side (a step of 2**-160 in mpmath; the next float past 16,384 elements), never
    autograd.

    - The sides agree: the function is differentiable along that input, whatever the
      operation's rule (``relu(x) - relu(-x)`` at 0 is x): their value is the reference,
      checked as anywhere else, and the element is marked in ``smooth_kinks``.
    - They differ (a real kink): PyTorch's value must lie between them (``bounds``); the
      reference shown is SymPy's value clipped to that interval.
    - A side has no number (outside the domain), or a step does not leave the kink: the
      element stays left out (``kinks``), as PyTorch's convention.
    """
    evaluate = getattr(model, "_evaluate", None)
    names = [n for n, mask in expected.kinks.items() if np.any(mask)]
    if evaluate is None or not names:
        return expected
    used = np.ones(()) if weights is None else weights
    grads, kinks, bounds = dict(expected.grads), dict(expected.kinks), dict(expected.bounds)
    sides, smooth = dict(expected.sides), dict(expected.smooth_kinks)
    precise_ = max(np.size(v) for v in seen.values()) <= PRECISE_SIDES
    for name in names:
        mask = np.asarray(expected.kinks[name], dtype=bool)
        left, right, undecided = _sides(evaluate, seen, used, name, mask, precise_)
        found = decide(left, right, mask & ~undecided, expected.grads[name])
        grads[name], smooth[name] = found.expected, found.smooth
        kinks[name] = mask & ~found.decided
        sides[name] = found.sides
        if found.bounds is not None:
            bounds[name] = found.bounds
    return replace(
        expected, grads=grads, kinks=kinks, bounds=bounds, sides=sides, smooth_kinks=smooth
    )


@dataclass(frozen=True)
class Decided:
    """What the one-sided derivatives decided at an array's kink elements: the reference
    (their common value where they agree, SymPy's clipped between them at a real kink),
    the elements decided, those where the function is differentiable (``smooth``), the
    real kinks' intervals (NaN elsewhere; None when there is none) and both sides."""

    expected: np.ndarray
    decided: np.ndarray
    smooth: np.ndarray
    bounds: tuple[np.ndarray, np.ndarray] | None
    sides: tuple[np.ndarray, np.ndarray]


def decide(left: np.ndarray, right: np.ndarray, mask: np.ndarray, values: np.ndarray) -> Decided:
    """The rule at the ``mask`` elements, from the ``left`` and ``right`` partial
    derivatives there (NaN: no number, left undecided). Where SymPy's value at a real
    kink is NaN (0*inf in its derivative), the reference is the interval's number nearest
    0 (its least subgradient in size): 0 clipped to the interval."""
    decided = mask & ~np.isnan(left) & ~np.isnan(right)
    with np.errstate(all="ignore"):
        near = np.abs(left - right) <= SIDES_RTOL * np.maximum(np.abs(left), np.abs(right))
        same = decided & ((left == right) | near)
        # sides with numbers but an infinite derivative at the point (a DiracDelta fires:
        # the function jumps, as a rounded division at an integer quotient): none there
        jump = decided & np.isinf(values)
        decided, same = decided & ~jump, same & ~jump
        real = decided & ~same
        low, high = np.fmin(left, right), np.fmax(left, right)
        inside = np.clip(np.where(np.isnan(values), 0.0, values), low, high)
    expected = np.where(same, right, np.where(real, inside, values))
    bounds = None
    if real.any():
        bounds = (np.where(real, low, np.nan), np.where(real, high, np.nan))
    sides = (np.where(decided, left, np.nan), np.where(decided, right, np.nan))
    return Decided(expected, decided, same, bounds, sides)


def jacobian_sides(
    model: ComponentModel,
    seen: dict[str, np.ndarray],
    name: str,
    values: np.ndarray,
    kinks: np.ndarray,
) -> Decided:
    """``decide`` for a Jacobian block (output elements by input elements): each input
    element with a kink entry in its column is moved just off its point on each side, one
    at a time (up to ``ONE_BY_ONE``), and the column of SymPy's Jacobian read there."""
    size = int(np.size(seen[name]))
    columns = np.asarray(kinks, dtype=bool).reshape(-1, size)
    left, right = (np.full(columns.shape, np.nan) for _ in range(2))
    arith = precise(KINK_BITS)
    terms = model.jacobian(name)
    for j in np.flatnonzero(columns.any(axis=0))[:ONE_BY_ONE]:
        for direction, out in ((-1, left), (1, right)):
            moved = _moved(arith, seen[name], (j,), direction)
            env = model.environment({**seen, name: moved}, arith)
            numbers, at, _ = model.numbers(terms, env, arith)
            column = arith.floats(numbers).reshape(columns.shape)[:, j]
            out[:, j] = np.where(np.asarray(at).reshape(columns.shape)[:, j], np.nan, column)
    shape = np.shape(kinks)
    mask = np.asarray(kinks, dtype=bool)
    return decide(left.reshape(shape), right.reshape(shape), mask, np.asarray(values))


def _moved(
    arith: Precise, values: np.ndarray, indices: Iterable[int], direction: int
) -> np.ndarray:
    """``values`` in ``arith`` with the elements at flat ``indices`` moved just off their
    point (2**-STEP_BITS of their size, at least 1) in ``direction``."""
    moved = np.array(arith.array(values), dtype=object)
    flat = moved.reshape(-1)
    for index in indices:
        x = flat[index]
        flat[index] = x + direction * arith.ctx.ldexp(max(abs(x), 1), -STEP_BITS)
    return moved


def _sides(
    evaluate: Callable[..., Expected],
    seen: dict[str, np.ndarray],
    weights: np.ndarray,
    name: str,
    mask: np.ndarray,
    precise_: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The left and right partial derivatives for ``name`` at the ``mask`` elements, and
    where they could not be had (a move that does not leave the kink). Up to
    ``ONE_BY_ONE`` elements are moved one at a time (the partial derivative is along one
    element); more are moved together, and those that stay at a kink (a tie: both tied
    elements moved alike) one at a time after all, up to ``ONE_BY_ONE`` of them."""
    shape = mask.shape
    left, right = np.full(shape, np.nan), np.full(shape, np.nan)
    undecided = np.zeros(shape, dtype=bool)
    together = int(mask.sum()) > ONE_BY_ONE
    if together:
        for direction, out in ((-1, left), (1, right)):
            grads, still = _beside(evaluate, seen, weights, name, mask, direction, precise_)
            np.copyto(out, grads, where=mask)
            undecided |= still
    alone = undecided if together else mask
    for count, index in enumerate(np.flatnonzero(alone)):
        if count == ONE_BY_ONE:
            break
        one = np.zeros(shape, dtype=bool)
        one.reshape(-1)[index] = True
        still = False
        for direction, out in ((-1, left), (1, right)):
            grads, at = _beside(evaluate, seen, weights, name, one, direction, precise_)
            out.reshape(-1)[index] = grads.reshape(-1)[index]
            still = still or bool(at.reshape(-1)[index])
        undecided.reshape(-1)[index] = still
    return left, right, undecided  # those past ONE_BY_ONE stay undecided (``alone`` is it)


def _beside(
    evaluate: Callable[..., Expected],
    seen: dict[str, np.ndarray],
    weights: np.ndarray,
    name: str,
    mask: np.ndarray,
    direction: int,
    precise_: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """The gradient for ``name`` with the ``mask`` elements moved just off their point in
    ``direction``, and where an operation still sits at its kink after the move."""
    arith: Arith
    if precise_:
        arith = precise(KINK_BITS)
        moved = _moved(arith, seen[name], np.flatnonzero(mask), direction)
    else:
        arith = FLOAT64
        moved = np.array(seen[name], dtype=np.float64)
        toward = math.inf if direction > 0 else -math.inf
        moved[mask] = np.nextafter(moved[mask], toward)
    # exact_zeros False: a zero weight times no number is no number, as in backward(w)
    found = evaluate({**seen, name: moved}, weights, frozenset({name}), False, arith)
    still = np.broadcast_to(found.kinks[name], mask.shape) & mask  # kinks has every name
    return np.broadcast_to(found.grads[name], mask.shape), still
