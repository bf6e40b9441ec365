"""Every example of the five seed notebooks, one command each, with the notebooks' numbers."""

from __future__ import annotations

import pytest

from tests.conftest import cli, grad_json


def test_seed000_mean_of_products_on_ones():
    # x = ones(2,2); y = x + 2; z = y*y*3; out = z.mean() -> 27, dout/dx = 4.5
    doc = grad_json("mean((x+2)*(x+2)*3)", "--x", "ones(2,2)")
    assert doc["output"]["value"] == 27.0
    assert doc["variables"]["x"]["grad"] == [[4.5, 4.5], [4.5, 4.5]]
    assert doc["variables"]["x"]["derivative"] == "3*x/2 + 3"
    assert doc["agree"] is True


def test_seed000_grad_accumulates_over_two_calls():
    doc = grad_json("mean((x+2)*(x+2)*3)", "--x", "ones(2,2)", "--repeat", "2")
    assert [p["grads"]["x"] for p in doc["passes"]] == [
        [[4.5, 4.5], [4.5, 4.5]],
        [[9.0, 9.0], [9.0, 9.0]],
    ]
    assert [p["expected"]["x"] for p in doc["passes"]] == [
        [[4.5, 4.5], [4.5, 4.5]],
        [[9.0, 9.0], [9.0, 9.0]],
    ]
    assert doc["variables"]["x"]["grad"] == [[9.0, 9.0], [9.0, 9.0]]


@pytest.mark.parametrize("weights", [None, "[1.0]"])
def test_seed001_scalar_a_times_a(weights):
    # a = [4.]; out = a*a; out.backward() and out.backward(tensor([1.])) -> a.grad = [8.]
    args = ["a*a", "--a", "[4.0]"] + ([] if weights is None else ["--weights", weights])
    doc = grad_json(*args)
    assert doc["variables"]["a"]["grad"] == [8.0]


def test_seed001_weights_equal_to_a_transform_the_output():
    doc = grad_json("a*a", "--a", "[[1,2,3],[4,5,6]]", "--weights", "a")
    assert doc["variables"]["a"]["grad"] == [[2, 8, 18], [32, 50, 72]]
    assert doc["weights"] == [[1, 2, 3], [4, 5, 6]]


def test_seed001_ones_weights_give_the_derivative():
    doc = grad_json("a*a", "--a", "[[1,2,3],[4,5,6]]", "--weights", "[[1,1,1],[1,1,1]]")
    assert doc["variables"]["a"]["grad"] == [[2, 4, 6], [8, 10, 12]]


def test_seed001_five_by_three_matrix():
    x = "[[73,67,43],[91,88,64],[87,134,58],[102,43,37],[69,96,70]]"
    doc = grad_json("x**2", "--x", x, "--weights", "ones(5,3)")
    assert doc["variables"]["x"]["grad"] == [
        [146, 134, 86],
        [182, 176, 128],
        [174, 268, 116],
        [204, 86, 74],
        [138, 192, 140],
    ]


def test_seed001_multiple_weights_with_a_constant_leaf():
    doc = grad_json(
        "10 - (w3*(w1*a) + w4*(w2*a))",
        "--a",
        "[4]",
        "--const",
        "a",
        "--w1",
        "[2]",
        "--w2",
        "[5]",
        "--w3",
        "[9]",
        "--w4",
        "[7]",
    )
    grads = {n: v["grad"] for n, v in doc["variables"].items()}
    assert grads == {"w1": [-36.0], "w2": [-28.0], "w3": [-8.0], "w4": [-20.0], "a": None}
    assert doc["variables"]["a"]["requires_grad"] is False


def test_seed001_arange_reshaped_to_five_by_three():
    doc = grad_json("x**2", "--x", "reshape(arange(1,16),5,3)", "--weights", "ones")
    assert doc["variables"]["x"]["grad"] == [
        [2 * (3 * r + c + 1) for c in range(3)] for r in range(5)
    ]


def test_seed002_and_004_polynomial_at_two():
    doc = grad_json("2*x**4 + x**3 + 3*x**2 + 5*x + 1", "--x", "2.0")
    assert doc["output"]["value"] == 63.0
    assert doc["variables"]["x"]["grad"] == 93.0
    assert doc["variables"]["x"]["derivative"] == "8*x**3 + 3*x**2 + 6*x + 5"


def test_seed002_and_004_multistep_with_ones_like():
    doc = grad_json("2*(3*x + 2)**2", "--x", "[[1.,2,3],[3,2,1]]", "--weights", "ones")
    assert doc["output"]["value"] == [[50, 128, 242], [242, 128, 50]]
    assert doc["variables"]["x"]["grad"] == [[60, 96, 132], [132, 96, 60]]
    assert doc["variables"]["x"]["derivative"] == "36*x + 24"


def test_seed002_and_004_multistep_mean():
    doc = grad_json("mean(2*(3*x + 2)**2)", "--x", "[[1.,2,3],[3,2,1]]")
    assert doc["output"]["value"] == 140.0
    assert doc["variables"]["x"]["grad"] == [[10, 16, 22], [22, 16, 10]]


def test_seed003_x_times_constant_y():
    doc = grad_json("x*y", "--x", "1.0", "--y", "2.0", "--const", "y")
    assert doc["output"]["value"] == 2.0
    assert doc["variables"]["x"]["grad"] == 2.0
    assert doc["variables"]["y"]["grad"] is None


def test_seed003_cube():
    assert grad_json("x**3", "--x", "1.0")["variables"]["x"]["grad"] == 3.0


@pytest.mark.parametrize(("weights", "grad"), [("[1.0, 1.0]", [2.0, 4.0]), ("x", [2.0, 8.0])])
def test_seed003_weights_act_as_weights(weights, grad):
    assert (
        grad_json("x**2", "--x", "[1.0, 2.0]", "--weights", weights)["variables"]["x"]["grad"]
        == grad
    )


def test_seed003_z_of_y_of_x_accumulates_with_repeat():
    doc = grad_json("(x**2)**3", "--x", "[1.0, 2.0]", "--weights", "ones", "--repeat", "2")
    assert [p["grads"]["x"] for p in doc["passes"]] == [[6.0, 192.0], [12.0, 384.0]]


def test_seed003_two_leaves_three_passes():
    doc = grad_json(
        "x**2 + z**3",
        "--x",
        "[2.0, 2.0]",
        "--z",
        "[4.0, 4.0]",
        "--weights",
        "ones",
        "--repeat",
        "3",
    )
    assert [p["grads"]["x"] for p in doc["passes"]] == [[4.0, 4.0], [8.0, 8.0], [12.0, 12.0]]
    assert [p["grads"]["z"] for p in doc["passes"]] == [[48.0, 48.0], [96.0, 96.0], [144.0, 144.0]]


def test_seed003_why_is_y_grad_none_with_retain_graph_twice():
    # y = x**2; z = y**3; z.backward(w, retain_graph=True) twice: y.grad None, x.grad doubles
    doc = grad_json(
        "y = x**2; z = y**3", "--x", "[1.0, 2.0]", "--weights", "ones",
        "--repeat", "2", "--same-graph", "--retain-graph", "--inspect",
    )  # fmt: skip
    assert [p["grads"]["x"] for p in doc["passes"]] == [[6.0, 192.0], [12.0, 384.0]]
    assert doc["tensors"]["y"]["grad"] is None and doc["tensors"]["y"]["is_leaf"] is False
    assert doc["tensors"]["y"]["grad_note"].startswith("PyTorch fills .grad only for leaf")


def test_seed003_same_graph_twice_with_retain_graph_three_passes():
    doc = grad_json(
        "x**2 + z**3", "--x", "[2.0, 2.0]", "--z", "[4.0, 4.0]", "--weights", "ones",
        "--repeat", "3", "--same-graph", "--retain-graph",
    )  # fmt: skip
    assert [p["grads"]["z"] for p in doc["passes"]] == [[48.0, 48.0], [96.0, 96.0], [144.0, 144.0]]


def test_seed003_without_retain_graph_the_second_pass_fails():
    run = cli(
        "grad", "x**2 + z**3", "--x", "[2.0, 2.0]", "--z", "[4.0, 4.0]", "--weights", "ones",
        "--repeat", "2", "--same-graph",
    )  # fmt: skip
    assert run.exit_code == 2
    assert run.stderr.startswith(
        "Error: backward pass 2 on the same graph: PyTorch: Trying to backward through the "
        "graph a second time"
    )


@pytest.mark.parametrize(
    ("weights", "grad"),
    [
        ("[[1, 0, 0, 0]]", [[2.0, 0.0, 0.0, 0.0]]),
        ("[[0, 1, 0, 0]]", [[0.0, 2.0, 0.0, 0.0]]),
        ("[[1, 1, 1, 1]]", [[2.0, 2.0, 2.0, 2.0]]),
    ],
)
def test_seed003_one_hot_weights_pick_one_element(weights, grad):
    doc = grad_json("2*x", "--x", "[[1, 2, 3, 4]]", "--weights", weights)
    assert doc["variables"]["x"]["grad"] == grad


def test_seed003_loss_as_sum():
    assert grad_json("sum(2*x)", "--x", "[[1, 2, 3, 4]]")["variables"]["x"]["grad"] == [[2.0] * 4]


def test_seed000_device_auto_is_cpu_without_cuda():
    import torch

    doc = grad_json("mean((x+2)*(x+2)*3)", "--x", "ones(2,2)", "--device", "auto")
    assert doc["device"] == ("cuda:0" if torch.cuda.is_available() else "cpu")


def test_seed_rich_output_shows_the_numbers():
    run = cli("grad", "2*x**4+x**3+3*x**2+5*x+1", "--x", "2")
    assert run.exit_code == 0
    assert "63" in run.stdout and "93" in run.stdout
    assert "8*x**3 + 3*x**2 + 6*x + 5" in run.stdout
    assert "✓ autograd and SymPy agree" in run.stdout
