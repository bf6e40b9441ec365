"""Each spelling of a transpose records the node PyTorch records for it (issue 28): ``A.T``
a ``PermuteBackward0``, ``A.t()`` a ``TBackward0``, ``transpose`` and ``swapaxes`` a
``TransposeBackward0``, ``permute`` a ``PermuteBackward0``, ``A.mT`` and ``A.mH`` (real)
a ``TransposeBackward0``; ``A.H`` is refused with the fix. Real torch is run on the same
spelling, written out here, and its graph compared node by node."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import autogradcli as ag
from tests.conftest import cli

A = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
C = [[1.0, -1.0], [0.5, 2.0], [3.0, 0.0]]

SPELLINGS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "A.T": lambda a: a.T,
    "T(A)": lambda a: a.T,  # the tool's own function is A.T
    "A.t()": lambda a: a.t(),
    "torch.t(A)": lambda a: torch.t(a),
    "A.transpose(0, 1)": lambda a: a.transpose(0, 1),
    "torch.transpose(A, 0, 1)": lambda a: torch.transpose(a, 0, 1),
    "A.swapaxes(0, 1)": lambda a: a.swapaxes(0, 1),
    "A.permute(1, 0)": lambda a: a.permute(1, 0),
    "torch.permute(A, (1, 0))": lambda a: torch.permute(a, (1, 0)),
    "A.mT": lambda a: a.mT,
    "A.mH": lambda a: a.mH,  # a real tensor's conjugate is itself
}


def _torch_nodes(spelled: Callable[[torch.Tensor], torch.Tensor]) -> list[str]:
    """The class names of real torch's backward graph for ``(spelled(A) * C).sum()``,
    from the output's grad_fn down, depth first."""
    a = torch.tensor(A, requires_grad=True)
    out = (spelled(a) * torch.tensor(C)).sum()
    names, stack = [], [out.grad_fn]
    while stack:
        node = stack.pop()
        names.append(type(node).__name__)
        stack.extend(reversed([n for n, _ in node.next_functions if n is not None]))
    return names


@pytest.mark.parametrize("spelling", list(SPELLINGS))
def test_the_graph_records_what_pytorch_records(spelling: str) -> None:
    graph = ag.backward_graph(f"({spelling} * C).sum()", {"A": A, "C": C}, const=["C"])
    ours = [node.grad_fn for node in graph.nodes]
    theirs = _torch_nodes(SPELLINGS[spelling])
    assert ours == theirs
    transposes = {"PermuteBackward0", "TBackward0", "TransposeBackward0"}
    assert len(set(ours) & transposes) == 1


def test_the_gradient_is_the_same_for_every_spelling() -> None:
    for spelling in SPELLINGS:
        result = ag.grad(f"({spelling} * C).sum()", {"A": A, "C": C}, const=["C"])
        assert result.verdict == "agree", spelling
        assert result.grads["A"].tolist() == [[1.0, 0.5, 3.0], [-1.0, 2.0, 0.0]]


def test_the_graph_command_shows_the_node() -> None:
    """Rendered as a user sees it (NO_COLOR, 100 columns)."""
    values = ["--A", str(A), "--C", str(C), "--const", "C"]
    shown = {}
    for spelling in ("A.T", "A.t()"):
        run = cli("graph", f"({spelling} * C).sum()", *values)
        assert run.exit_code == 0, run.stderr
        shown[spelling] = [line.rstrip() for line in run.stdout.splitlines()]
    tail = [
        "    │   └── AccumulateGrad  A [2, 3]  → A.grad",
        "    └── None  (no gradient flows here: a constant or a tensor with requires_grad=False)",
    ]
    assert shown["A.T"] == [
        "backward graph of out: 4 nodes, walked from the top by backward()",
        "SumBackward0  out = sum(T(A)*C)",
        "└── MulBackward0  T(A)*C",
        "    ├── PermuteBackward0  T(A)",
        *tail,
    ]
    assert shown["A.t()"] == [
        "backward graph of out: 4 nodes, walked from the top by backward()",
        "SumBackward0  out = sum(A.t()*C)",
        "└── MulBackward0  A.t()*C",
        "    ├── TBackward0  A.t()",
        *tail,
    ]


def test_mT_swaps_the_last_two_dims_of_a_batch_as_pytorch_does() -> None:
    batch = [[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], [[0.5, -1.0, 2.0], [3.0, 1.0, -2.0]]]
    weights = [[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], [[-1.0, 0.0], [2.0, 1.0], [0.5, 3.0]]]
    for attr in ("mT", "mH"):
        graph = ag.backward_graph(f"(B.{attr} * W).sum()", {"B": batch, "W": weights}, const=["W"])
        b = torch.tensor(batch, requires_grad=True)
        out = (getattr(b, attr) * torch.tensor(weights)).sum()
        out.backward()
        names, stack = [], [out.grad_fn]
        while stack:
            node = stack.pop()
            names.append(type(node).__name__)
            stack.extend(reversed([n for n, _ in node.next_functions if n is not None]))
        assert [node.grad_fn for node in graph.nodes] == names
        result = ag.grad(f"(B.{attr} * W).sum()", {"B": batch, "W": weights}, const=["W"])
        assert result.verdict == "agree"
        assert result.grads["B"].tolist() == b.grad.tolist()


def test_H_is_refused_with_the_fix() -> None:
    """PyTorch takes ``.H`` on 2-D tensors only; the line cannot tell a shape, so it is
    refused and ``.mH`` (the same on a real matrix) named."""
    run = cli("grad", "(A.H * C).sum()", "--A", str(A), "--C", str(C), "--const", "C")
    assert run.exit_code == 2
    assert run.stderr == (
        "Error: '.H' (2-D only) is not supported; did you mean .mH? "
        "(autograd-cli grad --help lists the functions)\n"
    )
