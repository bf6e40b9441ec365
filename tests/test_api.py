"""The Python API as a front end of its own: keywords and ``Settings``, results as values,
``to_dict()`` equal to the CLI's ``--json``, ``rich.print(result)`` equal to the CLI's report,
and errors in the API's words where the CLI names flags."""

from __future__ import annotations

import dataclasses
import io
import json
import pickle
from importlib.metadata import version

import numpy as np
import pytest
from rich.console import Console

import autogradcli as ag
from autogradcli.render.json import dumps
from tests.conftest import cli


def shown(result: object) -> str:
    """What ``rich.print(result)`` prints, at the CLI tests' width and without colour."""
    console = Console(file=io.StringIO(), width=100, color_system=None, highlight=False)
    console.print(result)
    return console.file.getvalue()


# --- the same document and the same report as the CLI --------------------------------------

SAME = [
    (
        lambda: ag.grad("2*x**4+x**3+3*x**2+5*x+1", x=2),
        ["grad", "2*x**4+x**3+3*x**2+5*x+1", "--x", "2"],
    ),
    (
        lambda: ag.grad("y = x + 2; out = mean(y*y)", x="[1.0, 2.0]", repeat=2, dtype="float64"),
        [
            "grad",
            "y = x + 2; out = mean(y*y)",
            "--x",
            "[1.0, 2.0]",
            "--repeat",
            "2",
            "--dtype",
            "float64",
        ],
    ),
    (
        lambda: ag.grad("x*y", x=2, y=3, const=["y"], numeric=True, explain=True),
        ["grad", "x*y", "--x", "2", "--y", "3", "--const", "y", "--numeric", "--explain"],
    ),
    (
        lambda: ag.grad("sum(relu(x))", x="[-1.0, 0.0, 2.0]", inspect=True),
        ["grad", "sum(relu(x))", "--x", "[-1.0, 0.0, 2.0]", "--inspect"],
    ),
    (
        lambda: ag.jacobian("x*sum(x)", x="[1.0, 2.0]", rows=True),
        ["jacobian", "x*sum(x)", "--x", "[1.0, 2.0]", "--show-rows"],
    ),
    (
        lambda: ag.jacobian("x*sum(x)", x="[1.0, 2.0]"),
        ["jacobian", "x*sum(x)", "--x", "[1.0, 2.0]"],
    ),
    (
        lambda: ag.hessian("x**2*y", x=1.5, y=-2.0, dtype="float64"),
        ["hessian", "x**2*y", "--x", "1.5", "--y", "-2.0", "--dtype", "float64"],
    ),
    (
        lambda: ag.derivative("sin(x)", x=1.0, order=3),
        ["grad", "sin(x)", "--x", "1.0", "--order", "3"],
    ),
    (
        lambda: ag.backward_graph("y = x + 2; out = mean(y*y)", x="ones(2)"),
        ["graph", "y = x + 2; out = mean(y*y)", "--x", "ones(2)"],
    ),
]


@pytest.mark.parametrize(("call", "argv"), SAME, ids=[" ".join(a[:2]) for _, a in SAME])
def test_to_dict_is_the_clis_json_document(call, argv):
    run = cli(*argv, "--json")
    assert call().to_dict() == run.json()


# Where the report names an option, each front end spells it its own way.
SPELLINGS = {"(--retain-grad NAME)": '(retain_grad=["NAME"])', "(--weights)": "(weights)"}


@pytest.mark.parametrize(("call", "argv"), SAME, ids=[" ".join(a[:2]) for _, a in SAME])
def test_rich_print_shows_the_clis_report(call, argv):
    printed = cli(*argv).stdout
    for cli_words, api_words in SPELLINGS.items():
        printed = printed.replace(cli_words, api_words)
    assert shown(call()) == printed


def test_the_report_names_the_apis_parameters_where_the_cli_names_flags():
    api = shown(ag.grad("relu(x)", x="[-1.0, 2.0]", weights="ones"))
    run = cli("grad", "relu(x)", "--x", "[-1.0, 2.0]", "--weights", "ones")
    assert "gradient (weights): [1, 1]" in api and "--weights" not in api
    assert api == run.stdout.replace("(--weights)", "(weights)")


# --- values and settings --------------------------------------------------------------------


def test_values_as_keywords_as_a_mapping_and_together():
    assert ag.grad("x*y", x=2, y=3).grads == {"x": 3.0, "y": 2.0}
    assert ag.grad("x*y", {"x": 2, "y": 3}).grads == {"x": 3.0, "y": 2.0}
    assert ag.grad("x*y", {"x": 2}, y=3).grads == {"x": 3.0, "y": 2.0}


def test_values_may_be_numbers_lists_arrays_tensors_or_text():
    import torch

    assert ag.grad("x**2", x=2.0).grads["x"] == 4.0
    for value in ([2.0, 3.0], np.array([2.0, 3.0]), torch.tensor([2.0, 3.0]), "[2.0, 3.0]"):
        r = ag.grad("sum(x**2)", x=value, dtype="float64")
        assert r.grads["x"].tolist() == [4.0, 6.0]


def test_a_name_that_clashes_with_a_setting_goes_in_values():
    r = ag.grad("seed*dtype", values={"seed": 2, "dtype": 5}, dtype="float64")
    assert r.dtype == "float64"
    assert r.grads == {"seed": 5.0, "dtype": 2.0}
    drawn = ag.grad("sum(x)", x="randn(3)", seed=7)
    assert drawn.seed == 7 and drawn.to_dict()["seed"] == 7


def test_settings_object_and_keywords_combine_keywords_winning():
    base = ag.Settings(dtype="float64", device="cpu", rtol=1e-3)
    r = ag.grad("x**2", x=3, settings=base, atol=0.5)
    assert (r.dtype, r.device, r.rtol, r.atol) == ("float64", "cpu", 1e-3, 0.5)
    assert ag.grad("x**2", x=3, settings=base, dtype="float32").dtype == "float32"
    assert base.dtype == "float64"  # the object given is not changed


def test_limits_fields_are_settings_keywords():
    with pytest.raises(ag.AutogradCliError) as caught:
        ag.grad("sum(x)", x="ones(100)", max_elements=10)
    assert caught.value.code == "value_too_large" and caught.value.data["limit"] == 10
    settings = ag.Settings().but(max_elements=10)
    assert settings.limits == ag.Limits(max_elements=10)


def test_default_tolerances_follow_the_dtype():
    assert (ag.Settings(dtype="float64").tolerance, ag.Settings().tolerance) == (
        (1e-7, 1e-7),
        (1.3e-6, 1e-5),
    )


def test_an_unknown_dtype_is_refused_when_the_settings_are_made():
    with pytest.raises(ag.AutogradCliError) as caught:
        ag.Settings(dtype="float8")
    assert str(caught.value) == (
        "unknown dtype 'float8' (did you mean float32?); use one of float32, float64, "
        "float16, bfloat16 (PyTorch's double, float and half, and torch.float64 and the like, "
        "are understood too)"
    )
    assert ag.Settings(dtype="double").dtype == ag.Settings(dtype="torch.float64").dtype
    assert ag.Settings(dtype="torch.half").dtype == "float16"


@pytest.mark.parametrize(
    ("keywords", "message"),
    [
        ({"repeat": 0}, "repeat takes a whole number from 1 to 10000, not 0"),
        ({"repeat": "2"}, "repeat takes a whole number from 1 to 10000, not '2'"),
        ({"repeat": True}, "repeat takes a whole number from 1 to 10000, not True"),
        ({"rtol": -1e-3}, "rtol takes a number ≥ 0, not -0.001"),
        ({"atol": float("nan")}, "atol takes a number ≥ 0, not nan"),
        ({"seed": -1}, "seed takes a whole number from 0 to 9223372036854775807, not -1"),
        ({"max_elements": 0}, "Limits.max_elements takes a whole number ≥ 1, not 0"),
        ({"sympy_seconds": -1}, "sympy_seconds takes a number ≥ 0, not -1"),
    ],
)
def test_numbers_a_setting_cannot_take_are_refused(keywords, message):
    with pytest.raises(ag.AutogradCliError) as caught:
        ag.grad("x**2", x=2, **keywords)
    assert (caught.value.code, str(caught.value)) == ("bad_number", message)


def test_numpy_numbers_are_numbers():
    r = ag.grad("x**2", x=2, repeat=np.int64(2), rtol=np.float32(1e-3), dtype="float64")
    assert r.grads["x"] == 8.0 and r.rtol == pytest.approx(1e-3)
    assert type(r.rtol) is float
    assert json.loads(dumps(r.to_dict()))["tolerance"]["rtol"] == float(np.float32(1e-3))
    assert ag.derivative("x**3", x=2, order=np.int8(3)).blocks[0].autograd == 6.0


# --- results are values ---------------------------------------------------------------------


def test_results_are_immutable_arrays_included():
    r = ag.grad("sum(x**2)", x="[1.0, 2.0]")
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.dtype = "float64"  # type: ignore[misc]
    with pytest.raises(ValueError, match="read-only"):
        r.grads["x"][0] = 5.0
    with pytest.raises(ValueError, match="read-only"):
        r.passes[0].grads["x"][0] = 5.0
    jac = ag.jacobian("x*sum(x)", x="[1.0, 2.0]")
    with pytest.raises(ValueError, match="read-only"):
        jac.blocks[0].autograd[0, 0] = 5.0
    assert r.grads["x"].tolist() == [2.0, 4.0]


def test_a_result_holds_no_torch_tensor():
    r = ag.grad("y = x*2; out = sum(y)", x="[1.0, 2.0]", retain_grad=["y"], explain=True)
    seen = []

    def walk(value: object) -> None:
        if dataclasses.is_dataclass(value):
            for f in dataclasses.fields(value):
                walk(getattr(value, f.name))
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list | tuple):
            for item in value:
                walk(item)
        else:
            seen.append(type(value).__module__.split(".")[0])

    walk(r)
    assert "torch" not in seen and "numpy" in seen


# --- errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "argv", "code", "api_words", "cli_words"),
    [
        (
            lambda: ag.grad("x**2", x=2, zero_grad=True),
            ["grad", "x**2", "--x", "2", "--zero-grad"],
            "needs_repeat",
            "zero_grad=True only matters when backward runs more than once; add repeat=2 (or more)",
            "--zero-grad only matters when backward runs more than once; add --repeat 2 (or more)",
        ),
        (
            lambda: ag.grad("x**2"),
            ["grad", "x**2"],
            "value_missing",
            "variable 'x' needs a value, e.g. x=2 (or values=dict(x=2))",
            "variable 'x' needs a value, e.g. --x 2 (or --var x=2)",
        ),
    ],
)
def test_errors_are_codes_with_sentences_in_each_front_ends_words(
    call, argv, code, api_words, cli_words
):
    with pytest.raises(ag.AutogradCliError) as caught:
        call()
    assert (caught.value.code, str(caught.value)) == (code, api_words)
    run = cli(*argv)
    assert (run.exit_code, run.stderr) == (2, f"Error: {cli_words}\n")


def test_errors_survive_pickling_with_their_code_and_data():
    with pytest.raises(ag.AutogradCliError) as caught:
        ag.grad("x**2", x=2, zero_grad=True)
    again = pickle.loads(pickle.dumps(caught.value))  # our own object, not user input
    assert (type(again), again.code, again.data, str(again)) == (
        type(caught.value),
        caught.value.code,
        caught.value.data,
        str(caught.value),
    )


def test_the_version_is_the_packages():
    assert ag.__version__ == version("autograd-cli")
    assert cli("--version").stdout.strip().endswith(ag.__version__)


def test_one_name_may_be_given_as_a_string():
    program = "y = x*w; out = sum(y*x)"
    listed = ag.grad(program, x="[1.0, 2.0]", w=3, retain_grad=["all"], const=["w"])
    named = ag.grad(program, x="[1.0, 2.0]", w=3, retain_grad="all", const="w")
    names = [t.name for t in named.tensors]
    assert names == [t.name for t in listed.tensors] == ["x", "w", "y", "out"]
    assert named.variables["w"].grad is None and not named.variables["w"].requires_grad


def test_pytorchs_own_errors_are_torch_errors():
    with pytest.raises(ag.TorchError) as caught:
        ag.grad("x*x", x=2, repeat=2, same_graph=True)
    assert isinstance(caught.value, ag.AutogradCliError)
    assert caught.value.data["pass_index"] == 2
    assert str(caught.value).endswith("(drop same_graph=True).")
