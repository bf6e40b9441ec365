"""d2l's "Automatic Differentiation" control flow as written: a plain ``def f(a): ...
return c`` called later, ``while b.norm() < 1000:`` and ``if b.sum() > 0:`` read from the
tensor values as PyTorch reads them. Each cell the tests write is also run by real PyTorch
(the test's own text, after ``torch.manual_seed``), and every printed line, printed value
and ``.grad`` must be PyTorch's."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import autogradcli as ag
from autogradcli.cli import app
from autogradcli.cli.shell import run_lines
from autogradcli.errors import AutogradCliError
from autogradcli.lang.cellstatements import Branch
from autogradcli.lang.parser import parse_expression
from autogradcli.lang.tree import Step
from autogradcli.messages import error_text
from tests.conftest import RUNNER, cli

D2L = """import torch

def f(a):
    b = a * 2
    while b.norm() < 1000:
        b = b * 2
    if b.sum() > 0:
        c = b
    else:
        c = 100 * b
    return c

a = torch.randn(size=(), requires_grad=True)
d = f(a)
d.backward()
print(a.grad == d / a)
print(a.grad.item(), d.item())
"""
# the d2l exercise: a vector a, d.sum().backward()
D2L_VECTOR = D2L.replace("size=()", "size=(3,)").replace("d.backward()", "d.sum().backward()")
D2L_VECTOR = D2L_VECTOR.replace("print(a.grad.item(), d.item())", "print(a.grad.tolist())")


def python_run(text: str, seed: int) -> tuple[list[str], dict[str, Any]]:
    """What real PyTorch prints running ``text`` (the test's own cell) after manual_seed,
    and its names."""
    torch.manual_seed(seed)
    out = io.StringIO()
    names: dict[str, Any] = {}
    with contextlib.redirect_stdout(out):
        exec(compile(text, "cell", "exec"), names)  # test-owned text, not user input
    return out.getvalue().splitlines(), names


def same_as_pytorch(text: str, seed: int, leaves: tuple[str, ...] = ("a",)) -> ag.CellResult:
    """The tool's run of ``text`` equals PyTorch's: each printed line, each printed value,
    each leaf's final ``.grad``; every check agrees."""
    result = ag.grad(text, seed=seed)
    assert result.error is None, error_text(result.error)
    printed, names = python_run(text, seed)
    prints = [e for e in result.events if e.kind == "print"]
    assert len(prints) == len(printed)
    for event, line in zip(prints, printed, strict=True):
        if event.printed is not None:  # a line Python formats: the same text
            assert event.printed == line
        else:  # tensors shown: PyTorch's values
            for shown in event.shown:
                want = eval(shown.text, {}, names).detach().numpy()  # the test's cell's
                assert np.array_equal(np.asarray(shown.value), want)
    last = [e for e in result.events if e.grads][-1]  # the leaves after the last change
    for grad in last.grads:
        if grad.name in leaves:
            assert np.array_equal(grad.grad, names[grad.name].grad.numpy())
    assert result.verdict == "agree"
    return result


@pytest.mark.parametrize("seed", range(8))
def test_d2l_control_flow_runs_verbatim_as_pytorch_runs_it(seed: int) -> None:
    same_as_pytorch(D2L, seed)


@pytest.mark.parametrize("seed", range(4))
def test_d2l_exercise_with_a_vector(seed: int) -> None:
    same_as_pytorch(D2L_VECTOR, seed)


@pytest.mark.parametrize("seed", [0, 5])
def test_the_if_written_as_a_conditional_expression(seed: int) -> None:
    block = "    if b.sum() > 0:\n        c = b\n    else:\n        c = 100 * b\n"
    assert block in D2L
    same_as_pytorch(D2L.replace(block, "    c = b if b.sum() > 0 else 100 * b\n"), seed)


def test_the_path_taken_is_said_and_is_the_graph() -> None:
    result = same_as_pytorch(D2L, 0)  # a = 1.541: b doubles 9 times, the sum is positive
    assert [str(n) for n in result.notes] == [
        "'while b.norm() < 1000:' (line 5): the loop ran 9 times, its condition read from "
        "the tensor values as PyTorch reads them",
        "'if b.sum() > 0:' (line 7): the condition was True (read from the tensor values as "
        "PyTorch reads them)",
        "the graph is the path these conditions took, and the reference differentiates that "
        "path (other values may take another path, with another derivative)",
    ]
    backward = result.events[0]
    assert backward.grads[0].derivative == "1024"  # d = 2**10 * a on this path
    other = same_as_pytorch(D2L, 5)  # a < 0: the else branch, c = 100 * b
    assert "the condition was False" in str(other.notes[1])
    assert other.events[0].grads[0].derivative == "409600"


@pytest.mark.parametrize(
    ("condition", "value", "grad"),
    [("not loss < 1", True, [12.0, -8.0]), ("loss > 1 and loss < 5", False, [6.0, -4.0])],
)
def test_the_note_gives_the_whole_condition(condition: str, value: bool, grad: list) -> None:
    text = (
        "import torch\nw = torch.tensor([3.0, -2.0], requires_grad=True)\n"
        f"loss = (w * w).sum()\nif {condition}:\n    loss = loss * 2\nloss.backward()\n"
        "print(w.grad)\n"
    )
    result = same_as_pytorch(text, 0, leaves=("w",))
    assert str(result.notes[0]) == (
        f"'if {condition}:' (line 4): the condition was {value} (read from the tensor values "
        "as PyTorch reads them)"
    )
    assert result.events[0].grads[0].grad.tolist() == grad


def test_a_loop_reached_again_counts_its_runs() -> None:
    result = same_as_pytorch(CELLS[1], 0, leaves=("w",))
    assert str(result.notes[0]).startswith(
        "'while s < 2 and t < 5:' (line 5): reached 3 times, the loop ran"
    )


def test_read_without_values_the_cell_waits_at_its_first_condition() -> None:
    program = parse_expression(D2L)  # no seed yet: the rest needs the run's values
    *_, branch = program.statements
    assert isinstance(branch, Branch) and branch.open and branch.text == "while b.norm() < 1000:"
    assert [s.name for s in program.statements if isinstance(s, Step)] == ["b"]


def test_the_run_reads_each_condition_again() -> None:
    from autogradcli.bind import bind
    from autogradcli.cellrun import follow
    from autogradcli.settings import Settings

    bound = follow(bind(D2L, {}, Settings(seed=0)))
    branches = [s for s in bound.program.statements if isinstance(s, Branch)]
    assert [(b.kind, b.taken) for b in branches] == [("while", True)] * 9 + [
        ("while", False),
        ("if", True),
    ]
    steps = [bound.program.shown(s.name) for s in bound.program.steps]
    assert steps == ["b"] * 10 + ["c", "d"]


def test_a_path_the_run_does_not_take_stops_the_run() -> None:
    """The run reads each condition again: a Branch that says otherwise is caught."""
    from dataclasses import replace

    from autogradcli.bind import bind
    from autogradcli.cellrun import follow
    from autogradcli.settings import Settings
    from autogradcli.torchside.cell import run_cell

    bound = follow(bind(D2L, {}, Settings(seed=0)))
    statements = list(bound.program.statements)
    index = max(i for i, s in enumerate(statements) if isinstance(s, Branch))  # the if
    statements[index] = replace(statements[index], taken=False)
    wrong = replace(bound, program=replace(bound.program, statements=tuple(statements)))
    ran = run_cell(wrong)
    assert ran.error is not None and [e.statement.text for e in ran.events] == []
    assert error_text(ran.error) == (
        "'if b.sum() > 0:': the run read this condition as True, but the cell was read with "
        "it False; the path cannot be trusted, so the run stops here (please report it)"
    )
    assert run_cell(bound).error is None


def test_a_condition_of_several_elements_raises_what_pytorch_raises() -> None:
    text = (
        "import torch\n"
        "a = torch.randn(3, requires_grad=True)\n"
        "b = a * 2\n"
        "print(b.sum().item())\n"
        "if b > 0:\n"
        "    c = b\n"
        "else:\n"
        "    c = -b\n"
        "c.sum().backward()\n"
    )
    with pytest.raises(RuntimeError) as python:
        python_run(text, 0)
    result = ag.grad(text, seed=0)
    assert [e.printed for e in result.events] == [str(python_run(text.split("if")[0], 0)[0][0])]
    assert error_text(result.error) == f"'if b > 0:': PyTorch: {python.value}"
    assert str(python.value) == "Boolean value of Tensor with more than one value is ambiguous"


CELLS = [
    # a function called twice, its names in a scope of their own, a return in a branch
    """import torch
x = torch.tensor([0.5, -1.5, 2.0], requires_grad=True)
b = x + 1

def g(v, k):
    b = v * k
    if b.sum() < 0:
        return -b
    while b.abs().max() < 10:
        b = b * 1.5
    return b

y = g(x, 2)
z = g(b, 3.0)
total = (y * z + b).sum()
total.backward()
print(x.grad)
print(f'{total.item()}')
""",
    # and / or / not of tensor conditions and Python numbers, a for loop around a while
    """import torch
w = torch.tensor(0.3, requires_grad=True)
s = w * 1
for t in range(3):
    while s < 2 and t < 5:
        s = s * s + 1
    if not (s > 100) or t == 2:
        s = s.sin() + 2
loss = s * w
loss.backward()
print(w.grad)
print(loss.item())
""",
]


@pytest.mark.parametrize("text", CELLS)
def test_generated_cells_match_pytorch(text: str) -> None:
    leaf = "x" if "x = " in text else "w"
    same_as_pytorch(text, 0, leaves=(leaf,))


def test_break_and_continue_and_a_value_printed_after_its_update() -> None:
    text = (
        "import torch\n"
        "w = torch.tensor([3.0, -2.0], requires_grad=True)\n"
        "for t in range(1000):\n"
        "    loss = (w * w).sum()\n"
        "    if loss < 0.5:\n"
        "        break\n"
        "    loss.backward()\n"
        "    with torch.no_grad():\n"
        "        w -= 0.1 * w.grad\n"
        "    w.grad.zero_()\n"
        "    if t % 2 == 1:\n"
        "        continue\n"
        "    print(t, loss.item())\n"
        "print(t, w.tolist())\n"
    )
    result = same_as_pytorch(text, 0, leaves=("w",))
    checked = [s for e in result.events for s in e.shown if s.text == "loss"]
    assert len(checked) == 4 and all(s.verdict == "agree" for s in checked)
    assert "True 1 times and False 8 times" in str(result.notes[0])


def test_a_print_after_an_update_reads_each_step_at_its_own_values() -> None:
    text = (
        "import torch\nw = torch.tensor([3.0, -2.0], requires_grad=True)\n"
        "loss = (w * w).sum()\nloss.backward()\nwith torch.no_grad():\n"
        "    w -= 0.1 * w.grad\nprint(loss)\nprint(loss + w.sum())\n"
    )
    result = ag.grad(text)
    printed, names = python_run(text, 0)
    old, mixed = (e.shown[0] for e in result.events if e.kind == "print")
    assert old.verdict == "agree" and float(old.value) == names["loss"].item() == 13.0
    assert mixed.verdict is None and mixed.expected is None  # two values of w: not checked
    assert printed == [
        "tensor(13., grad_fn=<SumBackward0>)",
        "tensor(13.8000, grad_fn=<AddBackward0>)",
    ]


def test_a_function_that_calls_a_function_and_a_python_number_return() -> None:
    text = (
        "import torch\n"
        "def scale(n):\n"
        "    return n * 2\n"
        "def h(a):\n"
        "    k = scale(3)\n"
        "    e = a * k\n"
        "    return e\n"
        "a = torch.tensor(1.5, requires_grad=True)\n"
        "k = 10\n"
        "out = h(a) \n"
        "out.backward()\n"
        "print(a.grad, k)\n"
    )
    same_as_pytorch(text, 0)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            "def f(a):\n    c = c + a\n    return c\nc = 2 * x\nd = f(x)\nd.backward()\n",
            "'c' is read before the function assigns it (Python raises UnboundLocalError); "
            "pass it as an argument or assign it first",
        ),
        (
            "def f(a):\n    b = a * 2\nd = f(x)\nd.backward()\n",
            "'d = f(x)': the function returned no tensor (no 'return VALUE' ran), so the name "
            "would be None; return the tensor",
        ),
        (
            "def f(a):\n    return a * 2\nd = f(x) + 1\nd.backward()\n",
            "'d = f(x) + 1': a call of the cell's own function 'f' goes on a line of its own, "
            "'NAME = f(...)' (then use NAME in the expression)",
        ),
        (
            "def f(a, b=2):\n    return a * b\nd = f(x)\nd.backward()\n",
            "'def f(...)' is not a function this tool inlines: write plain parameters (no "
            "defaults, *args, **kwargs or decorators), e.g. 'def f(a):'",
        ),
        (
            "def f(a):\n    return a * 2\nd = f(x, x)\nd.backward()\n",
            "'d = f(x, x)': 'f' takes the arguments a, each given once",
        ),
        (
            "def f(a):\n    e = f(a)\n    return e\nd = f(x)\nd.backward()\n",
            "'e = f(a)': calls of the cell's own functions nest past 50 (recursion); write the "
            "computation without recursion",
        ),
        (
            "y = x * 2\nbreak\ny.backward()\n",
            "'break' is outside a loop (Python refuses it); use it inside 'for' or 'while'",
        ),
        (
            "y = x * 2\nif y.item() > 0:\n    y = y * 3\ny.backward()\n",
            "'if y.item() > 0:': .item(), .tolist(), float(), int() and bool() in a condition "
            "are not followed; compare the tensor itself, e.g. 'if loss < 0.5:' (a one-element "
            "tensor's truth, read in its dtype)",
        ),
        (
            "with torch.no_grad():\n    if x > 0:\n        y = x * 2\ny = x * 3\ny.backward()\n",
            "a tensor condition or a call of the cell's own function inside a 'with' block is "
            "not followed; write the 'if', the 'while' or the call outside the block",
        ),
    ],
)
def test_refusals_name_what_to_write(body: str, message: str) -> None:
    text = "import torch\nx = torch.tensor(2., requires_grad=True)\n" + body
    with pytest.raises(AutogradCliError) as caught:
        ag.grad(text, seed=0)
    assert error_text(caught.value) == message


def test_a_loop_that_changes_its_tensor_in_place_runs_as_pytorch_runs_it() -> None:
    text = (
        "import torch\nx = torch.tensor(2., requires_grad=True)\ny = x * 1\n"
        "while y < 100:\n    y.mul_(2)\ny.backward()\nprint(x.grad, y)\n"
    )
    result = same_as_pytorch(text, 0, leaves=("x",))
    assert "the loop ran 6 times" in str(result.notes[0])


def test_a_loop_that_never_ends_is_said_at_once() -> None:
    text = (
        "import torch\nx = torch.tensor(2., requires_grad=True)\ny = x * 1\n"
        "while y > 0:\n    z = y * 2\nz.backward()\n"
    )
    with pytest.raises(AutogradCliError) as caught:
        ag.grad(text, seed=0)
    assert error_text(caught.value) == (
        "'while y > 0:' reads the same tensors on every pass and nothing changes them, so the "
        "loop never ends (Python would run forever); assign the condition's tensor again in "
        "the loop's body"
    )


def test_the_iteration_cap_is_named_and_raised_by_its_option() -> None:
    text = "import torch\nx = torch.tensor(2., requires_grad=True)\n" + (
        "y = x * 1\nwhile y < 1000:\n    y = y * 2\ny.backward()\n"
    )
    with pytest.raises(AutogradCliError) as caught:
        ag.grad(text, seed=0, max_iterations=5)
    assert error_text(caught.value) == (
        "'while y < 1000:' ran past the cap of 5 iterations for all of a cell's loops "
        "together; make the condition end sooner (or raise the cap with "
        "Limits.max_iterations)"
    )
    assert ag.grad(text, seed=0, max_iterations=9).verdict == "agree"  # 9 passes: 2 -> 1024
    run = cli("grad", text, "--max-iterations", "5")
    assert run.exit_code == 2
    assert run.stderr == (
        "Error: 'while y < 1000:' ran past the cap of 5 iterations for all of a cell's loops "
        "together; make the condition end sooner (or raise the cap with --max-iterations)\n"
    )


def test_the_line_cap_is_named_and_raised_by_its_option() -> None:
    text = "import torch\nx = torch.tensor(2., requires_grad=True)\n" + (
        "y = x * 1\nfor t in range(30):\n    y = y * 1.5\ny.backward()\n"
    )
    run = cli("grad", text, "--max-lines", "20")
    assert run.exit_code == 2
    assert run.stderr == (
        "Error: the cell runs more than 20 lines (its loops unrolled), at 'y = y * 1.5'; run "
        "fewer iterations or fewer lines in the loop (or raise the cap with --max-lines)\n"
    )
    assert ag.grad(text, max_lines=40).verdict == "agree"


def test_a_value_given_from_outside_decides_the_path() -> None:
    text = (
        "y = x * 1\nwhile y.abs() < 100:\n    y = y * 3\nif y > 0:\n    z = y.sin()\n"
        "else:\n    z = y * y\nz.backward()\n"
    )
    for x in (2.0, -2.0):
        result = ag.grad(text, x=x)
        assert result.verdict == "agree"
        _, names = python_run(
            f"import torch\nx = torch.tensor({x}, requires_grad=True)\n" + text, 0
        )
        assert result.events[0].grads[0].grad == names["x"].grad.numpy()
    assert "the condition was False" in str(result.notes[1])


# --- the ways in: grad -, grad @cell.py, the shell and check ----------------------------


def test_grad_from_standard_input_and_from_a_file(tmp_path: Path) -> None:
    piped = RUNNER.invoke(app, ["grad", "-", "--seed", "0"], input=D2L, prog_name="autograd-cli")
    assert piped.exit_code == 0, piped.stderr
    assert "note: 'while b.norm() < 1000:' (line 5): the loop ran 9 times" in " ".join(
        piped.stdout.split()
    )
    path = tmp_path / "d2l.py"
    path.write_text(D2L)
    run = cli("grad", f"@{path}", "--seed", "0")
    assert run.exit_code == 0 and run.stdout == piped.stdout
    assert "1024.0 1577.97998046875" in run.stdout  # print(a.grad.item(), d.item())


def test_the_shell_and_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "d2l.py"
    path.write_text(D2L)
    assert run_lines([f"grad @{path} --seed 0"]) == 0
    assert "the graph is the path these conditions took" in " ".join(
        capsys.readouterr().out.split()
    )
    cases = tmp_path / "cases.txt"
    cases.write_text(f"grad @{path} --seed 0\ngrad @{path} --seed 5\n")
    checked = cli("check", str(cases), "--json")
    assert checked.exit_code == 0
    *documents, last = (json.loads(line) for line in checked.stdout.splitlines())
    assert [d["status"] for d in documents] == ["agree", "agree"]
    assert last["summary"]["exit_code"] == 0


def _torch_graph_and_grad(seed: int) -> tuple[list[str], float]:
    """Real PyTorch's backward graph of d2l's ``d`` (class names, depth first) and
    ``a.grad`` after ``d.backward()``, for the cell run after ``manual_seed(seed)``."""
    _, names = python_run(D2L, seed)
    names["a"].grad = None
    d = names["f"](names["a"])
    found, stack = [], [d.grad_fn]
    while stack:
        node = stack.pop()
        found.append(type(node).__name__)
        stack.extend(reversed([n for n, _ in node.next_functions if n is not None]))
    d.backward()
    return found, float(names["a"].grad)


@pytest.mark.parametrize("seed", [0, 5])  # 5: a < 0, the else branch
def test_graph_and_jacobian_follow_the_path_taken(seed: int) -> None:
    nodes, grad = _torch_graph_and_grad(seed)
    graph = ag.backward_graph(D2L, seed=seed)
    assert [node.grad_fn for node in graph.nodes] == nodes
    jacobian = ag.jacobian(D2L, seed=seed)
    assert jacobian.verdict == "agree"
    assert float(jacobian.blocks[0].autograd) == float(jacobian.blocks[0].expected) == grad
