"""A time limit for SymPy's exact check that holds in any thread and touches no signal.

A watchdog timer raises an exception in the thread that set the limit
(``PyThreadState_SetAsyncExc``), so the limit works alike in a CLI's main thread, the
shell's worker thread, a notebook kernel's thread and each process of ``check --jobs``,
and the host program's signal handlers are never replaced. Why not a worker process:
SymPy's models and derivatives would have to cross a process boundary for every question,
and the start-up of a second interpreter with SymPy costs more than a whole question.
The one limit of this way: the exception lands between two bytecodes, so a single call
into C (one product of huge integers) finishes before it is raised. A limit of
``threading.TIMEOUT_MAX`` seconds or more (about 292 years on Linux; the longest wait a
thread can make) is no limit, as 0 and infinity are: the watchdog never starts.
"""

from __future__ import annotations

import ctypes
import math
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from autogradcli.errors import ComputationError

T = TypeVar("T")


class SympyTimeout(ComputationError):
    """SymPy's exact check took longer than allowed."""


class Expired(BaseException):
    """Raised into the limited thread and turned into ``SympyTimeout`` at the limit's edge;
    a BaseException, so that no ``except Exception`` inside SymPy swallows it."""


def raise_in(thread: int, exception: type[BaseException]) -> None:
    """Schedule ``exception`` in ``thread``: it lands at that thread's next bytecode check.
    (Never called with NULL to cancel one: CPython 3.11 then keeps its eval breaker set,
    and a traced thread spins at the next function entry.)"""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread), ctypes.py_object(exception))


# Past the limit, while the exception has not been caught here (code inside the block may
# swallow it: a bare except, a gc callback), it is raised again at this interval.
AGAIN = 0.25


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise ``SympyTimeout`` in this thread after ``seconds`` (0, inf or
    ``threading.TIMEOUT_MAX`` and more: no limit)."""
    if seconds <= 0 or math.isinf(seconds) or seconds >= threading.TIMEOUT_MAX:
        yield
        return
    thread, entered, done = threading.get_ident(), threading.Event(), threading.Event()
    count = {"raised": 0, "caught": 0}  # plain stores: no bytecode check between them

    def watch() -> None:
        entered.wait()  # the clock starts inside the try below, where the exception is caught
        if done.wait(seconds):
            return
        while not done.is_set() and not count["caught"]:
            count["raised"] += 1
            raise_in(thread, Expired)
            done.wait(AGAIN)

    watchdog = threading.Thread(target=watch, name="autograd-cli-time-limit", daemon=True)
    watchdog.start()
    try:
        entered.set()
        yield
    except Expired:
        count["caught"] += 1
    finally:
        try:
            done.set()
            watchdog.join()  # it raises nothing more
            if count["raised"] > count["caught"]:
                for _ in range(10_000):  # one still pending lands at the first check: a
                    _check()  # function's entry is checked even in a traced thread
        except Expired:
            count["caught"] += 1
    if count["caught"]:
        raise SympyTimeout("sympy_timeout", seconds=seconds)


def _check() -> None:
    """Nothing: calling it gives a pending exception its bytecode check."""


def within(seconds: float, work: Callable[[], T]) -> T:
    """``work()``, or ``SympyTimeout`` after ``seconds``."""
    try:
        with time_limit(seconds):
            return work()
    except Expired:  # the watchdog's exception landed at the limit's very edge
        raise SympyTimeout("sympy_timeout", seconds=seconds) from None
