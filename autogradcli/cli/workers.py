"""``check --jobs N``: the cases run in worker processes, one case at a time each.

The parent knows which case each worker holds, so a worker that dies (``kill -9``, the
out-of-memory killer) loses that case only: it runs once more in a new worker, and a
second loss is its result. The pool is no larger than the cases and the cores. Workers
ignore Ctrl-C and die quietly on SIGTERM: the parent decides when the run stops, and it
stops them all before it reports what finished (a Ctrl-C or SIGTERM that comes while it
stops them waits until they are gone).
"""

from __future__ import annotations

import os
import signal
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")

RETRIES = 1  # runs more of a case whose worker died
STOP_SECONDS = 5.0  # a worker that has not ended this long after SIGTERM gets SIGKILL
_SIGNALS = {signal.SIGINT, signal.SIGTERM}


def cores() -> int:
    """The CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def pool_size(jobs: int, cases: int) -> int:
    """Worker processes for ``cases`` cases: ``jobs``, but no more than the cases and the
    cores (``--jobs 16`` on 3 cases starts 3 at most)."""
    return max(1, min(jobs, cases, cores()))


def how_it_ended(exitcode: int | None) -> str:
    """``was killed by SIGKILL``, ``exited with code 1``."""
    if exitcode is None:
        return "stopped answering"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        return f"was killed by {name}"
    return f"exited with code {exitcode}"


@dataclass
class _Worker(Generic[Item]):
    process: Any  # multiprocessing's Process of the chosen start method
    conn: Any  # the parent's end of the pipe
    index: int | None = None  # the case it holds


def _serve(
    conn: Any, work: Callable[[Any], Any], warm: Callable[[], None], parents: list[Any]
) -> None:
    """A worker: cases in, results out, until the parent sends None or goes away.
    ``parents``: the parent's ends of the pipes, copied by fork; closed here, so that the
    parent's death reaches every worker as the end of its pipe."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole process group
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the parent's SIGTERM handler is not ours
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)
    for end in parents:
        end.close()
    try:
        warm()
        while (item := conn.recv()) is not None:
            index, case = item
            conn.send((index, work(case)))
    except (EOFError, OSError):  # the parent is gone: nothing to report to
        pass


@contextmanager
def _signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM wait while a worker starts, so none lands in it before it has
    set its own handlers (it unblocks them itself)."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def run_in_workers(
    items: Sequence[Item],
    jobs: int,
    work: Callable[[Item], Result],
    warm: Callable[[], None],
    lost: Callable[[Item, str], Result],
    retried: Callable[[Item, str], None] = lambda item, how: None,
) -> Iterator[Result]:
    """``work(item)`` for each item, in order, in ``pool_size(jobs, len(items))`` worker
    processes (each runs ``warm()`` first). A worker that dies loses its item: it runs
    again (``retried(item, how)``), and after ``RETRIES`` more losses ``lost(item, how)``
    is its result. Closing the iterator or an exception in the parent (Ctrl-C) stops every
    worker."""
    import multiprocessing
    from multiprocessing.connection import wait

    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    context = multiprocessing.get_context(method)
    size = pool_size(jobs, len(items))
    pending = deque(range(len(items)))
    finished: dict[int, Result] = {}
    losses: dict[int, int] = {}
    workers: list[_Worker[Item]] = []

    def start() -> _Worker[Item]:
        ours, theirs = context.Pipe()
        parents = [ours, *(w.conn for w in workers)] if method == "fork" else []
        process = context.Process(
            target=_serve,
            args=(theirs, work, warm, parents),
            name="autograd-cli-check",
            daemon=True,
        )
        with _signals_held():
            process.start()
        theirs.close()
        return _Worker(process, ours)

    def ended(worker: _Worker[Item]) -> None:
        workers.remove(worker)
        worker.process.join(STOP_SECONDS)
        worker.conn.close()
        if worker.index is None:
            return
        how = how_it_ended(worker.process.exitcode)
        losses[worker.index] = losses.get(worker.index, 0) + 1
        if losses[worker.index] > RETRIES:
            finished[worker.index] = lost(items[worker.index], how)
        else:
            pending.appendleft(worker.index)
            retried(items[worker.index], how)

    emitted, completed = 0, False
    try:
        while emitted < len(items):
            idle = sum(w.index is None for w in workers)
            while len(workers) < size and len(pending) > idle:
                workers.append(start())
                idle += 1
            for worker in list(workers):
                if worker.index is None and pending:
                    index = pending.popleft()
                    try:
                        worker.conn.send((index, items[index]))
                    except OSError:  # it died before it got the case: not the case's fault
                        pending.appendleft(index)
                        ended(worker)
                        continue
                    worker.index = index
            busy = [w for w in workers if w.index is not None]
            ready = set(wait([x for w in busy for x in (w.conn, w.process.sentinel)]))
            for worker in busy:
                if worker.conn in ready or worker.process.sentinel in ready:
                    try:
                        if not worker.conn.poll():
                            raise EOFError
                        index, result = worker.conn.recv()
                    except (EOFError, OSError):
                        ended(worker)
                        continue
                    finished[index] = result
                    worker.index = None
            while emitted in finished:
                yield finished.pop(emitted)
                emitted += 1
        completed = True
    finally:
        with _signals_deferred(stopping=not completed):
            _stop(workers)


@contextmanager
def _signals_deferred(stopping: bool) -> Iterator[None]:
    """SIGINT and SIGTERM are noted, not handled, while the workers are stopped (a Ctrl-C
    raised there would leave some running); then the handlers are put back and the first
    noted is given to its handler. ``stopping``: an exception is already on its way out
    (a Ctrl-C, or the consumer closed the iterator, maybe while the iterator is being
    collected, where a second exception could only be printed): the handler is called
    and what it raises dropped, so a handler that notes the signal still learns of it.
    In the main thread only (elsewhere: nothing done)."""
    noted: list[int] = []
    before: dict[int, Any] = {}
    try:
        for number in sorted(_SIGNALS):
            before[number] = signal.signal(number, lambda n, frame: noted.append(n))
    except ValueError:  # not the main thread
        pass
    try:
        yield
    finally:
        for number, handler in before.items():
            signal.signal(number, signal.SIG_DFL if handler is None else handler)
        if noted and stopping and callable(before[noted[0]]):
            with suppress(BaseException):
                before[noted[0]](noted[0], None)
        elif noted:
            signal.raise_signal(noted[0])


def _stop(workers: list[_Worker[Any]]) -> None:
    """End every worker: SIGTERM (they die quietly), then SIGKILL for any still there."""
    for worker in workers:
        with suppress(OSError, ValueError):
            worker.process.terminate()
    for worker in workers:
        worker.process.join(STOP_SECONDS)
        if worker.process.is_alive():
            worker.process.kill()
            worker.process.join()
        with suppress(OSError):
            worker.conn.close()
