"""A custom autograd Function's own check: the user's backward against SymPy's derivative
of the user's forward, per input and per element, with central differences beside."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from autogradcli.policy.verdict import AGREE, DISAGREE
from autogradcli.results.base import Frozen, maybe


@dataclass(frozen=True)
class InputCheck(Frozen):
    """One input of the Function: its gradient by the user's backward (``user``), by
    SymPy's derivative of the forward (``expected``) and by central differences of the
    forward in float64 (``numeric``); ``elements`` are the flat indices that differ.
    ``written`` is the user's backward as a formula, ``right`` SymPy's (empty where the
    forward is not elementwise); ``difference`` says how they differ."""

    name: str
    user: np.ndarray | None
    expected: np.ndarray | None
    numeric: np.ndarray | None
    verdict: str
    elements: tuple[int, ...] = ()
    written: str = ""
    right: str = ""
    difference: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "backward": maybe(self.user),
            "expected": maybe(self.expected),
            "numeric": maybe(self.numeric),
            "verdict": self.verdict,
            "elements": list(self.elements),
            "written": self.written,
            "right": self.right,
            "difference": self.difference,
        }


@dataclass(frozen=True)
class FunctionCheck(Frozen):
    """One call of a custom Function at the values the cell gave it (grad_output from 0.75 to
    1.25 over the elements, in float64): each input checked, and gradcheck's other checks
    (``problems``: a wrong shape or dtype, a backward that is not reentrant, a wrong jvp)."""

    name: str
    call: str
    inputs: tuple[InputCheck, ...]
    problems: tuple[str, ...] = ()

    @property
    def verdict(self) -> str:
        wrong = self.problems or any(i.verdict == DISAGREE for i in self.inputs)
        return DISAGREE if wrong else AGREE

    def to_dict(self) -> dict[str, Any]:
        return {
            "function": self.name,
            "call": self.call,
            "verdict": self.verdict,
            "inputs": [i.to_dict() for i in self.inputs],
            "problems": list(self.problems),
        }
