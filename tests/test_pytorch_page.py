"""docs/pytorch.md shows every cell in docs/examples/ as it is, and runs each one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "pytorch.md"
EXAMPLES = sorted((ROOT / "docs" / "examples").glob("*.py"))


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", PAGE.read_text(), flags=re.S)


def _commands() -> list[str]:
    return [
        line
        for block in _blocks("console")
        for line in block.splitlines()
        if line.startswith("$ autograd-cli ")
    ]


def test_there_are_examples():
    assert len(EXAMPLES) >= 8
    assert {"gentle_introduction.py", "autodiff_bce.py", "d2l_autograd.py"} <= {
        p.name for p in EXAMPLES
    }


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_each_example_is_shown_verbatim_in_a_python_block(path):
    text = path.read_text()
    assert any(text in block for block in _blocks("python")), path.name


# Too long for the suite: the verbatim tutorial runs 2000 backward() calls (about a minute).
# The page shows its output as text; tests/test_tutorials.py reads the whole file and runs
# it with 20 passes against PyTorch, and the page's console example runs tutorial_20_steps.py.
LONG = {"tutorial_tensors_autograd.py"}


@pytest.mark.parametrize("path", [p for p in EXAMPLES if p.name not in LONG], ids=lambda p: p.name)
def test_each_example_is_run_by_a_console_example(path):
    command = f"$ autograd-cli grad @docs/examples/{path.name}"
    assert any(c == command or c.startswith(command + " ") for c in _commands()), path.name


def test_each_console_file_is_an_example():
    named = {m for c in _commands() for m in re.findall(r"@docs/examples/(\S+\.py)", c)}
    assert named <= {p.name for p in EXAMPLES}
