"""What every result shares: read-only arrays (``Frozen``), rendering through Rich and
Jupyter (``Rendered``), a verdict's closing fields (``Judged``), and the JSON helpers
(``strict``, ``plain``, causes and notes as codes and sentences)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import fields
from typing import Any

import numpy as np

from autogradcli.messages import CLI, PYTHON, Style, cause_text, note_text
from autogradcli.notes import Note
from autogradcli.policy.verdict import (
    Cause,
)

SCHEMA_VERSION = 1


def strict(value: Any) -> Any:
    """``value`` with every non-finite float spelled as JSON (RFC 8259) has no number for
    it: the strings "NaN", "Infinity", "-Infinity"."""
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return value
    if isinstance(value, dict):
        return {k: strict(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [strict(v) for v in value]
    return value


def plain(array: np.ndarray) -> Any:
    """A 0-d array as a float, others as nested lists of floats."""
    return np.asarray(array, dtype=np.float64).tolist()


def maybe(array: np.ndarray | None) -> Any:
    return None if array is None else plain(array)


def cause_dict(cause: Cause | None) -> dict[str, Any] | None:
    """A cause for JSON: its code, its numbers, and the sentence."""
    return None if cause is None else {**cause.to_dict(), "message": cause_text(cause)}


def note_texts(notes: Sequence[Note], style: Style = CLI) -> list[str]:
    return [note_text(n, style) for n in notes]


def note_codes(notes: Sequence[Note]) -> list[dict[str, Any]]:
    return [n.to_dict() for n in notes]


def _lock(value: Any) -> None:
    """Make the arrays in ``value`` (and in its dicts, lists and tuples) read-only."""
    if isinstance(value, np.ndarray):
        value.flags.writeable = False
    elif isinstance(value, dict):
        for item in value.values():
            _lock(item)
    elif isinstance(value, list | tuple):
        for item in value:
            _lock(item)


class Frozen:
    """A result's arrays are read-only, like its fields: results are values."""

    def __post_init__(self) -> None:
        for f in fields(self):  # type: ignore[arg-type]
            _lock(getattr(self, f.name))


class Rendered(Frozen):
    """``__rich__`` through the renderers, imported only when used."""

    def __rich__(self) -> object:
        """The report as a Rich renderable (the core names no Rich type)."""
        from autogradcli.render import renderable

        return renderable(self, PYTHON)

    def _repr_html_(self) -> str:
        """The same report as HTML, for Jupyter (the API's words)."""
        from autogradcli.render import html

        return html(self)


class Judged(Rendered):
    """A result with a verdict (``grad``, ``jacobian``, ``hessian``, ``derivative``)."""

    def verdict_fields(self) -> dict[str, Any]:
        """The fields that close a judged result's document: the bound and the verdict."""
        judged: Any = self
        return {
            "rounding_bound": judged.rounding_bound,
            "strict": judged.strict,
            "verdict": judged.verdict,
            "cause": cause_dict(judged.first_cause()),
            "agree": judged.agree,
        }
