"""Values: numbers, lists, constructors, files; caps before allocation; no pickle execution."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest
import torch

import autogradcli as ag
from autogradcli.errors import LimitError, ValueSpecError
from autogradcli.lang.values import RandomSource, read_value
from autogradcli.settings import Limits
from tests.conftest import cli, grad_json

LIMITS = Limits()


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("2", np.array(2.0)),
        ("-1.5e-3", np.array(-1.5e-3)),
        ("[[1,2,3],[3,2,1]]", np.array([[1, 2, 3], [3, 2, 1]], dtype=float)),
        ("ones(2,2)", np.ones((2, 2))),
        ("zeros(3)", np.zeros(3)),
        ("full(2,3,0.5)", np.full((2, 3), 0.5)),
        ("arange(1,16)", np.arange(1, 16, dtype=float)),
        ("arange(4)", np.arange(4, dtype=float)),
        ("arange(0,1,0.25)", np.array([0, 0.25, 0.5, 0.75])),
        ("linspace(0,1,5)", np.linspace(0, 1, 5)),
        ("reshape(arange(1,16),5,3)", np.arange(1, 16, dtype=float).reshape(5, 3)),
        ("reshape(arange(6),-1,2)", np.arange(6, dtype=float).reshape(3, 2)),
    ],
)
def test_value_forms(spec, expected):
    np.testing.assert_array_equal(read_value(spec, LIMITS), expected)


def test_rand_and_randn_match_torch_after_manual_seed():
    source = RandomSource(3, "float32")
    first, second = source.draw("rand", (2, 3)), source.draw("randn", (4,))
    torch.manual_seed(3)
    np.testing.assert_array_equal(first, torch.rand(2, 3).double().numpy())
    np.testing.assert_array_equal(second, torch.randn(4).double().numpy())


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "empty value"),
        ("[[1,2],[3]]", "ragged or non-numeric list"),
        ("[1, 'a']", "'a' is not a number"),
        ("ones(2, 2.5)", "a size in ones() must be a whole number, not 2.5"),
        ("zeros(-1)", "sizes in zeros() cannot be negative: [-1]"),
        ("full(2)", "full() needs a shape and a fill value"),
        ("arange(0, 1, 0)", "arange() needs finite numbers and a step that is not 0"),
        ("linspace(0, 1)", "linspace() takes (start, end, steps)"),
        ("reshape(arange(6), 4, 2)", "cannot reshape 6 elements into shape [4, 2]"),
        (
            "ones(shape=2)",
            "ones() does not take shape=; its keywords are size=, dtype=, requires_grad=",
        ),
        ("__import__('os')", "unknown constructor '__import__'"),
        ("x.y", "x.y is not a number"),
        ("1 +", "cannot read the value '1 +'"),
        ("@data.txt", "unsupported file type '.txt'"),
    ],
)
def test_bad_values_say_what_is_wrong(spec, message):
    with pytest.raises(ValueSpecError, match=None) as info:
        read_value(spec, LIMITS, RandomSource(0, "float32"))
    assert message in str(info.value)


@pytest.mark.parametrize(
    "spec",
    [
        "ones(100000,100000)",
        "zeros(10**9)",
        "arange(0, 1e12)",
        "linspace(0,1,10**10)",
        "rand(99999, 99999)",
        "full(50000, 50000, 1)",
    ],
)
def test_huge_constructors_are_refused_before_allocation(spec):
    with pytest.raises((LimitError, ValueSpecError)):
        read_value(spec, LIMITS, RandomSource(0, "float32"))


def test_files_of_every_type(tmp_path):
    data = np.array([[1.0, 2.0], [3.0, 4.0]])
    np.save(tmp_path / "a.npy", data)
    torch.save(torch.tensor(data, dtype=torch.float32), tmp_path / "a.pt")
    np.savetxt(tmp_path / "a.csv", data, delimiter=",")
    (tmp_path / "a.json").write_text(json.dumps(data.tolist()))
    for suffix in ("npy", "pt", "csv", "json"):
        doc = grad_json("sum(x**2)", "--x", f"@{tmp_path}/a.{suffix}")
        assert doc["variables"]["x"]["grad"] == [[2.0, 4.0], [6.0, 8.0]], suffix


def test_pickled_objects_in_pt_files_are_refused_and_never_run(tmp_path):
    sentinel = tmp_path / "ran"

    class Exploit:
        def __reduce__(self):
            return (open, (str(sentinel), "w"))

    path = tmp_path / "evil.pt"
    with open(path, "wb") as handle:
        pickle.dump(Exploit(), handle)
    run = cli("grad", "sum(x)", "--x", f"@{path}")
    assert run.exit_code == 2
    assert run.stderr.startswith(f"Error: cannot read '@{path}' with torch.load(weights_only=True)")
    assert not sentinel.exists()


def test_npy_with_objects_is_refused(tmp_path):
    path = tmp_path / "obj.npy"
    np.save(path, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    run = cli("grad", "sum(x)", "--x", f"@{path}")
    assert run.exit_code == 2
    assert run.stderr.startswith(f"Error: cannot read '@{path}' as a NumPy array")


def test_pt_file_holding_a_dict_is_refused(tmp_path):
    path = tmp_path / "d.pt"
    torch.save({"x": torch.ones(2)}, path)
    run = cli("grad", "sum(x)", "--x", f"@{path}")
    assert run.stderr == f"Error: '@{path}' holds a dict, not a tensor\n"


def test_directory_is_not_a_file(tmp_path):
    (tmp_path / "d.npy").mkdir()
    run = cli("grad", "sum(x)", "--x", f"@{tmp_path}/d.npy")
    assert run.exit_code == 2
    assert run.stderr == f"Error: cannot read '@{tmp_path}/d.npy': it is a directory, not a file\n"


def test_npy_shape_is_checked_before_loading(tmp_path):
    np.save(tmp_path / "big.npy", np.zeros(1000))
    run = cli("grad", "sum(x)", "--x", f"@{tmp_path}/big.npy", "--max-elements", "200")
    assert run.exit_code == 2
    assert "has 1000 elements; the limit is 200" in run.stderr


def test_weights_may_be_a_file_or_a_constructor(tmp_path):
    np.save(tmp_path / "w.npy", np.array([1.0, 0.0]))
    assert grad_json("x**2", "--x", "[3, 4]", "--weights", f"@{tmp_path}/w.npy")["variables"]["x"][
        "grad"
    ] == [6.0, 0.0]
    assert grad_json("x**2", "--x", "[3, 4]", "--weights", "full(2, 0.5)")["variables"]["x"][
        "grad"
    ] == [3.0, 4.0]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            "torch.tensor([1., 2.], dtype=torch.float64)",
            "Error: dtype= in a value given from outside the program is not used: every tensor "
            "runs in one dtype; write --dtype float64 instead\n",
        ),
        (
            "torch.tensor([1., 2.], requires_grad=False)",
            "Error: requires_grad=False in a value given from outside the program is not used; "
            "write --const NAME to make that input a constant\n",
        ),
    ],
)
def test_what_a_value_cannot_set_is_said_not_ignored(value, message):
    run = cli("grad", "sum(x)", "--x", value)
    assert run.exit_code == 2 and run.stderr == message


@pytest.mark.parametrize(
    ("text", "shape"),
    [("1\n2\n3\n", (3, 1)), ("1,2,3\n", (3,)), ("5\n", ()), ("1,2\n3,4\n", (2, 2))],
)
def test_csv_shapes(tmp_path, text, shape):
    path = tmp_path / "v.csv"
    path.write_text(text)
    assert ag.grad("sum(x)", x=f"@{path}").variables["x"].value.shape == shape
