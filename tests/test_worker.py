"""The warm worker behind the plain command (docs/worker.md), end to end and in parts.

A real worker runs in a temporary ``XDG_RUNTIME_DIR`` (never the user's own); the rest of
the suite runs with ``AUTOGRAD_CLI_NO_WORKER=1`` (tests/conftest.py). Every answer the
worker gives is compared byte for byte with the in-process run of the same command line
(typer's CliRunner, as tests/conftest.py runs the CLI, or a real process on a terminal).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from autogradcli import client
from autogradcli.cli.app import app
from autogradcli.worker import server, wire

pytestmark = pytest.mark.skipif(not wire.supported(), reason="no Unix sockets")

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = [sys.executable, "-c", "import sys; sys.argv[0] = 'autograd-cli'; "
          "from autogradcli.client import main; main()"]  # fmt: skip
OUTPUT = {"NO_COLOR": "1", "COLUMNS": "100", "TERM": "dumb"}
README = ["grad", "2*x**4+x**3+3*x**2+5*x+1", "--x", "2"]


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


def _wait(condition: Callable[[], Any], seconds: float, what: str) -> Any:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        found = condition()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"waited {seconds} s for {what}")


class Running:
    """The worker of the module's temporary runtime directory."""

    def __init__(self, runtime: str) -> None:
        self.runtime = runtime
        self.env = _env(runtime)
        self.place = wire.place(self.env, create=True)
        assert self.place is not None

    def status(self) -> dict[str, Any] | None:
        return wire.ask(self.place, {"op": "status"})  # type: ignore[arg-type]

    def questions(self) -> int:
        info = self.status()
        assert info is not None, "the worker is not running"
        return int(info["questions"])


@pytest.fixture(scope="module")
def worker() -> Iterator[Running]:
    """The first call that needs torch: answered in its own process, and it starts the
    worker, which the module's tests then share."""
    runtime = _private_dir()
    running = Running(runtime)
    try:
        out = through_client(README, running.env)
        assert out == in_process(README)
        _wait(running.status, 180, "the worker to start")
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
    """They print what the app alone prints (CliRunner would not do: it fixes help's width
    at 80 columns where a process has 78)."""
    runtime = _private_dir()
    try:
        env = _env(runtime)
        app_alone = [sys.executable, "-c", "import sys; sys.argv[0] = 'autograd-cli'; "
                     "from autogradcli.cli.app import main; main()"]  # fmt: skip
        for args in (["--version"], ["--help"], ["grad", "--help"], ["worker", "status"]):
            done = subprocess.run([*app_alone, *args], capture_output=True, text=True, env=env)
            expected = (done.stdout, done.stderr, done.returncode)
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
    time.sleep(3)  # no heartbeat: a stalled question


def _answers(conn: socket.socket, request: dict[str, Any]) -> None:
    assert request["args"] == ["grad", "x"] and request["cwd"] == os.getcwd()
    wire.send_json(conn, {"op": "started", "pid": 1})
    wire.send(conn, b"O", b"out\n")
    wire.send(conn, b"E", b"err\n")
    wire.send_json(conn, {"op": "done", "code": 1})


@pytest.mark.parametrize("reply", [_crash, _stale, _silent])
def test_a_failing_worker_leaves_the_question_to_this_process(reply, capfd):
    with fake_worker(reply) as place:
        question = client.Question(["grad", "x"], {**os.environ, wire.HANG: "1"})
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


def test_the_worker_exits_when_the_package_files_change(tmp_path):
    place = wire.Place(str(tmp_path), str(tmp_path / "s"), str(tmp_path / "l"), "")
    worker = server.Worker(place, wire.fingerprint(os.environ))
    worker.listen()
    loop = threading.Thread(target=worker.loop, daemon=True)
    loop.start()
    touched = Path(wire.PACKAGE) / "worker" / "__init__.py"
    info = touched.stat()
    try:
        os.utime(touched, ns=(info.st_atime_ns, info.st_mtime_ns + 1_000_000_000))
        loop.join(10)
        assert not loop.is_alive()
    finally:
        os.utime(touched, ns=(info.st_atime_ns, info.st_mtime_ns))
        worker.close()


# --- the real worker ---------------------------------------------------------------------------


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
    before = worker.questions()
    for args, stdin in CORPUS:
        assert through_client(args, worker.env, stdin) == in_process(args, stdin), args
    assert worker.questions() == before + len(CORPUS)  # none was answered in-process


def test_check_through_the_worker_differs_only_in_its_timing(worker):
    """``check``'s summary shows the time it took: that column (and the rate) is masked."""
    import re

    cases = 'grad "x**3" --x 2 --expect x=12\ngrad "x**2" --x 1 --expect x=3\n'

    def masked(run: tuple[str, str, int]) -> tuple[str, str, int]:
        out = re.sub(r"[\d.]+ s │ +\d+ │", "T", run[0])
        return out, run[1], run[2]

    warm = through_client(["check", "-"], worker.env, cases)
    assert warm[2] == 1 and "line 2  ✗ disagree" in warm[0]
    assert masked(warm) == masked(in_process(["check", "-"], cases))


def test_a_terminal_gets_the_same_colours_and_width(worker):
    """On a terminal (a pty of 72 columns, colours on): the worker's answer is the bytes
    the command prints there without a worker."""
    import pty

    def on_terminal(env: dict[str, str]) -> bytes:
        import fcntl
        import struct
        import termios

        leader, follower = pty.openpty()
        fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 20, 72, 0, 0))
        process = subprocess.Popen(
            [*SCRIPT, *README, "--quiet"],
            stdin=subprocess.DEVNULL,
            stdout=follower,
            stderr=follower,
            env=env,
        )
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the other side closed
                break
            if not chunk:
                break
            chunks.append(chunk)
        process.wait(timeout=120)
        os.close(leader)
        return b"".join(chunks)

    env = {k: v for k, v in worker.env.items() if k not in OUTPUT} | {"TERM": "xterm-256color"}
    before = worker.questions()
    warm = on_terminal(env)
    assert worker.questions() == before + 1
    cold = on_terminal({**env, wire.OFF: "1"})
    assert b"\x1b[" in warm and warm == cold


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


def _question_waiting_for_input(worker: Running, partial: bytes) -> subprocess.Popen[bytes]:
    """A client whose question (``grad - --x 2``) has read ``partial`` from standard input
    and waits for the rest."""
    before = worker.questions()
    process = subprocess.Popen(
        [*SCRIPT, "grad", "-", "--x", "2"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=worker.env,
    )
    assert process.stdin is not None
    process.stdin.write(partial)
    process.stdin.flush()
    _wait(lambda: worker.questions() == before + 1, 60, "the question to reach the worker")
    _wait(lambda: worker.status()["running"] == 1, 60, "the question to run")  # type: ignore[index]
    time.sleep(1.0)  # it reads what there is, then waits for more
    return process


def _reading_input(pid: int) -> bool:
    """Whether process ``pid`` waits in ``read`` on its standard input (Linux)."""
    try:
        return Path(f"/proc/{pid}/syscall").read_text().startswith("0 0x0 ")
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/syscall").exists(), reason="needs Linux's /proc")
def test_ctrl_c_cancels_the_question_and_the_worker_stays(worker):
    """SIGINT to a client whose question waits for input: what the command prints on
    Ctrl-C without a worker; then the worker answers the next question."""
    process = _question_waiting_for_input(worker, b"x**")
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    alone = subprocess.Popen(
        [*SCRIPT, "grad", "-", "--x", "2"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**worker.env, wire.OFF: "1"},
    )
    assert alone.stdin is not None
    alone.stdin.write(b"x**")
    alone.stdin.flush()
    _wait(lambda: _reading_input(alone.pid), 120, "the command to read its input")
    alone.send_signal(signal.SIGINT)
    expected = alone.communicate(timeout=60)
    assert (out, err, process.returncode) == (*expected, alone.returncode)
    assert process.returncode != 0
    _wait(lambda: worker.status()["running"] == 0, 30, "the question to end")  # type: ignore[index]
    test_the_next_call_is_answered_by_the_worker(worker)


def test_a_worker_that_dies_mid_question_leaves_it_to_the_client(worker):
    """The question's process is killed after it read part of standard input: the client
    answers in its own process, from all of its input, and prints the answer once."""
    process = _question_waiting_for_input(worker, b"2*x**4+x**3")
    (pid,) = worker.status()["pids"]  # type: ignore[index]
    os.kill(pid, signal.SIGKILL)
    time.sleep(0.5)
    out, err = process.communicate(b"+3*x**2+5*x+1", timeout=180)
    expected = in_process(["grad", "-", "--x", "2"], "2*x**4+x**3+3*x**2+5*x+1")
    assert (out.decode(), err.decode(), process.returncode) == expected
    assert out.decode().count("✓ autograd and SymPy agree") == 1
    test_the_next_call_is_answered_by_the_worker(worker)


def test_the_worker_exits_when_idle(worker):
    """Last of the module: a question that asks for a one-second idle time."""
    env = {**worker.env, wire.IDLE: "1"}
    assert through_client(["grad", "x**2", "--x", "3"], env) == in_process(
        ["grad", "x**2", "--x", "3"]
    )
    _wait(lambda: not os.path.exists(worker.place.socket), 30, "the idle worker to exit")
    assert worker.status() is None
