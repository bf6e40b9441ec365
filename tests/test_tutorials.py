"""PyTorch's "Learning PyTorch with Examples" (Tensors and autograd) as written: Python
numbers, dtypes and devices bound to names, ``for t in range(...)``, ``if`` on Python
numbers, the parameter update under ``torch.no_grad()``, ``.item()`` and f-strings in
``print``; each printed line equal to what PyTorch prints for the same cell and seed."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
import torch

import autogradcli as ag
from autogradcli.errors import AutogradCliError
from autogradcli.lang.cellstatements import Printed, Update
from autogradcli.lang.parser import parse_program
from autogradcli.lang.tree import Backward
from autogradcli.messages import error_text
from autogradcli.results import CellResult
from autogradcli.settings import Limits
from tests.conftest import cli

TUTORIAL = Path(__file__).parent.parent / "docs" / "examples" / "tutorial_tensors_autograd.py"
TEXT = TUTORIAL.read_text()
# the same program with 20 passes (a print every 10): the tests' runs stay quick
SHORT = TEXT.replace("range(2000)", "range(20)").replace("t % 100 == 99", "t % 10 == 9")


def python_prints(text: str, seed: int) -> list[str]:
    """The lines real PyTorch prints running ``text`` (test-owned text) after manual_seed."""
    torch.manual_seed(seed)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(text, "tutorial", "exec"), {})  # the test's own file, not user input
    return out.getvalue().splitlines()


def test_the_verbatim_file_is_read_as_python_runs_it() -> None:
    program = parse_program(TEXT, Limits())
    statements = program.statements
    assert sum(isinstance(s, Backward) for s in statements) == 2000
    assert sum(isinstance(s, Update) for s in statements) == 4 * 2000
    printed = [s for s in statements if isinstance(s, Printed)]
    assert len(printed) == 20 + 1  # t = 99, 199, ..., 1999, and the result line
    assert printed[0].items[0] == "99" and printed[0].formats == ("text", "item")
    assert printed[-1].sep == "" and printed[-1].formats[1] == "item"


@pytest.fixture(scope="module")
def short() -> CellResult:
    """``SHORT`` run once (about 5 s: two passes checked over 2,000 points) for the tests
    that read its result (tests/test_docs.py runs the command line on the same program
    with a print every 5 passes: test_cli_runs_the_file_and_shows_the_summary)."""
    return ag.grad(SHORT, seed=0)


def test_short_tutorial_prints_what_pytorch_prints(short: CellResult) -> None:
    result = short
    assert result.error is None
    printed = [e.printed for e in result.events if e.kind == "print"]
    assert printed == python_prints(SHORT, 0)
    shown = [s for e in result.events for s in e.shown if s.verdict is not None]
    assert len(shown) == 2 + 4  # loss.item() twice, a..d .item() in the f-string
    assert all(s.verdict == "agree" for s in shown)


def test_loop_passes_first_and_last_checked_the_rest_said(short: CellResult) -> None:
    result = short
    passes = [e for e in result.events if e.kind == "backward"]
    assert len(passes) == 20
    checked = [k for k, e in enumerate(passes) if e.check is not None]
    assert checked == [0, 19]
    assert all(g.verdict is None and g.expected is None for g in passes[5].grads)
    first = passes[0]
    assert first.check is not None and first.verdict == "agree"
    assert {g.name for g in first.grads} == {"a", "b", "c", "d"}
    assert passes[-1].target is not None and passes[0].target is not None
    assert passes[-1].target < passes[0].target  # the loss goes down


STEPS = Path(__file__).parent.parent / "docs" / "examples" / "tutorial_20_steps.py"
STEPS_COMMAND = "grad @docs/examples/tutorial_20_steps.py --seed 0"


def _page_block(command: str) -> str:
    """What docs/pytorch.md shows under ``$ autograd-cli COMMAND``."""
    page = (Path(__file__).parent.parent / "docs" / "pytorch.md").read_text()
    start = f"```console\n$ autograd-cli {command}\n"
    assert page.count(start) == 1, command
    return page.partition(start)[2].partition("```")[0]


def test_cli_runs_the_file_and_shows_the_summary() -> None:
    """The command line on the tutorial with 20 passes (a print every 5): what it prints is
    docs/pytorch.md's block, which tests/test_docs.py compares with a run of the command
    (line for line, and exit code 1 where the block shows a disagreement). That run of
    about 5 s is the suite's only one; this test reads its block."""
    assert STEPS.read_text() == TEXT.replace("range(2000)", "range(20)").replace(
        "t % 100 == 99", "t % 5 == 4"
    )
    shown = _page_block(STEPS_COMMAND)
    assert "✗ autograd and SymPy disagree" in shown  # exit 1: the last pass's float32
    # cancellation (see the docs); the page keeps no space at the end of a folded line
    unfolded = " ".join(shown.split())
    for line in python_prints(STEPS.read_text(), 0):
        assert " ".join(line.split()) in unfolded
    assert (
        "loss.backward() ran 20 times; passes checked against SymPy: 1, 20 "
        "(the other 18 ran unchecked)" in unfolded
    )


def test_the_update_changes_the_leaf_as_pytorch_does() -> None:
    text = (
        "import torch\n"
        "w = torch.tensor([1.0, 2.0], requires_grad=True)\n"
        "lr = 0.1\n"
        "for step in range(3):\n"
        "    loss = (w * w).sum()\n"
        "    loss.backward()\n"
        "    with torch.no_grad():\n"
        "        w -= lr * w.grad\n"
        "    w.grad.zero_()\n"
        "print(w.tolist())\n"
        "print(f'w = {w.sum().item()}')\n"
    )
    result = ag.grad(text)
    assert result.error is None
    printed = [e.printed for e in result.events if e.kind == "print"]
    assert printed == python_prints(text, 0)
    assert all(e.verdict in ("agree", None) for e in result.events)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            "for t in [1, 2]:\n    y = a * t\n    y.backward()\n",
            "'for t in [1, 2]:' is not a loop this tool runs; write 'for NAME in range(N):' "
            "with N a number known before the loop (no else)",
        ),
        (
            "for t in range(n):\n    y = a * 2\n    y.backward()\n",
            "'for t in range(n):': range() needs whole numbers known before the loop runs "
            "(literals, or names bound to them), e.g. 'for t in range(2000):'",
        ),
        (
            "for t in range(200001):\n    y = a * 2\n    y.backward()\n",
            "'for t in range(200001):' runs 200001 iterations; the cap is 100000 for all of a "
            "cell's loops together; run fewer iterations (or raise the cap with "
            "Limits.max_iterations)",
        ),
        (
            "y = a * 2\nwhile y < 100:\n    y = y * 2\nelse:\n    y = y * 3\ny.backward()\n",
            "'while y < 100:' is not a loop this tool runs: write 'while CONDITION:' without "
            "else (the condition a Python number or a one-element tensor)",
        ),
    ],
)
def test_refusals_name_what_to_write(body: str, message: str) -> None:
    text = "import torch\na = torch.tensor(2., requires_grad=True)\n" + body
    with pytest.raises(AutogradCliError) as caught:
        ag.grad(text, seed=0)
    assert error_text(caught.value) == message


def test_a_device_not_asked_for_names_the_option() -> None:
    text = (
        "import torch\n"
        "a = torch.tensor(2., requires_grad=True, device=torch.device('cuda:0'))\n"
        "y = a * 2\ny.backward()\n"
    )
    result = ag.grad(text, settings=ag.Settings(device="cpu"))
    assert result.error is not None
    assert error_text(result.error) == (
        "the cell asks for device cuda:0, but this run is on cpu; ask for it with "
        "--device cuda:0 (or write device=cpu)"
    )


def test_python_numbers_dtypes_and_math_constants() -> None:
    text = (
        "import torch\nimport math\n"
        "dtype = torch.float64\n"
        "scale = 2 * math.pi\n"
        "x = torch.linspace(-math.pi, math.pi, 5, dtype=dtype, requires_grad=True)\n"
        "y = (scale * x).sin().sum()\n"
        "y.backward()\n"
        "print(x.grad)\n"
    )
    result = ag.grad(text)
    assert result.error is None and result.dtype == "float64"
    assert result.verdict == "agree"


# --- the ways in: the shell and check files (issue 26) ------------------------------------

MY_CUBE = """

def my_cube(x):
    result, dx = MyCube.apply(x)
    return result


x = torch.tensor([1.0, 2.0, -0.5], requires_grad=True)
y = my_cube(x)
y.sum().backward()
print(x.grad)
"""


EXAMPLES = Path(__file__).resolve().parent.parent / "docs" / "examples"


def _my_cube(folder: Path) -> Path:
    """MyCube behind PyTorch's own ``def my_cube(x)`` wrapper, written to ``folder``."""
    cube = (EXAMPLES / "extending_mycube.py").read_text().split("\n\nx = torch.tensor")[0]
    wrapped = folder / "my_cube.py"
    wrapped.write_text(cube + MY_CUBE)
    return wrapped


# The shell and the check file are two tests (they were one of 9-11 s, of which the check
# file's tutorial is most): the suite's two processes (pytest -n 2) can run them at once.


def test_extending_pytorch_through_the_shell(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The Extending PyTorch Functions, and MyCube behind PyTorch's own ``def my_cube(x)``
    wrapper, as shell lines."""
    from autogradcli.cli.shell import run_lines

    lines = [
        f"grad @{EXAMPLES / 'extending_linear.py'}",
        f"grad @{EXAMPLES / 'extending_mulconstant.py'}",
        f"grad @{EXAMPLES / 'extending_legendre.py'} --seed 0",
        f"grad @{_my_cube(tmp_path)}",
    ]
    assert run_lines(lines) == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert "custom Function MyCube.apply(x) your backward" in shown


def test_the_tutorial_and_my_cube_through_a_check_file(tmp_path: Path) -> None:
    """The tutorial (20 of its passes) and the wrapped MyCube as the lines of a check file."""
    tutorial = f"grad @{EXAMPLES / 'tutorial_20_steps.py'} --seed 0"
    cases = tmp_path / "cases.txt"
    cases.write_text(f"{tutorial}\ngrad @{_my_cube(tmp_path)}\n")
    checked = cli("check", str(cases), "--json")
    *documents, last = (json.loads(line) for line in checked.stdout.splitlines())
    assert [d["status"] for d in documents] == ["disagree", "agree"]  # float32's cancellation
    assert (checked.exit_code, last["summary"]["exit_code"]) == (1, 1)
    assert "precision loss: cancellation" in json.dumps(documents[0]["document"])
