"""First contact (issue 28): the messages a newcomer meets name what to write instead."""

from __future__ import annotations

import pytest

from autogradcli.cli.shell import Shell
from tests.conftest import cli

DTYPE_LIST = (
    "use one of float32, float64, float16, bfloat16 (PyTorch's double, float and half, and "
    "torch.float64 and the like, are understood too)"
)


@pytest.mark.parametrize(
    ("given", "dtype"),
    [("double", "float64"), ("torch.float64", "float64"), ("float", "float32"),
     ("half", "float16"), ("torch.bfloat16", "bfloat16"), ("float64", "float64")],
)  # fmt: skip
def test_pytorchs_dtype_names_are_understood(given, dtype):
    run = cli("grad", "x**2", "--x", "1", "--dtype", given, "--json")
    assert run.exit_code == 0 and run.json()["dtype"] == dtype


def test_a_mistyped_dtype_gets_the_nearest_and_no_stray_prefix():
    run = cli("grad", "x**2", "--x", "1", "--dtype", "doubel")
    assert run.exit_code == 2
    assert run.stderr == f"Error: unknown dtype 'doubel' (did you mean float64?); {DTYPE_LIST}\n"
    assert "Value error" not in run.stderr


def test_a_mistyped_command_ends_its_suggestion_once():
    run = cli("gard", "x")
    assert run.exit_code == 2
    assert run.stderr == (
        "Error: No such command 'gard'. Did you mean 'grad'? See 'autograd-cli --help'.\n"
    )


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("set dtype doubel", f"Error: unknown dtype 'doubel' (did you mean float64?); "
         f"{DTYPE_LIST}"),
        ("set rtol abc", "Error: --rtol takes a number ≥ 0, not 'abc'"),
        ("set seed -1",
         "Error: --seed takes a whole number from 0 to 9223372036854775807, not '-1'"),
        ("set device gpu", "Error: unknown device 'gpu'; use auto, cpu, cuda, cuda:N or mps"),
    ],
)  # fmt: skip
def test_the_shell_refuses_a_bad_setting_at_its_set_line(line, message, capsys):
    shell = Shell()
    shell.handle(line)
    assert capsys.readouterr().err == message + "\n"
    assert shell.settings == {} and shell.exit_code == 2


def test_the_shell_stores_a_pytorch_dtype_name_as_the_tools(capsys):
    shell = Shell()
    shell.handle("set dtype double")
    shell.handle("vars")
    assert capsys.readouterr().out == "set dtype float64\n"
    assert shell.exit_code == 0


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("−2", "'−2': '−' (U+2212) looks like a minus sign but is not Python's; write '-' (-2)"),
        ("[1, –2]", "'[1, –2]': '–' (U+2013) looks like a minus sign but is not Python's; "
         "write '-' ([1, -2])"),
        ("2×3", "'2×3': '×' (U+00D7) looks like a multiplication sign but is not Python's; "
         "write '*' (2*3)"),
    ],
)  # fmt: skip
def test_a_pasted_lookalike_character_in_a_value_is_named(value, message):
    run = cli("grad", "x**2", "--x", value)
    assert run.exit_code == 2 and run.stderr == f"Error: cannot read the value {message}\n"


def test_a_read_only_array_reaches_torch_without_a_warning():
    import warnings

    import numpy as np

    from autogradcli.lang.parser import parse_expression
    from autogradcli.settings import Limits
    from autogradcli.torchside.build import detached_values

    program = parse_expression("sum(where(detach(x) > 0, x, x**2))", Limits())
    value = np.array([1.0, -2.0])
    value.flags.writeable = False  # results hold their arrays read-only
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch's "not writable" UserWarning would raise
        pinned = detached_values(program, {"x": value})
    assert pinned and value.tolist() == [1.0, -2.0]


def test_a_large_matrix_is_its_shape_and_corners_with_the_worst_element_named():
    import numpy as np

    from autogradcli.render import FULL
    from autogradcli.render.numbers import format_array, worst_at

    weight = np.arange(64.0).reshape(4, 16)
    assert str(format_array(weight)) == "shape [4, 16]\n[[0, ..., 15],\n ...,\n [48, ..., 63]]"
    assert str(format_array(np.arange(17.0))) == "shape [17]\n[0, 1, ..., 15, 16]"
    assert str(format_array(np.arange(16.0).reshape(4, 4))).startswith("[[0, 1, 2, 3],")
    token = FULL.set(True)
    try:
        assert "63]]" in str(format_array(weight)) and "..." not in str(format_array(weight))
    finally:
        FULL.reset(token)
    got = weight.copy()
    got[2, 5] += 0.5
    assert worst_at(got, weight, 0.5) == " at [2, 5]"
    assert worst_at(got, weight, 0.0) == "" and worst_at(np.array(1.0), np.array(2.0), 1.0) == ""


def test_the_report_of_a_4x16_weight_fits_in_a_few_lines():
    run = cli("grad", "sum(W @ x)", "--W", "randn(4,16)", "--x", "randn(16)", "--seed", "0")
    assert run.exit_code == 0
    table = run.stdout.split("gradients")[1]
    assert "shape [4, 16]" in table and "shape [16]" not in table  # a vector of 16: whole
    assert len(table.splitlines()) < 35  # was 92: the weight alone wrapped into 60 lines


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("2x + 1", "at column 1: '2x' is not a product in Python; write the * ('2*x + 1')"),
        ("0.5sin(x) + 2x", "at column 3: '0.5sin' is not a product in Python; write the * "
         "('0.5*sin(x) + 2*x')"),
        ("x−1", "at column 2: '−' (U+2212) looks like a minus sign but is not Python's; "
         "write '-' ('x-1')"),
        ("2e5x", "at column 3: invalid decimal literal; write it in Python syntax, e.g. "
         '"2*x**4 + 3*x + 1"'),
    ],
)  # fmt: skip
def test_a_product_written_as_on_paper_or_a_pasted_minus_gets_the_fix(expression, message):
    run = cli("grad", expression, "--x", "1")
    assert run.exit_code == 2
    assert run.stderr == f"Error: cannot parse the expression {message}\n"


def test_an_index_tensor_of_fractions_is_refused_when_the_values_are_bound():
    run = cli("grad", "sum(x[y])", "--x", "[1., 2.]", "--y", "[0.5]")
    assert run.exit_code == 2
    assert run.stderr == (
        "Error: an index tensor must be a constant tensor of whole numbers (a value with "
        "requires_grad=False)\n"
    )
    assert cli("grad", "sum(x[y])", "--x", "[1., 2.]", "--y", "[1, 1]", "--json").json()[
        "variables"
    ]["x"]["grad"] == [0.0, 2.0]
