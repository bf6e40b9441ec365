"""Real subprocesses: the console script, ``python -m``, a light ``--help``, no tracebacks."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

ENV = {**os.environ, "NO_COLOR": "1", "COLUMNS": "100"}
SCRIPT = shutil.which("autograd-cli") or os.path.join(
    os.path.dirname(sys.executable), "autograd-cli"
)


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, env=ENV, timeout=120)


def test_console_script_runs_the_main_example():
    done = run(SCRIPT, "grad", "2*x**4+x**3+3*x**2+5*x+1", "--x", "2")
    assert done.returncode == 0, done.stderr
    assert "93" in done.stdout and "✓ autograd and SymPy agree" in done.stdout


def test_python_dash_m():
    done = run(sys.executable, "-m", "autogradcli", "--version")
    assert done.returncode == 0
    assert done.stdout.startswith("autograd-cli ")


@pytest.fixture(scope="module")
def light() -> list[str]:
    """One process: --help, grad --help and --version, then what is imported; a parse
    error, then whether torch is (the two questions in the order a user might ask them)."""
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from autogradcli.cli import app\n"
        "for args in (['--help'], ['grad', '--help'], ['--version']):\n"
        "    assert CliRunner().invoke(app, args).exit_code == 0\n"
        "print(sorted(m for m in ('torch', 'sympy') if m in sys.modules))\n"
        "r = CliRunner().invoke(app, ['grad', 'x.y', '--x', '2'])\n"
        "assert r.exit_code == 2, r.output\n"
        "print('torch' in sys.modules)\n"
    )
    done = run(sys.executable, "-c", code)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_help_and_version_do_not_import_torch_or_sympy(light: list[str]) -> None:
    assert light[0] == "[]"


def test_parse_errors_do_not_import_torch(light: list[str]) -> None:
    assert light[1] == "False"


# One real process per way an error reaches the line: the parser's refusal, Click's usage
# error, and a refusal after torch has loaded (the device). The value-size and --repeat
# refusals (real processes here before) are AutogradCliErrors that the parser's handler
# (cli/errors.py) prints; tests/test_cli.py's test_bad_input_is_one_error_line_and_exit_2
# asserts their whole stderr line, in-process, where a traceback would fail it too.
@pytest.mark.parametrize(
    "args",
    [
        ["grad", "x.__class__", "--x", "2"],
        ["grad"],
        ["grad", "x**2", "--x", "2", "--device", "cuda:7"],
    ],
)
def test_errors_are_one_line_without_traceback(args):
    done = run(SCRIPT, *args)
    assert done.returncode == 2
    assert done.stderr.startswith("Error: ")
    assert done.stderr.count("\n") == 1
    assert "Traceback" not in done.stderr
