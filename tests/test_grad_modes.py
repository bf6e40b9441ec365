"""``no_grad``, ``inference_mode``, ``detach`` and ``requires_grad_(False)`` in programs:
each compared with real PyTorch running the same lines (the test runs them; the tool never
does), and with SymPy (the reference the tool checks ``.grad`` against).

``--inspect`` shows what each changes (requires_grad, grad_fn, is_leaf) and says why no
``.grad`` flows into (or through) the tensor it made."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import autogradcli as ag
from autogradcli.results import GradResult, TensorResult
from tests.conftest import cli
from tests.schemas import validate

MODES = """\
x = torch.tensor([1., 2.], requires_grad=True)
w = torch.tensor([3., 4.], requires_grad=True)
w.requires_grad_(False)
with torch.no_grad():
    a = x * 2
with torch.inference_mode():
    b = x * 3
c = x.detach()
y = (x**2 + a + b + c + w).sum()"""

# The derivative SymPy gives (by hand): only x**2 carries a gradient back to x.
EXPECTED_X_GRAD = [2.0, 4.0]
WHY = {
    "w": "requires_grad_off",
    "a": "made_no_grad",
    "b": "made_inference_mode",
    "c": "detached",
}


def run_in_pytorch(code: str) -> dict[str, torch.Tensor]:
    """The same lines run by PyTorch itself (in the test only), then ``y.backward()``."""
    names: dict[str, Any] = {"torch": torch}
    exec(code, names)  # the test's own constant text, never the tool's input
    names["y"].backward()
    return {k: v for k, v in names.items() if isinstance(v, torch.Tensor)}


def api(expression: str, **options: Any) -> GradResult:
    result = ag.grad(expression, **options)
    validate(result.to_dict())
    return result


def tensors_of(result: GradResult) -> dict[str, TensorResult]:
    assert result.tensors is not None
    return {t.name: t for t in result.tensors}


def test_inspect_shows_what_pytorch_holds_after_each_mode():
    held = run_in_pytorch(MODES)
    result = api(MODES, inspect=True)
    tensors = tensors_of(result)
    assert set(tensors) == {"x", "w", "a", "b", "c", "y"}
    for name, tensor in held.items():
        row = tensors[name]
        assert row.requires_grad is tensor.requires_grad, name
        assert row.is_leaf is tensor.is_leaf, name
        assert row.grad_fn == (None if tensor.grad_fn is None else tensor.grad_fn.name()), name
        assert np.allclose(row.value, tensor.detach().numpy()), name
        grad = tensor.grad if tensor.is_leaf else None
        assert (row.grad is None) is (grad is None), name
    assert held["b"].is_inference() and not held["a"].is_inference()
    # .grad against PyTorch and against SymPy
    x = result.variables["x"]
    assert x.grad.tolist() == held["x"].grad.tolist() == EXPECTED_X_GRAD
    assert x.expected.tolist() == EXPECTED_X_GRAD and x.agree is True
    assert result.expected_by == "SymPy" and result.agree is True
    # each value a mode made is checked against SymPy too
    assert all(tensors[n].value_agree is True for n in ("a", "b", "c", "y"))
    for name, code in WHY.items():
        assert tensors[name].grad is None and tensors[name].grad_note_code == code


def test_no_grad_result_feeds_a_product_and_sympy_holds_it_constant():
    code = (
        "x = torch.tensor([1., 2.], requires_grad=True)\n"
        "with torch.no_grad():\n"
        "    z = x * 2\n"
        "y = (x**2 * z).sum()"
    )
    held = run_in_pytorch(code)
    result = api(code)
    x = result.variables["x"]
    # d/dx (x^2 * z) with z = 2x held constant: 2 x z = 4 x^2
    assert x.grad.tolist() == held["x"].grad.tolist() == [4.0, 16.0]
    assert x.expected.tolist() == [4.0, 16.0] and x.agree is True
    assert result.expected_by == "SymPy"


def test_inference_tensor_saved_for_backward_is_pytorchs_own_error():
    code = (
        "x = torch.tensor([1., 2.], requires_grad=True)\n"
        "with torch.inference_mode():\n"
        "    z = x * 2\n"
        "y = (x**2 * z).sum()"
    )
    with pytest.raises(RuntimeError) as real:
        run_in_pytorch(code)
    message = str(real.value).split("\n")[0]
    assert message.startswith("Inference tensors cannot be saved for backward")
    run = cli("grad", code + "\ny.backward()", "--json")
    assert run.exit_code == 2
    document = run.json()
    assert document["events"] == [] and document["agree"] is False
    assert document["stopped"]["code"] == "pytorch"
    assert (
        "Why: a tensor made under torch.inference_mode() is an inference tensor"
        in (document["stopped"]["message"])
    )
    assert document["stopped"]["message"].endswith(
        "Fix: write 'with torch.no_grad():' for that block, or clone what it made after it "
        "(z = z.clone())."
    )
    assert message in document["stopped"]["message"]
    rich = cli("grad", code + "\ny.backward()")
    assert rich.exit_code == 2
    assert "the cell stopped here, as Python would:" in rich.stdout
    assert message[:60] in " ".join(rich.stderr.split())
    # the program without backward() (no cell): the same message, as an error
    plain = cli("grad", code, "--json")
    assert plain.exit_code == 2 and message in plain.json()["error"]["message"]


def test_inference_tensor_added_is_fine_in_pytorch_and_checked():
    code = (
        "x = torch.tensor([1., 2.], requires_grad=True)\n"
        "with torch.inference_mode():\n"
        "    z = x * 2\n"
        "y = (x**2 + z).sum()\n"
        "y.backward()\n"
        "print(x.grad)"
    )
    held = run_in_pytorch(code.replace("y.backward()\nprint(x.grad)", ""))
    run = cli("grad", code, "--json")
    assert run.exit_code == 0, run.stdout + run.stderr
    document = run.json()
    assert document["agree"] is True
    event = document["events"][0]
    assert event["check"]["expected_by"] == "SymPy"
    assert event["grads"]["x"]["grad"] == held["x"].grad.tolist() == [2.0, 4.0]
    assert event["grads"]["x"]["expected"] == [2.0, 4.0]
    assert event["grads"]["x"]["verdict"] == "agree"
    assert "[2, 4]" in cli("grad", code).stdout


def test_inspect_rich_says_why_no_grad_flows():
    run = cli("grad", MODES, "--inspect")
    assert run.exit_code == 0, run.stdout + run.stderr
    text = " ".join(run.stdout.split())
    assert "a.grad is None: it was computed under torch.no_grad()" in text
    assert "b.grad is None: it was computed under torch.inference_mode()" in text
    assert "c.grad is None: it is a detach() (or .data)" in text
    assert "w.grad is None: its requires_grad was turned off" in text
    document = cli("grad", MODES, "--inspect", "--json").json()
    assert {n: document["tensors"][n]["grad_note_code"] for n in WHY} == WHY
    assert document["tensors"]["b"]["grad_fn"] is None
    assert document["tensors"]["b"]["requires_grad"] is False


def test_other_with_blocks_are_still_refused():
    run = cli("grad", "x = torch.tensor(1., requires_grad=True)\nwith open('f'):\n    y = x")
    assert run.exit_code == 2
    run = cli(
        "grad",
        "x = torch.tensor(1., requires_grad=True)\nwith torch.inference_mode(False):\n    y = x",
    )
    assert run.exit_code == 2


def test_the_fix_a_clone_outside_the_block_runs_and_agrees_with_pytorch_and_sympy():
    code = (
        "x = torch.tensor([1., 2.], requires_grad=True)\n"
        "with torch.inference_mode():\n"
        "    z = x * 2\n"
        "z = z.clone()\n"
        "y = (x**2 * z).sum()"
    )
    held = run_in_pytorch(code)
    result = api(code)
    x = result.variables["x"]
    assert x.grad.tolist() == held["x"].grad.tolist() == [4.0, 16.0]
    assert x.expected.tolist() == [4.0, 16.0] and x.agree is True


def test_an_in_place_leaf_update_under_no_grad_runs_as_pytorch_runs_it():
    code = (
        "x = torch.tensor([1., 2.], requires_grad=True)\n"
        "y = (x**2).sum()\n"
        "y.backward()\n"
        "with torch.no_grad():\n"
        "    x -= 0.1 * x.grad"
    )
    names: dict[str, Any] = {"torch": torch}
    exec(code, names)  # PyTorch allows it: an optimizer's step
    assert names["x"].is_leaf and names["x"].requires_grad
    run = cli("grad", code + "\nprint(x)", "--json")  # an optimizer's step changes the leaf
    assert run.exit_code == 0, run.stdout
    assert names["x"].tolist() == pytest.approx([0.8, 1.6])
    assert "0.8" in run.stdout and "1.6" in run.stdout
    refused = cli("grad", code.split("\nwith")[0] + "\nx -= 1", "--json").json()
    assert refused["stopped"]["message"].startswith(
        "'x -= 1': PyTorch: a leaf Variable that requires grad is being used in an in-place "
        "operation. Which tensor: x, at version 0 before and after 'x -= 1'"
    )


@pytest.mark.parametrize(
    "text",
    [
        "no_grad(x) * x",
        "inference_mode(x) * x",
        "x.inference_mode()",
        "torch.inference_mode(x)",
        "x = torch.tensor(1., requires_grad=True)\nwith torch.inference_mode():\n    import os",
        "x = torch.tensor(1., requires_grad=True)\nwith torch.inference_mode() as m:\n    y = x",
        "x = torch.tensor(1., requires_grad=True)\nwith torch.no_grad(), torch.inference_mode():\n"
        "    y = x",
    ],
)
def test_the_blocks_operations_cannot_be_written_and_nothing_else_rides_in(text):
    run = cli("grad", text, "--x", "1") if "tensor" not in text else cli("grad", text)
    assert run.exit_code == 2 and run.stderr.startswith("Error:")
