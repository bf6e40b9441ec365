"""A time limit for SymPy's exact check."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from autogradcli.errors import ComputationError


class SympyTimeout(ComputationError):
    """SymPy's exact check took longer than allowed."""


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise ``SympyTimeout`` after ``seconds`` (main thread on POSIX; elsewhere no limit)."""
    usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not usable or seconds <= 0:
        yield
        return

    def expire(signum: int, frame: object) -> None:
        raise SympyTimeout("sympy_timeout", seconds=seconds)

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
