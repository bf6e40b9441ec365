"""The ``autograd-cli`` entry point: hands the question to this user's warm worker when one
runs, else answers it in this process and starts a worker for the next one.

Nothing heavy is imported before it is known that the question runs here: no torch,
SymPy, Typer, Click, Rich, pydantic or NumPy (tests/test_worker.py checks the set).
``--help``, ``--version``, shell completion and ``shell`` run here and start no worker;
``worker status`` and ``worker stop`` are answered here. The worker's answer is held
until the worker says it has finished, then printed (standard output and error in the
order they were written) and the exit code taken; so a worker that crashes, stalls past
``AUTOGRAD_CLI_WORKER_HANG`` seconds or is stale leaves nothing printed, and the question
is answered here once. docs/worker.md describes it.
"""

from __future__ import annotations

import io
import os
import select
import signal
import sys
import time

import autogradcli
from autogradcli.worker import wire

TYPE_CHECKING = False  # typing's, without importing typing (milliseconds of every call)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

# Words that need no torch: answered here, and no worker is started for them.
CHEAP = frozenset({"--help", "--version", "--install-completion", "--show-completion"})
# In this process always: the shell keeps the terminal; ``worker`` (its help, a usage
# error) needs no torch.
HERE = frozenset({"shell", "worker"})
HELD = 8 << 20  # past this many bytes of answer, it is printed as it comes
GRACE = 3.0  # seconds the worker has to finish a question after Ctrl-C
LOST = (
    "Error: the worker stopped after part of its answer was printed; run the command "
    f"again with {wire.OFF}=1 to answer it in this process"
)


def cheap(args: list[str], env: Mapping[str, str]) -> bool:
    """Whether the command needs no torch: no arguments (the help), ``--help``,
    ``--version``, shell completion."""
    words = args[: args.index("--")] if "--" in args else args
    completing = any(k.startswith("_") and k.endswith("_COMPLETE") for k in env)
    return not args or bool(CHEAP.intersection(words)) or completing


def _stream(stream: Any, fd: int) -> dict[str, Any]:
    """How this process's standard stream ``fd`` is set up (the worker's copy matches)."""
    try:
        size = os.fstat(fd).st_blksize
    except OSError:
        size = 0
    return {
        "fd": fd,
        "tty": os.isatty(fd),
        "encoding": stream.encoding,
        "errors": stream.errors,
        "line_buffering": stream.line_buffering,
        "write_through": getattr(stream, "write_through", False),
        "buffered": isinstance(stream.buffer, io.BufferedIOBase),
        "size": size if size > 1 else io.DEFAULT_BUFFER_SIZE,
    }


def _size(fd: int) -> list[int] | None:
    try:
        return list(os.get_terminal_size(fd))
    except OSError:
        return None


def _write(fd: int, data: bytes) -> None:
    """All of ``data`` to descriptor ``fd`` (a closed pipe drops the rest)."""
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view) :]
    except BrokenPipeError:
        pass


class Question:
    """One command line asked of the worker: the request, the talk, the answer."""

    def __init__(self, args: list[str], env: Mapping[str, str]) -> None:
        self.args = args
        self.env = env
        self.consumed = bytearray()  # standard input read for the worker
        self.held: list[tuple[int, bytes]] = []
        self.size = 0
        self.streaming = False

    def request(self) -> dict[str, Any]:
        """What the worker needs to answer as this process would."""
        main = sys.modules.get("__main__")
        return {
            "op": "run",
            "stamp": wire.stamp(),
            "fingerprint": wire.fingerprint(self.env),
            "args": self.args,
            "argv0": sys.argv[0],
            "package": getattr(main, "__package__", None),
            "cwd": os.getcwd(),
            "env": dict(self.env),
            "streams": {
                "stdin": _stream(sys.stdin, 0),
                "stdout": _stream(sys.stdout, 1),
                "stderr": _stream(sys.stderr, 2),
            },
            "sizes": {str(fd): _size(fd) for fd in (0, 1, 2)},
        }

    def ask(self, place: wire.Place) -> int | None:
        """The exit code after printing the worker's answer; None when the worker is not
        there, is stale, crashed or stalled with nothing printed (answer here)."""
        sock = wire.connect(place.socket)  # first: with no worker, nothing more to do
        if sock is None:
            return None
        try:
            request = self.request()
        except (OSError, AttributeError):  # no working directory, a stream replaced
            sock.close()
            return None
        wake_read, wake_write = os.pipe()
        os.set_blocking(wake_read, False)
        os.set_blocking(wake_write, False)
        interrupts: list[float] = []
        old_handler = signal.signal(signal.SIGINT, lambda *_: interrupts.append(time.monotonic()))
        old_wakeup = signal.set_wakeup_fd(wake_write)
        try:
            sock.settimeout(30.0)
            wire.send_json(sock, request)
            return self._talk(sock, wake_read, interrupts)
        except (OSError, EOFError, ValueError):
            return self._lost()
        finally:
            signal.set_wakeup_fd(old_wakeup)
            signal.signal(signal.SIGINT, old_handler)
            os.close(wake_read)
            os.close(wake_write)
            sock.close()

    def _talk(self, sock: Any, wake: int, interrupts: list[float]) -> int | None:
        import json

        hang = wire.seconds(self.env, wire.HANG, wire.HANG_SECONDS)
        progress, cpu = time.monotonic(), -1.0
        wanted: int | None = None  # bytes of standard input the worker asked for
        sent_interrupt = 0.0
        while True:
            if interrupts and not sent_interrupt:
                sent_interrupt = time.monotonic()
                wire.send_json(sock, {"op": "interrupt"})
                wanted = None
            if len(interrupts) > 1 or (
                sent_interrupt and time.monotonic() - sent_interrupt > GRACE
            ):
                return self._aborted()
            if wanted is not None:
                progress = time.monotonic()  # waiting for our input is not a stall
            elif time.monotonic() - progress > hang:
                return self._lost()
            watch = [sock, wake] + ([0] if wanted is not None else [])
            ready, _, _ = select.select(watch, [], [], 0.25)
            if wake in ready:
                try:  # noqa: SIM105 (contextlib: milliseconds of the client's start)
                    os.read(wake, 512)
                except BlockingIOError:
                    pass
            if 0 in ready and wanted is not None:
                try:
                    data = os.read(0, wanted)
                except OSError:
                    data = b""
                self.consumed += data
                wire.send(sock, b"I", data)
                wanted = None
            if sock not in ready:
                continue
            kind, payload = wire.receive(sock)
            if kind in (b"O", b"E"):
                self._hold(1 if kind == b"O" else 2, payload)
                progress = time.monotonic()
                continue
            message = json.loads(payload)
            op = message.get("op")
            if op == "alive":
                if message["cpu"] > cpu:
                    progress, cpu = time.monotonic(), message["cpu"]
            elif op == "started":
                progress = time.monotonic()
            elif op == "stdin":
                wanted = int(message["n"])
            elif op == "stale":
                return self._lost()
            elif op == "done":
                self._release()
                return int(message["code"])

    def _hold(self, fd: int, data: bytes) -> None:
        if self.streaming:
            _write(fd, data)
            return
        self.held.append((fd, data))
        self.size += len(data)
        if self.size > HELD:
            self._release()
            self.streaming = True

    def _release(self) -> None:
        for fd, data in self.held:
            _write(fd, data)
        self.held.clear()

    def _lost(self) -> int | None:
        """The worker failed: answer here (None), unless part of its answer is out."""
        if not self.streaming:
            return None
        _write(2, (LOST + "\n").encode())
        return 2

    def _aborted(self) -> int:
        """Ctrl-C and the worker did not finish in time: what it printed, then exit 130
        with nothing more, as a command stopped by Ctrl-C in this process ends."""
        self._release()
        return autogradcli.INTERRUPTED


class _Replay(io.RawIOBase):
    """Standard input again: the bytes already read for the worker, then the rest."""

    def __init__(self, consumed: bytes) -> None:
        self.consumed = memoryview(consumed)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self.consumed:
            size = min(len(buffer), len(self.consumed))
            buffer[:size] = self.consumed[:size]
            self.consumed = self.consumed[size:]
            return size
        data = os.read(0, len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def isatty(self) -> bool:
        return os.isatty(0)

    def fileno(self) -> int:
        return 0


class Settled:
    """Loads torch and SymPy with the cycle collector off, then freezes what they made.

    Their import makes about 200,000 objects that live as long as the process; each full
    collection during it walks all of them (three or four of them, some 0.3 s of a first
    call). While one of ``PACKAGES`` loads, nothing is collected; when the outermost
    finishes, ``gc.freeze()`` moves every object so far out of the collector's sight and the
    collector runs as before (cycles made after the import are collected as usual). Only
    the command line's own process installs it (``in_process``), never the Python API.
    """

    PACKAGES = frozenset({"torch", "sympy"})

    def __init__(self, packages: frozenset[str] = PACKAGES) -> None:
        self.packages = packages
        self.depth = 0
        self.collecting = True

    @classmethod
    def install(cls, packages: frozenset[str] = PACKAGES) -> Settled | None:
        """Put a finder first in ``sys.meta_path`` unless the packages are loaded already."""
        if packages <= sys.modules.keys():
            return None
        finder = cls(packages)
        sys.meta_path.insert(0, finder)
        return finder

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        """The spec the other finders give for a watched package, its loader's
        ``exec_module`` wrapped; None (ask the next finder) for every other name."""
        if name not in self.packages:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = None if finder is self or find is None else find(name, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        load = loader.exec_module
        loader.exec_module = lambda module: self._quietly(load, module)
        return spec

    def _quietly(self, load: Any, module: Any) -> None:
        import gc

        if self.depth == 0:
            self.collecting = gc.isenabled()
            gc.disable()
        self.depth += 1
        try:
            load(module)
        finally:
            self.depth -= 1
            if self.depth == 0:
                gc.freeze()
                if self.collecting:
                    gc.enable()
        if self.depth == 0 and self.packages <= sys.modules.keys() and self in sys.meta_path:
            sys.meta_path.remove(self)  # all loaded: nothing more to watch


def in_process(consumed: bytes = b"") -> None:
    """Answer here, with the Typer app, as without a worker. Ctrl-C raises
    KeyboardInterrupt even where SIGINT came ignored (a shell script's background job):
    Python would leave it ignored, and the worker's path answers it (exit 130)."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if consumed:
        old = sys.stdin
        sys.stdin = io.TextIOWrapper(
            io.BufferedReader(_Replay(consumed)), encoding=old.encoding, errors=old.errors
        )
    Settled.install()
    try:
        from autogradcli.cli.app import main as run
    except KeyboardInterrupt:  # Ctrl-C while the app loads: the same quiet exit as later
        sys.exit(autogradcli.INTERRUPTED)
    run()


def start_worker(env: Mapping[str, str]) -> bool:
    """Start this user's worker in the background unless one runs or is starting (it
    holds the lock). It waits for this process to exit before it loads torch."""
    import fcntl

    place = wire.place(env, create=True)
    if place is None:
        return False
    try:
        lock = os.open(place.lock, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return False
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(lock, fcntl.LOCK_UN)
    except OSError:
        return False
    finally:
        os.close(lock)
    import subprocess

    flags = subprocess._args_from_interpreter_flags()  # type: ignore[attr-defined]
    code = "from autogradcli.worker.server import serve; serve()"
    log = os.open(place.log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        subprocess.Popen(
            [sys.executable, *flags, "-c", code, "--after", str(os.getpid())],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            cwd="/",
            start_new_session=True,
            close_fds=True,
        )
    except OSError:
        return False
    finally:
        os.close(log)
    return True


def _control(action: str, env: Mapping[str, str]) -> int:
    """``worker status``/``stop``: its lines, and the app's exit codes when they cannot be
    written (a closed pipe: 141 quietly; a full disk: one ``Error:`` line, 2)."""
    try:
        code = wire.control(action, env, print)
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no flush error at exit
        return autogradcli.BROKEN_PIPE
    except OSError as exc:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.stderr.write(f"Error: cannot write the output: {exc.strerror or exc}\n")
        return 2
    return code


def main() -> None:
    """Console-script entry point (``autograd-cli``, ``python -m autogradcli``)."""
    args = sys.argv[1:]
    env = os.environ
    if args == ["--version"]:
        print(f"autograd-cli {autogradcli.__version__}")
        sys.exit(0)
    if args[:1] == ["worker"] and args[1:] in ([], *([a] for a in wire.ACTIONS)):
        sys.exit(_control(args[1] if args[1:] else "status", env))
    use = not (
        wire.disabled(env)
        or not wire.supported()
        or cheap(args, env)
        or args[0] in HERE
        or None in (sys.stdin, sys.stdout, sys.stderr)
    )
    if not use:
        in_process()
        return
    place = wire.place(env)
    question = Question(args, env)
    if place is not None:
        code = question.ask(place)
        if code is not None:
            sys.exit(code)
    try:
        in_process(bytes(question.consumed))
    finally:  # after the answer: the worker's start takes nothing from it
        try:  # noqa: SIM105 (contextlib: milliseconds of the client's start)
            sys.stdout.flush()
        except (OSError, ValueError):
            pass
        start_worker(env)
