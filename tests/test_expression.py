"""The parser: what the language accepts, what it refuses, and the limits."""

from __future__ import annotations

import time

import pytest

from autogradcli.errors import ExpressionError, LimitError
from autogradcli.lang.parser import parse_expression
from autogradcli.lang.text import unparse
from autogradcli.lang.tree import Binary, Name, Num
from autogradcli.settings import Limits
from tests.conftest import cli


def test_caret_is_power_with_power_precedence():
    assert parse_expression("x^2+1").root == parse_expression("x**2+1").root


def test_variables_in_order_of_appearance_constants_excluded():
    assert parse_expression("b*sin(a) + pi*e + b").variables == ("b", "a")
    assert parse_expression("pi*x", given=frozenset({"pi"})).variables == ("pi", "x")


def test_tree_keeps_the_expression_as_written():
    root = parse_expression("y*y*3").root
    assert root == Binary("*", Binary("*", Name("y"), Name("y")), Num(3))


@pytest.mark.parametrize(
    "text",
    [
        "2*x**4 + x**3 + 3*x**2 + 5*x + 1",
        "-x**2",
        "(-x)**2",
        "x - (y - z)",
        "x/(y*z)",
        "2**(-x)",
        "sin(x)/sum(x)",
        "mean((x + 2)*(x + 2)*3)",
        "-(x + 1)",
    ],
)
def test_unparse_round_trips(text):
    assert (
        parse_expression(unparse(parse_expression(text).root)).root == parse_expression(text).root
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "x.real",
            "'x.real' cannot be used: .real is not an attribute the language knows; "
            "use .T, .data, .grad in print(...), or a method such as x.sum()",
        ),
        ("x[0.5]", "an index must be an integer written as such (0, 1, -1), not '0.5'"),
        ("x[::0]", "slices step forward in PyTorch; a step of 0 is not allowed"),
        ("lambda: 1", "lambda cannot be used in an expression"),
        ("[i for i in x]", "comprehensions cannot be used in an expression"),
        ("x if y else z", "conditional expressions cannot be used in an expression"),
        ("'abc'", "strings are not allowed in an expression"),
        ("f'{x}'", "strings cannot be used in an expression"),
        ("True*x", "'True' is not allowed in an expression"),
        ("1j*x", "complex numbers are not supported; use real numbers"),
        ("x & y", "operator in 'x & y' is not allowed"),
        ("x // y", "operator in 'x // y' is not allowed"),
        ("f(x)", "unknown function 'f'"),
        ("__import__('os')", "unknown function '__import__'"),
        ("eval('1')", "unknown function 'eval'"),
        ("open('/etc/passwd')", "unknown function 'open'"),
        ("x.__class__", "'x.__class__' cannot be used: .__class__ is not an attribute"),
        ("x.sin().__class__", "'x.sin().__class__' cannot be used: .__class__ is not"),
        ("x.sin().__class__()", ".__class__() is not supported (autograd-cli grad --help"),
        ("sin(x, y)", "too many arguments for sin(); e.g. sin(x)"),
        ("sin(x=1)", "sin() needs its argument 'input', e.g. sin(x)"),
        ("sum(*x)", "sum() takes its arguments written out, not *args or **kwargs"),
        ("x.sum(dim=0, foo=1)", "sum() has no argument 'foo'; it takes input, dim, keepdim"),
        ("F.softmax(x)", "softmax() needs its argument 'dim', e.g. softmax(x, 0)"),
        (
            "F.mse_loss(x, y, reduction='bogus')",
            "reduction of mse_loss() must be one of 'mean', 'sum', 'none', not 'bogus'",
        ),
        ("ln(x)", "unknown function 'ln'; did you mean log?"),
        ("max(x, y)", "max(x, y) of two tensors: write maximum(x, y) for the elementwise larger"),
        ("x.max(dim=0)", "'x.max(dim=0)' gives (values, indices) in PyTorch; write x.max(dim=0)"),
        ("torch.max(x, 0)[1]", "'torch.max(x, 0)[1]': indices are integers, with no gradient"),
        ("torch.foo(x)", "torch.foo is not supported (autograd-cli grad --help lists"),
        ("math.sum(x)", "math.sum is not supported; did you mean sum? (autograd-cli grad --help"),
        ("torch.nn.Linear(2, 2)", "torch.nn.Linear is not supported"),
        ("x.item()", ".item() is not part of the maths the tool checks; print(x) shows the value"),
        ("x.cuda()", ".cuda() is not part of the maths the tool checks; choose the device with"),
        ("x.size(0)", ".size() is not part of the maths the tool checks; print(x.shape) shows"),
        (
            "y = x.exp_()",
            "'x.exp_()' changes a tensor in place inside an expression; write the in-place call "
            "as a line of its own (y.exp_()), or compute a new tensor (z = y.exp())",
        ),
        ("x.t_()", "'x.t_()': .t_() is not an in-place operation autograd-cli follows"),
        ("x.grad.mul_(0)", "'x.grad.mul_(0)': an in-place call here changes a named tensor"),
        ("torch.relu_(x)", "'torch.relu_(x)' changes a tensor in place"),
        (
            "import os",
            "'import os' is not allowed: a cell may import torch, torch.nn.functional as F, "
            "torch.nn as nn, numpy as np and math (nothing is imported)",
        ),
        ("from os import system", "'from os import system' is not allowed: a cell may import"),
        ("x.grad", "'x.grad' is not part of the computation; print it (print(x.grad))"),
        ("if x: y = 1", "if statements cannot be used; a program is steps NAME = EXPR"),
        ("while x: pass", "loops cannot be used"),
        ("for i in x: y = i", "loops cannot be used"),
        ("def f(): pass", "function definitions cannot be used"),
        ("z = y*2; y = x + 1; z", "step 'y' is never used; use it in a later step or remove it"),
        ("y = x + 1; x*2", "step 'y' is never used; use it in a later step or remove it"),
        ("sin = x; sin*2", "cannot assign to 'sin': it is a function"),
        ("a, b = x, 1; a", "cannot assign in 'a, b = (x, 1)': assign one plain name per step"),
        (
            "y.z = x; x",
            "'y.z = x' is not allowed; the attributes a cell may set are x.grad = None and "
            "x.requires_grad = True",
        ),
        ("y = x\n  z = y +\n z", "cannot parse the expression at line 2, column"),
        ("", "the expression is empty"),
        ("ｘ*2 + x", "the name 'ｘ' has characters Python reads as 'x'; write 'x'"),
        ("x\x00", "cannot parse the expression"),
        ("1/0*x", "division by zero in the constant 1/0"),
        ("(-8)**(1/3)*x", "is a complex number"),
    ],
)
def test_refused_with_a_reason(text, message):
    with pytest.raises(ExpressionError) as info:
        parse_expression(text)
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("9**9**9*x", "integer constant 9**387420489 is too large"),
        ("10.0**400*x", "the constant 10.0**400 overflows a float"),
        ("x**(10**6)", "exponent 1e+06 is larger than the limit 1000"),
        ("(3*x)**(10**300)", "exponent 1e+300 is larger than the limit 1000"),
        ("x*" + "9" * 400, "integer constant with 400 digits is too large"),
        ("x+" * 6000 + "x", "characters long; the limit is 10000"),
        ("(" * 300 + "x" + ")" * 300, "nested"),
        ("-" * 5000 + "x", "nested"),
        ("sin(" * 250 + "x" + ")" * 250, "nested"),
    ],
)
def test_limits_answer_at_once(text, message):
    start = time.perf_counter()
    with pytest.raises((LimitError, ExpressionError)) as info:
        parse_expression(text)
    assert message in str(info.value)
    assert time.perf_counter() - start < 2


def test_limits_are_configurable():
    with pytest.raises(LimitError):
        parse_expression("x**20", Limits(max_exponent=10))
    assert parse_expression("x**20").variables == ("x",)


def test_huge_tower_through_the_cli_is_an_error_not_a_hang():
    run = cli("grad", "9**9**9*x", "--x", "2")
    assert run.exit_code == 2
    assert "Traceback" not in run.stderr


def test_program_steps_in_order_with_the_last_assignment_as_output():
    program = parse_expression("y = x + 2; z = y*y*3; out = mean(z)")
    assert [s.name for s in program.steps] == ["y", "z", "out"]
    assert program.variables == ("x",)
    assert program.output == "out" and program.root == Name("out")


def test_program_on_lines_with_a_final_expression_named_out():
    program = parse_expression("y = x**2\n    z = y**3\n    z + w")
    assert program.variables == ("x", "w")
    assert program.output == "out"
    assert program.root == Binary("+", Name("z"), Name("w"))


def test_bare_output_is_not_named_like_an_input_or_a_step():
    assert parse_expression("out = x*2; out + 1").output == "out_"
    assert parse_expression("out*2").output == "out_"
    assert parse_expression("y = x*2; y").output == "y"
