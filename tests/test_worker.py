"""The warm worker behind the plain command (docs/worker.md), end to end and in parts.

A real worker runs in a temporary ``XDG_RUNTIME_DIR`` (never the user's own); the rest of
the suite runs with ``AUTOGRAD_CLI_NO_WORKER=1`` (tests/conftest.py). Every answer the
worker gives is compared byte for byte with the in-process run of the same command line
(typer's CliRunner, as tests/conftest.py runs the CLI, or a real process on a terminal).

One worker serves the module (the ``worker`` fixture, made once): the first call answers
in its own process and starts it. While the worker loads torch and SymPy, the terminal
test's reference runs in a process of its own and this process loads them for its
references. Tests that need no worker run the parts (fake workers speaking the protocol,
``Worker.handle`` and ``Worker.loop`` on sockets of their own) and take under a second
each. Answers that would load torch a second time only to show the same thing are avoided:
the first call and the crash's answer in the client's own process are command lines
refused before torch loads.
"""

from __future__ import annotations

import array
import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import termios
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from autogradcli import client
from autogradcli.cli.app import app
from autogradcli.worker import server, wire

pytestmark = pytest.mark.skipif(not wire.supported(), reason="no Unix sockets")

ROOT = Path(__file__).resolve().parent.parent
# As the console script starts: sys.path[0] is the interpreter's directory, not the working
# directory (the checkout, whose package would shadow the copy on PYTHONPATH, see Running).
PRELUDE = "import os, sys; sys.path[0] = os.path.dirname(sys.executable); "
SCRIPT = [sys.executable, "-c", PRELUDE + "sys.argv[0] = 'autograd-cli'; "
          "from autogradcli.client import main; main()"]  # fmt: skip
OUTPUT = {"NO_COLOR": "1", "COLUMNS": "100", "TERM": "dumb"}
README = ["grad", "2*x**4+x**3+3*x**2+5*x+1", "--x", "2"]
ON_TERMINAL = [*README, "--quiet"]  # --quiet: no progress display, however slow the machine
# The module's first call: a grad command line, which the client cannot tell from one that
# needs torch; it is refused before torch loads, so its answer in its own process is quick.
FIRST = ["grad", "x**2", "--x", "2", "--repeat", "abc"]


def _private_dir() -> str:
    """A short 0700 directory (a socket's path must stay under about 100 bytes)."""
    return tempfile.mkdtemp(prefix="agw", dir="/tmp")


def _env(runtime: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != wire.OFF}
    return {**env, "XDG_RUNTIME_DIR": runtime, **OUTPUT, **extra}


def in_process(
    args: list[str], stdin: str | None = None, **env: str | None
) -> tuple[str, str, int]:
    """What the command prints in this process (stdout, stderr, exit code)."""
    try:
        runner = CliRunner(env={**OUTPUT, **env}, mix_stderr=False)  # type: ignore[call-arg]
    except TypeError:
        runner = CliRunner(env={**OUTPUT, **env})
    result = runner.invoke(app, args, input=stdin, prog_name="autograd-cli")
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.stdout, result.stderr, result.exit_code


def through_client(
    args: list[str], env: dict[str, str], stdin: str | None = None, timeout: float = 120
) -> tuple[str, str, int]:
    done = subprocess.run(
        [*SCRIPT, *args],
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )
    return done.stdout, done.stderr, done.returncode


class OnTerminal:
    """A client on a pseudo-terminal of 72 columns (colours on), its output read by a
    thread until the terminal closes."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        import pty
        import struct

        self.leader, follower = pty.openpty()
        fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 20, 72, 0, 0))
        try:
            self.process = subprocess.Popen(
                [*SCRIPT, *args],
                stdin=subprocess.DEVNULL,
                stdout=follower,
                stderr=follower,
                env=env,
            )
        finally:
            os.close(follower)
        self.chunks: list[bytes] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.leader, 65536)
            except OSError:  # EIO: the other side closed
                return
            if not chunk:
                return
            self.chunks.append(chunk)

    def result(self, timeout: float = 120) -> tuple[bytes, int]:
        """All it printed, and its exit code."""
        try:
            code = self.process.wait(timeout=timeout)
            self.reader.join(timeout)
        finally:
            self.process.kill()
            os.close(self.leader)
        return b"".join(self.chunks), code


def _client_package(env: dict[str, str]) -> str:
    """Where a client started with ``env`` imports autogradcli from."""
    code = PRELUDE + "import autogradcli; print(autogradcli.__file__)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    return done.stdout.strip()


def _terminal_env(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k not in OUTPUT} | {"TERM": "xterm-256color"}


def _wait(condition: Callable[[], Any], seconds: float, what: str) -> Any:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        found = condition()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"waited {seconds} s for {what}")


class Running:
    """The worker of the module's temporary runtime directory. Its clients, and so the
    worker, import a copy of the package made here (``PYTHONPATH``): an edit elsewhere in
    the checkout while the module runs would otherwise make the worker stale (it exits
    when the package's files change) and the next question be answered in-process."""

    def __init__(self, runtime: str) -> None:
        self.runtime = runtime
        copy = os.path.join(runtime, "src")
        self.package = os.path.join(copy, "autogradcli")
        shutil.copytree(wire.PACKAGE, self.package, symlinks=True)
        path = os.pathsep.join(p for p in (copy, os.environ.get("PYTHONPATH")) if p)
        self.env = _env(runtime, PYTHONPATH=path)
        saved = wire.PACKAGE
        wire.PACKAGE = self.package  # the place's name is the copy's (wire.install_key)
        try:
            self.place = wire.place(self.env, create=True)
        finally:
            wire.PACKAGE = saved
        assert self.place is not None
        self.first: tuple[str, str, int] = ("", "", -1)  # what the first call printed
        self.answered_at_start = -1  # the worker's count of questions once it listened
        self.terminal: tuple[bytes, int] = (b"", -1)  # ON_TERMINAL in its own process

    def status(self) -> dict[str, Any] | None:
        return wire.ask(self.place, {"op": "status"})  # type: ignore[arg-type]

    def questions(self) -> int:
        info = self.status()
        assert info is not None, "the worker is not running"
        return int(info["questions"])


@pytest.fixture(scope="module")
def worker() -> Iterator[Running]:
    """The first call that may need torch: answered in its own process, and it starts the
    worker, which the module's tests then share. Meanwhile the terminal test's reference
    runs in its own process, and this process loads torch and SymPy for its references."""
    runtime = _private_dir()
    running = Running(runtime)
    try:
        assert os.listdir(running.place.folder) == []  # type: ignore[union-attr]
        cold = OnTerminal(ON_TERMINAL, {**_terminal_env(running.env), wire.OFF: "1"})
        running.first = through_client(FIRST, running.env)
        assert _client_package(running.env) == os.path.join(running.package, "__init__.py")
        in_process(README)
        _wait(running.status, 300, "the worker to start")
        running.answered_at_start = running.questions()
        running.terminal = cold.result(300)
        yield running
    finally:
        wire.ask(running.place, {"op": "stop"})  # type: ignore[arg-type]
        shutil.rmtree(runtime, ignore_errors=True)


# --- the client: light, and what it keeps for itself -----------------------------------------

HEAVY = ("torch", "sympy", "typer", "click", "rich", "pydantic", "numpy", "mpmath")


def test_the_client_imports_nothing_heavy():
    code = (
        f"import sys, autogradcli.client\nprint(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert (done.returncode, done.stdout.strip()) == (0, "[]"), done.stderr


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        ([], {}, True),
        (["--help"], {}, True),
        (["grad", "x", "--x", "1", "--help"], {}, True),
        (["--version"], {}, True),
        (["--show-completion"], {}, True),
        (["grad", "x"], {"_AUTOGRAD_CLI_COMPLETE": "complete_bash"}, True),
        (["grad", "x**2", "--x", "2"], {}, False),
        (["grad", "--x", "2", "--", "--help"], {}, False),  # an expression, not the flag
    ],
)
def test_what_is_cheap(args, env, expected):
    assert client.cheap(args, env) is expected


def test_help_and_version_start_no_worker():
    """They print what the app alone prints: help in a process of its own (CliRunner would
    not do: it fixes help's width at 80 columns where a process has 78), the version and
    ``worker status`` through CliRunner."""
    runtime = _private_dir()
    try:
        env = _env(runtime)
        app_alone = [sys.executable, "-c", "import sys; sys.argv[0] = 'autograd-cli'; "
                     "from autogradcli.cli.app import main; main()"]  # fmt: skip
        helps = (["--help"], ["grad", "--help"])
        with ThreadPoolExecutor(2) as pool:  # the two sides at once (each waits on a process)
            alone = [
                pool.submit(
                    subprocess.run, [*app_alone, *args], capture_output=True, text=True, env=env
                )
                for args in helps
            ]
            client_side = [pool.submit(through_client, args, env) for args in helps]
            for args, done, ours in zip(helps, alone, client_side, strict=True):
                expected = (done.result().stdout, done.result().stderr, done.result().returncode)
                assert ours.result() == expected, args
        for args in (["--version"], ["worker", "status"]):
            expected = in_process(args, XDG_RUNTIME_DIR=runtime, **{wire.OFF: None})
            assert through_client(args, env) == expected, args
        assert os.listdir(runtime) == []
    finally:
        shutil.rmtree(runtime, ignore_errors=True)


def test_the_off_switch_runs_in_process_and_starts_nothing(monkeypatch):
    runtime = _private_dir()
    try:
        env = _env(runtime, AUTOGRAD_CLI_NO_WORKER="1")
        monkeypatch.setattr(sys, "argv", ["autograd-cli", *README])
        started = []
        monkeypatch.setattr(client, "start_worker", lambda env: started.append(env))
        monkeypatch.setattr(client, "in_process", lambda consumed=b"": started.append("here"))
        monkeypatch.setattr(os, "environ", env)
        client.main()
        assert started == ["here"]
    finally:
        shutil.rmtree(runtime, ignore_errors=True)


# --- who may connect -----------------------------------------------------------------------


def test_the_peer_check_refuses_another_uid():
    a, b = socket.socketpair(socket.AF_UNIX)
    with a, b:
        assert wire.peer_uid(a) == os.getuid()
        assert wire.peer_allowed(a)
        assert not wire.peer_allowed(a, uid=os.getuid() + 1)


def test_the_worker_answers_no_connection_from_another_uid(monkeypatch, tmp_path):
    place = wire.Place(str(tmp_path), str(tmp_path / "s"), str(tmp_path / "l"), "")
    worker = server.Worker(place, wire.fingerprint(os.environ))
    ours, theirs = socket.socketpair(socket.AF_UNIX)
    with ours, theirs:
        wire.send_json(theirs, {"op": "status"})
        monkeypatch.setattr(wire, "peer_uid", lambda sock: os.getuid() + 1)
        worker.handle(ours)
        theirs.settimeout(5)
        try:
            answer = theirs.recv(1)
        except ConnectionResetError:  # closed with the question unread
            answer = b""
        assert answer == b""  # closed, unanswered
    ours, theirs = socket.socketpair(socket.AF_UNIX)
    with ours, theirs:
        wire.send_json(theirs, {"op": "status"})
        monkeypatch.setattr(wire, "peer_uid", lambda sock: os.getuid())
        worker.handle(ours)
        theirs.settimeout(5)
        kind, payload = wire.receive(theirs)
        assert kind == b"J" and json.loads(payload)["pid"] == os.getpid()


def test_the_socket_directory_must_be_private(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    os.chmod(shared, 0o755)
    assert wire.folder({"XDG_RUNTIME_DIR": str(shared), "TMPDIR": str(shared)}) is None
    (shared / f"autograd-cli-{os.getuid()}").symlink_to(tmp_path)
    assert wire.folder({"TMPDIR": str(shared)}, create=True) is None  # a link: refused
    private = Path(_private_dir())
    try:
        made = wire.folder({"XDG_RUNTIME_DIR": str(private)}, create=True)
        assert made == str(private / "autograd-cli")
        assert os.stat(made).st_mode & 0o777 == 0o700
        os.chmod(made, 0o750)
        assert wire.folder({"XDG_RUNTIME_DIR": str(private)}) is None
    finally:
        shutil.rmtree(private, ignore_errors=True)


# --- the client against a worker that misbehaves (a fake, speaking the protocol) ---------------


@contextlib.contextmanager
def fake_worker(reply: Callable[[socket.socket, dict[str, Any]], None]) -> Iterator[wire.Place]:
    runtime = _private_dir()
    place = wire.place({"XDG_RUNTIME_DIR": runtime}, create=True)
    assert place is not None
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(place.socket)
    listener.listen(1)

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            _, payload = wire.receive(conn)
            reply(conn, json.loads(payload))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield place
    finally:
        listener.close()
        thread.join(5)
        shutil.rmtree(runtime, ignore_errors=True)


def _crash(conn: socket.socket, request: dict[str, Any]) -> None:
    wire.send_json(conn, {"op": "started", "pid": 1})
    wire.send(conn, b"O", b"half an answer")  # then the connection drops


def _stale(conn: socket.socket, request: dict[str, Any]) -> None:
    wire.send_json(conn, {"op": "stale"})


def _silent(conn: socket.socket, request: dict[str, Any]) -> None:
    wire.send_json(conn, {"op": "started", "pid": 1})
    wire.send(conn, b"E", b"something")
    conn.settimeout(10)
    with contextlib.suppress(OSError):
        assert conn.recv(1) == b""  # no heartbeat (a stalled question) until the client goes


def _answers(conn: socket.socket, request: dict[str, Any]) -> None:
    assert request["args"] == ["grad", "x"] and request["cwd"] == os.getcwd()
    wire.send_json(conn, {"op": "started", "pid": 1})
    wire.send(conn, b"O", b"out\n")
    wire.send(conn, b"E", b"err\n")
    wire.send_json(conn, {"op": "done", "code": 1})


@pytest.mark.parametrize("reply", [_crash, _stale, _silent])
def test_a_failing_worker_leaves_the_question_to_this_process(reply, capfd):
    with fake_worker(reply) as place:
        question = client.Question(["grad", "x"], {**os.environ, wire.HANG: "0.3"})
        assert question.ask(place) is None  # answer here
    assert capfd.readouterr() == ("", "")  # and nothing of the worker's was printed


def test_the_answer_is_printed_when_the_worker_is_done(capfd):
    with fake_worker(_answers) as place:
        assert client.Question(["grad", "x"], dict(os.environ)).ask(place) == 1
    assert capfd.readouterr() == ("out\n", "err\n")


# --- a changed package ---------------------------------------------------------------------------


def test_a_client_of_another_version_makes_the_worker_go(tmp_path):
    place = wire.Place(str(tmp_path), str(tmp_path / "s"), str(tmp_path / "l"), "")
    worker = server.Worker(place, wire.fingerprint(os.environ))
    worker.listen()
    ours, theirs = socket.socketpair(socket.AF_UNIX)
    with ours, theirs:
        wire.send_json(theirs, {"op": "run", "stamp": "0.0.1:1:2:3:[]", "fingerprint": ""})
        worker.handle(ours)
        assert json.loads(wire.receive(theirs)[1]) == {"op": "stale"}
    assert worker.stopping and not os.path.exists(place.socket)


def test_the_stamp_is_the_installed_package(monkeypatch, tmp_path):
    """The stamp follows the version, and the count, sizes and times of the package's
    source files (a copy here: the real package is shared with other runs)."""
    assert Path(wire.__file__).parent.parent == Path(wire.PACKAGE)  # autogradcli/ itself
    package = tmp_path / "package"
    (package / "sub").mkdir(parents=True)
    source = package / "sub" / "module.py"
    source.write_text("x = 1\n")
    monkeypatch.setattr(wire, "PACKAGE", str(package))
    stamps = [wire.stamp()]
    (package / "sub" / "__pycache__").mkdir()
    (package / "sub" / "__pycache__" / "module.cpython-311.pyc").write_bytes(b"0")
    (package / "notes.txt").write_text("not source")
    assert wire.stamp() == stamps[0]  # bytecode and other files are not the package
    info = source.stat()
    os.utime(source, ns=(info.st_atime_ns, info.st_mtime_ns + 1_000_000_000))
    stamps.append(wire.stamp())
    source.write_text("x = 12\n")
    os.utime(source, ns=(info.st_atime_ns, info.st_mtime_ns + 1_000_000_000))
    stamps.append(wire.stamp())
    (package / "new.py").write_text("")
    stamps.append(wire.stamp())
    monkeypatch.setattr(wire.autogradcli, "__version__", "0.0.1")
    stamps.append(wire.stamp())
    assert len(set(stamps)) == len(stamps)  # a time, a size, a file, a version: each new


def test_the_worker_exits_when_the_package_files_change(monkeypatch, tmp_path):
    package = tmp_path / "package"
    package.mkdir()
    source = package / "module.py"
    source.write_text("")
    monkeypatch.setattr(wire, "PACKAGE", str(package))
    monkeypatch.setattr(server, "STAMP_SECONDS", 0.05)
    monkeypatch.setattr(server, "TICK_SECONDS", 0.05)
    place = wire.Place(str(tmp_path), str(tmp_path / "s"), str(tmp_path / "l"), "")
    worker = server.Worker(place, wire.fingerprint(os.environ))
    worker.listen()
    loop = threading.Thread(target=worker.loop, daemon=True)
    try:
        loop.start()
        loop.join(0.5)
        assert loop.is_alive()  # nothing changed: it stays
        info = source.stat()
        os.utime(source, ns=(info.st_atime_ns, info.st_mtime_ns + 1_000_000_000))
        loop.join(10)
        assert not loop.is_alive()
    finally:
        worker.stopping = True
        loop.join(10)
        worker.close()


def test_the_worker_exits_after_its_idle_time(monkeypatch, tmp_path):
    """``Worker.loop`` alone; the real worker's idle exit is the module's last test."""
    monkeypatch.setenv(wire.IDLE, "0.2")
    place = wire.Place(str(tmp_path), str(tmp_path / "s"), str(tmp_path / "l"), "")
    worker = server.Worker(place, wire.fingerprint(os.environ))
    worker.listen()
    loop = threading.Thread(target=worker.loop, daemon=True)
    start = time.monotonic()
    try:
        loop.start()
        loop.join(10)
        took = time.monotonic() - start
        assert not loop.is_alive() and 0.2 <= took < 5
    finally:
        worker.stopping = True
        loop.join(10)
        worker.close()


# --- the real worker ---------------------------------------------------------------------------


def _plain(terminal: bytes) -> str:
    """A terminal's text without its escape sequences."""
    import re

    return re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", terminal.decode())


def test_the_first_call_answers_itself_and_starts_the_worker(worker):
    assert worker.first == in_process(FIRST)
    assert worker.first[1].startswith("Error: --repeat takes") and worker.first[2] == 2
    assert worker.answered_at_start == 0  # the worker answered nothing: the call did
    assert os.path.exists(worker.place.socket)


def test_the_next_call_is_answered_by_the_worker(worker):
    before = worker.questions()
    assert through_client(README, worker.env) == in_process(README)
    assert worker.questions() == before + 1
    status = through_client(["worker", "status"], worker.env)
    assert status[0].startswith("worker: running, pid ") and status[2] == 0
    assert "questions answered: " in status[0] and "MB resident" in status[0]


CORPUS: list[tuple[list[str], str | None]] = [
    (["grad", "2*x**4+x**3+3*x**2+5*x+1", "--x", "2", "--json"], None),
    (["grad", "mean((x+2)*(x+2)*3)", "--x", "ones(2,2)", "--repeat", "2", "--device", "cpu"], None),
    (["grad", "sin(x)", "--x", "1", "--rtol", "0", "--atol", "0", "--strict", "--json"], None),
    (["grad", "x*y", "--x", "1.0", "--y", "2.0", "--const", "y"], None),
    (["grad", "relu(x)", "--x", "[-1,0,2]", "--weights", "ones"], None),
    (["grad", "randn(3)*x", "--x", "2", "--seed", "7", "--dtype", "float64"], None),
    (["grad", "x**2", "--x", "2", "--device", "tpu", "--json"], None),  # exit 2, JSON error
    (["grad", "x**2", "--x", "2", "--repeat", "abc"], None),
    (["grad", "x**2", "--jsn", "2"], None),  # an unknown variable that looks like --json
    (["grad", "x.__class__", "--x", "2"], None),
    (["grad", "sin(x)", "--x", "1", "--order", "3"], None),
    (["grad", "-", "--x", "3"], "x**3 + 2*x"),  # the expression on standard input
    (["grad", "-", "--x", "2"], "y = x + 2; z = y*y*3\nout = z.mean()\nout.backward()"),
    (["jacobian", "x*sum(x)", "--x", "[1.0, 2.0]", "--show-rows"], None),
    (["jvp", "x*y + sin(x)", "--x", "[1, 2]", "--y", "[3, 4]", "--tangent", "x=[1,0]"], None),
    (["hessian", "x**2*y + y**3", "--x", "1", "--y", "2", "--json"], None),
    (["graph", "y = x + 2; z = y*y*3; out = mean(z)", "--x", "ones(2,2)", "--dot", "-"], None),
    (["graph", "x*x", "--x", "2", "--saved"], None),
    (["plot", "x*abs(x)", "--x", "-3:3", "--points", "9"], None),
    (["nosuchcommand"], None),
]


def test_answers_are_byte_for_byte_those_of_the_in_process_run(worker):
    """The clients run three at a time; this process computes the references meanwhile."""
    before = worker.questions()
    with ThreadPoolExecutor(3) as pool:
        warm = [pool.submit(through_client, args, worker.env, stdin) for args, stdin in CORPUS]
        for (args, stdin), answer in zip(CORPUS, warm, strict=True):
            expected = in_process(args, stdin)
            assert answer.result() == expected, args
    assert worker.questions() == before + len(CORPUS)  # none was answered in-process


def test_the_plot_picture_does_not_depend_on_an_ipython_shell_run_earlier(monkeypatch):
    """An IPython shell leaves the builtin ``__IPYTHON__`` in its process (the suite's
    magics tests do); plotext then took a second line off the terminal's height, and the
    in-process picture was a row shorter than the worker's (CI's whole-suite run)."""
    import builtins

    args = ["plot", "x*abs(x)", "--x", "-3:3", "--points", "9"]
    monkeypatch.delattr(builtins, "__IPYTHON__", raising=False)
    fresh = in_process(args, LINES="24")
    monkeypatch.setattr(builtins, "__IPYTHON__", True, raising=False)
    assert in_process(args, LINES="24") == fresh
    # 24 lines less one for the prompt, then a blank line and the verdict
    assert len(fresh[0].splitlines()) == 23 + 2
    small = in_process(args, COLUMNS="60", LINES="12")[0].splitlines()
    assert len(small) == 11 + 2 and max(map(len, small)) == 60  # the terminal still bounds it


def test_check_through_the_worker_differs_only_in_its_timing(worker):
    """``check``'s summary shows the time it took: that column (and the rate) is masked."""
    import re

    cases = 'grad "x**3" --x 2 --expect x=12\ngrad "x**2" --x 1 --expect x=3\n'

    def masked(run: tuple[str, str, int]) -> tuple[str, str, int]:
        # the rate has a decimal under 10 cases/s (a loaded machine): "0.28 s │     7.1 │"
        out = re.sub(r"[\d.]+ s │ +[\d.]+ │", "T", run[0])
        return out, run[1], run[2]

    warm = through_client(["check", "-"], worker.env, cases)
    assert warm[2] == 1 and "line 2  ✗ disagree" in warm[0]
    assert masked(warm) == masked(in_process(["check", "-"], cases))


def test_a_terminal_gets_the_same_colours_and_width(worker):
    """On a terminal (a pty of 72 columns, colours on): the worker's answer is the bytes
    the command prints there without a worker (run by the fixture)."""
    before = worker.questions()
    warm = OnTerminal(ON_TERMINAL, _terminal_env(worker.env)).result()
    assert worker.questions() == before + 1
    cold_out, cold_code = worker.terminal
    assert cold_code == 0 and "✓ autograd and SymPy agree" in _plain(cold_out)
    assert b"\x1b[" in warm[0] and warm == worker.terminal


def test_two_clients_at_once_with_different_settings(worker):
    jobs = [
        (["grad", "sum(x*sin(x))", "--x", "[1.0, 2.0, 3.0]", "--dtype", "float64"], "60"),
        (["jacobian", "x*sum(x)", "--x", "[1.0, 2.0]", "--show-rows"], "130"),
    ]
    processes = [
        subprocess.Popen(
            [*SCRIPT, *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**worker.env, "COLUMNS": columns},
        )
        for args, columns in jobs
    ]
    for process, (args, columns) in zip(processes, jobs, strict=True):
        out, err = process.communicate(timeout=120)
        expected = in_process(args, COLUMNS=columns)
        assert (out.decode(), err.decode(), process.returncode) == expected


def _unread(pipe: Any) -> int:
    """How many bytes written to ``pipe`` its reader has not read yet (Linux's FIONREAD)."""
    count = array.array("i", [0])
    fcntl.ioctl(pipe.fileno(), termios.FIONREAD, count)
    return count[0]


def _question_waiting_for_input(
    worker: Running, partial: bytes, **popen: Any
) -> subprocess.Popen[bytes]:
    """A client whose question (``grad - --x 2``) runs in the worker and has read
    ``partial`` from standard input (the client read it from its pipe for the question)."""
    before = worker.questions()
    process = subprocess.Popen(
        [*SCRIPT, "grad", "-", "--x", "2"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=worker.env,
        **popen,
    )
    assert process.stdin is not None
    process.stdin.write(partial)
    process.stdin.flush()
    _wait(lambda: worker.questions() == before + 1, 60, "the question to reach the worker")
    _wait(lambda: _unread(process.stdin) == 0, 60, "the question to read its input")
    return process


def _reading_input(pid: int) -> bool:
    """Whether process ``pid`` waits in ``read`` on its standard input (Linux)."""
    try:
        return Path(f"/proc/{pid}/syscall").read_text().startswith("0 0x0 ")
    except OSError:
        return False


def _ignoring_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.parametrize("ignored", [False, True], ids=["sigint-default", "sigint-ignored"])
@pytest.mark.skipif(not Path("/proc/self/syscall").exists(), reason="needs Linux's /proc")
def test_ctrl_c_cancels_the_question_and_the_worker_stays(worker, ignored):
    """SIGINT to a client whose question waits for input: what the command prints on
    Ctrl-C without a worker (exit 130, nothing printed, the partial text not parsed);
    then the worker answers the next question. ``ignored``: both started with SIGINT
    ignored, as a shell script's background job is (CI ran the suite so); Python leaves
    it ignored, so the command without a worker parsed ``x**`` when its input closed."""
    popen: dict[str, Any] = {"preexec_fn": _ignoring_sigint} if ignored else {}
    alone = subprocess.Popen(
        [*SCRIPT, "grad", "-", "--x", "2"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**worker.env, wire.OFF: "1"},
        **popen,
    )
    assert alone.stdin is not None
    alone.stdin.write(b"x**")
    alone.stdin.flush()
    process = _question_waiting_for_input(worker, b"x**", **popen)
    process.send_signal(signal.SIGINT)
    _wait(lambda: _reading_input(alone.pid), 120, "the command to read its input")
    alone.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    expected = alone.communicate(timeout=60)
    assert (out, err, process.returncode) == (*expected, alone.returncode)
    assert (out, err, process.returncode) == (b"", b"", 130)
    _wait(lambda: worker.status()["running"] == 0, 30, "the question to end")  # type: ignore[index]
    test_the_next_call_is_answered_by_the_worker(worker)


def test_a_worker_that_dies_mid_question_leaves_it_to_the_client(worker):
    """The question's process is killed after it read part of standard input: the client
    answers in its own process, from all of its input, and prints the answer once. (The
    expression is refused before torch is needed, so that answer is quick; its error
    quotes the part read before the crash.)"""
    process = _question_waiting_for_input(worker, b"x.__cl")
    (pid,) = worker.status()["pids"]  # type: ignore[index]
    os.kill(pid, signal.SIGKILL)
    _wait(lambda: worker.status()["running"] == 0, 30, "the worker to see it go")  # type: ignore[index]
    out, err = process.communicate(b"ass__ + 1", timeout=120)
    expected = in_process(["grad", "-", "--x", "2"], "x.__class__ + 1")
    assert (out.decode(), err.decode(), process.returncode) == expected
    assert expected[1].startswith("Error: 'x.__class__' cannot be used") and expected[2] == 2
    assert err.decode().count("Error:") == 1
    test_the_next_call_is_answered_by_the_worker(worker)


def test_the_next_question_goes_to_the_spare_and_a_dead_spare_is_replaced(worker):
    """A process forked ahead waits for the next question and answers it; once no question
    runs another is forked. A spare killed while it waits is replaced, and the question
    that comes meanwhile is answered by a process forked for it."""
    spare = _wait(lambda: worker.status()["spare"], 60, "a spare")  # type: ignore[index]
    process = _question_waiting_for_input(worker, b"x**")
    assert worker.status()["pids"] == [spare]  # type: ignore[index]
    out, err = process.communicate(b"3 + 2*x", timeout=60)
    expected = in_process(["grad", "-", "--x", "2"], "x**3 + 2*x")
    assert (out.decode(), err.decode(), process.returncode) == expected and expected[2] == 0

    def another() -> int | None:
        found = worker.status()["spare"]  # type: ignore[index]
        return found if found not in (None, spare) else None

    new = _wait(another, 60, "the next spare")
    os.kill(new, signal.SIGKILL)
    _wait(lambda: worker.status()["spare"] != new, 30, "the worker to see it go")  # type: ignore[index]
    test_the_next_call_is_answered_by_the_worker(worker)
    _wait(another, 60, "a spare after the dead one")


def test_a_spare_that_does_not_take_its_question_is_killed_and_passed_over():
    """Its end of the channel closed: ``hand`` says so (the worker forks a child for the
    question) and kills the process, which might be alive but stuck."""
    stuck = subprocess.Popen(["sleep", "60"])
    ours, theirs = socket.socketpair()
    theirs.close()
    question, _ = socket.socketpair()
    try:
        assert server.Spare(stuck.pid, ours).hand(question, b"{}") is False
        assert ours.fileno() == -1  # the channel is closed either way
        assert stuck.wait(timeout=10) == -signal.SIGKILL
    finally:
        question.close()
        stuck.kill()


def test_the_worker_exits_when_idle(worker):
    """Last of the module: a question that asks for an idle time of 0.2 s."""
    env = {**worker.env, wire.IDLE: "0.2"}
    assert through_client(["grad", "x**2", "--x", "3"], env) == in_process(
        ["grad", "x**2", "--x", "3"]
    )
    _wait(lambda: not os.path.exists(worker.place.socket), 30, "the idle worker to exit")
    assert worker.status() is None
