"""``autograd-cli check FILE``: many questions in one process (or ``--jobs`` processes).

Each case is a line written as on the command line (``grad "x**3" --x 2 --expect x=12``),
or a JSON object with the API's fields (``{"command": "grad", "expression": "x**3",
"values": {"x": 2}, "expect": {"x": 12}}``). A bad case is reported with its line number;
the others still run.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from autogradcli import case_commands, line_commands
from autogradcli.cli.lines import Outcome, run, split, worst
from autogradcli.errors import AutogradCliError, LimitError, ValueSpecError
from autogradcli.messages import CLI, error_text
from autogradcli.reads import lines
from autogradcli.settings import Limits

STATUS = {0: "agree", 1: "disagree", 2: "bad input"}


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
    cases or ``limits.file_bytes`` bytes: the file is refused."""
    limits = limits or Limits()
    if isinstance(stream, str):
        stream = io.BytesIO(stream.encode("utf-8", "surrogatepass"))
    cases = []
    for number, line in lines(stream, limits.line_bytes, limits.file_bytes, path):
        if isinstance(line, AutogradCliError):
            cases.append(Case(number, f"(line {number})", line))
        elif (stripped := line.strip()) and not stripped.startswith("#"):
            cases.append(Case(number, stripped))
        if len(cases) > MAX_CASES:
            raise LimitError("too_many_cases", path=path, limit=MAX_CASES)
    return cases


def run_case(case: Case) -> Done:
    """Run one case and keep its document (never raises for bad input)."""
    start = time.perf_counter()
    try:
        if case.error is not None:
            raise case.error
        done = _json_case(case) if case.text.startswith("{") else _line_case(case, split(case.text))
    except AutogradCliError as exc:
        done = Done(case, 2, error=" ".join(error_text(exc, CLI).split()))
    except Exception as exc:
        done = Done(case, 2, error=f"internal error: {type(exc).__name__}: {exc}")
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
    if outcome.exit_code == 2:
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
    if done.exit_code == 2:
        return done.error or "bad input"
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
) -> list[Done]:
    """Every case in order (``jobs`` processes share them); ``fail_fast`` stops at the first
    case that does not agree."""
    done: list[Done] = []
    for result in _results(cases, jobs):
        done.append(result)
        if progress is not None:
            progress(result)
        if fail_fast and result.exit_code != 0:
            break
    return done


def _results(cases: list[Case], jobs: int) -> Iterator[Done]:
    if jobs <= 1 or len(cases) < 2:
        yield from map(run_case, cases)
        return
    import multiprocessing

    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    with multiprocessing.get_context(method).Pool(jobs, initializer=_warm) as pool:
        yield from pool.imap(run_case, cases, chunksize=max(1, min(16, len(cases) // jobs // 8)))


def _warm() -> None:
    """Load torch and SymPy once per worker process."""
    import autogradcli.pipeline  # noqa: F401


def exit_code(done: list[Done]) -> int:
    return worst([d.exit_code for d in done])


def junit_xml(done: list[Done], name: str, seconds: float) -> str:
    """A JUnit XML report: one testcase per case, a failure per disagreement, an error per
    bad case (what CI systems show)."""
    from xml.etree import ElementTree as ET

    suite = ET.Element(
        "testsuite",
        name=f"autograd-cli check {name}",
        tests=str(len(done)),
        failures=str(sum(d.exit_code == 1 for d in done)),
        errors=str(sum(d.exit_code == 2 for d in done)),
        time=f"{seconds:.3f}",
    )
    for d in done:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=name,
            name=f"line {d.case.line}: {d.case.text}",
            time=f"{d.seconds:.3f}",
        )
        if d.exit_code == 1:
            ET.SubElement(case, "failure", message=d.summary, type="disagree").text = d.summary
        elif d.exit_code == 2:
            ET.SubElement(case, "error", message=d.summary, type="bad input").text = d.summary
    suites = ET.Element("testsuites")
    suites.append(suite)
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def summary(done: list[Done], seconds: float) -> dict[str, Any]:
    counts = {s: sum(d.status == s for d in done) for s in STATUS.values()}
    return {
        "cases": len(done),
        "agreed": counts["agree"],
        "disagreed": counts["disagree"],
        "bad_input": counts["bad input"],
        "seconds": round(seconds, 3),
        "exit_code": exit_code(done),
    }
