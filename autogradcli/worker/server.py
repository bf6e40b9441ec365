"""The worker process: torch, SymPy and the command line loaded once, each question answered
in a process forked from it.

The client (``autogradcli.client``) starts it detached, in a session of its own; it waits
for that client to exit (so that the two do not share the cores during the first
answer), takes the install's lock (one worker per user and installation), imports the
command line and answers a few questions to itself, then listens on its Unix socket.

Each ``run`` question is answered by a child forked from the worker: the child takes the
client's working directory, whole environment, ``argv[0]``, terminal sizes and stream
settings, resets the random generators as a fresh process has them, and runs the same
Click app the in-process command runs (``autogradcli.cli.app.main``). Its standard output
and error go to the client as frames, in the order a real process would flush them;
standard input is read from the client on demand. So a question never sees another's
settings, seed, random state or working directory, a question that crashes takes only its
own process with it, and Ctrl-C (the client's ``interrupt``) is a SIGINT in that child.
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import fcntl
import gc
import io
import json
import os
import queue
import select
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from autogradcli import INTERRUPTED
from autogradcli.worker import wire

MAX_RUNNING = 4  # questions answered at once; more wait for one to finish
STATUS_SECONDS = 1.0  # how often a question reports that it is alive
TICK_SECONDS = 1.0  # the longest the loop sleeps between looks at its clock
HAND_SECONDS = 5.0  # the longest the worker waits for its spare to take a question
POLL_SECONDS = 0.01  # while a question runs: how soon after it ends a spare is forked
STAMP_SECONDS = 2.0  # how often the loop looks for a change of the installed package

# What the worker asks itself before it listens: each command once, so that the modules
# and first-call work of every command are done before the first real question.
WARM_UP = (
    ["grad", "2*x**4+x**3+3*x**2+5*x+1", "--x", "2", "--device", "cpu"],
    ["grad", "sum(x*sin(x))", "--x", "[1.0, 2.0]", "--device", "cpu", "--json"],
    ["grad", "sin(x)", "--x", "1", "--order", "2", "--device", "cpu"],
    ["jacobian", "x*sum(x)", "--x", "[1.0, 2.0]", "--device", "cpu"],
    ["jvp", "x*y", "--x", "2", "--y", "3", "--device", "cpu"],
    ["hessian", "x**2*y", "--x", "1", "--y", "2", "--device", "cpu"],
    ["graph", "x*x", "--x", "2", "--device", "cpu"],
    ["plot", "x**2", "--x", "0:1", "--points", "5", "--device", "cpu"],
)
# What a spare child asks itself before it waits for its question: the first question in a
# forked process runs about twice as long as the next (its pages are copied from the
# worker's as it writes them, torch starts its threads), so the spare pays that first.
SPARE_WARM_UP = WARM_UP[0]


def _resident() -> int:
    """This process's resident memory in bytes (``/proc``; elsewhere its peak)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


class Worker:
    """The listening process: accepts connections, answers ``status`` and ``stop``, forks a
    child per ``run`` question, exits when idle, stale or stopped."""

    def __init__(self, place: wire.Place, fingerprint: str, lock: int | None = None) -> None:
        self.place = place
        self.fingerprint = fingerprint
        self.lock = lock
        self.stamp = wire.stamp()
        self.started = time.time()
        self.questions = 0
        self.children: dict[int, float] = {}  # the questions running, by pid
        self.spare: Spare | None = None
        self.spare_after = 0.0  # no spare is forked before this time (one has just died)
        self.idle = wire.seconds(os.environ, wire.IDLE, wire.IDLE_SECONDS)
        self.last = time.monotonic()
        self.stopping = False
        self.listener: socket.socket | None = None
        self.pristine: Any = None  # torch's generator state before any question

    # --- start ----------------------------------------------------------------------------

    def warm(self) -> None:
        """Import the command line, torch and SymPy, and answer ``WARM_UP`` to nobody."""
        import torch

        self.pristine = torch.default_generator.get_state()
        from autogradcli.cli.app import app, main
        from autogradcli.cli.warm import keep_built

        for args in WARM_UP:
            contextvars.copy_context().run(_quietly, main, args)
        torch.default_generator.set_state(self.pristine)
        keep_built(app)
        gc.collect()
        gc.freeze()  # the children leave these objects' pages shared

    def listen(self) -> None:
        """Bind the socket (mode 0600, in the private directory), replacing a dead one."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.place.socket)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            listener.bind(self.place.socket)
        finally:
            os.umask(old)
        listener.listen(64)
        self.listener = listener

    # --- the loop -------------------------------------------------------------------------

    def loop(self) -> None:
        """Accept until stopped, idle past the limit, or the installed package changed."""
        assert self.listener is not None
        checked = time.monotonic()
        while not self.stopping:
            self.reap()
            if self.spare is None and not self.children and time.monotonic() > self.spare_after:
                self.spare = Spare.fork(self)  # once no question takes the cores
            tick = min(TICK_SECONDS, self.idle)  # a short idle time is kept to the tick
            ready, _, _ = select.select(
                [self.listener], [], [], POLL_SECONDS if self.children else tick
            )
            self.reap()
            if ready:
                try:
                    conn, _ = self.listener.accept()
                except OSError:
                    continue
                self.handle(conn)
                continue
            now = time.monotonic()
            if not self.children and now - self.last > self.idle:
                return
            if now - checked > STAMP_SECONDS:
                checked = now
                if wire.stamp() != self.stamp:
                    return

    def reap(self, block: bool = False) -> None:
        """Collect the children that have finished (wait for one when ``block``); a spare
        that has died is forgotten (another is forked when no question runs)."""
        while self.children or self.spare is not None:
            try:
                pid, _ = os.waitpid(-1, 0 if block else os.WNOHANG)
            except ChildProcessError:
                self.children.clear()
                self.spare = None
                return
            if pid == 0:
                return
            if self.spare is not None and pid == self.spare.pid:  # died waiting: a bug
                self.spare.close()
                self.spare = None
                self.spare_after = time.monotonic() + TICK_SECONDS
                continue
            self.children.pop(pid, None)
            self.last = time.monotonic()
            block = False

    def info(self) -> dict[str, Any]:
        """What ``worker status`` shows."""
        return {
            "pid": os.getpid(),
            "started": self.started,
            "questions": self.questions,
            "running": len(self.children),
            "pids": sorted(self.children),
            "spare": self.spare.pid if self.spare is not None and self.spare.ready() else None,
            "rss": _resident(),
            "idle": self.idle,
            "version": wire.autogradcli.__version__,
        }

    def handle(self, conn: socket.socket) -> None:
        """One connection: another user's is closed unanswered; ``status``, ``stop`` and
        ``run`` are answered."""
        self.last = time.monotonic()
        if not wire.peer_allowed(conn):
            conn.close()
            return
        try:
            conn.settimeout(5.0)
            kind, payload = wire.receive(conn)
            message = json.loads(payload) if kind == b"J" else {}
            op = message.get("op")
            if op in ("status", "stop"):
                wire.send_json(conn, self.info())
                self.stopping = op == "stop"
            elif op == "run":
                if message.get("stamp") != self.stamp or message.get("fingerprint") != (
                    self.fingerprint
                ):  # the package changed, or the client's start-up settings: make way
                    self.close()
                    self.stopping = True
                    wire.send_json(conn, {"op": "stale"})
                else:
                    self.idle = wire.seconds(message.get("env", {}), wire.IDLE, wire.IDLE_SECONDS)
                    self.fork(conn, message, payload)
        except (OSError, EOFError, ValueError, AttributeError):
            pass
        finally:
            conn.close()

    def fork(self, conn: socket.socket, message: dict[str, Any], payload: bytes) -> None:
        """Answer ``message`` in a child process: the spare when there is one (it is handed
        the connection and the request's bytes), else one forked now."""
        while len(self.children) >= MAX_RUNNING:
            self.reap(block=True)
        spare, pid = self.spare, None
        if spare is not None and spare.ready():
            self.spare = None
            pid = spare.pid if spare.hand(conn, payload) else None
        if pid is None:
            pid = self.child(lambda: answer(conn, message, self.pristine))
        self.children[pid] = time.monotonic()
        self.questions += 1

    def child(self, run: Callable[[], None]) -> int:
        """Fork; the child closes the worker's listener, lock and spare, runs ``run`` and
        exits. The child's pid."""
        pid = os.fork()
        if pid == 0:  # the child: never returns
            try:
                if self.listener is not None:
                    self.listener.close()
                if self.lock is not None:
                    os.close(self.lock)
                if self.spare is not None:
                    self.spare.channel.close()
                run()
            finally:
                os._exit(0)
        return pid

    def close(self) -> None:
        """Stop listening: the socket file goes first, then the lock; a spare exits."""
        if self.spare is not None:
            self.spare.close()
            self.spare = None
        if self.listener is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.place.socket)
            self.listener.close()
            self.listener = None
        if self.lock is not None:
            os.close(self.lock)
            self.lock = None


class Spare:
    """A child forked before its question comes: it answers ``SPARE_WARM_UP`` to nobody,
    says it is ready, then waits on a socket pair for a client's connection (passed as a
    descriptor) and the request's bytes, and answers it as a child forked for it would. The
    fork and the first-question slowness are then paid between questions, not during one.
    A question that comes while it warms up gets a child forked for it (waiting for the
    spare cost more: calls one after another took 141 ms each, against 96 ms so)."""

    def __init__(self, pid: int, channel: socket.socket) -> None:
        self.pid, self.channel = pid, channel
        self.warm = False

    def ready(self) -> bool:
        """Whether it has warmed up (it says so with one byte)."""
        if not self.warm and select.select([self.channel], [], [], 0)[0]:
            self.warm = self.channel.recv(1) == b"R"
        return self.warm

    @classmethod
    def fork(cls, worker: Worker) -> Spare | None:
        """A new spare of ``worker`` (None when it cannot fork)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)

        def wait() -> None:
            ours.close()
            _wait_for_question(theirs, worker.pristine)

        try:
            pid = worker.child(wait)
        except OSError:
            ours.close()
            return None
        finally:
            theirs.close()
        return cls(pid, ours)

    def hand(self, conn: socket.socket, payload: bytes) -> bool:
        """Give the spare its question; False when it has gone or does not take it within
        ``HAND_SECONDS`` (it is killed, and a child is forked for the question)."""
        try:
            self.channel.settimeout(HAND_SECONDS)
            socket.send_fds(self.channel, [b"Q"], [conn.fileno()])
            wire.send(self.channel, b"J", payload)
        except OSError:
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)
            return False
        finally:
            self.channel.close()
        return True

    def close(self) -> None:
        """Let the spare go: a closed channel is its signal to exit."""
        self.channel.close()


def _wait_for_question(channel: socket.socket, pristine: Any) -> None:
    """The spare's life: warm up, wait for a connection and its request, answer it."""
    from autogradcli.cli.app import main

    contextvars.copy_context().run(_quietly, main, list(SPARE_WARM_UP))
    gc.collect()
    channel.sendall(b"R")
    _, fds, _, _ = socket.recv_fds(channel, 1, 1)
    if not fds:
        return  # the worker has gone or let this spare go
    conn = socket.socket(fileno=fds[0])
    _, payload = wire.receive(channel)
    channel.close()
    answer(conn, json.loads(payload), pristine)


def _quietly(main: Any, args: list[str]) -> None:
    """Run the command line on ``args`` with its output thrown away."""
    saved = sys.argv, sys.stdout, sys.stderr, sys.stdin
    sys.argv = ["autograd-cli", *args]
    sys.stdout = sys.stderr = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    sys.stdin = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    try:
        main()
    except BaseException:  # a warm-up that fails only leaves work for later
        pass
    finally:
        sys.argv, sys.stdout, sys.stderr, sys.stdin = saved


# --- the child: one question ------------------------------------------------------------------


class Line:
    """The child's connection to its client: frames out (under a lock), standard input and
    ``interrupt`` in (read by a thread that also reports, every second, that the child is
    alive and how much CPU time it has used)."""

    def __init__(self, conn: socket.socket) -> None:
        self.conn = conn
        self.lock = threading.Lock()
        self.stdin: queue.SimpleQueue[bytes] = queue.SimpleQueue()
        self.main = threading.get_ident()
        threading.Thread(target=self._listen, name="autograd-cli-line", daemon=True).start()

    def send(self, kind: bytes, payload: bytes = b"") -> None:
        with self.lock:
            wire.send(self.conn, kind, payload)

    def send_json(self, message: dict[str, Any]) -> None:
        self.send(b"J", json.dumps(message).encode())

    def _listen(self) -> None:
        beat = time.monotonic()
        try:
            while True:
                ready, _, _ = select.select([self.conn], [], [], STATUS_SECONDS)
                if ready:
                    kind, payload = wire.receive(self.conn)
                    if kind == b"I":
                        self.stdin.put(payload)
                    elif kind == b"J" and json.loads(payload).get("op") == "interrupt":
                        signal.pthread_kill(self.main, signal.SIGINT)
                if time.monotonic() - beat >= STATUS_SECONDS:
                    beat = time.monotonic()
                    self.send_json({"op": "alive", "cpu": time.process_time()})
        except BaseException:  # the client has gone: so does its question
            os.kill(os.getpid(), signal.SIGKILL)


class RemoteOut(io.RawIOBase):
    """The client's standard output or error: each write is a frame. ``fileno`` is the
    client's descriptor number, so that terminal-size lookups reach the client's sizes."""

    def __init__(self, line: Line, kind: bytes, spec: dict[str, Any]) -> None:
        self.line, self.kind, self.tty, self.fd = line, kind, bool(spec["tty"]), int(spec["fd"])

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        data = bytes(data)
        for start in range(0, len(data), wire.CHUNK):
            self.line.send(self.kind, data[start : start + wire.CHUNK])
        return len(data)

    def isatty(self) -> bool:
        return self.tty

    def fileno(self) -> int:
        return self.fd


class RemoteIn(io.RawIOBase):
    """The client's standard input, read on demand: each read asks the client for at most
    that many bytes (it reads once from its own standard input)."""

    def __init__(self, line: Line, spec: dict[str, Any]) -> None:
        self.line, self.tty = line, bool(spec["tty"])

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        self.line.send_json({"op": "stdin", "n": len(buffer)})
        data = self.line.stdin.get()
        buffer[: len(data)] = data
        return len(data)

    def isatty(self) -> bool:
        return self.tty


def _text(raw: io.RawIOBase, spec: dict[str, Any], writer: bool) -> io.TextIOWrapper:
    """A text stream over ``raw`` buffered as the client's own stream is."""
    binary: Any = raw
    if spec["buffered"]:
        size = max(int(spec["size"]), 1)
        binary = io.BufferedWriter(raw, size) if writer else io.BufferedReader(raw, size)
    return io.TextIOWrapper(
        binary,
        encoding=spec["encoding"],
        errors=spec["errors"],
        newline="\n",
        line_buffering=bool(spec["line_buffering"]),
        write_through=bool(spec["write_through"]),
    )


def _terminal_sizes(sizes: dict[str, Any]) -> None:
    """``os.get_terminal_size`` of descriptors 0-2 answers with the client's terminals
    (Rich and ``shutil`` ask it)."""
    real = os.get_terminal_size
    known = {int(fd): size for fd, size in sizes.items()}

    def get_terminal_size(fd: int = 1) -> os.terminal_size:
        if fd in known:
            if known[fd] is None:
                raise OSError(errno.ENOTTY, os.strerror(errno.ENOTTY))
            return os.terminal_size(tuple(known[fd]))
        return real(fd)

    os.get_terminal_size = get_terminal_size  # type: ignore[assignment]


def _fresh_random(pristine: Any) -> None:
    """The random generators as a new process has them: Python's, SymPy's and NumPy's
    seeded from the system, torch's at its default seed."""
    import random

    random.seed()
    for name, reseed in (("sympy.core.random", "seed"), ("numpy.random", "seed")):
        module = sys.modules.get(name)
        if module is not None:
            getattr(module, reseed)()
    torch = sys.modules.get("torch")
    if torch is not None and pristine is not None:
        torch.default_generator.set_state(pristine)


def _exit_code(code: Any) -> int:
    """The exit status ``SystemExit(code)`` gives, printing a message as Python does."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def answer(conn: socket.socket, request: dict[str, Any], pristine: Any) -> None:
    """Answer one ``run`` question in this (forked) process, as the client's own process
    would have: its directory, environment, streams, ``argv``; then ``done`` and its code."""
    began = time.process_time()
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    conn.settimeout(None)
    line = Line(conn)
    line.send_json({"op": "started", "pid": os.getpid()})
    try:
        os.chdir(request["cwd"])
    except OSError:
        line.send_json({"op": "stale"})
        return
    os.environ.clear()
    os.environ.update(request["env"])
    streams = request["streams"]
    sys.stdin = sys.__stdin__ = _text(RemoteIn(line, streams["stdin"]), streams["stdin"], False)
    sys.stdout = sys.__stdout__ = _text(
        RemoteOut(line, b"O", streams["stdout"]), streams["stdout"], True
    )
    sys.stderr = sys.__stderr__ = _text(
        RemoteOut(line, b"E", streams["stderr"]), streams["stderr"], True
    )
    _terminal_sizes(request["sizes"])
    sys.argv = [request["argv0"], *request["args"]]
    main_module = type(sys)("__main__")
    main_module.__package__ = request["package"]
    sys.modules["__main__"] = main_module
    _fresh_random(pristine)
    from autogradcli.cli.app import main

    try:
        main()
        code = 0
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except KeyboardInterrupt:
        traceback.print_exc()
        code = INTERRUPTED
    except BaseException:
        sys.excepthook(*sys.exc_info())
        code = 1
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    line.send_json({"op": "done", "code": code, "cpu": time.process_time() - began})


def _alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (a zombie, exited but not yet collected, does
    not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def serve(args: list[str] | None = None) -> None:
    """The worker's main: ``--after PID`` waits for that process to exit before loading."""
    fingerprint = wire.fingerprint(os.environ)  # before any import can change sys.path
    args = sys.argv[1:] if args is None else args
    after = int(args[args.index("--after") + 1]) if "--after" in args else None
    if sys.path and sys.path[0] in ("", os.getcwd()):
        sys.path.pop(0)
    place = wire.place(os.environ, create=True)
    if place is None:
        return
    lock = os.open(place.lock, os.O_RDWR | os.O_CREAT, 0o600)
    for _ in range(100):  # a worker that is making way releases it within moments
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            time.sleep(0.05)
    else:
        return
    while after is not None and _alive(after):
        time.sleep(0.05)
    worker = Worker(place, fingerprint, lock)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        worker.warm()
        worker.listen()
        worker.loop()
    finally:
        worker.close()
