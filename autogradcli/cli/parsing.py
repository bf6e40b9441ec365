"""The command line's text read into what the API takes: ``NAME=VALUE`` items (variables,
``--expect``, ``--tangent``), the shell's bound values, the expression argument's help
and completion, and output paths."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated

import typer

from autogradcli.errors import AutogradCliError, ValueSpecError, VariableError
from autogradcli.lang.vocabulary import elementwise_names, function_names

# Values bound in the shell (``x = [1., 2.]``): a command uses those its expression needs.
# Set (to a dict, maybe empty) while the shell runs a line.
BOUND: ContextVar[dict[str, str] | None] = ContextVar("bound", default=None)
# Set to "check" or "shell" while they run lines read from a file or a pipe without
# --allow-writes: those lines write no file (a shared exercise sheet cannot clobber one).
NO_WRITES: ContextVar[str | None] = ContextVar("no_writes", default=None)


def _complete_functions(incomplete: str) -> list[str]:
    """Shell completion of the expression: the function names, after what is typed."""
    head, word = re.match(r"(.*?)(\w*)$", incomplete, flags=re.S).groups()  # type: ignore[union-attr]
    return [head + name for name in function_names() if name.startswith(word)]


ExpressionArg = Annotated[
    str,
    typer.Argument(
        metavar="EXPRESSION",
        autocompletion=_complete_functions,
        help="Expression in Python syntax: + - * / ** (or ^) @, comparisons, x[i], "
        + " ".join(elementwise_names())
        + "; "
        + " ".join(n for n in function_names() if n not in elementwise_names())
        + " (as PyTorch spells them too: x.sum(0), torch.sin(x), F.relu(x)); constants pi "
        "e; or a program, a notebook cell: lines separated by ; or newlines, e.g. "
        '"y = x + 2; z = y*y*3; out = mean(z)", with torch.tensor(...) values, backward() '
        "calls and print(...). @FILE or - reads it from a file or standard input.",
        show_default=False,
    ),
]


def variables(specs: list[str], expression: str = "") -> dict[str, str | None]:
    """``NAME=VALUE`` items as a dict (``NAME`` alone: no value); a name given twice is an
    error. In the shell, values bound earlier fill in the variables the expression needs."""
    values: dict[str, str | None] = {}
    for spec in specs:
        name, has_value, value = spec.partition("=")
        name = name.strip()
        if not name.isidentifier():
            raise VariableError("not_name_value", spec=spec)
        if name in values:
            raise VariableError("given_twice", name=name, first=values[name], second=value)
        values[name] = value if has_value else None
    return {**_bound(expression, values), **values}


def _bound(expression: str, given: dict[str, str | None]) -> dict[str, str]:
    """The shell's bound values of the expression's variables that were not given."""
    bound = BOUND.get()
    if not bound or not expression:
        return {}
    from autogradcli.lang.parser import parse_expression

    try:
        program = parse_expression(expression)
    except AutogradCliError:
        return {}  # the command itself reports it
    wanted = [n for n in program.variables if program.leaf(n) is None and n not in given]
    return {n: bound[n] for n in wanted if n in bound}


def expectations(specs: list[str]) -> dict[str, str]:
    """``--expect NAME=VALUE`` items as a dict."""
    found: dict[str, str] = {}
    for spec in specs:
        name, has_value, value = spec.partition("=")
        if not has_value or not name.strip().isidentifier() or not value.strip():
            raise VariableError("expect_spec", spec=spec)
        found[name.strip()] = value
    return found


def tangents(given: list[str]) -> dict[str, str]:
    """``--tangent NAME=VALUE`` pairs as a dict (the values are read by the API, as inputs
    are)."""
    found = {}
    for text in given:
        name, sep, value = text.partition("=")
        if not sep or not name.strip().isidentifier() or not value.strip():
            raise VariableError("tangent_form", text=text)
        found[name.strip()] = value.strip()
    return found


def check_file(path: Path, option: str) -> None:
    """A path an option writes to must not be a folder."""
    if path.is_dir():
        raise ValueSpecError("path_is_folder", option=option, path=str(path))


def write(path: Path, text: str, option: str) -> None:
    """Write ``text`` to the file an option names; a failure is one error line."""
    check_file(path, option)
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ValueSpecError(
            "cannot_write", path=str(path), detail=str(exc.strerror or exc)
        ) from None


def read_files(expression: str, specs: Sequence[str] = ()) -> list[tuple[str, str]]:
    """The files a command line reads, with what each is: its ``@FILE`` program and
    ``@FILE`` values."""
    found = []
    if expression.startswith("@") and "\n" not in expression:
        found.append((expression[1:], "program file"))
    for spec in specs:
        value = spec.partition("=")[2].strip()
        if value.startswith("@"):
            found.append((value[1:], "value file"))
    return found


def may_write(path: Path, option: str, read: Sequence[tuple[str, str]] = ()) -> None:
    """Refuse to write ``path`` for an option: from a line of ``check`` or a piped
    ``shell`` not given --allow-writes, or onto a file the command read."""
    command = NO_WRITES.get()
    if command is not None:
        source = "a check file" if command == "check" else "a piped script"
        raise ValueSpecError(
            "writes_not_allowed", option=option, path=str(path), command=command, source=source
        )
    for source, what in read:
        try:
            same = os.path.samefile(path, source)
        except (OSError, ValueError):  # one of them is not there
            same = False
        if same:
            raise ValueSpecError("overwrites_input", option=option, path=str(path), what=what)
