"""What the docs and messages say about PyTorch, checked against PyTorch itself."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import tomllib
import torch

from autogradcli import COMMANDS
from autogradcli.messages import ERRORS, NOTES
from autogradcli.policy.verdict import VERDICTS

ROOT = Path(__file__).resolve().parent.parent


def _page(name: str) -> str:
    return (ROOT / "docs" / name).read_text()


def test_the_verdict_table_has_one_row_per_verdict():
    rows = re.findall(r'^\| .+? \| .+? \| .+? \| `"(\w+)"` \|$', _page("trust.md"), flags=re.M)
    assert rows == [v.value for v in VERDICTS]
    assert not re.search(r"one of (two|three|four|five) verdicts", _page("trust.md"))


def test_the_higher_order_page_counts_what_it_lists():
    text = _page("higher-order.md")
    head = text.split("\n\n")[1] + "\n\n" + text.split("\n\n")[2]
    listed = re.findall(r"^- `autograd-cli (\w+)", head, flags=re.M)
    assert listed == ["jacobian", "hessian", "grad", "jvp"]
    assert set(listed) <= set(COMMANDS)
    assert "Four commands do both" in head


def test_the_license_file_is_the_one_pyproject_names():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT"
    assert (ROOT / "LICENSE").read_text().startswith("MIT License\n")


def test_a_scalar_factor_is_saved_as_the_graph_not_freed_note_says():
    x = torch.tensor(2.0, requires_grad=True)
    for saves, y in ((True, x * 2), (True, x * x), (False, x + 2)):
        y.backward()
        if saves:
            with pytest.raises(RuntimeError, match="backward through the graph a second time"):
                y.backward()
        else:
            y.backward()
    assert "x*x or x*2: each saves a factor; x + 2 saves nothing" in NOTES["graph_not_freed"]


def test_zero_on_a_none_grad_is_pythons_attribute_error():
    x = torch.tensor(2.0, requires_grad=True)
    with pytest.raises(AttributeError, match="'NoneType' object has no attribute 'zero_'"):
        x.grad.zero_()
    assert "Python raises AttributeError" in ERRORS["zero_none"]
    assert "PyTorch raises" not in ERRORS["zero_none"]


def test_the_matmul_table_names_the_nodes_pytorch_records():
    a2, b2 = torch.ones(2, 3, requires_grad=True), torch.ones(3, 4)
    nodes = {
        "[m, n] @ [n, p]": type((a2 @ b2).grad_fn).__name__,
        "[m, n] @ [n]": type((a2 @ torch.ones(3)).grad_fn).__name__,
        "[n] @ [n]": type((torch.ones(3, requires_grad=True) @ torch.ones(3)).grad_fn).__name__,
    }
    table = _page("tensor-algebra.md")
    for shapes, node in nodes.items():
        row = next(line for line in table.splitlines() if line.startswith(f"| `{shapes}`"))
        assert row.rstrip(" |").endswith(f"`{node}`"), row
    assert "several share one (`MmBackward0` for three rows)" in table
    assert "records a\ndifferent node for each" not in table
