"""``grad`` on large inputs computes the reference in a second thread while autograd's passes
run, where they leave a core free (``reference/beside.py``): the same result as one after
the other, autograd's error first, the reference's errors and time limit as in one thread,
Ctrl-C ends the thread."""

from __future__ import annotations

import signal
import threading
import time

import numpy as np
import pytest
import torch

import autogradcli as ag
from autogradcli import pipeline
from autogradcli.errors import TorchError, VariableError
from autogradcli.reference import beside, choice

THREAD = "autograd-cli-reference"
EXPRESSION = "mean(3*(x+2)**2)"
SEED000 = "y = x + 2; z = y*y*3; out = mean(z)"


@pytest.fixture
def values() -> np.ndarray:
    return np.random.default_rng(0).random(50_000).astype(np.float32)


def _overlap(monkeypatch: pytest.MonkeyPatch, on: bool) -> list[str]:
    """The reference beside autograd (``on``) or after it, whatever the size and the cores;
    the list fills with the name of each thread that computed a reference."""
    monkeypatch.setattr(beside, "OVERLAP_ELEMENTS", 1 if on else 10**18)
    monkeypatch.setattr(beside, "cores", lambda: torch.get_num_threads() + 1)
    threads: list[str] = []
    reference_for = pipeline.reference_for

    def recorded(bound, session):  # type: ignore[no-untyped-def]
        threads.append(threading.current_thread().name)
        return reference_for(bound, session)

    monkeypatch.setattr(pipeline, "reference_for", recorded)
    return threads


def _no_thread_left() -> bool:
    """No reference thread runs (one that has just set its result gets a second to end)."""
    for _ in range(100):
        if all(t.name != THREAD for t in threading.enumerate()):
            return True
        time.sleep(0.01)
    return False


def test_only_large_inputs_with_a_core_left_free_are_overlapped(
    monkeypatch: pytest.MonkeyPatch,
):
    class Seen:
        def __init__(self, device: str, *sizes: int) -> None:
            self.seen = {str(i): np.empty(n, dtype=np.uint8) for i, n in enumerate(sizes)}
            self.device = torch.device(device)

    def overlapped(*sizes: int, device: str = "cpu") -> bool:
        return beside.overlapped(Seen(device, *sizes))  # type: ignore[arg-type]

    limit, threads = beside.OVERLAP_ELEMENTS, torch.get_num_threads()
    monkeypatch.setattr(beside, "cores", lambda: threads + 1)  # a core torch leaves free
    assert overlapped(limit) and overlapped(limit // 2, limit - limit // 2)
    assert not overlapped(limit - 1) and not overlapped(3)
    monkeypatch.setattr(beside, "cores", lambda: threads)  # torch's kernels use every core
    assert not overlapped(limit) and overlapped(limit, device="cuda") == (threads > 1)
    monkeypatch.setattr(beside, "cores", lambda: 1)
    assert not overlapped(limit) and not overlapped(limit, device="cuda")


def test_overlapped_gives_the_serial_result(monkeypatch: pytest.MonkeyPatch, values):
    threads = _overlap(monkeypatch, on=False)
    serial = ag.grad(EXPRESSION, x=values, dtype="float32")
    assert len(threads) == 1 and THREAD not in threads
    threads = _overlap(monkeypatch, on=True)
    both = ag.grad(EXPRESSION, x=values, dtype="float32")
    assert threads == [THREAD]
    assert both.verdict == serial.verdict == "agree"
    assert np.array_equal(both.output, serial.output)
    assert np.array_equal(both.grads["x"], serial.grads["x"])
    assert np.array_equal(both.expected["x"], serial.expected["x"])
    assert both.notes == serial.notes and both.expected_by == serial.expected_by == "SymPy"
    assert both.variables["x"].verdict == serial.variables["x"].verdict
    assert _no_thread_left()


def test_the_reference_leaves_the_inputs_as_autograd_saw_them(
    monkeypatch: pytest.MonkeyPatch, values
):
    """The thread reads ``session.seen`` while torch runs: it must never write it (here
    read-only: a write raises), nor may autograd (the leaves are copies)."""
    _overlap(monkeypatch, on=True)
    reference_for = pipeline.reference_for

    def read_only(bound, session):  # type: ignore[no-untyped-def]
        for array in session.seen.values():
            array.flags.writeable = False
        return reference_for(bound, session)

    monkeypatch.setattr(pipeline, "reference_for", read_only)
    result = ag.grad("sum(w*(tanh(x)*sigmoid(x) + log1p(x**2)))", x=values, w=values)
    assert result.verdict == "agree"


def test_autograd_error_surfaces_first(monkeypatch: pytest.MonkeyPatch, values):
    """A second backward() on a freed graph: PyTorch's error, word for word, whether the
    reference ran beside it (and would itself have failed) or never ran."""
    _overlap(monkeypatch, on=False)
    with pytest.raises(TorchError) as serial:
        ag.grad(SEED000, x=values, repeat=2, same_graph=True)
    threads = _overlap(monkeypatch, on=True)
    ended = threading.Event()

    def failing(*args: object) -> None:
        time.sleep(0.2)  # still running when autograd fails
        ended.set()
        raise VariableError("explain_needs_sympy")

    monkeypatch.setattr(pipeline, "choose", failing)
    with pytest.raises(TorchError) as both:
        ag.grad(SEED000, x=values, repeat=2, same_graph=True)
    assert threads == [THREAD] and ended.is_set()  # waited for: nothing runs on
    assert str(both.value) == str(serial.value) and both.value.data == serial.value.data
    assert _no_thread_left()


def test_reference_error_surfaces_as_in_one_thread(monkeypatch: pytest.MonkeyPatch, values):
    def failing(*args: object) -> None:
        raise VariableError("explain_needs_sympy")

    monkeypatch.setattr(pipeline, "choose", failing)
    raised = []
    for on in (False, True):
        _overlap(monkeypatch, on=on)
        with pytest.raises(VariableError) as error:
            ag.grad(EXPRESSION, x=values)
        raised.append(error.value)
    assert [type(e) for e in raised] == [VariableError] * 2
    assert str(raised[0]) == str(raised[1]) and raised[0].code == raised[1].code
    assert _no_thread_left()


def test_time_limit_holds_in_the_thread(monkeypatch: pytest.MonkeyPatch, values):
    """SymPy past its limit (here a model that never ends) in the reference's thread: the
    numeric check stands in with its note, as in the main thread."""

    def endless(*args: object) -> None:
        while True:
            time.sleep(0.01)

    monkeypatch.setattr(choice, "sympy_model", endless)
    found = []
    for on in (False, True):
        threads = _overlap(monkeypatch, on=on)
        start = time.perf_counter()
        # 20 elements: the numeric stand-in's differences are cheap (any size overlaps here)
        result = ag.grad(EXPRESSION, x=values[:20], sympy_seconds=0.1)
        found.append((result, time.perf_counter() - start, threads))
    for result, seconds, _ in found:
        assert result.expected_by == "numeric" and seconds < 20
        assert "timeout_fallback" in [n.code for n in result.notes]
    assert found[0][0].notes == found[1][0].notes
    assert found[1][2] == [THREAD]
    assert np.array_equal(found[0][0].expected["x"], found[1][0].expected["x"])
    assert _no_thread_left()


def test_ctrl_c_ends_the_thread(monkeypatch: pytest.MonkeyPatch, values):
    """Ctrl-C during autograd's passes: KeyboardInterrupt reaches the caller and the
    reference's thread ends (a long reference is interrupted, not waited for)."""
    _overlap(monkeypatch, on=True)
    started = threading.Event()

    def endless(*args: object) -> None:
        started.set()
        while True:
            time.sleep(0.01)

    def interrupted(*args: object) -> None:
        started.wait(5)
        raise KeyboardInterrupt

    monkeypatch.setattr(pipeline, "choose", endless)
    monkeypatch.setattr(pipeline, "run_passes", interrupted)
    start = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        ag.grad(EXPRESSION, x=values)
    assert time.perf_counter() - start < 5
    assert _no_thread_left()


def test_ctrl_c_while_waiting_for_the_reference_ends_it():
    """Ctrl-C (SIGINT to the main thread) in ``result()``'s wait interrupts the thread too."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    started = threading.Event()

    def endless() -> None:
        started.set()
        while True:
            time.sleep(0.01)

    work = beside.Beside(endless)
    started.wait(5)
    main = threading.main_thread().ident
    assert main == threading.get_ident()
    timer = threading.Timer(0.2, lambda: signal.pthread_kill(main, signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            work.result()
    finally:
        timer.join()
        signal.signal(signal.SIGINT, previous)
    assert _no_thread_left()
