"""The reference computed in a second thread while autograd's passes run (``grad`` on large
inputs where the passes leave a CPU core free): NumPy's and torch's kernels release the
GIL, so the two computations run at once instead of one after the other."""

from __future__ import annotations

import contextvars
import os
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

import torch

from autogradcli.reference.timeout import raise_in
from autogradcli.torchside.run import Session

# Input elements (all inputs together) from which ``grad`` computes SymPy's reference in a
# second thread while autograd's passes run, where those passes leave a CPU core free: on a
# GPU, or where torch's kernels use fewer threads than the process has cores. NumPy's and
# torch's kernels release the GIL, so the reference then takes the free core. Where torch
# uses every core (its default: one thread per core), the two only contend: on a 2-core VM
# the 10^7-element row ran 1.06-1.14x slower that way and held 20-50 MB more (docs/speed.md,
# "Large tensors"). Below the size, the reference is mostly SymPy and Python, which hold
# the GIL, and a thread would add its start to a call of a few milliseconds.
OVERLAP_ELEMENTS = 1_000_000


def cores() -> int:
    """The CPU cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def overlapped(session: Session) -> bool:
    """Whether ``run_grad`` computes the reference beside autograd's passes: a large input,
    and a core those passes leave free."""
    elements = sum(int(v.size) for v in session.seen.values())
    if elements < OVERLAP_ELEMENTS or cores() < 2:
        return False
    return session.device.type != "cpu" or cores() > torch.get_num_threads()


T = TypeVar("T")


class Beside(Generic[T]):
    """``work()`` in a daemon thread, in a copy of the caller's context (the front end's
    progress report), while the caller does something else: ``result()`` waits for it and
    returns its value or raises its exception, as calling ``work()`` there would have.
    The reference's time limit (``timeout.within``) holds in any thread. Nothing else
    touches SymPy or the reference's caches meanwhile: autograd's passes use torch only,
    and the caller reads the reference only after ``result()``."""

    def __init__(self, work: Callable[[], T]) -> None:
        self._value: T | None = None
        self._error: BaseException | None = None
        self._done = threading.Event()  # not Thread.join: Python 3.11's join, interrupted
        # by Ctrl-C, marks a thread still running as stopped
        context = contextvars.copy_context()
        name = "autograd-cli-reference"
        self._thread = threading.Thread(
            target=context.run, args=(self._run, work), name=name, daemon=True
        )
        self._thread.start()

    def _run(self, work: Callable[[], T]) -> None:
        try:
            try:
                self._value = work()
            except BaseException as exc:  # raised in the caller's thread by result()
                self._error = exc
            self._done.set()
        except BaseException:  # an interrupt that landed as the work ended
            self._done.set()

    def result(self) -> T:
        """The value of ``work()``, or its exception raised here."""
        self._wait()
        error, self._error = self._error, None
        if error is not None:
            raise error
        return self._value  # type: ignore[return-value]

    def abandon(self, reason: BaseException) -> None:
        """The caller failed with ``reason``: an error waits for the work to end (so that no
        reference runs on into the next command); Ctrl-C (any non-``Exception``) interrupts
        it, as it interrupts the reference computed in the caller's thread."""
        if isinstance(reason, Exception):
            self._wait()
        else:
            self._interrupt()

    def _wait(self) -> None:
        try:
            self._done.wait()  # a lock's wait: Ctrl-C interrupts it
        except BaseException:
            self._interrupt()
            raise
        self._thread.join()  # it only returns now

    def _interrupt(self) -> None:
        """KeyboardInterrupt in the thread (at its next bytecode; one NumPy call on a block
        finishes first); waits a moment for it to end, never longer: the thread is a daemon."""
        ident = self._thread.ident
        if not self._done.is_set() and ident is not None:
            raise_in(ident, KeyboardInterrupt)
            self._done.wait(INTERRUPTED_WAIT)


INTERRUPTED_WAIT = 2.0  # seconds
