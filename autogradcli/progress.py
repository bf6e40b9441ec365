"""What the library is doing, for a front end to show while the user waits.

The core calls ``stage("differentiating with SymPy")``; nothing is shown unless a front end
has set ``REPORT`` (the CLI does, on a terminal, unless ``--quiet``). The library never
prints.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextvars import ContextVar

REPORT: ContextVar[Callable[[str, int, int], None] | None] = ContextVar("report", default=None)


def stage(text: str) -> None:
    """Tell the front end (if it listens) what comes next."""
    report = REPORT.get()
    if report is not None:
        report(text, 0, 0)


def step(text: str, done: int, total: int) -> None:
    """How far a counted piece of work is (``done`` of ``total``), for a progress bar."""
    report = REPORT.get()
    if report is not None:
        report(text, done, total)


def loading() -> None:
    """Before the first use of torch and SymPy in this process (about 2.5 s)."""
    if "torch" not in sys.modules or "sympy" not in sys.modules:
        stage("loading PyTorch and SymPy")
