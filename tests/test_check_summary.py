"""check's summary table: the rate of slow cases is a number, not 0."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from autogradcli.render.check import render_summary


@pytest.mark.parametrize(
    ("cases", "seconds", "rate"), [(1, 2.32, "0.43"), (7, 2.88, "2.4"), (400, 8.0, "50")]
)
def test_the_rate_has_two_digits_below_ten_cases_a_second(
    cases: int, seconds: float, rate: str
) -> None:
    summary = {"cases": cases, "agreed": cases, "disagreed": 0, "bad_input": 0}
    out = io.StringIO()
    Console(file=out, width=80, no_color=True).print(
        render_summary({**summary, "seconds": seconds})
    )
    row = [line for line in out.getvalue().splitlines() if f"{seconds:.2f} s" in line]
    assert row and row[0].split("│")[-2].strip() == rate
