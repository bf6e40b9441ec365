"""Every PyTorch spelling in the vocabulary table means its entry: ``torch.sin(x)``,
``x.sin()``, ``F.relu(x)``, ``np.sin(x)`` parse to the same tree as the bare name."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import autogradcli as ag
from autogradcli.lang.parser import parse_expression
from autogradcli.lang.vocabulary import OPS, SPELLINGS

PREFIX = {"torch": "torch.", "F": "F.", "Tensor": "", "np": "np.", "math": "math.", "nn": "nn."}


def _written(key: str, argument: str) -> str:
    """``SPELLING(argument)`` as a user writes it (a method as ``(argument).name()``)."""
    if "." not in key:
        return f"{key}({argument})"
    namespace, name = key.split(".", 1)
    if namespace == "Tensor":
        return f"({argument}).{name}()"
    return f"{PREFIX.get(namespace, namespace + '.')}{name}({argument})"


ONE_INPUT = sorted(
    k
    for k, op in SPELLINGS.items()
    if op.tensors == ("input",)
    and not op.params
    and not op.varargs
    and op.kind != "detach"
    and "bare" in op.spelled
)


def test_the_table_has_the_spellings_the_tutorials_use():
    for key in ["Tensor.sum", "Tensor.pow", "Tensor.t", "torch.matmul", "F.relu", "Tensor.dot"]:
        assert key in SPELLINGS, key
    assert len(ONE_INPUT) >= 60


@settings(max_examples=60, deadline=None)
@given(key=st.sampled_from(ONE_INPUT), inner=st.sampled_from(["x", "x*y + 1", "(x - y)/2"]))
def test_each_spelling_parses_to_its_entry(key, inner):
    bare = OPS[SPELLINGS[key].name]
    spelled = parse_expression(_written(key, inner)).root
    plain = parse_expression(f"{bare.name}({inner})").root
    assert spelled == plain


@pytest.mark.parametrize(
    ("spelled", "plain"),
    [
        ("x.sum(dim=0, keepdim=True)", "sum(x, 0, True)"),
        ("torch.sum(x, axis=1)", "sum(x, 1)"),
        ("x.mean(0)", "mean(x, 0)"),
        ("x.softmax(dim=1)", "softmax(x, 1)"),
        ("F.softmax(x, -1)", "softmax(x, -1)"),
        ("x.pow(2)", "x**2"),
        ("torch.matmul(x, y)", "x @ y"),
        ("x.matmul(y)", "x @ y"),
        ("x.t()", "torch.t(x)"),  # T(x) is x.T: PyTorch records another node
        ("x.T", "T(x)"),
        ("np.exp(x)", "exp(x)"),
        ("torch.nn.functional.relu(x)", "relu(x)"),
        ("x.data", "detach(x)"),
        ("x.max(dim=0).values", "max(x, 0)"),
        ("torch.max(x, 0)[0]", "max(x, 0)"),
        ("torch.neg(x)", "-x"),
        ("x.square()", "x**2"),
        ("x.reciprocal()", "1/x"),
        ("x.rsqrt()", "1/sqrt(x)"),
        ("torch.add(x, y)", "x + y"),
        ("x.mul(y)", "x*y"),
        ("x.div(y)", "x/y"),
        ("x.sub(y)", "x - y"),
    ],
)
def test_pytorch_forms_mean_the_plain_ones(spelled, plain):
    assert parse_expression(spelled).root == parse_expression(plain).root


@settings(max_examples=12, deadline=None)
@given(
    key=st.sampled_from([k for k in ONE_INPUT if k.split(".")[-1] in ("sin", "exp", "tanh")]),
    value=st.floats(min_value=-2, max_value=2, allow_nan=False),
)
def test_a_spelled_function_gives_the_plain_numbers(key, value):
    spelled = ag.grad(_written(key, "x"), x=value, dtype="float64")
    plain = ag.grad(f"{SPELLINGS[key].name}(x)", x=value, dtype="float64")
    assert spelled.verdict == "agree"
    assert float(spelled.grads["x"]) == float(plain.grads["x"])
