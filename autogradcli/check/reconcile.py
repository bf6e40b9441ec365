"""Stage 5: reconcile the reference with what IEEE arithmetic does at the edges of a
function's domain; returns a new reference and the notes that say what happened."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from autogradcli.notes import Note
from autogradcli.reference import NumericModel
from autogradcli.reference.expected import Expected


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
