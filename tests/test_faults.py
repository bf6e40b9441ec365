"""Faults around a correct run (issue 25): endless input, a killed worker, Ctrl-C and
SIGTERM, a full disk or a closed pipe, an internal error, overflowed plot values, a time
limit past what a thread can wait, and files written only where the user asked.

Where the fault needs one (a signal, a killed worker, /dev/full, a closed pipe) the test
runs a real process: ``autograd-cli`` through ``autogradcli.cli.app:main`` (the in-process
entry point, not the warm-worker client), with ``batch.run_case`` slowed to a sleep and
torch left unloaded (``HARNESS``), so that each costs about a second and a signal lands
while cases are in flight. Every wait has a timeout: nothing here can hang the suite.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import xml.dom.minidom
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest

import autogradcli
import autogradcli as ag
from autogradcli import FAULT_EXIT_CODES, FAULT_EXITS, INTERNAL_ERROR
from autogradcli.cli import batch, checking
from autogradcli.cli.batch import Case, Done, junit_xml, read_cases, run_all
from autogradcli.cli.checking import run_check, stops_installed
from autogradcli.cli.lines import group
from autogradcli.cli.shell import Shell, run_lines, run_stream
from autogradcli.cli.workers import _signals_deferred, cores, pool_size
from autogradcli.errors import LimitError
from autogradcli.reference.timeout import time_limit
from autogradcli.render import Output
from autogradcli.settings import Limits, Settings
from tests.conftest import cli

ROOT = Path(__file__).resolve().parent.parent
FORK = hasattr(os, "fork")
TIMEOUT = 60  # seconds any real process of this file may take before the test fails

# A real autograd-cli whose cases sleep FAULT_SLOW seconds each and load no torch; the case
# on line FAULT_HOLD (if set) writes its worker's pid to FAULT_PIDFILE and sleeps 30 s the
# first time it runs, so that a test can kill the worker that holds it.
HARNESS = """
import os, sys, time
import autogradcli.cli.batch as b
real = b.run_case
def slow(case, allow_writes=False):
    hold = os.environ.get("FAULT_HOLD")
    pidfile = os.environ.get("FAULT_PIDFILE", "")
    if hold and case.line == int(hold) and not os.path.exists(pidfile):
        with open(pidfile + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.rename(pidfile + ".tmp", pidfile)
        time.sleep(30)
    time.sleep(float(os.environ.get("FAULT_SLOW", "0")))
    return real(case, allow_writes)
b.run_case = slow
b._warm = lambda: None
from autogradcli.cli.app import main
sys.argv = ["autograd-cli", *sys.argv[1:]]
main()
"""
BAD_CASE = (
    "a line starts with a command (grad, jacobian, jvp, hessian, graph, plot), not "
    "'nonsense', e.g. grad \"x**3\" --x 2"
)


def _cases(tmp_path: Path, count: int) -> Path:
    """A check file of ``count`` bad-input cases (they need no torch)."""
    path = tmp_path / "cases.txt"
    path.write_text("".join(f"nonsense {n}\n" for n in range(1, count + 1)))
    return path


def _start(args: list[str], env: dict[str, str] | None = None, **kw: object) -> subprocess.Popen:
    environment = {**os.environ, "NO_COLOR": "1", "COLUMNS": "100", **(env or {})}
    return subprocess.Popen(
        [sys.executable, "-c", HARNESS, *args],
        cwd=ROOT,
        env=environment,
        start_new_session=True,  # its own process group, as a terminal gives a job
        **kw,  # type: ignore[arg-type]
    )


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    if not path.exists():
        pytest.skip("needs Linux's /proc/PID/task/PID/children")
    return [int(p) for p in path.read_text().split()]


def _gone(pids: list[int]) -> bool:
    """Each process has ended (and is no zombie)."""
    for pid in pids:
        stat = Path(f"/proc/{pid}/stat")
        if stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] != "Z":
            return False
    return True


def _lines(out: str) -> tuple[list[dict[str, object]], dict[str, object]]:
    *cases, last = (json.loads(x) for x in out.splitlines())
    return cases, last["summary"]


# --- hangs: input without end ---------------------------------------------------------------


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_a_check_file_from_dev_zero_ends_with_an_error():
    start = time.perf_counter()
    with open("/dev/zero", "rb") as zero, pytest.raises(LimitError) as raised:
        read_cases(zero, Limits(max_file_bytes=1 << 20), "-")
    assert raised.value.code == "stream_too_large"
    assert str(raised.value) == (
        "standard input gave more than 1048576 bytes; the rest was not read (split the input "
        "into smaller files)"
    )
    assert time.perf_counter() - start < 5


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_a_piped_shell_from_dev_zero_ends_with_an_error(capsys):
    with open("/dev/zero", "rb") as zero:
        assert run_stream(zero, limits=Limits(max_file_bytes=1 << 20)) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        "Error: standard input gave more than 1048576 bytes; the rest was not read (split the "
        "input into smaller files)\n"
    )


def test_an_endless_line_on_standard_input_ends_check(monkeypatch):
    monkeypatch.setattr(Limits, "file_bytes", property(lambda self: 65536))
    from typer.testing import CliRunner

    from autogradcli.cli import app

    run = CliRunner().invoke(app, ["check", "-"], input=b"x" * 200_000)
    assert run.exit_code == 2
    assert run.stderr == (
        "Error: standard input gave more than 65536 bytes; the rest was not read (split the "
        "input into smaller files)\n"
    )


def test_the_lines_before_an_endless_one_still_run(capsys):
    script = b'grad "x**3" --x 2 --expect x=12\n' + b"\0" * 70_000
    assert run_stream(io.BytesIO(script), limits=Limits(max_file_bytes=65536)) == 2
    out, err = capsys.readouterr()
    assert "autograd and SymPy agree" in out
    assert err.startswith("Error: standard input gave more than 65536 bytes")
    assert err.count("\n") == 1


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_as_the_check_file_is_refused_without_waiting(tmp_path):
    fifo = tmp_path / "cases.fifo"
    os.mkfifo(fifo)
    start = time.perf_counter()
    run = cli("check", str(fifo))
    assert run.exit_code == 2
    assert run.stderr == (
        f"Error: cannot read '{fifo}': it is a FIFO (named pipe), not a regular file; copy it "
        "into a regular file first\n"
    )
    assert time.perf_counter() - start < 5


# --- check --jobs: workers that die, the pool's size --------------------------------------


def test_the_pool_is_capped_by_the_cases_and_the_cores():
    assert pool_size(16, 3) == min(3, cores())
    assert pool_size(2, 1) == 1
    assert pool_size(1, 1000) == 1
    assert pool_size(64, 1000) == cores()


@pytest.mark.skipif(not FORK, reason="the worker patches reach children by fork")
def test_jobs_16_on_3_cases_starts_no_more_processes_than_cases_and_cores(monkeypatch):
    import multiprocessing.context

    started: list[int] = []
    real = multiprocessing.context.ForkProcess.start

    def counted(process: object) -> None:
        started.append(1)
        real(process)  # type: ignore[arg-type]

    monkeypatch.setattr(multiprocessing.context.ForkProcess, "start", counted)
    monkeypatch.setattr(batch, "_warm", lambda: None)
    done = run_all([Case(n, f"nonsense {n}") for n in (1, 2, 3)], jobs=16)
    assert [d.case.line for d in done] == [1, 2, 3]
    assert all(d.error == BAD_CASE for d in done)
    assert len(started) == min(3, cores())


@pytest.mark.skipif(not FORK or cores() < 2, reason="needs fork and two cores")
def test_a_case_that_kills_its_worker_twice_is_one_failed_case(monkeypatch, capfd):
    real = batch.run_case

    def killer(case: Case, allow_writes: bool = False) -> Done:
        if case.line == 2:
            os.kill(os.getpid(), signal.SIGKILL)  # as the out-of-memory killer would
        return real(case, allow_writes)

    monkeypatch.setattr(batch, "run_case", killer)
    monkeypatch.setattr(batch, "_warm", lambda: None)
    done = run_all([Case(n, f"nonsense {n}") for n in range(1, 6)], jobs=2)
    assert [(d.case.line, d.exit_code) for d in done] == [
        (1, 2),
        (2, INTERNAL_ERROR),
        (3, 2),
        (4, 2),
        (5, 2),
    ]
    assert done[1].status == "internal error"
    assert done[1].error == (
        "the worker process running this case was killed by SIGKILL, twice; the case did not "
        "finish (out of memory? run it alone, without --jobs)"
    )
    assert batch.exit_code(done) == INTERNAL_ERROR
    err = capfd.readouterr().err
    assert err == (
        "note: a worker process was killed by SIGKILL while running line 2; the case ran again "
        "in a new one\n"
    )


@pytest.mark.skipif(not FORK or cores() < 2, reason="needs fork and two cores")
def test_check_jobs_2_survives_a_worker_killed_from_outside(tmp_path):
    """kill -9 of the worker holding line 5: it runs again, the run finishes, the summary
    and the JUnit report are written."""
    cases, junit, pidfile = _cases(tmp_path, 40), tmp_path / "report.xml", tmp_path / "pid"
    env = {"FAULT_SLOW": "0.01", "FAULT_HOLD": "5", "FAULT_PIDFILE": str(pidfile)}
    args = ["check", str(cases), "--jobs", "2", "--json", "--junit-xml", str(junit)]
    process = _start(args, env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + TIMEOUT
        while not pidfile.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert pidfile.exists(), "the held case never started"
        os.kill(int(pidfile.read_text()), signal.SIGKILL)
        out, err = process.communicate(timeout=TIMEOUT)
    finally:
        process.kill()
    assert process.returncode == 2, err
    done, totals = _lines(out)
    assert [d["case"] for d in done] == list(range(1, 41))
    assert all(d["status"] == "bad input" and d["error"] == BAD_CASE for d in done)
    assert totals["cases"] == 40 and totals["bad_input"] == 40 and totals["stopped"] is None
    assert err == (
        "note: a worker process was killed by SIGKILL while running line 5; the case ran again "
        "in a new one\n"
    )
    suite = ElementTree.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.get("tests") == "40" and suite.get("errors") == "40"


# --- signals ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "number", "code", "whole_group"),
    [("Ctrl-C", signal.SIGINT, 130, True), ("SIGTERM", signal.SIGTERM, 143, False)],
)
@pytest.mark.skipif(cores() < 2, reason="needs two cores for two workers")
def test_a_signal_during_check_jobs_2_prints_what_finished(
    tmp_path, name, number, code, whole_group
):
    """Ctrl-C reaches the whole process group (the terminal sends it to the job); SIGTERM
    comes to the parent alone (kill PID)."""
    _signal_during_check_jobs_2(tmp_path, name, number, code, whole_group)


@pytest.mark.skipif(cores() < 2, reason="needs two cores for two workers")
def test_ctrl_c_stops_check_jobs_2_started_with_sigint_ignored(tmp_path):
    """A shell script's background job (``cmd &``) starts with SIGINT ignored, and Python
    leaves it so: CI ran the suite that way, and its ``check`` ran every case (exit 2)."""
    _signal_during_check_jobs_2(tmp_path, "Ctrl-C", signal.SIGINT, 130, True, ignored=True)


def _ignoring_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _signal_during_check_jobs_2(
    tmp_path: Path, name: str, number: int, code: int, whole_group: bool, ignored: bool = False
) -> None:
    cases, junit = _cases(tmp_path, 150), tmp_path / "report.xml"
    args = ["check", str(cases), "--jobs", "2", "--json", "--junit-xml", str(junit)]
    process = _start(  # unbuffered: the first line is read alone, the rest by communicate
        args,
        {"FAULT_SLOW": "0.02"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,
        preexec_fn=_ignoring_sigint if ignored else None,
    )
    try:
        first = process.stdout.readline()  # type: ignore[union-attr]
        workers = _children(process.pid)
        if whole_group:
            os.killpg(process.pid, number)
        else:
            os.kill(process.pid, number)
        out, err = (x.decode() for x in process.communicate(timeout=TIMEOUT))
    finally:
        process.kill()
    assert json.loads(first)["case"] == 1
    done, totals = _lines(first.decode() + out)
    assert process.returncode == code
    assert 1 <= len(done) < 150
    assert [d["case"] for d in done] == list(range(1, len(done) + 1))
    assert totals["stopped"] == name and totals["exit_code"] == code
    assert totals["cases"] == len(done)
    assert err == f"stopped by {name}: {len(done)} of 150 cases finished\n"  # no tracebacks
    suite = ElementTree.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.get("tests") == str(len(done))
    assert len(workers) == 2 and _gone(workers)


def _three_cases() -> list[Case]:
    return [Case(n, f"nonsense {n}") for n in (1, 2, 3)]


@pytest.fixture
def sigint_ignored() -> Iterator[None]:
    """This process's SIGINT ignored, as a background job of a shell script starts."""
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def test_ctrl_c_during_the_cases_stops_check_even_where_sigint_came_ignored(
    sigint_ignored, monkeypatch, capsys
):
    real = batch.run_case

    def second_is_interrupted(case: Case, allow_writes: bool = False) -> Done:
        if case.line == 2:
            os.kill(os.getpid(), signal.SIGINT)
        return real(case, allow_writes)

    monkeypatch.setattr(batch, "run_case", second_is_interrupted)
    code = run_check(_three_cases(), "cases.txt", Output.JSON, None, 1, False)
    out, err = capsys.readouterr()
    done, totals = _lines(out)
    assert code == 130 and [d["case"] for d in done] == [1]
    assert totals["stopped"] == "Ctrl-C" and totals["exit_code"] == 130
    assert err == "stopped by Ctrl-C: 1 of 3 cases finished\n"
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN  # put back as it was


def test_ctrl_c_before_the_cases_start_stops_the_run_at_once(capsys):
    """While the command reads its cases (``stops_installed`` entered first), a Ctrl-C is
    kept; the run then stops before its first case, with the summary of none."""
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    with stops_installed():
        os.kill(os.getpid(), signal.SIGINT)  # noted, not raised
        code = run_check(_three_cases(), "cases.txt", Output.JSON, None, 1, False)
    out, err = capsys.readouterr()
    done, totals = _lines(out)
    assert code == 130 and done == [] and totals["stopped"] == "Ctrl-C"
    assert err == "stopped by Ctrl-C: 0 of 3 cases finished\n"
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


@pytest.mark.parametrize("where", ["before", "while"])
def test_a_case_that_finished_as_ctrl_c_came_is_printed_once(where, monkeypatch, capsys):
    """The signal lands after case 2 joined the finished cases, ``before`` its line is
    printed (it is printed after the run stops) or ``while`` it is (held till after)."""
    real = checking._held

    def held(stops: object, show: Any, shown: list[Done]) -> Any:
        def interrupted_show(d: Done) -> None:
            if where == "while" and d.case.line == 2:
                os.kill(os.getpid(), signal.SIGINT)
            show(d)

        each = real(stops, interrupted_show, shown)  # type: ignore[arg-type]

        def interrupted(d: Done) -> None:
            if where == "before" and d.case.line == 2:
                os.kill(os.getpid(), signal.SIGINT)
            each(d)

        return interrupted

    monkeypatch.setattr(checking, "_held", held)
    code = run_check(_three_cases(), "cases.txt", Output.JSON, None, 1, False)
    out, err = capsys.readouterr()
    done, totals = _lines(out)
    assert code == 130 and [d["case"] for d in done] == [1, 2] and totals["cases"] == 2
    assert err == "stopped by Ctrl-C: 2 of 3 cases finished\n"


@pytest.mark.parametrize(
    ("number", "name", "code"), [(signal.SIGINT, "Ctrl-C", 130), (signal.SIGTERM, "SIGTERM", 143)]
)
def test_a_signal_after_the_last_case_still_stops_the_run(number, name, code, monkeypatch, capsys):
    """Between the last case and the summary (here: while the JUnit report is made) the
    signal is not raised into the report; the run says it was stopped."""
    real = checking.junit_xml

    def signalled(*args: object) -> str:
        os.kill(os.getpid(), number)
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(checking, "junit_xml", signalled)
    junit = Path(os.devnull)
    code_given = run_check(_three_cases(), "cases.txt", Output.JSON, junit, 1, False)
    out, err = capsys.readouterr()
    done, totals = _lines(out)
    assert code_given == code and len(done) == 3
    assert totals["stopped"] == name and totals["exit_code"] == code
    assert err == f"stopped by {name}: 3 of 3 cases finished\n"


@pytest.mark.parametrize("stopping", [False, True])
def test_a_signal_while_the_workers_are_stopped_waits_for_them(stopping):
    """It reaches its handler after the workers are gone: raised then on the normal way
    out; while a stop is already under way, the handler still sees it but what it raises
    is dropped (the iterator may be closing while it is collected)."""
    seen: list[int] = []

    def handler(number: int, frame: object) -> None:
        seen.append(number)
        raise KeyboardInterrupt

    before = signal.signal(signal.SIGINT, handler)
    try:
        raised = contextlib.nullcontext() if stopping else pytest.raises(KeyboardInterrupt)
        with raised, _signals_deferred(stopping):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.01)  # a handler would have run by now
            assert seen == []
        assert seen == [signal.SIGINT]
    finally:
        signal.signal(signal.SIGINT, before)


def test_ctrl_c_in_a_case_of_check_stops_the_run_with_130(tmp_path, monkeypatch):
    """Without --jobs: Ctrl-C inside a case (Click's Abort in the line's command) stops the
    whole run, never counts as one case's "disagree"."""
    path = tmp_path / "cases.txt"
    path.write_text("nonsense 1\nnonsense 2\ngrad x --x 1\nnonsense 4\n")

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("autogradcli.api.grad", interrupted)
    run = cli("check", str(path), "--json")
    assert run.exit_code == 130
    done, totals = _lines(run.stdout)
    assert [d["case"] for d in done] == [1, 2]
    assert totals["stopped"] == "Ctrl-C" and totals["exit_code"] == 130
    assert run.stderr == "stopped by Ctrl-C: 2 of 4 cases finished\n"


def test_ctrl_c_in_a_command_exits_130(monkeypatch):
    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("autogradcli.api.grad", interrupted)
    run = cli("grad", "x", "--x", "1")
    assert run.exit_code == 130
    assert run.stderr == ""


def test_ctrl_c_while_the_app_loads_exits_130_without_a_traceback(monkeypatch, capsys):
    """The first ~0.3 s of an in-process answer import the app (Typer, Rich, ...): a Ctrl-C
    there is the same quiet 130 as in the command."""
    from autogradcli import client

    class Loading(type(sys)):  # the app's module, interrupted while it is imported
        def __getattr__(self, name: str) -> object:
            raise KeyboardInterrupt

    monkeypatch.setitem(sys.modules, "autogradcli.cli.app", Loading("autogradcli.cli.app"))
    with pytest.raises(SystemExit) as stopped:
        client.in_process()
    assert stopped.value.code == 130
    assert capsys.readouterr() == ("", "")


# --- output that cannot be written --------------------------------------------------------


DEV_FULL = pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full here")


@DEV_FULL
def test_standard_output_on_a_full_disk_is_one_error_line(tmp_path):
    """``check --json > /dev/full`` (``grad > /dev/full``: the in-process test below, the
    same path through the app)."""
    argv = ["check", str(_cases(tmp_path, 3)), "--json"]
    with open("/dev/full", "w") as full:
        process = _start(argv, stdout=full, stderr=subprocess.PIPE, text=True)
        _, err = process.communicate(timeout=TIMEOUT)
    assert process.returncode == 2
    assert err == "Error: cannot write the output: No space left on device\n"


def test_a_closed_pipe_ends_quietly_with_141(tmp_path):
    """``check --json ... | head -1`` (Rich's own answer to a closed pipe: the in-process
    test below)."""
    cases = _cases(tmp_path, 600)  # about 150 KB of output: more than a pipe holds
    args = ["check", str(cases), "--json"]
    process = _start(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert process.stdout is not None and process.stderr is not None
        assert b"nonsense 1" in process.stdout.readline()
        process.stdout.close()  # as head does after its lines
        err = process.stderr.read()
        process.wait(timeout=TIMEOUT)
    finally:
        process.kill()
    assert process.returncode == 141
    assert err == b""


class _Broken(io.TextIOBase):
    """A standard output whose every write fails with ``errno`` (``fileno``: a file of the
    test's, which Rich sends to the null device on a closed pipe)."""

    def __init__(self, number: int, fd: int) -> None:
        self.number = number
        self.fd = fd

    def write(self, text: str) -> int:
        raise OSError(self.number, os.strerror(self.number))

    def fileno(self) -> int:
        return self.fd


@pytest.mark.parametrize(
    ("number", "code", "err"),
    [
        (errno.ENOSPC, 2, "Error: cannot write the output: No space left on device\n"),
        (errno.EPIPE, 141, ""),
    ],
)
def test_grad_into_a_full_disk_or_a_closed_pipe(monkeypatch, capsys, tmp_path, number, code, err):
    """``grad "x**2" --x 3 > /dev/full`` and ``| head -0``: the command's own output fails
    (here in this process, as Rich's print hits the file)."""
    with open(tmp_path / "stdout", "w") as file:
        monkeypatch.setattr(sys, "stdout", _Broken(number, file.fileno()))
        with pytest.raises(SystemExit) as stopped:
            group().main(args=["grad", "x**2", "--x", "3"], prog_name="autograd-cli")
        monkeypatch.undo()
    assert stopped.value.code == code
    assert capsys.readouterr().err == err


@DEV_FULL
def test_a_junit_report_on_a_full_disk_is_one_error_line_after_the_verdicts(tmp_path):
    run = cli("check", str(_cases(tmp_path, 2)), "--junit-xml", "/dev/full")
    assert run.exit_code == 2
    assert run.stdout.count("! bad input  nonsense") == 2 and "check" in run.stdout
    assert run.stderr == "Error: cannot write /dev/full: No space left on device\n"


def test_a_junit_report_in_a_folder_that_is_not_there(tmp_path):
    report = tmp_path / "missing" / "report.xml"
    run = cli("check", str(_cases(tmp_path, 2)), "--junit-xml", str(report), "--json")
    assert run.exit_code == 2
    done, totals = _lines(run.stdout)
    assert len(done) == 2 and totals["cases"] == 2
    assert run.stderr == f"Error: cannot write {report}: No such file or directory\n"


def test_a_junit_report_in_a_read_only_folder(tmp_path):
    folder = tmp_path / "locked"
    folder.mkdir()
    folder.chmod(0o500)
    if os.access(folder, os.W_OK):
        pytest.skip("running as root: folder permissions are not enforced")
    report = folder / "report.xml"
    run = cli("check", str(_cases(tmp_path, 1)), "--junit-xml", str(report))
    assert run.exit_code == 2
    assert run.stderr == f"Error: cannot write {report}: Permission denied\n"


# --- internal errors --------------------------------------------------------------------------

INTERNAL = (
    "internal error (AttributeError: module 'numpy.lib.format' has no attribute "
    "'_read_array_header'); this is a bug in autograd-cli, please report it "
    "(AUTOGRAD_CLI_TRACEBACK=1 prints the traceback)"
)


@pytest.fixture
def bug(monkeypatch):
    """``ag.grad`` fails as a bug would (the NumPy 2 error the issue found)."""

    def broken(*args: object, **kwargs: object) -> None:
        raise AttributeError("module 'numpy.lib.format' has no attribute '_read_array_header'")

    monkeypatch.setattr("autogradcli.api.grad", broken)


def test_an_internal_error_is_one_line_and_exit_3(bug, monkeypatch):
    monkeypatch.delenv("AUTOGRAD_CLI_TRACEBACK", raising=False)
    run = cli("grad", "x", "--x", "1")
    assert run.exit_code == INTERNAL_ERROR == 3
    assert run.stderr == f"Error: {INTERNAL}\n"
    assert run.stdout == ""


def test_an_internal_error_in_json(bug):
    run = cli("grad", "x", "--x", "1", "--json")  # the error document follows its schema
    assert run.exit_code == 3
    assert run.json()["error"] == {"type": "error", "code": "internal_error", "message": INTERNAL}


def test_the_traceback_of_an_internal_error_on_request(bug, monkeypatch):
    monkeypatch.setenv("AUTOGRAD_CLI_TRACEBACK", "1")
    run = cli("grad", "x", "--x", "1")
    assert run.exit_code == 3
    assert run.stderr.startswith("Traceback (most recent call last):")
    assert run.stderr.endswith(
        "AttributeError: module 'numpy.lib.format' has no attribute '_read_array_header'\n"
        f"Error: {INTERNAL}\n"
    )


def test_an_internal_error_in_check_and_the_shell(bug, tmp_path, capsys):
    path = tmp_path / "cases.txt"
    path.write_text('grad x --x 1\n{"command": "grad", "expression": "x", "values": {"x": 1}}\n')
    run = cli("check", str(path), "--json")
    assert run.exit_code == 3
    done, totals = _lines(run.stdout)
    assert [(d["status"], d["exit_code"], d["error"]) for d in done] == [
        ("internal error", 3, INTERNAL),
        ("internal error", 3, INTERNAL),
    ]
    assert totals["internal_errors"] == 2 and totals["exit_code"] == 3
    table = cli("check", str(path))
    assert "internal error" in table.stdout.splitlines()[-4]  # the summary's extra column
    assert run_lines(["grad x --x 1", "nonsense", 'grad "x**2" --x 3']) == 3
    errors = capsys.readouterr().err.splitlines()
    assert errors[0] == errors[2] == f"Error: {INTERNAL}" and errors[1].startswith("Error: ")


# --- plot: values that overflow -----------------------------------------------------------


def test_plot_draws_the_finite_part_of_an_overflow_and_says_what_it_left_out():
    result = ag.plot("exp(x)", x="0:100")
    left_out = int(result.not_finite.sum())
    assert 0 < left_out < 200
    run = cli("plot", "exp(x)", "--x", "0:100")
    assert run.exit_code in (0, 1) and run.stderr == ""
    assert (
        f"note: {left_out} of 200 points are not drawn: f or a derivative is not finite there "
        "(an overflow, or outside the domain)"
    ) in " ".join(run.stdout.split())
    assert "autograd and SymPy" in run.stdout.splitlines()[-1]


def test_plot_of_a_function_finite_everywhere_notes_nothing():
    run = cli("plot", "x**2", "--x", "0:1", "--points", "5")
    assert run.exit_code == 0 and "not drawn" not in run.stdout


# --- SymPy's time limit past what a thread can wait ----------------------------------------


@pytest.mark.parametrize("seconds", [1e10, threading.TIMEOUT_MAX, 1e300])
def test_a_sympy_limit_past_timeout_max_is_no_limit_and_starts_no_thread(seconds):
    before = threading.active_count()
    with time_limit(seconds):
        assert threading.active_count() == before


def test_sympy_timeout_1e10_runs_without_a_dying_watchdog(monkeypatch):
    died: list[object] = []
    monkeypatch.setattr(threading, "excepthook", died.append)
    run = cli("grad", "x**2", "--x", "3", "--sympy-timeout", "1e10")
    assert run.exit_code == 0 and run.stderr == ""
    settings = Settings(limits=Limits(sympy_seconds=1e10))
    assert ag.grad("x**2", {"x": 3}, settings=settings).agree
    assert died == []


# --- files written only where the user asked ---------------------------------------------


REFUSED = (
    "{option} {path}: a line of {source} writes no file; to let it, run autograd-cli "
    "{command} with --allow-writes"
)


def test_a_check_file_writes_no_file_without_allow_writes(tmp_path):
    target = tmp_path / "precious.txt"
    target.write_text("keep me")
    image = tmp_path / "plot.png"
    path = tmp_path / "sheet.txt"
    path.write_text(
        f'graph "x*2" --x 1 --dot {target}\n'
        f'graph "x*2" --x 1 --svg {target}\n'
        f'plot "x*2" --x 0:1 --output {image}\n'
    )
    run = cli("check", str(path), "--json")
    assert run.exit_code == 2
    done, _ = _lines(run.stdout)
    assert [d["error"] for d in done] == [
        REFUSED.format(option="--dot", path=target, source="a check file", command="check"),
        REFUSED.format(option="--svg", path=target, source="a check file", command="check"),
        REFUSED.format(option="--output", path=image, source="a check file", command="check"),
    ]
    assert target.read_text() == "keep me" and not image.exists()


def test_check_allow_writes_lets_its_lines_write(tmp_path):
    target = tmp_path / "graph.dot"
    path = tmp_path / "sheet.txt"
    path.write_text(f'graph "x*2" --x 1 --dot {target}\n')
    run = cli("check", str(path), "--allow-writes")
    assert run.exit_code == 0, run.stdout
    assert target.read_text().startswith("digraph")


def test_a_piped_script_writes_no_file_without_allow_writes(tmp_path, capsys):
    target = tmp_path / "precious.txt"
    target.write_text("keep me")
    line = f'graph "x*2" --x 1 --dot {target}\n'.encode()
    assert run_stream(io.BytesIO(line)) == 2
    err = capsys.readouterr().err
    assert (
        err
        == "Error: "
        + REFUSED.format(option="--dot", path=target, source="a piped script", command="shell")
        + "\n"
    )
    assert target.read_text() == "keep me"
    assert run_stream(io.BytesIO(line), Shell(allow_writes=True)) == 0
    assert target.read_text().startswith("digraph")


def test_the_typed_shell_and_the_command_line_still_write(tmp_path):
    target = tmp_path / "graph.dot"
    assert cli("graph", "x*2", "--x", "1", "--dot", str(target)).exit_code == 0
    assert target.exists()
    target.unlink()
    assert run_lines([f'graph "x*2" --x 1 --dot {target}'], Shell(allow_writes=True)) == 0
    assert target.exists()


def test_graph_and_plot_refuse_to_write_over_the_program_they_read(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    program = tmp_path / "cell.py"
    program.write_text("y = x*2\nout = y*y\n")
    for args, option in (
        (["graph", "@cell.py", "--x", "1", "--dot", "cell.py"], "--dot"),
        (["graph", "@cell.py", "--x", "1", "--svg", "./cell.py"], "--svg"),
        (["plot", f"@{program}", "--x", "0:1", "--output", "cell.py"], "--output"),
    ):
        run = cli(*args)
        assert run.exit_code == 2
        assert run.stderr == (
            f"Error: {option} {Path(args[-1])} is the program file that was read; write to "
            "another file\n"
        )
    assert program.read_text() == "y = x*2\nout = y*y\n"
    values = tmp_path / "x.json"
    values.write_text("[1, 2]")
    run = cli("graph", "sum(x*2)", "--x", f"@{values}", "--dot", str(values))
    assert (
        run.stderr
        == f"Error: --dot {values} is the value file that was read; write to another file\n"
    )
    assert values.read_text() == "[1, 2]"


def test_check_refuses_a_junit_report_over_its_own_check_file(tmp_path):
    path = _cases(tmp_path, 1)
    run = cli("check", str(path), "--junit-xml", str(path))
    assert run.exit_code == 2 and run.stdout == ""
    assert run.stderr == (
        f"Error: --junit-xml {path} is the check file that was read; write to another file\n"
    )
    assert path.read_text() == "nonsense 1\n"


# --- JUnit reports from text XML cannot hold ----------------------------------------------


def test_a_junit_report_of_control_characters_is_well_formed_xml(tmp_path):
    texts = ['grad "x*\x1b[31m" --x 1', "grad x\x0c --x \x01", "plot \x7f\x08 --x 1"]
    done = [Done(Case(n, t), 2, error=t, summary=t) for n, t in enumerate(texts, 1)]
    report = junit_xml(done, "sheet\x02.txt", 0.5)
    parsed = xml.dom.minidom.parseString(report.encode("utf-8"))
    names = [c.getAttribute("name") for c in parsed.getElementsByTagName("testcase")]
    assert names == [
        'line 1: grad "x*\\x1b[31m" --x 1',
        "line 2: grad x\\x0c --x \\x01",
        "line 3: plot \x7f\\x08 --x 1",  # DEL is allowed in XML 1.0
    ]
    path = tmp_path / "cases.txt"
    path.write_bytes("".join(t + "\n" for t in texts).encode())
    junit = tmp_path / "report.xml"
    assert cli("check", str(path), "--junit-xml", str(junit)).exit_code == 2
    ElementTree.parse(junit)  # well-formed
    xml.dom.minidom.parse(str(junit))


# --- exit codes, documented from the registry -----------------------------------------------


def test_every_command_documents_the_fault_exit_codes():
    for name in (*autogradcli.line_commands(), "check", "shell"):
        run = cli(name, "--help")
        assert " ".join(FAULT_EXITS.split()) in " ".join(run.stdout.split()), name


def test_trust_page_lists_the_fault_exit_codes_from_the_registry():
    page = (ROOT / "docs" / "trust.md").read_text()
    section = page.split("## Faults survived", 1)[1].split("\n## ", 1)[0]
    rows = dict(re.findall(r"^\| (\d+) \| ([^|]+?) \|", section, flags=re.M))
    assert {int(k): v for k, v in rows.items() if int(k) > 2} == FAULT_EXIT_CODES


class _Endless(io.RawIOBase):
    """A stream of one line that never ends (what /dev/zero gives), counting what it gave."""

    given = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[override]
        buffer[:] = b"x" * len(buffer)
        self.given += len(buffer)
        return len(buffer)


def test_the_skip_past_a_long_line_stops_at_the_total():
    from autogradcli.errors import LimitError
    from autogradcli.reads import lines

    raw = _Endless()
    with pytest.raises(LimitError) as caught:
        list(lines(io.BufferedReader(raw), max_bytes=100, max_total=1 << 20))
    assert caught.value.code == "file_too_large"
    assert raw.given < 2 << 20  # stopped a chunk past the total, not never


@pytest.mark.parametrize(
    ("error", "code", "stderr"),
    [
        (BrokenPipeError(errno.EPIPE, "Broken pipe"), 141, ""),
        (OSError(errno.ENOSPC, "No space left on device"), 2,
         "Error: cannot write the output: No space left on device\n"),
    ],
)  # fmt: skip
def test_worker_status_that_cannot_be_written_ends_as_the_app_does(
    error, code, stderr, monkeypatch, capfd
):
    from autogradcli import client
    from autogradcli.worker import wire

    def control(action, env, echo):
        raise error

    monkeypatch.setattr(wire, "control", control)
    monkeypatch.setattr(os, "dup2", lambda *a: None)  # keep pytest's own stdout
    assert client._control("status", {}) == code
    assert capfd.readouterr().err == stderr


def test_a_question_the_worker_cannot_finish_after_ctrl_c_exits_130_quietly(capfd):
    from autogradcli import client

    question = client.Question.__new__(client.Question)
    question._release = lambda: None  # type: ignore[method-assign]
    assert question._aborted() == 130
    assert capfd.readouterr().err == ""
