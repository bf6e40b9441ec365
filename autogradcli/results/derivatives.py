"""``jacobian``, ``jvp``, ``hessian`` and ``derivative``'s result: blocks of
autograd's numbers beside SymPy's, Jacobian rows."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from autogradcli.messages import CLI, Style, cause_text
from autogradcli.notes import Note
from autogradcli.policy.compare import Comparison
from autogradcli.policy.verdict import (
    AGREE,
    DISAGREE,
    ROUNDING,
    Cause,
    Verdict,
    agrees,
    worst,
)
from autogradcli.results.base import (
    SCHEMA_VERSION,
    Frozen,
    Judged,
    cause_dict,
    maybe,
    note_codes,
    note_texts,
    plain,
    strict,
)


@dataclass(frozen=True)
class Block(Frozen):
    """One block of derivatives (a Jacobian per input, a Hessian per pair of inputs, a K-th
    derivative per input): autograd's numbers, a torch cross-check, and the reference."""

    key: str
    autograd: np.ndarray
    cross: np.ndarray | None  # torch.autograd.functional's answer, where there is one
    cross_name: str
    expected: np.ndarray  # SymPy's (or numeric, see DerivativeResult.expected_by)
    max_abs_error: float
    check: Comparison
    cross_agree: bool | None = None
    excluded: int = 0
    numeric: np.ndarray | None = None
    numeric_agree: bool | None = None
    reference_verdict: str = AGREE  # against the reference alone
    cause: Cause | None = None
    kink_codes: frozenset[str] = frozenset()
    smooth: np.ndarray | None = None  # entries at a kink where the function is differentiable
    bounds: tuple[np.ndarray, np.ndarray] | None = None  # real kinks' intervals (NaN elsewhere)

    @property
    def verdict(self) -> Verdict:
        """The block's verdict: the reference's, with the cross-check and numeric check."""
        others = [DISAGREE for c in (self.cross_agree, self.numeric_agree) if c is False]
        return worst([self.reference_verdict, *others])

    @property
    def agree(self) -> bool:
        return bool(agrees(self.verdict))

    @property
    def rounding(self) -> str | None:
        within = self.reference_verdict == ROUNDING and self.cause
        return cause_text(self.cause) if within else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "shape": list(self.autograd.shape),
            "autograd": plain(self.autograd),
            "cross_check": None
            if self.cross is None
            else {"by": self.cross_name, "value": plain(self.cross), "agree": self.cross_agree},
            "expected": plain(self.expected),
            "max_abs_error": self.max_abs_error,
            "excluded": self.excluded,
            "numeric": maybe(self.numeric),
            "numeric_agree": self.numeric_agree,
            "rounding": self.rounding,
            "verdict": self.verdict,
            "cause": cause_dict(self.cause),
            "agree": self.agree,
        }


@dataclass(frozen=True)
class JacobianRow(Frozen):
    """One backward pass of the Jacobian: the one-hot external gradient and the grads."""

    index: tuple[int, ...]
    one_hot: np.ndarray
    grads: dict[str, np.ndarray]

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": list(self.index),
            "one_hot": plain(self.one_hot),
            "grads": {n: plain(g) for n, g in self.grads.items()},
        }


@dataclass(frozen=True)
class DerivativeResult(Judged):
    """What ``jacobian``, ``hessian`` or ``derivative`` found; ``verdict`` and ``agree``
    sum it up."""

    kind: str  # "jacobian", "hessian", "order K" or "jvp"
    expression: str
    device: str
    dtype: str
    rtol: float
    atol: float
    output_shape: list[int]
    values: dict[str, np.ndarray]
    blocks: tuple[Block, ...]
    rows: tuple[JacobianRow, ...] = ()
    notes: tuple[Note, ...] = ()
    expected_by: str = "SymPy"
    derivatives: dict[str, str] = field(default_factory=dict)
    rounding_bound: float = 0.0
    strict: bool = False
    seed: int | None = None
    latex: dict[str, str] = field(default_factory=dict)  # SymPy's derivatives as LaTeX
    tangents: dict[str, np.ndarray] = field(default_factory=dict)  # jvp's v, per input

    @property
    def verdict(self) -> Verdict:
        return worst(b.verdict for b in self.blocks)

    @property
    def agree(self) -> bool:
        return bool(agrees(self.verdict, self.strict))

    def first_cause(self) -> Cause | None:
        return next((b.cause for b in self.blocks if b.verdict == self.verdict), None)

    def _tangents(self) -> dict[str, Any]:
        """jvp's ``tangents`` field (the other kinds have none)."""
        if self.kind != "jvp":
            return {}
        return {"tangents": {n: plain(v) for n, v in self.tangents.items()}}

    def to_dict(self, style: Style = CLI) -> dict[str, Any]:
        command = "derivative" if self.kind.startswith("order") else self.kind
        return strict(
            {
                "schema_version": SCHEMA_VERSION,
                "command": command,
                "kind": self.kind,
                "expression": self.expression,
                "device": self.device,
                "dtype": self.dtype,
                "tolerance": {"rtol": self.rtol, "atol": self.atol},
                "expected_by": self.expected_by,
                "output_shape": self.output_shape,
                "values": {n: plain(v) for n, v in self.values.items()},
                "blocks": {b.key: b.to_dict() for b in self.blocks},
                "derivatives": self.derivatives or None,
                "latex": self.latex or None,
                "rows": [r.to_dict() for r in self.rows],
                "notes": note_texts(self.notes, style),
                "note_codes": note_codes(self.notes),
                "seed": self.seed,
                **self._tangents(),
                **self.verdict_fields(),
            }
        )
