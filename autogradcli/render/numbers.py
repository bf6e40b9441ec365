"""Cell text shared by the renderers: numbers, tensors, check marks."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from rich.text import Text

from autogradcli.policy.verdict import Verdict
from autogradcli.render import FULL

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
    from rich.table import Table

OK, NEAR, UNSEEN, BAD = (v.mark for v in Verdict)  # ✓ ≈ ? ✗, written in policy/verdict.py
SHOWN = 300  # characters of a derivative shown in a report, unless --full


def shorten(text: str, limit: int = SHOWN) -> str:
    """A long derivative cut at ``limit`` characters, saying where the rest is."""
    if FULL.get() or len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text)} characters; all of it with --full or in --json)"


STYLES = {OK: "bold green", NEAR: "bold yellow", BAD: "bold red", UNSEEN: "bold magenta"}
MARK_OF = {v: v.mark for v in Verdict}  # keyed by the verdict, or its text


SUMMARISED = 16  # a tensor of more elements shows its shape and corners, unless --full


def format_array(array: np.ndarray | None) -> Text:
    """A number as ``93`` or ``4.5``; a tensor as nested rows; past ``SUMMARISED``
    elements its shape and its corners (the first and last element of each row and
    column; two from each end of a vector), unless ``--full``.

    A ``Text``, so that ``[nan, 1]`` is never read as Rich markup."""
    if array is None:
        return Text("None")
    array = np.asarray(array, dtype=np.float64)
    if array.ndim == 0:
        return Text(_number(float(array)))
    whole = FULL.get() or array.size <= SUMMARISED
    text = np.array2string(
        array,
        separator=", ",
        formatter={"float_kind": _number},
        threshold=array.size if whole else SUMMARISED,
        edgeitems=3 if whole else 1 if array.ndim > 1 else 2,
        max_line_width=60,
    )
    return Text(text if whole else f"shape {list(array.shape)}\n{text}")


def worst_at(got: np.ndarray | None, expected: np.ndarray | None, error: float | None) -> str:
    """`` at [i, j]``: the element of a tensor whose error is the largest checked one,
    ``error`` (nothing for a number, or when that error is 0), so that a summarised tensor
    still says which element to look at. One float64 scratch array; the answer is kept
    for the report's other layout (a table and its stacked rows render the same cell)."""
    if not error or got is None or expected is None or np.size(got) <= 1:
        return ""
    key = (id(got), id(expected), error)
    if key not in _WORST:
        scratch = np.subtract(got, expected, dtype=np.float64)
        with np.errstate(all="ignore"):
            np.abs(scratch, out=scratch)
            np.subtract(scratch, error, out=scratch)
            np.abs(scratch, out=scratch)
        np.copyto(scratch, np.inf, where=np.isnan(scratch))
        index = np.unravel_index(int(np.argmin(scratch)), scratch.shape)
        if len(_WORST) >= 64:  # a report's variables at most: older reports' keys go
            _WORST.clear()
        _WORST[key] = f" at [{', '.join(str(int(i)) for i in index)}]"
    return _WORST[key]


_WORST: dict[tuple[int, int, float], str] = {}


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


def add_column(table: Table, header: str, formula: bool = False) -> None:
    """A column that wraps its cells at spaces (never mid-number) and is never narrower
    than its header's longest word; a ``formula`` column may fold a long term."""
    width = max(len(word) for word in header.split()) if header.strip() else None
    table.add_column(header, overflow="fold" if formula else "ellipsis", min_width=width)


def indented(text: Text, by: int) -> Text:
    """A multi-line ``Text`` with its later lines indented ``by`` spaces."""
    from rich.text import Text

    lines = text.split("\n")
    out = Text()
    for k, line in enumerate(lines):
        out.append(" " * by if k else "")
        out.append_text(line)
        if k < len(lines) - 1:
            out.append("\n")
    return out


class Fit:
    """The wide renderable (a table) where it fits the width, else the narrow one (the same
    rows stacked), chosen when printed, at the console's width."""

    def __init__(self, wide: Table, narrow: RenderableType) -> None:
        self.wide, self.narrow = wide, narrow

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        from rich.measure import Measurement

        unbounded = options.update(width=10_000)
        need = Measurement.get(console, unbounded, _words_whole(self.wide)).minimum
        yield self.wide if need <= options.max_width else self.narrow


def _words_whole(table: Table) -> Table:
    """The table with each column at least as wide as its longest word (header or cell), so
    that a number is never cut."""
    for column in getattr(table, "columns", []):
        if column.overflow == "fold":  # formulas may break anywhere; numbers never do
            continue
        texts = [str(column.header), *(str(getattr(c, "plain", c)) for c in column._cells)]
        longest = max((len(w) for t in texts for w in t.split()), default=0)
        column.min_width = max(column.min_width or 0, longest)
    return table
