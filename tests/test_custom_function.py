"""Custom autograd Functions (issue 26 §2): the tutorial's LegendrePolynomial3 and the
"Extending PyTorch" examples run verbatim (docs/examples/extending_*.py), their numbers
equal to real PyTorch running the same text, and the user's own backward checked against
SymPy's derivative of the user's forward: where and how a wrong one differs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import autogradcli as ag
from autogradcli.errors import ExpressionError
from autogradcli.lang.program import parse_program
from autogradcli.settings import Limits
from tests.conftest import cli

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "docs" / "examples"


def _text(name: str) -> str:
    return (EXAMPLES / name).read_text()


def _pytorch(text: str) -> dict[str, Any]:
    """The test's own text run by real Python and PyTorch: its names after the run."""
    namespace: dict[str, Any] = {}
    exec(compile(text, "<test cell>", "exec"), namespace)  # test-owned text only
    return namespace


def _cell(text: str) -> ag.CellResult:
    result = ag.grad(text)
    assert isinstance(result, ag.CellResult)
    return result


def _same_grads(result: ag.CellResult, namespace: dict[str, Any], names: list[str]) -> None:
    for name in names:
        want = namespace[name].grad.detach().numpy()
        np.testing.assert_array_equal(result.grads[name], want)


# --- the tutorial's LegendrePolynomial3 ----------------------------------------------------


def test_legendre_right_backward_agrees_and_equals_pytorch(capsys: pytest.CaptureFixture[str]):
    text = _text("extending_legendre.py")
    result = _cell(text)
    assert result.error is None and result.verdict == "agree" and result.agree
    _same_grads(result, _pytorch(text), ["x"])
    (check,) = result.functions
    assert (check.name, check.call, check.verdict, check.problems) == (
        "LegendrePolynomial3",
        "LegendrePolynomial3.apply(x)",
        "agree",
        (),
    )
    (one,) = check.inputs
    assert one.name == "input" and one.verdict == "agree" and one.elements == ()
    # grad_output 0.75, 1, 1.25 times the derivative 7.5*x**2 - 1.5 at 0.5, -1, 2
    want = np.array([0.75, 1.0, 1.25]) * np.array([0.375, 6.0, 28.5])
    np.testing.assert_allclose(one.user, want, rtol=1e-12)
    np.testing.assert_allclose(one.expected, want, rtol=1e-12)
    np.testing.assert_allclose(one.numeric, want, rtol=1e-6)
    assert one.written == "1.5*grad_output*(5*input**2 - 1)"
    assert one.right == "grad_output*(7.5*input**2 - 1.5)"


def test_legendre_wrong_backward_names_the_missing_term():
    text = _text("extending_wrong_backward.py")
    result = _cell(text)
    assert result.verdict == "disagree" and not result.agree
    # the cell's .grad is what PyTorch computes with the user's (wrong) backward
    _same_grads(result, _pytorch(text), ["x"])
    np.testing.assert_allclose(result.grads["x"], [1.875, 7.5, 30.0])
    (check,) = result.functions
    (one,) = check.inputs
    assert check.verdict == "disagree" and one.verdict == "disagree"
    assert one.elements == (0, 1, 2)
    assert one.written == "7.5*grad_output*input**2"
    assert one.right == "grad_output*(7.5*input**2 - 1.5)"
    assert one.difference == "missing term -1.5*grad_output"
    g = np.array([0.75, 1.0, 1.25])
    np.testing.assert_allclose(one.expected, g * [0.375, 6.0, 28.5], rtol=1e-12)
    np.testing.assert_allclose(one.user, g * [1.875, 7.5, 30.0], rtol=1e-12)


def test_a_backward_that_forgets_grad_output_is_caught():
    """y.sum().backward() hands it ones, so the cell's .grad agrees; the check's own
    grad_output (0.75 to 1.25) does not let it pass."""
    text = _text("extending_legendre.py").replace(
        "return grad_output * 1.5 * (5 * input ** 2 - 1)", "return 1.5 * (5 * input ** 2 - 1)"
    )
    result = _cell(text)
    assert all(e.verdict == "agree" for e in result.events)
    (check,) = result.functions
    assert check.verdict == "disagree" and result.verdict == "disagree"
    assert check.inputs[0].elements == (0, 2)  # grad_output is 1 at element 1
    assert check.inputs[0].difference == "grad_output is left out: a missing factor"


def test_a_constant_factor_is_named():
    text = _text("extending_legendre.py").replace(
        "return grad_output * 1.5 * (5 * input ** 2 - 1)",
        "return grad_output * 3 * (5 * input ** 2 - 1)",
    )
    (check,) = _cell(text).functions
    assert check.inputs[0].difference == "a constant factor: 2 times the right gradient"


def test_the_cli_report_for_a_wrong_backward():
    run = cli("grad", "@docs/examples/extending_wrong_backward.py")
    assert run.exit_code == 1
    lines = [line.rstrip() for line in run.stdout.splitlines()]
    assert "   input: your backward differs at elements 0, 1, 2" in lines
    assert "      yours      7.5*grad_output*input**2" in lines
    assert "      the right  grad_output*(7.5*input**2 - 1.5)" in lines
    assert "      missing term -1.5*grad_output" in lines
    assert any(line.startswith("custom Function LegendrePolynomial3.apply(x)") for line in lines)


def test_the_cli_and_json_for_a_right_backward():
    assert cli("grad", "@docs/examples/extending_legendre.py").exit_code == 0
    document = cli("grad", "@docs/examples/extending_legendre.py", "--json").json()
    (function,) = document["functions"]
    assert function["function"] == "LegendrePolynomial3" and function["verdict"] == "agree"
    assert function["inputs"][0]["right"] == "grad_output*(7.5*input**2 - 1.5)"


# --- "Extending PyTorch": LinearFunction, MulConstant, MyCube --------------------------------


def test_linear_function_verbatim_equals_pytorch():
    text = _text("extending_linear.py")
    result = _cell(text)
    assert result.error is None and result.verdict == "agree"
    _same_grads(result, _pytorch(text), ["x", "w", "b"])
    (check,) = result.functions
    assert [i.name for i in check.inputs] == ["input", "weight", "bias"]
    assert all(i.verdict == "agree" for i in check.inputs) and check.problems == ()


def test_linear_function_with_a_transposed_gradient():
    text = _text("extending_linear.py").replace(
        "grad_weight = grad_output.t().mm(input)", "grad_weight = input.t().mm(grad_output)"
    )
    with pytest.raises(RuntimeError) as raised:  # what PyTorch says for the same text
        _pytorch(text)
    result = _cell(text)
    assert result.error is not None and result.error.code == "pytorch"
    assert str(raised.value).splitlines()[0] in result.error.torch_message
    (check,) = result.functions
    weight = next(i for i in check.inputs if i.name == "weight")
    assert weight.verdict == "disagree"
    assert weight.difference == "a transposed matrix (shape [3, 2] where [2, 3] is needed)"
    assert check.problems == (
        "backward returns a gradient of shape [3, 2] for weight, of shape [2, 3]",
    )
    run = cli("grad", text)
    assert run.exit_code == 2


def test_mul_constant_verbatim_equals_pytorch():
    text = _text("extending_mulconstant.py")
    result = _cell(text)
    assert result.error is None and result.verdict == "agree"
    _same_grads(result, _pytorch(text), ["x"])
    (check,) = result.functions
    assert check.call == "MulConstant.apply(x, 2.5)"
    assert [i.name for i in check.inputs] == ["tensor"]  # the constant has no gradient


def test_my_cube_with_setup_context_and_two_outputs():
    text = _text("extending_mycube.py")
    result = _cell(text)
    assert result.error is None and result.verdict == "agree"
    _same_grads(result, _pytorch(text), ["x"])
    (check,) = result.functions
    assert check.call == "MyCube.apply(x)" and check.verdict == "agree"
    assert check.inputs[0].right == "6*grad_dx*x + 3*grad_output*x**2"


def test_my_cube_without_the_grad_dx_term_is_wrong():
    text = _text("extending_mycube.py").replace(
        "result = grad_output * dx + grad_dx * 6 * x", "result = grad_output * dx"
    )
    result = _cell(text)
    _same_grads(result, _pytorch(text), ["x"])
    (check,) = result.functions
    assert check.verdict == "disagree" and result.verdict == "disagree"
    assert check.inputs[0].difference == "missing term 6*grad_dx*x"


LINEAR_OLD = """
import torch
from torch.autograd import Function


class LinearFunction(Function):

    @staticmethod
    def forward(ctx, input, weight, bias=None):
        ctx.save_for_backward(input, weight, bias)
        output = input.mm(weight.t())
        if bias is not None:
            output += bias.unsqueeze(0).expand_as(output)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        grad_input = grad_weight = grad_bias = None
        if ctx.needs_input_grad[0]:
            grad_input = grad_output.mm(weight)
        if ctx.needs_input_grad[1]:
            grad_weight = grad_output.t().mm(input)
        if bias is not None and ctx.needs_input_grad[2]:
            grad_bias = grad_output.sum(0)
        return grad_input, grad_weight, grad_bias


x = torch.tensor([[1.0, 2.0], [0.5, -1.0]], requires_grad=True)
w = torch.tensor([[0.1, 0.2], [-0.4, 0.5], [0.3, 0.3]], requires_grad=True)
y = LinearFunction.apply(x, w)
y.sum().backward()
print(x.grad)
print(w.grad)
"""


def test_the_older_linear_function_with_ctx_in_forward_and_bias_none():
    """The form of earlier "Extending PyTorch" pages: forward(ctx, input, weight, bias=None),
    called without the bias."""
    result = _cell(LINEAR_OLD)
    assert result.error is None and result.verdict == "agree"
    _same_grads(result, _pytorch(LINEAR_OLD), ["x", "w"])
    (check,) = result.functions
    assert check.call == "LinearFunction.apply(x, w)"
    assert [i.name for i in check.inputs] == ["input", "weight"]


# --- gradcheck's other checks -----------------------------------------------------------------

NOT_REENTRANT = """
import torch


class Drifting(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.scale = x * 0 + 2
        return x * 2

    @staticmethod
    def backward(ctx, grad_output):
        ctx.scale = ctx.scale + 1
        return grad_output * ctx.scale


x = torch.tensor([1.0, 2.0], requires_grad=True)
Drifting.apply(x).sum().backward()
print(x.grad)
"""


STEP = """
import torch
from torch.autograd.function import once_differentiable


class Step(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input):
        ctx.save_for_backward(input)
        return input.clamp(min=0)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output):
        input, = ctx.saved_tensors
        return input > 0


x = torch.tensor([1.0, -2.0, 3.0], requires_grad=True)
Step.apply(x).sum().backward()
print(x.grad)
"""


def test_a_backward_of_the_wrong_dtype_and_once_differentiable():
    result = _cell(STEP)
    _same_grads(result, _pytorch(STEP), ["x"])  # PyTorch casts the booleans to float
    (check,) = result.functions
    assert check.problems == ("backward returns torch.bool for input (torch.float64)",)
    assert check.verdict == "disagree"
    right = STEP.replace("return input > 0", "return grad_output * (input > 0)")
    assert _cell(right).verdict == "agree" and _cell(right).functions[0].problems == ()


def test_needs_input_grad_false_leaves_an_input_out():
    text = _text("extending_linear.py").replace(
        "w = torch.tensor([[0.1, 0.2, 0.3], [-0.4, 0.5, 0.6]], requires_grad=True)",
        "w = torch.tensor([[0.1, 0.2, 0.3], [-0.4, 0.5, 0.6]])",
    )
    text = text.replace("print(w.grad)\n", "")
    result = _cell(text)
    assert result.error is None and result.verdict == "agree"
    _same_grads(result, _pytorch(text), ["x", "b"])
    assert [i.name for i in result.functions[0].inputs] == ["input", "bias"]


def test_a_backward_that_is_not_reentrant():
    result = _cell(NOT_REENTRANT)
    _same_grads(result, _pytorch(NOT_REENTRANT), ["x"])
    (check,) = result.functions
    assert check.problems[0] == (
        "backward is not reentrant: run twice on the same inputs it returns different gradients"
    )
    assert check.verdict == "disagree"


JVP = """
import torch
from torch.autograd import Function


class MulConstant(Function):
    @staticmethod
    def forward(tensor, constant):
        return tensor * constant

    @staticmethod
    def setup_context(ctx, inputs, output):
        tensor, constant = inputs
        ctx.constant = constant

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * ctx.constant, None

    @staticmethod
    def jvp(ctx, grad_tensor, grad_constant):
        return grad_tensor * ctx.constant


x = torch.tensor([1.0, -2.0], requires_grad=True)
MulConstant.apply(x, 3.0).sum().backward()
print(x.grad)
"""


def test_a_right_jvp_passes_and_a_wrong_one_is_named():
    assert _cell(JVP).functions[0].problems == ()
    wrong = JVP.replace("return grad_tensor * ctx.constant", "return grad_tensor")
    (check,) = _cell(wrong).functions
    assert check.problems == (
        "jvp is wrong: it gives [1, 1] where the forward's directional derivative "
        "(central differences) is [3, 3]",
    )


def test_the_real_pytorch_jvp_agrees_with_the_reference_we_use():
    namespace = _pytorch(JVP.replace("MulConstant.apply(x, 3.0).sum().backward()", ""))
    import torch.autograd.forward_ad as fwAD

    with fwAD.dual_level():
        dual = fwAD.make_dual(torch.tensor([1.0, -2.0]), torch.ones(2))
        out = namespace["MulConstant"].apply(dual, 3.0)
        assert fwAD.unpack_dual(out).tangent.tolist() == [3.0, 3.0]


# --- refused forms ------------------------------------------------------------------------------


def test_a_method_without_staticmethod_is_refused():
    text = _text("extending_legendre.py").replace(
        "    @staticmethod\n    def backward", "    def backward"
    )
    with pytest.raises(ExpressionError) as raised:
        parse_program(text, Limits())
    assert str(raised.value) == (
        "'backward' of a custom autograd Function must be a @staticmethod, as PyTorch "
        "requires; write @staticmethod above 'def backward'"
    )
    run = cli("grad", text)
    assert run.exit_code == 2 and run.stderr.startswith("Error: 'backward' of a custom")


def test_python_outside_the_whitelist_is_refused_in_a_body():
    text = _text("extending_legendre.py").replace(
        "ctx.save_for_backward(input)", "open('/tmp/x', 'w')"
    )
    run = cli("grad", text)
    assert run.exit_code == 2
    assert run.stderr == (
        "Error: 'open('/tmp/x', 'w')' cannot be used in a custom autograd Function; write "
        "assignments, ctx.save_for_backward(...), a, b = ctx.saved_tensors, ctx.name = value, "
        "if ctx.needs_input_grad[i]: / if x is not None:, and return\n"
    )


def test_a_large_input_is_checked_without_the_numeric_column():
    """Past MAX_NUMERIC elements central differences (two forwards per element) are left
    out; SymPy's check still covers every element."""
    import ast

    from autogradcli.lang.custom import read_class
    from autogradcli.verify.custom import MAX_NUMERIC, check_function

    text = _text("extending_wrong_backward.py")
    node = next(s for s in ast.parse(text).body if isinstance(s, ast.ClassDef))
    fn = read_class(node, text, Limits(), {"torch": "torch"})
    values = np.linspace(-1.0, 1.0, MAX_NUMERIC + 1)
    (one,) = check_function(fn, "P3(x)", [values], [True], Limits()).inputs
    assert one.numeric is None and one.verdict == "disagree"
    assert len(one.elements) == MAX_NUMERIC + 1
    assert one.difference == "missing term -1.5*grad_output"
