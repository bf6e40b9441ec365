"""``autograd-cli shell``: many questions, one start-up.

Lines are the command line's commands without the program name (``grad "x**3" --x 2``),
plus bindings that persist (``x = [1., 2.]``), settings (``set dtype float64``), ``vars``,
``help [COMMAND]`` and ``exit``. On a terminal it is a prompt_toolkit prompt with history,
line editing and completion; torch and SymPy load in the background while the first line
is typed. From a pipe or a file it reads the lines, prints the results and exits 2 if a line
was bad input, else 1 if one disagreed, else 0.
"""

from __future__ import annotations

import os
import re
import sys
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import typer
from prompt_toolkit.completion import Completer as BaseCompleter
from prompt_toolkit.completion import Completion

from autogradcli.cli.lines import BOUND, line_commands, run, split, worst
from autogradcli.cli.parsing import NO_WRITES
from autogradcli.cli.streams import Capped
from autogradcli.errors import AutogradCliError, LimitError, ValueSpecError
from autogradcli.messages import CLI, error_text
from autogradcli.settings import Limits

BINDING = re.compile(r"^\s*([A-Za-z_]\w*)\s*=(?!=)\s*(.*?)\s*$")
# set NAME VALUE: the option each line gets unless it gives its own.
SETTINGS = {
    "dtype": "--dtype",
    "device": "--device",
    "rtol": "--rtol",
    "atol": "--atol",
    "seed": "--seed",
    "json": "--json",
    "numeric": "--numeric",
    "strict": "--strict",
}
FLAGS = ("json", "numeric", "strict")
WORDS = ("set", "unset", "vars", "help", "exit", "quit")
HELP = """\
Commands, as on the command line without 'autograd-cli':
  grad "x**3" --x 2        jacobian ...   hessian ...   graph ...
Bindings and settings that persist:
  x = [1., 2.]             bind a value; commands use it where their expression needs x
  unset x                  forget a binding
  set dtype float64        also: device, rtol, atol, seed; set json on, numeric on, strict on
  set dtype                back to the default
  vars                     the bindings and settings
  help grad                a command's options
  exit                     leave (or Ctrl-D); Ctrl-C cancels a running question"""


@dataclass
class Shell:
    """The shell's state: bindings, settings, and the exit codes of the lines so far.
    ``allow_writes``: its lines may write the files they name (the prompt, where the user
    types them, and ``shell --allow-writes``); a piped script's may not."""

    bound: dict[str, str] = field(default_factory=dict)
    settings: dict[str, str] = field(default_factory=dict)
    codes: list[int] = field(default_factory=list)
    allow_writes: bool = False

    def handle(self, line: str) -> bool:
        """Run one line; False when the line asks to leave."""
        text = line.strip()
        if not text or text.startswith("#"):
            return True
        word = text.split()[0]
        try:
            if word in ("exit", "quit"):
                return False
            if word == "help":
                self.help(text.split()[1:])
            elif word == "vars":
                self.show_vars()
            elif word == "set":
                self.set(text.split()[1:])
            elif word == "unset":
                for name in text.split()[1:]:
                    self.bound.pop(name, None)
            elif BINDING.match(text) and word not in line_commands():
                self.bind(text)
            else:
                self.command(split(text))
        except AutogradCliError as exc:
            self.report(exc)
        return True

    def report(self, exc: AutogradCliError) -> None:
        """A bad line: one ``Error:`` line; the script goes on and exits 2."""
        typer.echo(f"Error: {' '.join(error_text(exc, CLI).split())}", err=True)
        self.codes.append(2)

    def command(self, words: list[str]) -> None:
        words = [*words, *self.options(words)]
        token = BOUND.set(dict(self.bound))
        writes = NO_WRITES.set(None if self.allow_writes else "shell")
        try:
            outcome = run(words)
        except KeyboardInterrupt:
            typer.echo("cancelled", err=True)
            return
        finally:
            NO_WRITES.reset(writes)
            BOUND.reset(token)
        self.codes.append(outcome.exit_code)

    def options(self, words: list[str]) -> list[str]:
        """The settings' options that the line does not give itself."""
        added: list[str] = []
        for key, value in self.settings.items():
            flag = SETTINGS[key]
            if flag in words or any(w.startswith(flag + "=") for w in words):
                continue
            added += [flag] if key in FLAGS else [flag, value]
        return added

    def bind(self, text: str) -> None:
        match = BINDING.match(text)
        assert match is not None
        name, value = match.groups()
        if name in SETTINGS or name in WORDS or name in line_commands():
            raise ValueSpecError("shell_name", name=name)
        from autogradcli.lang.values import read_value
        from autogradcli.settings import Limits

        read_value(value, Limits())  # a bad value is refused now, not at every use
        self.bound[name] = value

    def set(self, args: list[str]) -> None:
        if not args or args[0] not in SETTINGS:
            raise ValueSpecError("shell_set", settings=", ".join(SETTINGS))
        key, rest = args[0], args[1:]
        if not rest:
            self.settings.pop(key, None)
        elif key in FLAGS:
            if rest[0] not in ("on", "off"):
                raise ValueSpecError("shell_flag", key=key)
            if rest[0] == "on":
                self.settings[key] = "on"
            else:
                self.settings.pop(key, None)
        else:
            self.settings[key] = checked_setting(key, rest[0])

    def help(self, args: list[str]) -> None:
        if args and args[0] in (*line_commands(), "check"):
            run([args[0], "--help"])
        else:
            typer.echo(HELP)

    def show_vars(self) -> None:
        for name, value in self.bound.items():
            typer.echo(f"{name} = {value}")
        for key, value in self.settings.items():
            typer.echo(f"set {key} {value}")
        if not self.bound and not self.settings:
            typer.echo("no bindings or settings yet (x = [1., 2.], set dtype float64)")

    @property
    def exit_code(self) -> int:
        return worst(self.codes)


def checked_setting(key: str, value: str) -> str:
    """A ``set`` line's value, refused at that line as the option would refuse it (every
    later line would fail on it): a dtype by PyTorch's names too (stored as float64 for
    double), a device this machine has, a number in its range."""
    from autogradcli.settings import NUMBERS, dtype_name, parse_number

    if key == "dtype":
        return dtype_name(value)
    if key == "device":
        from autogradcli.torchside.devices import resolve_device

        resolve_device(value)
        return value
    if key in NUMBERS:
        parse_number(key, value)
    return value


MAX_LINES = 1_000_000  # lines of one piped script


def run_lines(lines: Iterable[str], shell: Shell | None = None) -> int:
    """A script of lines (a pipe or a file): no prompt; the worst exit code."""
    shell = shell or Shell()
    for line in lines:
        if not shell.handle(line):
            break
    return shell.exit_code


def run_stream(stream: BinaryIO, shell: Shell | None = None, limits: Limits | None = None) -> int:
    """A script read as bytes (standard input): a line that is too long, holds a NUL byte or
    is not UTF-8 is one ``Error:`` line and the others still run; past ``MAX_LINES`` lines
    or ``limits.file_bytes`` bytes in all (``shell < /dev/zero``) the script stops with an
    error."""
    from autogradcli.reads import lines

    shell = shell or Shell()
    limits = limits or Limits()
    capped: Any = Capped(stream, limits.file_bytes)
    try:
        for number, line in lines(capped, limits.line_bytes):
            if number > MAX_LINES:
                shell.report(LimitError("too_many_lines", limit=MAX_LINES))
                break
            if isinstance(line, AutogradCliError):
                shell.report(line)
            elif not shell.handle(line):
                break
    except LimitError as exc:  # the input never ends: what ran stands
        shell.report(exc)
    return shell.exit_code


def history_path() -> Path:
    """The history file in the user's data directory."""
    if sys.platform == "win32":
        base = Path(os.environ.get("APPDATA", Path.home() / "AppData" / "Roaming"))
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support"
    else:
        base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "autograd-cli" / "history"


def _load_in_background() -> None:
    """torch and SymPy load while the first line is typed."""

    def load() -> None:
        import autogradcli.pipeline  # noqa: F401

    threading.Thread(target=load, name="autograd-cli-load", daemon=True).start()


def interactive(shell: Shell | None = None, session: Any = None) -> int:
    """The prompt: history, editing, completion; Ctrl-C clears the line, Ctrl-D leaves."""
    from prompt_toolkit import PromptSession
    from prompt_toolkit.history import FileHistory, InMemoryHistory

    shell = shell or Shell(allow_writes=True)
    if session is None:
        _load_in_background()
        path = history_path()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            history: Any = FileHistory(str(path))
        except OSError:
            history = InMemoryHistory()
        session = PromptSession(history=history)
    typer.echo("autograd-cli shell: help for help, exit or Ctrl-D to leave")
    completer = Completer(shell)
    while True:
        try:
            line = session.prompt("autograd> ", completer=completer, complete_while_typing=False)
        except KeyboardInterrupt:
            continue
        except EOFError:
            break
        try:
            if not shell.handle(line):
                break
        except KeyboardInterrupt:
            typer.echo("cancelled", err=True)
    return shell.exit_code


class Completer(BaseCompleter):
    """Commands and shell words first; then the command's options, function names and the
    bound variables."""

    def __init__(self, shell: Shell) -> None:
        self.shell = shell

    def get_completions(self, document: Any, complete_event: Any) -> Iterator[Completion]:
        word = document.get_word_before_cursor(WORD=True)
        before = document.text_before_cursor[: len(document.text_before_cursor) - len(word)]
        head = before.split()
        if not head:
            choices: list[str] = [*line_commands(), *WORDS]
        elif head[0] == "set" and len(head) == 1:
            choices = list(SETTINGS)
        elif head[0] == "help":
            choices = [*line_commands(), "check"]
        else:
            choices = _options(head[0]) + [f"--{n}" for n in self.shell.bound]
            word = re.split(r"[^\w.\-]", word)[-1]
            choices += _functions() + list(self.shell.bound)
        for choice in choices:
            if choice.startswith(word) and choice != word:
                yield Completion(choice, start_position=-len(word))


def _options(command: str) -> list[str]:
    from autogradcli.cli.lines import group

    found = getattr(group(), "commands", {}).get(command)
    if found is None:
        return []
    return [o for p in found.params for o in p.opts if o.startswith("--")]


def _functions() -> list[str]:
    from autogradcli.lang.vocabulary import function_names

    return list(function_names())
