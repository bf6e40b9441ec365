"""Many questions, one start-up: `check` (files of cases), `shell` (piped and through
prompt_toolkit's own test input), `--expect`, and the notebook display."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import autogradcli as ag
from autogradcli.cli.app import app
from autogradcli.cli.shell import Shell, interactive, run_lines
from tests.conftest import RUNNER, cli
from tests.schemas import validate

CASES = """\
# an exercise sheet: good, disagreeing and bad cases
grad "2*x**4+x**3+3*x**2+5*x+1" --x 2 --expect x=93
grad "sin(x)" --x 0 --expect x=0
grad "x**2" --x
jacobian "x**2" --x "[1., 2.]"
bogus "x"
grad "x**2 --x 1
{"command": "grad", "expression": "x**3", "values": {"x": 2}, "expect": {"x": 12}}
{"command": "hessian", "expression": "x**3", "values": {"x": 2}}
{"expression": "x**3", "values": {"x": 2}, "nonsense": 1}
{bad json
"""


@pytest.fixture
def cases(tmp_path):
    path = tmp_path / "cases.txt"
    path.write_text(CASES)
    return path


def test_check_reports_each_bad_case_by_line_and_runs_the_rest(cases, tmp_path):
    junit = tmp_path / "report.xml"
    run = cli("check", str(cases), "--json", "--junit-xml", str(junit))
    assert run.exit_code == 2
    lines = [json.loads(x) for x in run.stdout.splitlines()]
    *each, last = lines
    assert [(d["case"], d["status"]) for d in each] == [
        (2, "agree"),
        (3, "disagree"),
        (4, "bad input"),
        (5, "agree"),
        (6, "bad input"),
        (7, "bad input"),
        (8, "agree"),
        (9, "agree"),
        (10, "bad input"),
        (11, "bad input"),
    ]
    assert last == {
        "summary": {
            "cases": 10,
            "agreed": 4,
            "disagreed": 1,
            "bad_input": 5,
            "internal_errors": 0,
            "seconds": last["summary"]["seconds"],
            "stopped": None,
            "exit_code": 2,
        }
    }
    for d in each:
        if d["document"] is not None:
            validate(d["document"])
    assert each[1]["document"]["expect"]["x"] == {
        "value": 0.0,
        "autograd_agree": False,
        "sympy_agree": False,
        "agree": False,
    }
    assert each[2]["error"] == "variable 'x' needs a value, e.g. --x 2 (or --var x=2)"
    assert each[4]["error"] == (
        "a line starts with a command (grad, jacobian, jvp, hessian, graph, plot), not "
        "'bogus', e.g. "
        'grad "x**3" --x 2'
    )
    assert each[5]["error"] == (
        "cannot split the line as a shell would: No closing quotation; close the quotes"
    )
    assert each[8]["error"] == "no variable 'nonsense' in the expression (its variables: x)"
    assert each[9]["error"].startswith("the case is not valid JSON (Expecting property name")
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("10", "1", "5")
    names = [c.get("name") for c in suite.findall("testcase")]
    assert names[0] == 'line 2: grad "2*x**4+x**3+3*x**2+5*x+1" --x 2 --expect x=93'
    failure = suite.findall("testcase")[1].find("failure")
    assert failure is not None
    assert failure.get("message") == "expected x.grad = 0, autograd gives 1, SymPy 1"


def test_check_summary_table_and_lines_that_did_not_agree(cases):
    run = cli("check", str(cases))
    assert run.exit_code == 2
    out = run.stdout
    assert 'line 3  ✗ disagree  grad "sin(x)" --x 0 --expect x=0: expected x.grad = 0,' in out
    assert "line 4  ! bad input  grad \"x**2\" --x: variable 'x' needs a value" in out
    assert "line 2 " not in out  # a case that agrees is only counted
    row = next(x for x in out.splitlines() if x.startswith("│"))
    assert [c.strip() for c in row.strip("│").split("│")][:4] == ["10", "4", "1", "5"]


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ('grad "x**2" --x 3\ngrad "sum(x)" --x "[1., 2.]"\n', 0),
        ('grad "x**2" --x 3 --expect x=5\ngrad "x" --x 1\n', 1),
        ('grad "x**2" --x 3 --expect x=5\ngrad "x"\n', 2),
    ],
)
def test_check_exit_codes(tmp_path, text, code):
    path = tmp_path / "c.txt"
    path.write_text(text)
    assert cli("check", str(path)).exit_code == code


def test_check_fail_fast_and_stdin():
    piped = RUNNER.invoke(
        app,
        ["check", "-", "--json", "--fail-fast"],
        input='grad "x" --x 1 --expect x=2\ngrad "x" --x 1\n',
        prog_name="autograd-cli",
    )
    assert piped.exit_code == 1
    lines = [json.loads(x) for x in piped.stdout.splitlines()]
    assert len(lines) == 2 and lines[-1]["summary"]["cases"] == 1


def test_check_jobs_give_the_same_cases_in_order(tmp_path):
    path = tmp_path / "c.txt"
    path.write_text("".join(f'grad "x**{k}" --x 2\n' for k in range(1, 7)))
    run = cli("check", str(path), "--json", "--jobs", "2")
    cases = [json.loads(x) for x in run.stdout.splitlines()][:-1]
    assert run.exit_code == 0
    assert [c["document"]["variables"]["x"]["grad"] for c in cases] == [
        k * 2.0 ** (k - 1) for k in range(1, 7)
    ]


def test_check_missing_file_is_one_line():
    run = cli("check", "/nonexistent/cases.txt")
    assert run.exit_code == 2
    assert run.stderr == (
        "Error: cannot read the cases from '/nonexistent/cases.txt': No such file or directory; "
        "give a text file of command lines or JSON Lines, or - for standard input\n"
    )


# --- --expect -------------------------------------------------------------------------------


def test_expect_through_the_api():
    right = ag.grad("2*x**4+x**3+3*x**2+5*x+1", x=2, expect={"x": 93})
    assert right.verdict == "agree" and right.expectations[0].agree
    wrong = ag.grad("x**3", x=2, expect={"x": "[11]"})
    assert wrong.verdict == "disagree" and not wrong.agree
    assert (wrong.expectations[0].autograd_agree, wrong.expectations[0].sympy_agree) == (
        False,
        False,
    )
    with pytest.raises(ag.AutogradCliError) as raised:
        ag.grad("x**3", x=2, expect={"y": 1})
    assert str(raised.value) == (
        "expect names 'y', which is not a differentiated input (inputs: ['x']); write "
        "expect=dict(NAME=VALUE) with one of them"
    )


def test_expect_on_the_command_line():
    run = cli("grad", "x**3", "--x", "2", "--expect", "x=11")
    assert run.exit_code == 1
    assert "you expect x.grad = 11: autograd ✗, SymPy ✗" in run.stdout
    assert run.stdout.rstrip().endswith(
        "✗ autograd and SymPy agree with each other and disagree with your x.grad"
    )
    bad = cli("grad", "x**3", "--x", "2", "--expect", "x")
    assert bad.exit_code == 2
    assert bad.stderr == "Error: 'x': write --expect NAME=VALUE, e.g. --expect x=93\n"


# --- shell ----------------------------------------------------------------------------------


def test_shell_from_a_pipe_keeps_bindings_and_settings(capsys):
    lines = [
        "x = [1., 2.]",
        'grad "sum(x**3)" --expect x=[3,12]',
        "set dtype float64",
        "set json on",
        'grad "sum(x**2)"',
        "vars",
    ]
    assert run_lines(lines) == 0
    out = capsys.readouterr().out
    document = json.loads(next(x for x in out.splitlines() if x.startswith("{")))
    assert document["dtype"] == "float64" and document["variables"]["x"]["grad"] == [2.0, 4.0]
    assert "you expect x.grad = [3, 12]: autograd ✓, SymPy ✓" in out
    assert out.rstrip().endswith("x = [1., 2.]\nset dtype float64\nset json on")


def test_shell_a_bad_line_is_one_error_and_nothing_is_lost(capsys):
    shell = Shell()
    code = run_lines(["x = 2", "bogus", "y = foo(", 'grad "x**3"'], shell)
    captured = capsys.readouterr()
    assert code == 2 and shell.bound == {"x": "2"}
    errors = captured.err.splitlines()
    assert errors[0] == (
        "Error: a line starts with a command (grad, jacobian, jvp, hessian, graph, plot), "
        "not 'bogus', e.g. "
        'grad "x**3" --x 2'
    )
    assert errors[1].startswith("Error: cannot read the value 'foo('")
    assert "✓ autograd and SymPy agree" in captured.out  # the line after the bad ones ran


def test_shell_exit_code_is_the_worst_line():
    assert run_lines(['grad "x" --x 1 --expect x=3', 'grad "x" --x 1']) == 1
    assert run_lines(['grad "x" --x 1', "exit", "bogus"]) == 0


def test_shell_command_reads_a_pipe():
    run = RUNNER.invoke(app, ["shell"], input='x = 3\ngrad "x**2"\n', prog_name="autograd-cli")
    assert run.exit_code == 0 and "✓ autograd and SymPy agree" in run.stdout


def _prompt(text: str, shell: Shell) -> int:
    from prompt_toolkit import PromptSession
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    with create_pipe_input() as pipe:
        pipe.send_text(text)
        session = PromptSession(input=pipe, output=DummyOutput())
        return interactive(shell, session)


def test_interactive_shell_ctrl_c_clears_the_line_and_ctrl_d_leaves(capsys):
    shell = Shell()
    code = _prompt('x = 2\nhalf typed\x03grad "x**3"\nbogus\n\x04', shell)
    out = capsys.readouterr()
    assert code == 2 and shell.bound == {"x": "2"}
    assert "✓ autograd and SymPy agree" in out.out
    assert "Error: a line starts with a command" in out.err
    assert "half typed" not in out.err


def test_interactive_shell_ctrl_c_cancels_a_running_question(monkeypatch, capsys):
    import autogradcli.api

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(autogradcli.api, "grad", interrupted)
    shell = Shell()
    assert _prompt('grad "x**2" --x 1\nx = 4\nexit\n', shell) == 0
    assert "cancelled" in capsys.readouterr().err
    assert shell.bound == {"x": "4"}  # the shell went on


def test_shell_completion_offers_commands_options_functions_and_names():
    from prompt_toolkit.document import Document

    from autogradcli.cli.shell import Completer

    shell = Shell(bound={"weight": "2"})
    completer = Completer(shell)

    def words(text: str) -> list[str]:
        return [c.text for c in completer.get_completions(Document(text), None)]

    assert "grad" in words("gr") and "graph" in words("gr")
    assert "--dtype" in words('grad "x" --dt')
    assert "sigmoid" in words('grad "sig')
    assert "weight" in words('grad "we')
    assert words("set dt") == ["dtype"]


def test_history_lives_in_the_user_data_directory(monkeypatch, tmp_path):
    from autogradcli.cli.shell import history_path

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert history_path() == tmp_path / "autograd-cli" / "history"


# --- notebooks ------------------------------------------------------------------------------


def test_results_display_as_html_in_a_notebook():
    html = ag.grad("2*x**4+x**3+3*x**2+5*x+1", x=2)._repr_html_()
    assert html.startswith("<pre")
    assert "93" in html and "8*x**3 + 3*x**2 + 6*x + 5" in html
    assert "autograd and SymPy agree" in html
    cell = ag.grad("x = torch.tensor(2.0, requires_grad=True); (x*x).backward()")
    assert "every line agrees with SymPy" in cell._repr_html_()


# --- the page docs/shell.md -----------------------------------------------------------------

PAGE = (Path(__file__).resolve().parent.parent / "docs" / "shell.md").read_text()
TEXT_BLOCKS = re.findall(r"```text\n(.*?)```", PAGE, flags=re.S)


def test_the_shell_page_shows_the_sheet_file_as_it_is():
    sheet = Path(__file__).resolve().parent.parent / "docs" / "examples" / "sheet.txt"
    assert TEXT_BLOCKS[0] == sheet.read_text()


def test_the_shell_page_shows_what_check_prints():
    run = cli("check", "docs/examples/sheet.txt")
    assert run.exit_code == 2
    shown = TEXT_BLOCKS[1].splitlines()
    printed = " ".join(run.stdout.split())  # the page keeps each case on one line
    for line in shown:
        if line.startswith("line "):
            assert " ".join(line.split()) in printed, line
    counts = next(x for x in shown if x.startswith("│"))
    row = next(x for x in run.stdout.splitlines() if x.startswith("│"))
    assert counts.split("│")[1:5] == row.split("│")[1:5]


def test_the_shell_page_session_runs(capsys):
    session = TEXT_BLOCKS[2].splitlines()
    lines = [x.removeprefix("autograd> ") for x in session if x.startswith("autograd> ")]
    assert run_lines(lines) == 0
    out = capsys.readouterr().out
    shown = [x for x in session if not x.startswith("autograd> ")]
    assert out.rstrip().endswith("\n".join(shown))
    assert "you expect x.grad = [3, 12]: autograd ✓, SymPy ✓" in out
