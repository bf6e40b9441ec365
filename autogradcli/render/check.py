"""Render ``check``: a line per case that did not agree, then a summary table."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from rich.console import Group
from rich.table import Table
from rich.text import Text

from autogradcli.render.numbers import MARK_OF, STYLES

MARKS = {0: MARK_OF["agree"], 1: MARK_OF["disagree"], 2: "!", 3: "!"}


class _Case(Protocol):
    line: int
    text: str


class _Done(Protocol):
    """What ``check`` knows of a case run (``cli.batch.Done``)."""

    exit_code: int
    summary: str

    @property
    def case(self) -> _Case: ...

    @property
    def status(self) -> str: ...


def case_line(done: _Done) -> Text:
    """``line 3  ✗ disagree  grad "sin(x)" --x 1: why``."""
    mark = MARKS.get(done.exit_code, "!")
    text = Text.assemble(
        (f"line {done.case.line}  ", "dim"),
        (mark, STYLES.get(mark, "bold red")),
        f" {done.status}  ",
        (done.case.text, "cyan"),
    )
    if done.summary:
        text.append(f": {done.summary}")
    return text


def render_summary(summary: Mapping[str, Any]) -> Group:
    """``check``'s counts as a table: cases, agreed, disagreed, bad input, time, rate."""
    table = Table(title="check", title_justify="left")
    internal = summary.get("internal_errors", 0)  # a column only when a case met one
    columns = ("cases", "agreed", "disagreed", "bad input", "internal error", "time", "cases/s")
    for column in columns:
        if column != "internal error" or internal:
            table.add_column(column, justify="right")
    seconds = summary["seconds"]
    rate = summary["cases"] / seconds if seconds > 0 else 0.0
    counts = [summary["cases"], summary["agreed"], summary["disagreed"], summary["bad_input"]]
    table.add_row(
        *map(str, counts + ([internal] if internal else [])),
        f"{seconds:.2f} s",
        f"{rate:.0f}" if rate >= 10 else f"{rate:.2g}",  # 0.43, not 0, for slow cases
    )
    return Group(table)
