"""Running backward more than once: new graphs (repeat), one graph (same_graph) with and
without retain_graph, zero_grad; and PyTorch's own errors with the glossary's explanation.

The numbers go through the Python API (``ag.grad``); the CLI's tests cover its flags, exit
codes, error lines and tables."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch

import autogradcli as ag
from autogradcli.errors import TorchError
from autogradcli.glossary import GLOSSARY, lookup
from autogradcli.messages import CLI, PYTHON, explain_pytorch, spell
from autogradcli.results import GradResult
from tests.conftest import cli
from tests.schemas import validate

SEED000 = "y = x + 2; z = y*y*3; out = mean(z)"
SECOND_BACKWARD_WHY = (
    "Why: the first backward() freed the values the graph saved for it (such as the factors "
    "of a multiplication; autograd-cli graph --saved lists them), so the same graph cannot be "
    "walked again. Fix: keep them with "
    "backward(retain_graph=True) (--retain-graph), or build a new graph by running the forward "
    "pass again (drop --same-graph)."
)


def pytorch_message(action: Callable[[], object]) -> str:
    """What PyTorch itself raises (or warns) for ``action``, whitespace as the tool prints it."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            action()
        except RuntimeError as exc:
            return " ".join(str(exc).split())
    return " ".join(str(caught[0].message).split())


def second_backward() -> None:
    x = torch.tensor(3.0, requires_grad=True)
    out = x * x
    out.backward()
    out.backward()


def non_scalar() -> None:
    (torch.tensor([1.0, 2.0], requires_grad=True) ** 2).backward()


def nothing_requires_grad() -> None:
    (torch.tensor(1.0) * 2).backward()


def wrong_weights() -> None:
    (torch.tensor([1.0, 2.0], requires_grad=True) ** 2).backward(torch.ones(3))


def non_leaf_grad() -> None:
    y = torch.tensor(1.0, requires_grad=True) * 2
    y.backward()
    assert y.grad is None


def api(expression: str, **options: Any) -> GradResult:
    """``ag.grad(expression, **options)``; its ``to_dict()`` (the CLI's --json document) is
    validated against the published schema, as ``conftest.cli`` validates every --json run."""
    result = ag.grad(expression, **options)
    validate(result.to_dict())
    return result


def grads_of(result: GradResult) -> list[dict[str, Any]]:
    """``.grad`` of each variable after each pass, as plain numbers."""
    return [{n: g.tolist() for n, g in p.grads.items()} for p in result.passes]


def expected_of(result: GradResult) -> list[dict[str, Any]]:
    """The reference's gradient of each variable at each pass, as plain numbers."""
    return [{n: g.tolist() for n, g in p.expected.items()} for p in result.passes]


def inference_saved() -> None:
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    with torch.inference_mode():
        z = x * 2
    (x**2 * z).sum()


def in_place_saved() -> None:
    y = torch.tensor([1.0, 2.0], requires_grad=True).exp()
    y.add_(1)
    y.sum().backward()


def in_place_leaf() -> None:
    torch.tensor(1.0, requires_grad=True).add_(1)


def hook_no_grad() -> None:
    torch.ones(2).register_hook(lambda g: g * 2)


TRIGGERS = [
    second_backward,
    non_scalar,
    nothing_requires_grad,
    wrong_weights,
    non_leaf_grad,
    inference_saved,
    in_place_saved,
    in_place_leaf,
    hook_no_grad,
]


@pytest.mark.parametrize(
    ("entry", "trigger"),
    list(zip(GLOSSARY, TRIGGERS, strict=True)),
    ids=[e.title for e in GLOSSARY],
)
def test_each_glossary_prefix_matches_what_this_pytorch_says(entry, trigger):
    message = pytorch_message(trigger)
    assert lookup(message) is entry
    assert explain_pytorch(message, CLI) == (
        f"PyTorch: {message}{'' if message.endswith('.') else '.'} "
        f"Why: {entry.why}. Fix: {spell(entry.fix, CLI)}."
    )


def test_unknown_messages_are_passed_through_as_pytorch_wrote_them():
    assert lookup("some new  error") is None
    assert explain_pytorch("some new\n  error") == "PyTorch: some new error"


def test_repeat_builds_a_new_graph_each_pass_and_accumulates():
    result = api(SEED000, x="ones(2,2)", repeat=2)
    assert result.mode == "forward + backward each pass (a new graph); .grad accumulates"
    assert [p.index for p in result.passes] == [1, 2]
    assert [p["x"] for p in grads_of(result)] == [[[4.5, 4.5]] * 2, [[9.0, 9.0]] * 2]


def test_same_graph_without_retain_graph_shows_pytorchs_error_explained():
    run = cli("grad", SEED000, "--x", "ones(2,2)", "--repeat", "2", "--same-graph")
    assert run.exit_code == 2 and run.stdout == ""
    message = pytorch_message(second_backward)
    assert message.startswith("Trying to backward through the graph a second time")
    assert run.stderr == (
        f"Error: backward pass 2 on the same graph: PyTorch: {message} {SECOND_BACKWARD_WHY}\n"
    )
    as_json = cli("grad", SEED000, "--x", "ones(2,2)", "--repeat", "2", "--same-graph", "--json")
    assert as_json.exit_code == 2
    assert as_json.json() == {
        "schema_version": 1,
        "error": {"type": "pytorch", "code": "pytorch", "message": run.stderr[7:-1]},
    }
    with pytest.raises(TorchError) as raised:
        ag.grad(SEED000, x="ones(2,2)", repeat=2, same_graph=True)
    assert raised.value.code == "pytorch" and raised.value.data["pass_index"] == 2
    assert " ".join(raised.value.data["torch_message"].split()) == message
    assert str(raised.value) == (
        f"backward pass 2 on the same graph: {explain_pytorch(message, PYTHON)}"
    )


def test_same_graph_with_retain_graph_accumulates_like_seed003():
    # seed 003: x**2 + z**3 at x=[2,2], z=[4,4], backward(ones, retain_graph=True) three times
    x = torch.tensor([2.0, 2.0], requires_grad=True)
    z = torch.tensor([4.0, 4.0], requires_grad=True)
    out = x**2 + z**3
    by_hand = []
    for _ in range(3):
        out.backward(torch.ones(2), retain_graph=True)
        by_hand.append({"x": x.grad.tolist(), "z": z.grad.tolist()})
    values = {"x": "[2.0, 2.0]", "z": "[4.0, 4.0]"}
    result = api("x**2 + z**3", **values, weights="ones", repeat=3, same_graph=True,
                 retain_graph=True)  # fmt: skip
    assert (
        result.mode == "backward() again on the same graph (retain_graph=True); .grad accumulates"
    )
    assert grads_of(result) == by_hand
    assert by_hand[2] == {"x": [12.0, 12.0], "z": [144.0, 144.0]}  # 3 * 2x, 3 * 3z**2
    assert expected_of(result) == by_hand and result.agree is True


def test_same_graph_rich_output():
    run = cli("grad", SEED000, "--x", "ones(2,2)", "--repeat", "3", "--same-graph",
              "--retain-graph")  # fmt: skip
    assert run.exit_code == 0
    lines = run.stdout.splitlines()
    start = lines.index(
        "passes: backward() again on the same graph (retain_graph=True); .grad accumulates"
    )
    assert "│ 3    │ [[13.5, 13.5], │ [[13.5, 13.5],   │ ✓     │" in lines[start:]
    assert lines[-1] == "✓ autograd and SymPy agree"


def test_same_graph_that_saved_nothing_does_not_fail_and_says_why():
    result = api("x + 1", x="3", repeat=2, same_graph=True)
    assert [p["x"] for p in grads_of(result)] == [1.0, 2.0]
    note = (
        "backward() ran 2 times on one graph without retain_graph=True and PyTorch did not "
        "raise: no node of this graph saved a tensor for backward, so nothing was freed (a "
        "product would fail, x*x or x*2: each saves a factor; x + 2 saves nothing)"
    )
    assert [str(n) for n in result.notes] == [note] == result.to_dict()["notes"]
    assert [(n.code, n.data) for n in result.notes] == [("graph_not_freed", {"repeat": 2})]
    run = cli("grad", "x + 1", "--x", "3", "--repeat", "2", "--same-graph")
    assert "PyTorch did not raise" in run.stdout.replace("\n", " ") and run.exit_code == 0


def test_zero_grad_gives_the_single_gradient_every_pass():
    result = api("x*x", x="3", repeat=3, zero_grad=True)
    assert result.mode == (
        "forward + backward each pass (a new graph); .grad zeroed between passes (zero_grad)"
    )
    assert [p["x"] for p in grads_of(result)] == [6.0, 6.0, 6.0]
    assert [p["x"] for p in expected_of(result)] == [6.0, 6.0, 6.0]
    assert result.variables["x"].grad.tolist() == 6.0
    same = api("x*x", x="3", repeat=2, zero_grad=True, same_graph=True, retain_graph=True)
    assert [p["x"] for p in grads_of(same)] == [6.0, 6.0]


def test_zero_grad_rich_header():
    run = cli("grad", "x*x", "--x", "3", "--repeat", "2", "--zero-grad")
    assert "│ 2    │ 6      │ 6                │ ✓     │" in run.stdout.splitlines()
    assert "┃ pass ┃ x.grad ┃ single           ┃ check ┃" in run.stdout.splitlines()


@pytest.mark.parametrize(
    ("args", "message", "options", "code"),
    [
        (
            ["--retain-graph"],
            "Error: --retain-graph only matters when backward runs again on the same graph; "
            "add --same-graph (with --repeat 2 or more)\n",
            {"retain_graph": True},
            "retain_graph_alone",
        ),
        (
            ["--same-graph"],
            "Error: --same-graph only matters when backward runs more than once; add --repeat 2 "
            "(or more)\n",
            {"same_graph": True},
            "needs_repeat",
        ),
        (
            ["--zero-grad"],
            "Error: --zero-grad only matters when backward runs more than once; add --repeat 2 "
            "(or more)\n",
            {"zero_grad": True},
            "needs_repeat",
        ),
        (
            ["--repeat", "0"],
            "Error: --repeat takes a whole number from 1 to 10000, not '0'\n",
            {"repeat": 0},
            "bad_number",
        ),
    ],
)
def test_pass_option_errors(args, message, options, code):
    run = cli("grad", "x*x", "--x", "3", *args)
    assert (run.exit_code, run.stdout, run.stderr) == (2, "", message)
    with pytest.raises(ag.AutogradCliError) as raised:
        ag.grad("x*x", x="3", **options)
    assert raised.value.code == code


def test_each_glossary_entry_through_the_cli():
    runs = {
        "non-scalar": cli("grad", "x**2", "--x", "[1.0, 2.0]"),
        "nothing": cli("grad", "x*2", "--x", "1", "--const", "x"),
        "shape": cli("grad", "x**2", "--x", "[1.0, 2.0]", "--weights", "[1.0, 2.0, 3.0]"),
    }
    for trigger, key in ((non_scalar, "non-scalar"), (nothing_requires_grad, "nothing"),
                         (wrong_weights, "shape")):  # fmt: skip
        run = runs[key]
        assert run.exit_code == 2
        assert run.stderr.endswith(explain_pytorch(pytorch_message(trigger), CLI) + "\n")
    assert runs["non-scalar"].stderr.startswith("Error: the output has shape [2]: PyTorch: grad")
    api_errors: list[tuple[Callable[[], object], str, dict[str, Any]]] = [
        (non_scalar, "x**2", {"x": "[1.0, 2.0]"}),
        (nothing_requires_grad, "x*2", {"x": "1", "const": ["x"]}),
        (wrong_weights, "x**2", {"x": "[1.0, 2.0]", "weights": "[1.0, 2.0, 3.0]"}),
    ]
    for trigger, expression, options in api_errors:
        message = pytorch_message(trigger)
        glossary = lookup(message)
        with pytest.raises(TorchError) as raised:
            ag.grad(expression, **options)
        assert glossary is not None and raised.value.code == "pytorch"
        assert raised.value.data["entry"] == glossary.key
        assert str(raised.value).endswith(explain_pytorch(message, PYTHON))
    leaf = {t.name: t for t in api("y = x*2; y + 1", x="1", inspect=True).tensors}["y"]
    entry = lookup(pytorch_message(non_leaf_grad))
    assert entry is not None
    assert leaf.grad is None and leaf.grad_note_code == entry.key
    assert leaf.to_dict()["grad_note"] == f"{entry.why}; {spell(entry.fix, CLI)}"
    assert leaf.grad_note_text(PYTHON) == f"{entry.why}; {spell(entry.fix, PYTHON)}"
