"""Cell text shared by the renderers: numbers, tensors, check marks."""

from __future__ import annotations

import numpy as np
from rich.text import Text

OK, NEAR, BAD = "✓", "≈", "✗"
STYLES = {OK: "bold green", NEAR: "bold yellow", BAD: "bold red"}
MARK_OF = {"agree": OK, "rounding": NEAR, "disagree": BAD}


def format_array(array: np.ndarray | None) -> Text:
    """A number as ``93`` or ``4.5``; a tensor as nested rows, summarised when large.

    A ``Text``, so that ``[nan, 1]`` is never read as Rich markup."""
    if array is None:
        return Text("None")
    array = np.asarray(array, dtype=np.float64)
    if array.ndim == 0:
        return Text(_number(float(array)))
    return Text(
        np.array2string(
            array,
            separator=", ",
            formatter={"float_kind": _number},
            threshold=100,
            edgeitems=3,
            max_line_width=60,
        )
    )


def _number(value: float) -> str:
    return f"{value + 0.0:.6g}"  # -0.0 shows as 0


def mark(agree: bool | str | None) -> Text:
    """✓ / ≈ / ✗ for a verdict (or a bool), — for no check."""
    if agree is None:
        return Text("—")
    symbol = MARK_OF[agree] if isinstance(agree, str) else OK if agree else BAD
    return Text(symbol, style=STYLES[symbol])


def mark_expected(agree: bool | None, expected: np.ndarray | None) -> Text:
    """The check mark; a failed check also shows what SymPy expected."""
    cell = mark(agree)
    if agree is False and expected is not None:
        cell.append("\nSymPy: ", style="")
        cell.append_text(format_array(expected))
    return cell


def error_text(value: float | None) -> str:
    return "—" if value is None else f"{value:.3g}"
