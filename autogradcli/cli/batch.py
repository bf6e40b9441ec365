"""``autograd-cli check FILE``: many questions in one process (or ``--jobs`` processes).

Each case is a line written as on the command line (``grad "x**3" --x 2 --expect x=12``),
or a JSON object with the API's fields (``{"command": "grad", "expression": "x**3",
"values": {"x": 2}, "expect": {"x": 12}}``). A bad case is reported with its line number;
the others still run.
"""

from __future__ import annotations

import io
import json
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from autogradcli import INTERNAL_ERROR, case_commands, line_commands
from autogradcli.cli.errors import Coded, internal_text
from autogradcli.cli.lines import Outcome, run, split, worst
from autogradcli.cli.parsing import NO_WRITES
from autogradcli.cli.streams import Capped
from autogradcli.errors import AutogradCliError, LimitError, ValueSpecError
from autogradcli.messages import CLI, error_text
from autogradcli.reads import lines
from autogradcli.settings import Limits

STATUS = {0: "agree", 1: "disagree", 2: "bad input", INTERNAL_ERROR: "internal error"}


MAX_CASES = 100_000  # cases of one check file


@dataclass(frozen=True)
class Case:
    """One question of the file: its line number and text (or why the line cannot be read)."""

    line: int
    text: str
    error: AutogradCliError | None = None


@dataclass
class Done:
    """A case's outcome: exit code, its JSON document, the one-line error, the time."""

    case: Case
    exit_code: int
    document: dict[str, Any] | None = None
    error: str | None = None
    seconds: float = 0.0
    summary: str = field(default="")

    @property
    def status(self) -> str:
        return STATUS.get(self.exit_code, "bad input")

    def to_dict(self) -> dict[str, Any]:
        return {
            "case": self.case.line,
            "source": self.case.text,
            "exit_code": self.exit_code,
            "status": self.status,
            "seconds": round(self.seconds, 6),
            "error": self.error,
            "document": self.document,
        }


def read_cases(stream: BinaryIO | str, limits: Limits | None = None, path: str = "-") -> list[Case]:
    """The non-blank, non-comment lines, with their line numbers; a line that is too long,
    holds a NUL byte or is not UTF-8 is a case that reports it. More than ``MAX_CASES``
    cases or ``limits.file_bytes`` bytes (an endless ``/dev/zero`` too): the file is
    refused."""
    limits = limits or Limits()
    if isinstance(stream, str):
        stream = io.BytesIO(stream.encode("utf-8", "surrogatepass"))
    capped: Any = Capped(stream, limits.file_bytes, path)
    cases = []
    for number, line in lines(capped, limits.line_bytes, limits.file_bytes, path):
        if isinstance(line, AutogradCliError):
            cases.append(Case(number, f"(line {number})", line))
        elif (stripped := line.strip()) and not stripped.startswith("#"):
            cases.append(Case(number, stripped))
        if len(cases) > MAX_CASES:
            raise LimitError("too_many_cases", path=path, limit=MAX_CASES)
    return cases


def run_case(case: Case, allow_writes: bool = False) -> Done:
    """Run one case and keep its document (never raises for bad input); a line that would
    write a file is refused unless ``allow_writes``."""
    start = time.perf_counter()
    token = NO_WRITES.set(None if allow_writes else "check")
    try:
        if case.error is not None:
            raise case.error
        done = _json_case(case) if case.text.startswith("{") else _line_case(case, split(case.text))
    except AutogradCliError as exc:
        done = Done(case, 2, error=" ".join(error_text(exc, CLI).split()))
    except Exception as exc:  # a bug: the case says so, the others still run
        done = Done(case, INTERNAL_ERROR, error=" ".join(internal_text(exc).split()))
    finally:
        NO_WRITES.reset(token)
    done.seconds = time.perf_counter() - start
    done.summary = _summary(done)
    return done


def _line_case(case: Case, words: list[str]) -> Done:
    if not words:
        raise ValueSpecError("line_command", word="", commands=", ".join(line_commands()))
    outcome: Outcome = run([*words, "--json"] if "--json" not in words else words, capture=True)
    document = None
    for line in outcome.stdout.splitlines():
        if line.startswith("{"):
            document = json.loads(line)
    error = None
    if outcome.exit_code in (2, INTERNAL_ERROR):
        lines = [x for x in outcome.stderr.splitlines() if x.startswith("Error: ")]
        error = lines[-1].removeprefix("Error: ") if lines else outcome.stderr.strip()
    return Done(case, outcome.exit_code, document, error)


def _json_case(case: Case) -> Done:
    try:
        fields = json.loads(case.text)
    except json.JSONDecodeError as exc:
        raise ValueSpecError("case_json", reason=exc.msg, column=exc.colno) from None
    kinds = case_commands()
    if not isinstance(fields, dict) or fields.get("command", "grad") not in kinds:
        raise ValueSpecError("case_fields", commands=", ".join(kinds))
    call = kinds[fields.pop("command", "grad")].api()
    expression = fields.pop("expression", None)
    if not isinstance(expression, str):
        raise ValueSpecError("case_fields", commands=", ".join(kinds))
    try:
        result = call(expression, **fields)
    except TypeError as exc:  # a field the API does not take
        raise ValueSpecError("case_field", reason=str(exc).split(") ", 1)[-1]) from None
    stopped = getattr(result, "error", None)
    code = 2 if stopped is not None else 0 if getattr(result, "agree", True) else 1
    error = None if stopped is None else " ".join(error_text(stopped, CLI).split())
    return Done(case, code, result.to_dict(), error)


def _summary(done: Done) -> str:
    """One line on a case that did not agree: the verdict's cause, or the error."""
    if done.exit_code not in (0, 1):
        return done.error or done.status
    document = done.document or {}
    cause = document.get("cause") or {}
    expect = document.get("expect") or {}
    wrong = [n for n, e in expect.items() if not e.get("agree")]
    if wrong:
        variables = document.get("variables") or {}
        return "; ".join(
            f"expected {n}.grad = {_short(expect[n]['value'])}, autograd gives "
            f"{_short(variables[n]['grad'])}, SymPy {_short(variables[n]['expected'])}"
            for n in wrong
        )
    return str(cause.get("message") or document.get("verdict") or STATUS[done.exit_code])


def _short(value: Any) -> str:
    """A JSON number or nested list, briefly (6 significant digits)."""
    if isinstance(value, list):
        return "[" + ", ".join(_short(v) for v in value) + "]"
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def run_all(
    cases: list[Case],
    jobs: int = 1,
    fail_fast: bool = False,
    progress: Callable[[Done], None] | None = None,
    done: list[Done] | None = None,
    allow_writes: bool = False,
) -> list[Done]:
    """Every case in order (``jobs`` processes share them); ``fail_fast`` stops at the first
    case that does not agree. Each finished case is appended to ``done`` as it comes, so a
    run stopped by Ctrl-C or SIGTERM still has what finished. Lines write files only with
    ``allow_writes``."""
    done = [] if done is None else done
    for result in _results(cases, jobs, allow_writes):
        done.append(result)
        if progress is not None:
            progress(result)
        if fail_fast and result.exit_code != 0:
            break
    return done


def _results(cases: list[Case], jobs: int, allow_writes: bool) -> Iterator[Done]:
    from functools import partial

    from autogradcli.cli.workers import pool_size, run_in_workers

    work = partial(run_case, allow_writes=allow_writes)
    if pool_size(jobs, len(cases)) <= 1:
        yield from map(work, cases)
        return
    yield from run_in_workers(cases, jobs, work, _warm, _lost, _retried)


def _warm() -> None:
    """Load torch and SymPy once per worker process."""
    import autogradcli.pipeline  # noqa: F401


def _lost(case: Case, how: str) -> Done:
    """A case whose worker died twice: an internal error of its own."""
    text = error_text(Coded("worker_lost", how=how), CLI)
    return Done(case, INTERNAL_ERROR, error=text, summary=text)


def _retried(case: Case, how: str) -> None:
    """A note on standard error: the case's worker died and it runs again."""
    import typer

    typer.echo(error_text(Coded("worker_retried", how=how, line=case.line), CLI), err=True)


def exit_code(done: list[Done]) -> int:
    return worst([d.exit_code for d in done])


def junit_xml(done: list[Done], name: str, seconds: float) -> str:
    """A JUnit XML report: one testcase per case, a failure per disagreement, an error per
    bad case (what CI systems show)."""
    from xml.etree import ElementTree as ET

    suite = ET.Element(
        "testsuite",
        name=xml_text(f"autograd-cli check {name}"),
        tests=str(len(done)),
        failures=str(sum(d.exit_code == 1 for d in done)),
        errors=str(sum(d.exit_code not in (0, 1) for d in done)),
        time=f"{seconds:.3f}",
    )
    for d in done:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=xml_text(name),
            name=xml_text(f"line {d.case.line}: {d.case.text}"),
            time=f"{d.seconds:.3f}",
        )
        summary = xml_text(d.summary)
        if d.exit_code == 1:
            ET.SubElement(case, "failure", message=summary, type="disagree").text = summary
        elif d.exit_code != 0:
            ET.SubElement(case, "error", message=summary, type=d.status).text = summary
    suites = ET.Element("testsuites")
    suites.append(suite)
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


# What XML 1.0 cannot hold: control characters but tab, newline and carriage return;
# lone surrogates; U+FFFE and U+FFFF.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_text(text: str) -> str:
    """``text`` with each character XML 1.0 cannot hold written as its escape (``\\x1b``),
    so a case holding one still gives a well-formed report."""
    return _NOT_XML.sub(lambda m: repr(m.group())[1:-1], text)


def summary(
    done: list[Done], seconds: float, stopped: str | None = None, code: int | None = None
) -> dict[str, Any]:
    """The totals of the cases that finished; ``stopped``: the signal that ended the run
    early (``Ctrl-C``, ``SIGTERM``) and ``code`` the exit code it gives."""
    counts = {s: sum(d.status == s for d in done) for s in STATUS.values()}
    return {
        "cases": len(done),
        "agreed": counts["agree"],
        "disagreed": counts["disagree"],
        "bad_input": counts["bad input"],
        "internal_errors": counts["internal error"],
        "seconds": round(seconds, 3),
        "stopped": stopped,
        "exit_code": exit_code(done) if code is None else code,
    }
