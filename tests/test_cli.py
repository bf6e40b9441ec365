"""The command line: argument forms, exact error lines and exit codes, help and version."""

from __future__ import annotations

import dataclasses
import json
import math
import re

import pytest

from tests.conftest import cli, grad_json


@pytest.mark.parametrize(
    ("args", "value"),
    [
        (["x**2", "--x", "2"], 2.0),
        (["x**2", "--x=2"], 2.0),
        (["x**2", "--x", "-2"], -2.0),
        (["x**2", "--x=-1.5e-3"], -1.5e-3),
        (["x**2", "--var", "x=2"], 2.0),
        (["--x", "2", "x**2"], 2.0),
        (["--json", "--x", "3", "x**2"], 3.0),
    ],
)
def test_variable_value_forms_and_option_order(args, value):
    doc = grad_json(*args)
    assert doc["variables"]["x"]["value"] == pytest.approx(value, rel=1e-7)
    assert doc["variables"]["x"]["grad"] == pytest.approx(2 * value, rel=1e-6)


def test_expression_starting_with_minus():
    doc = grad_json("-x**2", "--x", "3")
    assert doc["output"]["value"] == -9.0
    assert doc["variables"]["x"]["grad"] == -6.0


def test_var_for_a_name_that_clashes_with_an_option():
    doc = grad_json("json*2 + weights", "--var", "json=3", "--var", "weights=1")
    assert doc["variables"]["json"]["grad"] == 2.0
    assert doc["variables"]["weights"]["grad"] == 1.0


def test_after_double_dash_everything_is_the_expression():
    run = cli("grad", "--json", "--x", "2", "--", "-x")
    assert run.exit_code == 0
    assert run.json()["variables"]["x"]["grad"] == -1.0


ERRORS = [
    (["x**2"], "Error: variable 'x' needs a value, e.g. --x 2 (or --var x=2)"),
    (["x**2", "--x"], "Error: variable 'x' needs a value, e.g. --x 2 (or --var x=2)"),
    (
        ["x**2", "--x", "2", "--x", "3"],
        "Error: variable 'x' is given twice (2 and 3); give each variable one value",
    ),
    (
        ["x**2", "--x", "2", "--y", "3"],
        "Error: no variable 'y' in the expression (its variables: x)",
    ),
    (
        ["x**2", "--x", "2", "--jsn"],
        "Error: no variable 'jsn' in the expression (its variables: x); did you mean --json?",
    ),
    (
        ["x**2", "--x", "2", "--weigths", "ones"],
        "Error: no variable 'weigths' in the expression (its variables: x); "
        "did you mean --weights?",
    ),
    (
        ["x**2", "--x", "2", "--const", "z"],
        "Error: no variable 'z' in the expression (its variables: x)",
    ),
    (
        ["x", "--x", "2", "--const", "x"],
        "Error: PyTorch: element 0 of tensors does not require grad and does not have a grad_fn. "
        "Why: the output depends on no tensor with requires_grad=True, so no graph was recorded "
        "for backward() to walk. Fix: let an input require grad (leave it out of --const), or "
        "use a variable in the expression.",
    ),
    (
        ["2*3"],
        "Error: PyTorch: element 0 of tensors does not require grad and does not have a grad_fn. "
        "Why: the output depends on no tensor with requires_grad=True, so no graph was recorded "
        "for backward() to walk. Fix: let an input require grad (leave it out of --const), or "
        "use a variable in the expression.",
    ),
    (
        ["x**2", "--x", "ones(2,2)"],
        "Error: the output has shape [2, 2]: PyTorch: grad can be implicitly created only for "
        "scalar outputs. Why: backward() with no argument supplies the external gradient 1, "
        "which only fits a one-element output; a tensor output needs weights w for the "
        "vector-Jacobian product J^T w. Fix: pass --weights ones (or weights of the output's "
        "shape), or reduce the output with sum(...) or mean(...).",
    ),
    (
        ["x**2", "--x", "ones(2,2)", "--weights", "[1,2]"],
        "Error: PyTorch: Mismatch in shape: grad_output[0] has a shape of torch.Size([2]) and "
        "output[0] has a shape of torch.Size([2, 2]). Why: the weights w in backward(w) must "
        "have exactly the output's shape, one weight per output element. Fix: give --weights "
        "the output's shape, or use --weights ones.",
    ),
    (
        ["x+y", "--x", "[1,2]", "--y", "[1,2,3]"],
        "Error: shapes [2] and [3] do not broadcast in 'x + y'; give the variables matching shapes",
    ),
    (
        ["x**2", "--x", "2", "--device", "tpu"],
        "Error: unknown device 'tpu'; use auto, cpu, cuda, cuda:N or mps",
    ),
    (
        ["x**2", "--x", "[[1,2],[3]]"],
        "Error: ragged or non-numeric list: every row must have the same length and hold numbers",
    ),
    (
        ["x**2", "--x", "ones(100000,100000)"],
        "Error: a value of shape [100000, 100000] has 10000000000 elements; the limit is 20000000 "
        "(raise it with --max-elements)",
    ),
    (
        ["x**2", "--x", "ones(3)", "--max-elements", "2"],
        "Error: a value of shape [3] has 3 elements; the limit is 2 (raise it with --max-elements)",
    ),
    (
        ["x*y", "--x", "ones(3,1)", "--y", "ones(1,3)", "--max-elements", "4"],
        "Error: 'x*y' would have 9 elements (shape [3, 3]); the limit is 4 (raise it with "
        "--max-elements)",
    ),
    (
        ["9**9**9*x", "--x", "2"],
        "Error: integer constant 9**387420489 is too large (about 2**1162261467); the limit is "
        "about 1e308",
    ),
    (
        ["x**2", "--x", "@missing.npy"],
        "Error: cannot read '@missing.npy': No such file or directory",
    ),
    (
        ["x**2", "--x", "open(1)"],
        "Error: unknown constructor 'open'; give a number (2, -1.5e-3), "
        "a nested list ([[1,2],[3,4]]), "
        "a constructor (ones(2,2), zeros(3), full(2,3,0.5), arange(1,16), linspace(0,1,5), "
        "reshape(arange(1,16),5,3), rand(2,3), randn(2,3)) or a file (@data.npy, .pt, .csv, .json)",
    ),
    (
        ["x**2 3", "--x", "2"],
        "Error: cannot parse the expression at column 6: invalid syntax; "
        'write it in Python syntax, e.g. "2*x**4 + 3*x + 1"',
    ),
    (
        ["x**2", "3", "--x", "2"],
        "Error: got more than one expression ('x**2', '3'); quote the expression and give "
        "values as "
        "--NAME VALUE. See 'autograd-cli grad --help'.",
    ),
    (
        ["x**2", "--x", "2", "--repeat", "abc"],
        "Error: --repeat takes a whole number from 1 to 10000, not 'abc'",
    ),
    (
        ["x**2", "--x", "2", "--repeat", "0"],
        "Error: --repeat takes a whole number from 1 to 10000, not '0'",
    ),
    (
        ["x**2", "--x", "2", "--order", "9"],
        "Error: --order takes a whole number from 1 to 8, not '9'",
    ),
    (["x**2", "--x", "2", "--rtol", "-1e-3"], "Error: --rtol takes a number ≥ 0, not '-1e-3'"),
    (["x**2", "--x", "2", "--atol", "nan"], "Error: --atol takes a number ≥ 0, not 'nan'"),
    (
        ["x**2", "--x", "2", "--seed", "-1"],
        "Error: --seed takes a whole number from 0 to 9223372036854775807, not '-1'",
    ),
    (
        ["x**2", "--x", "2", "--sympy-timeout", "soon"],
        "Error: --sympy-timeout takes a number ≥ 0, not 'soon'",
    ),
    (
        ["x**2", "--x", "2", "--max-elements", "0"],
        "Error: --max-elements takes a whole number ≥ 1, not '0'",
    ),
    (
        ["--x", "2"],
        'Error: missing the expression; give it in quotes, e.g. autograd-cli grad "x**2" --x 3. '
        "See 'autograd-cli grad --help'.",
    ),
]


@pytest.mark.parametrize(("args", "line"), ERRORS, ids=[" ".join(a) for a, _ in ERRORS])
def test_bad_input_is_one_error_line_and_exit_2(args, line):
    run = cli("grad", *args)
    assert run.exit_code == 2
    assert run.stderr == line + "\n"
    assert run.stdout == ""


def test_json_errors_also_go_to_stdout_as_an_object():
    run = cli("grad", "x**2", "--x", "2", "--device", "tpu", "--json")
    assert run.exit_code == 2
    assert json.loads(run.stdout) == {
        "schema_version": 1,
        "error": {
            "type": "device",
            "code": "unknown_device",
            "message": "unknown device 'tpu'; use auto, cpu, cuda, cuda:N or mps",
        },
    }
    assert run.stderr.startswith("Error: unknown device")


def test_json_usage_errors_are_objects_too():
    run = cli("grad", "x**2", "--x", "2", "--repeat", "abc", "--json")
    assert run.exit_code == 2
    assert json.loads(run.stdout)["error"]["type"] == "usage"


def test_cuda_unavailable_names_the_devices_that_are(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    run = cli("grad", "x**2", "--x", "2", "--device", "cuda")
    assert run.exit_code == 2
    assert run.stderr == (
        "Error: device 'cuda' is not available here; available devices: cpu "
        "(or use --device auto)\n"
    )


def test_disagreement_exits_1_and_says_so(wrong_sin):
    run = cli("grad", "sin(x)", "--x", "1")
    assert run.exit_code == 1
    assert "✗ autograd and SymPy disagree: x" in run.stdout
    assert "✗ x: a real mismatch: float64 disagrees too (max abs error 0.540302)" in run.stdout


def test_disagreement_in_json(wrong_sin):
    run = cli("grad", "sin(x)", "--x", "1", "--json")
    assert run.exit_code == 1
    doc = run.json()
    assert doc["agree"] is False
    assert doc["variables"]["x"]["agree"] is False
    assert doc["variables"]["x"]["rounding"] is None
    assert (doc["verdict"], doc["cause"]["code"]) == ("disagree", "mismatch")


def test_float32_rounding_is_named_and_is_not_a_disagreement():
    # A zero tolerance demands float32 equal the exact value, which rounding prevents;
    # the same inputs in float64 agree, so the mismatch is rounding.
    run = cli("grad", "sin(x)", "--x", "1", "--rtol", "0", "--atol", "0", "--json")
    assert run.exit_code == 0
    doc = run.json()
    assert doc["variables"]["x"]["rounding"] == (
        "within float32 rounding: error 3.03478e-08 (5.61682e-08 relative, bound 2.38419e-07); "
        "float64 agrees (error 0)"
    )
    assert doc["output"]["rounding"].startswith("within float32 rounding: error")
    assert (doc["verdict"], doc["cause"]["code"], doc["agree"]) == ("rounding", "rounding", True)


def test_strict_makes_rounding_exit_1():
    run = cli("grad", "sin(x)", "--x", "1", "--rtol", "0", "--atol", "0", "--strict", "--json")
    doc = run.json()
    assert (run.exit_code, doc["verdict"], doc["strict"], doc["agree"]) == (
        1,
        "rounding",
        True,
        False,
    )


def test_float32_overflow_is_named():
    run = cli("grad", "exp(x)", "--x", "100", "--json")
    doc = run.json()
    assert run.exit_code == 1
    assert doc["variables"]["x"]["cause"]["message"] == (
        "overflow: exp(x) reaches 2.68812e+43, past float32's largest number 3.40282e+38, so "
        "float32 gives inf"
    )
    assert doc["variables"]["x"]["grad"] == "Infinity"


def test_version():
    from autogradcli import __version__

    run = cli("--version")
    assert run.exit_code == 0
    assert run.stdout == f"autograd-cli {__version__}\n"


def test_help_lists_grad():
    run = cli("--help")
    assert run.exit_code == 0
    assert "grad" in run.stdout


def test_grad_help_explains_name_value_with_an_example():
    run = cli("grad", "--help")
    assert run.exit_code == 0
    assert "--NAME VALUE" in run.stdout
    assert "--x 2" in run.stdout
    for option in (
        "--weights",
        "--repeat",
        "--const",
        "--device",
        "--dtype",
        "--rtol",
        "--atol",
        "--json",
        "--var",
        "--seed",
        "--max-elements",
    ):
        assert option in run.stdout


def test_rich_report_has_header_table_passes_and_verdict():
    run = cli("grad", "mean((x+2)*(x+2)*3)", "--x", "ones(2,2)", "--repeat", "2", "--device", "cpu")
    assert run.exit_code == 0
    out = run.stdout
    assert out.startswith(
        "grad mean((x+2)*(x+2)*3)   device cpu · dtype float32 · rtol 1.3e-06, atol 1e-05"
    )
    assert re.search(r"^ out \[\]\s+27\s+27\s+0\s+✓", out, flags=re.M)
    assert "3*x/2 + 3" in out
    assert "passes: forward + backward each pass (a new graph); .grad accumulates" in out
    assert "[[4.5, 4.5]," in out and "[[9, 9]," in out
    assert out.rstrip().endswith("✓ autograd and SymPy agree")


def test_rich_report_shows_const_variables_without_grad():
    run = cli("grad", "x*y", "--x", "1.0", "--y", "2.0", "--const", "y")
    assert "— (requires_grad=False)" in run.stdout


def test_rich_report_shows_weights_and_notes():
    run = cli("grad", "relu(x)", "--x", "[-1,0,2]", "--weights", "ones")
    assert run.exit_code == 0
    assert "external gradient (--weights): [1, 1, 1]" in run.stdout
    assert (
        "relu'(0) is undefined (SymPy's Heaviside(0) is 1/2); one-sided derivatives there: "
        "[0, 1] (a real kink); PyTorch's value there: 0;"
    ) in " ".join(run.stdout.split())


def test_no_closed_form_from_sympy_falls_back_to_the_numeric_check(monkeypatch):
    # sin's SymPy side replaced by a function SymPy knows nothing of: its derivative stays
    # an unevaluated Derivative, which has no number
    import sympy

    from autogradcli.lang import vocabulary

    unknown = dataclasses.replace(vocabulary.OPS["sin"], sympy=lambda s, a: sympy.Function("f")(a))
    monkeypatch.setitem(vocabulary.OPS, "sin", unknown)
    doc = grad_json("sin(x)", "--x", "0.5")
    assert doc["expected_by"] == "numeric"
    assert doc["notes"] == [
        "SymPy gives no number here (SymPy leaves f(x) unevaluated); checked numerically instead"
    ]
    assert doc["variables"]["x"]["grad"] == pytest.approx(math.cos(0.5), rel=1e-6)
    assert doc["variables"]["x"]["expected"] == pytest.approx(math.cos(0.5), rel=1e-6)


def test_random_values_report_their_seed():
    doc = grad_json("sum(x)", "--x", "rand(3)", "--seed", "7")
    assert doc["seed"] == 7
    again = grad_json("sum(x)", "--x", "rand(3)", "--seed", "7")
    assert again["variables"]["x"]["value"] == doc["variables"]["x"]["value"]
    unseeded = grad_json("sum(x)", "--x", "rand(3)")
    assert isinstance(unseeded["seed"], int)
    assert grad_json("sum(x)", "--x", "ones(3)")["seed"] is None


@pytest.mark.parametrize(
    "args",
    [
        ["x/0", "--x", "2"],
        ["x + log(-1)", "--x", "2"],
        ["sqrt(-1)*x", "--x", "2"],
        ["x*2**64", "--x", "2"],
        ["x", "--x", "arange(0,1,1e-320)"],
        ["sum(x)", "--x", "zeros(0,1e19)"],
        ["sum(x)", "--x", "rand(2)", "--seed", "99999999999999999999"],
    ],
)
def test_inputs_that_break_a_library_still_give_one_error_line(args):
    run = cli("grad", *args)
    assert run.exit_code == 2, run.stdout
    assert run.stderr.startswith("Error: ") and run.stderr.count("\n") == 1


def test_150_nested_exps_are_the_recursion_limit_or_an_overflow_never_a_traceback():
    """Whether SymPy's derivative of 150 nested exp reaches Python's recursion limit depends
    on how much of it SymPy's cache already holds (the same process asked before): either
    answer is one clear line or an honest verdict."""
    run = cli("grad", "exp(" * 150 + "x" + ")" * 150, "--x", "0.1")
    if run.exit_code == 2:
        assert run.stderr.startswith("Error: the expression is nested too deeply to check: ")
        assert run.stderr.count("\n") == 1
    else:
        assert (run.exit_code, run.stderr) == (1, "")
        assert "✗ autograd and SymPy disagree: output, x" in run.stdout


def test_no_arguments_print_the_help_and_exit_0():
    run = cli()
    assert run.exit_code == 0 and run.stderr == ""
    assert run.stdout.startswith("Usage: autograd-cli [OPTIONS] COMMAND [ARGS]...")
    assert "  check " in run.stdout and "  shell " in run.stdout


def test_a_flag_given_a_value_says_it_takes_none():
    run = cli("grad", "x**2", "--x", "2", "--json", "true")
    assert run.exit_code == 2
    assert run.stderr == (
        "Error: --json is a flag and takes no value ('true'); write --json. "
        "See 'autograd-cli grad --help'.\n"
    )


def test_help_shows_flags_as_plain_flags_at_80_columns():
    run = cli("grad", "--help")
    assert run.exit_code == 0
    for flag in ("--inspect", "--same-graph", "--numeric", "--strict", "--explain"):
        assert f"  {flag} " in run.stdout
    assert "--no-" not in run.stdout
    assert max(len(line) for line in run.stdout.splitlines()) <= 100


@pytest.mark.parametrize("width", [60, 80, 100])
def test_reports_fit_the_width_and_never_cut_a_number(width):
    import io

    from rich.console import Console

    import autogradcli as ag
    from autogradcli.render import renderable

    result = ag.grad("2*x**4+x**3+3*x**2+5*x+1 + sum(W)", x=1.26501e-06, W="[[1.5, -3.75]]")
    out = io.StringIO()
    Console(file=out, width=width, no_color=True).print(renderable(result))
    text = out.getvalue()
    assert max(len(line.rstrip()) for line in text.splitlines()) <= width
    for number in ("1.26501e-06", "-3.75", "5.00001"):
        assert number in text, (width, text)
    stacked = "  .grad (autograd)" in text
    assert stacked == (width < 80)  # the table where it fits, rows stacked where it does not


def _in_a_terminal(*args: str) -> str:
    """``autograd-cli ARGS`` with a pseudo-terminal as its standard streams."""
    import os
    import pty
    import subprocess
    import sys

    leader, follower = pty.openpty()
    env = {**os.environ, "COLUMNS": "100", "TERM": "xterm"}
    process = subprocess.Popen(
        [sys.executable, "-m", "autogradcli", *args],
        stdin=follower, stdout=follower, stderr=follower, env=env, close_fds=True,
    )  # fmt: skip
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    process.wait(timeout=120)
    os.close(leader)
    return b"".join(chunks).decode("utf-8", "replace")


def test_a_terminal_sees_what_the_tool_is_doing_and_quiet_hides_it():
    from concurrent.futures import ThreadPoolExecutor

    args = ("grad", "x**2", "--x", "3")
    with ThreadPoolExecutor(2) as pool:  # both processes start at once: one start-up's wait
        shown, quiet = pool.map(lambda more: _in_a_terminal(*args, *more), [(), ("--quiet",)])
    assert "loading PyTorch and SymPy" in shown and "autograd and SymPy agree" in shown
    assert "loading PyTorch and SymPy" not in quiet and "autograd and SymPy agree" in quiet


def test_pipes_and_json_get_no_progress():
    run = cli("grad", "x**2", "--x", "3")
    assert "loading" not in run.stdout + run.stderr


@pytest.mark.parametrize(
    ("words", "cword", "offered"),
    [
        ("autograd-cli gr", 1, ["grad", "graph"]),
        ("autograd-cli grad --insp", 2, ["--inspect"]),
        ("autograd-cli grad 2*sigm", 2, ["2*sigmoid"]),
    ],
)
def test_shell_completion_offers_commands_options_and_functions(words, cword, offered):
    from autogradcli.cli.app import app
    from tests.conftest import RUNNER

    env = {"_AUTOGRAD_CLI_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(cword)}
    run = RUNNER.invoke(app, [], env=env, prog_name="autograd-cli")
    assert run.stdout.split() == offered


def test_completion_can_be_installed():
    run = cli("--help")
    assert "--install-completion" in run.stdout and "--show-completion" in run.stdout


def test_long_derivatives_are_cut_unless_full():
    args = ("grad", "sin(x)*exp(x)/(1+x**2)", "--x", "0.3", "--order", "5")
    short = " ".join(cli(*args).stdout.split())
    assert "… (436 characters; all of it with --full or in --json)" in short
    full = " ".join(cli(*args, "--full").stdout.split())
    assert "characters; all of it" not in full
    document = cli(*args, "--json").json()
    assert len(document["derivatives"]["x"]) == 436


def test_latex_of_the_derivatives():
    import autogradcli as ag

    r = ag.grad("2*x**4+x**3+3*x**2+5*x+1", x=2)
    assert r.variables["x"].latex == "8 x^{3} + 3 x^{2} + 6 x + 5"
    order = ag.derivative("sin(x)*y", x=1.0, y=2.0, order=2)
    assert order.latex == {"x": "- y \\sin{\\left(x \\right)}", "y": "0"}
    jac = ag.jacobian("x**2", x="[1., 2.]")
    assert jac.latex == {
        "x": "\\left[\\begin{matrix}2 x_{0} & 0\\\\0 & 2 x_{1}\\end{matrix}\\right]"
    }
    hess = ag.hessian("x**2*y + y**3", x=1.0, y=2.0)
    assert hess.latex == {"x,x": "2 y", "x,y": "2 x", "y,x": "2 x", "y,y": "6 y"}
    run = cli("grad", "2*x**4+x**3+3*x**2+5*x+1", "--x", "2", "--latex")
    assert "LaTeX ∂out/∂x: 8 x^{3} + 3 x^{2} + 6 x + 5" in run.stdout
    document = cli("hessian", "x**2*y + y**3", "--x", "1", "--y", "2", "--json").json()
    assert document["latex"]["y,y"] == "6 y"
    chain = ag.grad("y = x + 2; z = y*y*3; out = mean(z)", x="ones(2,2)").variables["x"]
    assert chain.chain_latex == (
        "\\frac{\\partial out}{\\partial x} = \\frac{\\partial out}{\\partial z} \\cdot "
        "\\frac{\\partial z}{\\partial y} \\cdot \\frac{\\partial y}{\\partial x} = "
        "\\left(\\frac{1}{4}\\right) \\cdot \\left(6 y\\right) \\cdot \\left(1\\right)"
    )


def test_the_numeric_check_reports_its_progress():
    import autogradcli as ag
    from autogradcli.progress import REPORT

    seen: list[tuple[str, int, int]] = []
    token = REPORT.set(lambda text, done, total: seen.append((text, done, total)))
    try:
        ag.grad("sum(x**2)", x="[1., 2., 3.]", numeric=True)
    finally:
        REPORT.reset(token)
    counted = [s for s in seen if s[2]]
    assert counted[-1] == ("numeric gradient", 7, 7)  # 2 per element and 1 at the point
    assert [d for _, d, _ in counted] == sorted(d for _, d, _ in counted)
