"""Sentences for codes: causes of a verdict and the notes on non-differentiable points.

The core keeps codes and numbers; renderers (Rich, JSON ``message``) call these.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from autogradcli.numeric import DEFAULT as NUMERIC
from autogradcli.verdict import Cause
from autogradcli.vocabulary import KINK_POINTS

POINTS: dict[str, str] = {
    **KINK_POINTS,
    "off_domain": f"the function is NaN within the numeric step ({NUMERIC.eps:g}) here (outside "
    "its real domain or at its edge), so central differences give no number",
    "one_sided": "SymPy's derivative is 0/0 here and the one-sided slopes differ (a kink)",
}


def number(value: Any) -> str:
    """A number as printed in sentences (strings such as "beyond float64" pass through)."""
    if isinstance(value, str):
        return value
    return f"{float(value) + 0.0:.6g}"


def pair(a: Any, b: Any) -> tuple[str, str]:
    """Two numbers with enough digits to tell them apart."""
    if isinstance(a, str) or isinstance(b, str):
        return number(a), number(b)
    for digits in (6, 9, 12, 17):
        left, right = f"{float(a) + 0.0:.{digits}g}", f"{float(b) + 0.0:.{digits}g}"
        if left != right:
            return left, right
    return left, right


def values_text(values: Iterable[float]) -> str:
    return ", ".join(number(v) for v in values)


def points_text(codes: Iterable[str]) -> str:
    return "; ".join(POINTS.get(c, c) for c in sorted(codes))


def kink_note(codes: Iterable[str], excluded: int, values: Iterable[float]) -> str:
    """Elements left out at non-differentiable points, with what PyTorch's .grad is there."""
    shown = values_text(values)
    return (
        f"{points_text(codes)}; PyTorch's value there: {shown}; {excluded} element(s) at that "
        "point are left out of the check"
    )


def _loss(data: Mapping[str, Any]) -> str:
    dtype, kind = data["dtype"], data.get("kind")
    if kind == "beyond_bound":
        return (
            f"precision loss in the backward pass (the forward values are right): {dtype}'s "
            f"error of {number(data['error'])} ({number(data['relative'])} relative) is more "
            f"than its rounding can do here; float64 agrees (error "
            f"{number(data['float64_error'])})"
        )
    node = data["node"]
    value, exact = pair(data["value"], data["exact"])
    what = {
        "cancellation": f"cancellation in {node}: {value} in {dtype}, exactly {exact}",
        "rounded_to_zero": f"{node} rounded to 0 in {dtype} (exactly {exact})",
        "infinite": f"{node} is {value} in {dtype} (exactly {exact})",
    }.get(kind or "", f"{node} is {value} in {dtype}, exactly {exact}")
    if "operand" in data:
        rounded, truth = pair(data["operand_value"], data["operand_exact"])
        what += f", after {data['operand']} rounded to {rounded} (exactly {truth})"
    if "fed_to" in data:
        what += f"; then fed to {data['fed_to']}"
    return f"precision loss: {what}"


def cause_text(cause: Cause) -> str:
    """One sentence for a verdict's cause."""
    data = cause.data
    code = cause.code
    if code == "rounding":
        return (
            f"within {data['dtype']} rounding: error {number(data['error'])} "
            f"({number(data['relative'])} relative, bound {number(data['bound'])}); "
            f"float64 agrees (error {number(data['float64_error'])})"
        )
    if code == "overflow":
        where = "the backward pass" if data["node"] == "backward" else data["node"]
        return (
            f"overflow: {where} reaches {number(data['exact'])}, past {data['dtype']}'s largest "
            f"number {number(data['max'])}, so {data['dtype']} gives inf"
        )
    if code == "precision_loss":
        return _loss(data)
    if code == "non_differentiable":
        return (
            f"NaN at a non-differentiable point: .grad is NaN or infinite at "
            f"{data['elements']} element(s) where {points_text(data['points'])}"
        )
    if code == "domain":
        return (
            f"PyTorch's forward is {number(data['value'])} at {data['node']}, where SymPy's "
            f"(simplified) expression is {number(data['exact'])}: IEEE arithmetic met 0/0, "
            "inf - inf or a value outside the real domain on the way"
        )
    if code == "nonfinite_input":
        return (
            "an input is NaN or infinite: IEEE arithmetic carries it through, and SymPy's "
            "formula does not give the same numbers"
        )
    if code == "zero_times_inf":
        return (
            f"NaN from 0·inf in the backward pass at {data['elements']} element(s): a zero "
            "gradient met an infinite local derivative (or 0/0), where the derivative is not NaN"
        )
    if code == "mismatch":
        return (
            f"a real mismatch: float64 disagrees too (max abs error "
            f"{number(data['float64_error'])})"
        )
    return code
