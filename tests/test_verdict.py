"""The verdict policy (issue 10): the commands a new user tried, each with the verdict the
policy gives and a true cause; stable forms suggested only when their re-run agrees; the
rounding bound; --strict; the loose ends."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import autogradcli as ag
from autogradcli.policy.compare import compare
from autogradcli.policy.verdict import MAX_RELATIVE, UNIT_ROUNDOFF, rounding_relative, settle
from tests.conftest import cli

BCE = "mean(-(y*log(sigmoid(z)) + (1-y)*log(1-sigmoid(z))))"

ISSUE = [
    # (expression, values, options, verdict, cause code, variable, printed .grad)
    (BCE, {"z": "[20., -3.]", "y": "[0., 1.]"}, {"const": ["y"]}, "disagree",
     "precision_loss", "z", [np.nan, -0.4762870669364929]),
    ("log(1 + exp(x))", {"x": 100}, {}, "disagree", "overflow", "x", np.nan),
    ("1/(1+exp(-x))", {"x": -100}, {}, "disagree", "overflow", "x", np.nan),
    ("(exp(x) - 1)/x", {"x": 1e-8}, {}, "disagree", "precision_loss", "x", 1e8),
    ("(exp(x) - 1)/x", {"x": 1e-8}, {"dtype": "float64"}, "disagree", "precision_loss", "x",
     1.6077470928430557),
    ("sqrt(x**2)", {"x": 0}, {}, "disagree", "non_differentiable", "x", np.nan),
    ("(x**2)**0.5", {"x": 0}, {}, "disagree", "non_differentiable", "x", np.nan),
    ("y = x*x; out = sqrt(y)", {"x": 0}, {}, "disagree", "non_differentiable", "x", np.nan),
    ("x*log(x)", {"x": 0}, {}, "disagree", "zero_times_inf", "x", np.nan),
]  # fmt: skip


@pytest.mark.parametrize(
    ("expr", "values", "options", "verdict", "cause", "name", "grad"),
    ISSUE,
    ids=[f"{c[0]}-{c[2].get('dtype', 'float32')}" for c in ISSUE],
)
def test_the_issues_commands_get_the_policys_verdict(
    expr, values, options, verdict, cause, name, grad
):
    r = ag.grad(expr, values, device="cpu", **options)
    assert np.allclose(r.variables[name].grad, grad, equal_nan=True, rtol=1e-6)
    assert (r.verdict, r.agree) == (verdict, False)
    assert r.variables[name].verdict == verdict
    assert r.variables[name].cause is not None and r.variables[name].cause.code == cause


def test_the_reference_is_exact_where_float64_cancels():
    # SymPy's exp(x)/x - (exp(x) - 1)/x**2 in float64 gives autograd's 1.6077 back
    r = ag.grad("(exp(x) - 1)/x", {"x": 1e-8}, dtype="float64", device="cpu")
    assert r.variables["x"].expected == pytest.approx(0.5000000033333334, rel=1e-15)
    assert r.variables["x"].cause.data["node"] == "exp(x) - 1"
    assert r.variables["x"].cause.data["kind"] == "cancellation"


def test_bce_names_the_subtraction_that_lost_everything_and_what_it_fed():
    r = ag.grad(BCE, {"z": "[20., -3.]", "y": "[0., 1.]"}, const=["y"], device="cpu")
    data = r.variables["z"].cause.data
    assert (data["node"], data["kind"], data["value"], data["fed_to"]) == (
        "1 - sigmoid(z)",
        "cancellation",
        0.0,
        "log",
    )
    assert (data["operand"], data["operand_value"]) == ("sigmoid(z)", 1.0)
    assert data["exact"] == pytest.approx(2.0611536181902037e-09)


def test_overflow_names_the_node_and_the_dtypes_largest_number():
    r = ag.grad("log(1 + exp(x))", {"x": 100}, device="cpu")
    data = r.variables["x"].cause.data
    assert data["node"] == "exp(x)" and data["max"] == pytest.approx(3.4028234663852886e38)
    assert data["exact"] == pytest.approx(2.6881171418161356e43)


def test_nan_hessian_at_a_non_differentiable_point_is_a_disagreement():
    r = ag.hessian("norm(x)", {"x": "[0., 0.]"}, device="cpu")
    assert np.isnan(r.blocks[0].autograd).all()
    assert r.verdict == "disagree" and r.blocks[0].cause.code == "non_differentiable"
    assert not any("PyTorch's value there" in str(n) for n in r.notes)


# --- stable forms -----------------------------------------------------------------------------

STABLE = [
    ("log(1 + exp(x))", {"x": 100}, {}, [("log(1 + exp(x))", "softplus(x)")], {"x": 1.0}),
    (BCE, {"z": "[20., -3.]", "y": "[0., 1.]"}, {"const": ["y"]},
     [("log(sigmoid(z))", "logsigmoid(z)"), ("log(1 - sigmoid(z))", "logsigmoid(-z)")],
     {"z": [0.5, -0.4762870669364929]}),
    ("1/(1+exp(-x))", {"x": -100}, {}, [("1/(1 + exp(-x))", "sigmoid(x)")], {"x": 0.0}),
    ("1e6*log(1 + x)", {"x": 1e-7}, {}, [("log(1 + x)", "log1p(x)")], {"x": 999999.875}),
]  # fmt: skip


@pytest.mark.parametrize(("expr", "values", "options", "replaced", "grads"), STABLE)
def test_a_stable_form_is_suggested_only_with_a_rerun_that_agrees(
    expr, values, options, replaced, grads
):
    r = ag.grad(expr, values, device="cpu", **options)
    assert r.verdict == "disagree"
    (suggestion,) = r.suggestions
    assert list(suggestion.replaced) == replaced
    assert (suggestion.confirmed, suggestion.verdict) == (True, "agree")
    for name, want in grads.items():
        assert np.allclose(suggestion.grads[name], want, rtol=1e-6)


def test_expm1_is_tried_for_exp_x_minus_1_near_zero_and_not_suggested():
    r = ag.grad("(exp(x) - 1)/x", {"x": 1e-8}, device="cpu")
    (tried,) = r.suggestions
    assert tried.replaced == (("exp(x) - 1", "expm1(x)"),)
    assert (tried.confirmed, tried.verdict) == (False, "disagree")
    assert tried.cause.code == "precision_loss" and tried.cause.data["node"] == "backward"


def test_the_suggestion_in_the_report_and_in_json():
    args = ("grad", "log(1 + exp(x))", "--x", "100")
    flat = " ".join(cli(*args).stdout.split())
    assert (
        "suggestion: write softplus(x) for log(1 + exp(x)): re-run in float32, it agrees "
        "(x.grad = 1)" in flat
    )
    doc = cli(*args, "--json").json()
    assert doc["suggestions"] == [
        {
            "replace": [{"pattern": "log(1 + exp(x))", "with": "softplus(x)"}],
            "expression": "softplus(x)",
            "confirmed": True,
            "rerun": {"verdict": "agree", "output": 100.0, "grads": {"x": 1.0}, "cause": None},
        }
    ]


def test_an_expression_that_agrees_gets_no_suggestion():
    assert ag.grad("log(1 + exp(x))", {"x": 1}, device="cpu").suggestions == ()


# --- the rounding bound and ≈ -----------------------------------------------------------------


def test_the_bound_is_capped_at_an_eighth_and_counts_steps():
    assert rounding_relative("float32", 10) == 10 * UNIT_ROUNDOFF["float32"]
    assert rounding_relative("bfloat16", 10**6) == MAX_RELATIVE == 0.125


@pytest.mark.parametrize("factor", [2.0, 1e8])
def test_an_error_of_2x_or_more_is_never_within_the_bound(factor):
    reference = np.array([0.5])
    check = compare(factor * reference, reference, 1.6e-2, 1e-5, relative=MAX_RELATIVE)
    assert not check.agree and not check.within_bound
    float64 = compare(reference, reference, 1e-7, 1e-7)
    assert settle(check, float64) == "disagree"


def test_within_the_bound_is_rounding_only_when_float64_agrees():
    reference = np.array([1.0])
    check = compare(np.array([1.05]), reference, 1.6e-2, 1e-5, relative=MAX_RELATIVE)
    assert (check.agree, check.within_bound) == (False, True)
    assert settle(check, compare(reference, reference, 1e-7, 1e-7)) == "rounding"
    assert settle(check, compare(np.array([1.1]), reference, 1e-7, 1e-7)) == "disagree"
    assert settle(check, None) == "disagree"


def test_rounding_is_shown_in_yellow_with_its_size_and_strict_fails_it():
    args = ("grad", "sin(x)", "--x", "1", "--rtol", "0", "--atol", "0")
    run = cli(*args)
    flat = " ".join(run.stdout.split())
    assert run.exit_code == 0
    assert "≈ x: within float32 rounding: error 3.03478e-08 (5.61682e-08 relative" in flat
    assert flat.endswith(
        "≈ autograd and SymPy agree within float32 rounding (bound 2.4e-07 relative; float64 "
        "agrees)"
    )
    strict = cli(*args, "--strict")
    assert strict.exit_code == 1
    assert strict.stdout.rstrip().endswith("--strict counts it as a disagreement")


def test_strict_applies_to_jacobian_and_hessian():
    for command in ("jacobian", "hessian"):
        args = (command, "sum(sin(x))", "--x", "[1.0, 2.0]", "--rtol", "0", "--atol", "0")
        loose, strict = cli(*args, "--json"), cli(*args, "--strict", "--json")
        assert loose.json()["verdict"] == strict.json()["verdict"] == "rounding", command
        assert (loose.exit_code, strict.exit_code) == (0, 1)


def test_json_has_verdict_and_cause_at_the_top_and_for_each_variable():
    doc = cli("grad", "log(1 + exp(x))", "--x", "100", "--json").json()
    assert (doc["verdict"], doc["agree"], doc["cause"]["code"]) == ("disagree", False, "overflow")
    v = doc["variables"]["x"]
    assert (v["verdict"], v["agree"], v["cause"]["code"]) == ("disagree", False, "overflow")
    assert v["cause"]["message"].startswith("overflow: exp(x) reaches 2.68812e+43")
    assert doc["passes"][0]["verdict"] == "disagree"


# --- loose ends -------------------------------------------------------------------------------


@pytest.mark.parametrize("expr", ["sum(x, 0)", "sum(x, -1)", "softmax(x, 0)", "max(x, 0)"])
def test_a_dim_of_a_single_number_works_as_in_pytorch(expr):
    import torch

    x = torch.tensor(2.0, requires_grad=True)
    name, dim = expr.split("(")[0], int(expr.split(", ")[1].rstrip(")"))
    fn = getattr(torch, name)
    out = fn(x, dim).values if name == "max" else fn(x, dim)
    out.backward()
    r = ag.grad(expr, {"x": 2.0}, device="cpu")
    assert (float(r.output), float(r.variables["x"].grad)) == (out.item(), x.grad.item())
    assert r.verdict == "agree"


def test_relu_of_inf_minus_inf_gets_no_kink_note():
    r = ag.grad("relu(x - y)", {"x": "inf", "y": "inf"}, device="cpu")
    said = " ".join(map(str, [*r.notes, *(n for v in r.variables.values() for n in v.notes)]))
    assert "relu'(0)" not in said and "PyTorch's value there" not in said
    assert r.verdict == "disagree" and r.first_cause().code == "nonfinite_input"


@pytest.mark.parametrize(
    ("expr", "values", "name", "text"),
    [
        ("abs(x)", {"x": 2}, "x", "sign(x)"),
        ("abs(z/(2+sin(abs(x))))", {"x": 1, "z": 1}, "z",
         "sign(z/(sin(Abs(x)) + 2))/(sin(Abs(x)) + 2)"),
    ],
)  # fmt: skip
def test_the_derivative_text_of_abs_never_reads_u_over_sign_u(expr, values, name, text):
    r = ag.grad(expr, values, device="cpu", dtype="float64")
    assert r.variables[name].derivative == text
    assert "/sign(" not in " ".join(v.derivative or "" for v in r.variables.values())


@pytest.mark.parametrize("device", ["cpu:5", "cpu:1", "mps:3"])
def test_a_cpu_with_an_index_is_an_error(device):
    run = cli("grad", "x", "--x", "1", "--device", device)
    kind = device.split(":")[0]
    assert (run.exit_code, run.stderr) == (
        2,
        f"Error: device '{device}' is not available here: the {kind} device has no index "
        f"{device.split(':')[1]}; use --device {kind}\n",
    )


@pytest.mark.parametrize(
    "args",
    [
        ("jacobian", "x*2", "--x", "rand(2)", "--seed", "7"),
        ("hessian", "sum(x**3)", "--x", "randn(2)", "--seed", "7"),
        ("graph", "x*2", "--x", "rand(2)", "--seed", "7"),
    ],
)
def test_jacobian_hessian_and_graph_report_the_seed_they_drew(args):
    assert cli(*args, "--json").json()["seed"] == 7
    assert "seed 7" in cli(*args).stdout
    unseeded = cli(*args[:-2], "--json").json()["seed"]
    assert isinstance(unseeded, int)
    assert cli(args[0], "sum(x*2)", "--x", "[1.0, 2.0]", "--json").json()["seed"] is None


# --- the stable forms' functions ---------------------------------------------------------------

NEW = [
    # (name, PyTorch's function, closed form of the derivative)
    ("log1p", lambda t, x: t.log1p(x), lambda x: 1 / (1 + x)),
    ("expm1", lambda t, x: t.expm1(x), np.exp),
    ("softplus", lambda t, x: t.nn.functional.softplus(x), lambda x: 1 / (1 + np.exp(-x))),
    ("logsigmoid", lambda t, x: t.nn.functional.logsigmoid(x), lambda x: 1 / (1 + np.exp(x))),
]


@pytest.mark.parametrize(("name", "fn", "derivative"), NEW, ids=[n[0] for n in NEW])
def test_new_functions_match_torch_and_their_closed_forms(name, fn, derivative):
    import torch

    points = [-0.5, -1e-6, 0.0, 0.5, 4.0, 30.0]
    x = torch.tensor(points, dtype=torch.float64, requires_grad=True)
    out = fn(torch, x)
    out.sum().backward()
    r = ag.grad(f"{name}(x)", {"x": points}, weights="ones", dtype="float64", device="cpu")
    assert np.array_equal(r.output, out.detach().numpy(), equal_nan=True)
    assert np.array_equal(r.variables["x"].grad, x.grad.numpy(), equal_nan=True)
    assert np.allclose(r.variables["x"].expected, derivative(np.array(points)), rtol=1e-12)
    assert r.verdict == "agree"


@settings(max_examples=200, deadline=None)
@given(
    pairs=st.lists(
        st.tuples(
            st.floats(allow_nan=True, allow_infinity=True, width=32),
            st.floats(allow_nan=True, allow_infinity=True, width=32),
        ),
        min_size=1,
        max_size=20,
    ),
    rtol=st.sampled_from([0.0, 1.3e-6, 1e-3]),
    atol=st.sampled_from([0.0, 1e-5, 1.0]),
)
def test_the_fast_isclose_is_numpys(pairs, rtol, atol):
    from autogradcli.policy.compare import isclose

    actual = np.array([a for a, _ in pairs])
    expected = np.array([e for _, e in pairs])
    want = np.isclose(actual, expected, rtol=rtol, atol=atol, equal_nan=True)
    assert (isclose(actual, expected, rtol, atol) == want).all()
