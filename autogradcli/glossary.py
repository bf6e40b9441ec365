"""PyTorch's autograd errors in plain words: one table, matched on stable message prefixes.

Each entry keeps the start of PyTorch's own message (stable across versions), why it
happens, and what to do; ``[[option]]`` in a fix is spelled as a flag by the CLI and as a
parameter by the Python API (``render.messages``). ``docs/errors.md`` shows each happening.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Entry:
    """One PyTorch message: a key, its stable prefix, the reason, and the fix."""

    key: str
    prefix: str
    title: str
    why: str
    fix: str
    in_cell: str = ""  # the fix written as lines of a cell, when the cell made the call


GLOSSARY: tuple[Entry, ...] = (
    Entry(
        key="freed_graph",
        prefix="Trying to backward through the graph a second time",
        title="second backward() on a freed graph",
        why="the first backward() freed the values the graph saved for it (such as the "
        "factors of a multiplication; autograd-cli graph --saved lists them), so the same "
        "graph cannot be walked again",
        fix="keep them with backward(retain_graph=True) ([[retain_graph]]), or build a new "
        "graph by running the forward pass again (drop [[same_graph]])",
        in_cell="write backward(retain_graph=True) on the earlier call, or compute the output "
        "again before the second backward()",
    ),
    Entry(
        key="non_scalar",
        prefix="grad can be implicitly created only for scalar outputs",
        title="backward() on a non-scalar output",
        why="backward() with no argument supplies the external gradient 1, which only "
        "fits a one-element output; a tensor output needs weights w for the "
        "vector-Jacobian product J^T w",
        fix="pass [[weights=ones]] (or weights of the output's shape), or reduce the output "
        "with sum(...) or mean(...)",
        in_cell="write y.backward(torch.ones_like(y)) for a tensor y, or y.sum().backward()",
    ),
    Entry(
        key="no_grad",
        prefix="element 0 of tensors does not require grad and does not have a grad_fn",
        title="nothing requires grad",
        why="the output depends on no tensor with requires_grad=True, so no graph was "
        "recorded for backward() to walk",
        fix="let an input require grad (leave it out of [[const]]), or use a variable in the "
        "expression",
        in_cell="create a leaf with requires_grad=True, e.g. x = torch.tensor([1., 2.], "
        "requires_grad=True), and compute the output from it",
    ),
    Entry(
        key="weights_shape",
        prefix="Mismatch in shape: grad_output[0]",
        title="external gradient of the wrong shape",
        why="the weights w in backward(w) must have exactly the output's shape, one weight "
        "per output element",
        fix="give [[weights]] the output's shape, or use [[weights=ones]]",
        in_cell="give backward() a gradient of the output's shape, e.g. "
        "y.backward(torch.ones_like(y))",
    ),
    Entry(
        key="non_leaf_grad",
        prefix="The .grad attribute of a Tensor that is not a leaf Tensor is being accessed",
        title=".grad of a non-leaf tensor",
        why="PyTorch fills .grad only for leaf tensors that require grad (made with "
        "requires_grad=True, not by an operation autograd recorded); an intermediate result "
        "passes its gradient on during backward() and keeps none",
        fix="call retain_grad() on it before backward() ([[retain_grad=NAME]])",
    ),
    Entry(
        key="inference_saved",
        prefix="Inference tensors cannot be saved for backward",
        title="an inference tensor saved for backward",
        why="a tensor made under torch.inference_mode() is an inference tensor: autograd "
        "may not keep it, yet an operation that needs it for its derivative (a product "
        "such as x**2 * z) uses it",
        fix="compute it under torch.no_grad() instead of torch.inference_mode(), or use a "
        ".clone() of it made outside the block",
        in_cell="write 'with torch.no_grad():' for that block, or clone what it made after "
        "it (z = z.clone())",
    ),
    Entry(
        key="in_place_saved",
        prefix="one of the variables needed for gradient computation has been modified by an "
        "inplace operation",
        title="a tensor saved for backward, then changed in place",
        why="an operation saved a tensor for its derivative (exp saves its result, a product "
        "its factors; autograd-cli graph --saved lists them) with the tensor's version "
        "counter; every in-place operation (y.add_(1), y += 1) adds 1 to it, and backward() "
        "refuses a saved tensor whose version moved, since its values are no longer the ones "
        "the derivative needs",
        fix="write the change as a new tensor (y = y + 1 instead of y.add_(1) or y += 1), or "
        "change a copy (y = y.clone(), then y.add_(1))",
        in_cell="write the change as a new tensor (y = y + 1 instead of y.add_(1) or y += 1), "
        "or change a copy (y = y.clone() on the line before)",
    ),
    Entry(
        key="in_place_leaf",
        prefix="a leaf Variable that requires grad is being used in an in-place operation",
        title="a leaf that requires grad changed in place",
        why="a leaf with requires_grad=True is what .grad is computed for; changing it in "
        "place would lose the value the graph starts from, so PyTorch refuses outside "
        "torch.no_grad() (an optimizer's update runs under no_grad)",
        fix="compute a new tensor (y = x + 1) and use it, or give the leaf its new value "
        "when it is made",
        in_cell="compute a new tensor (y = x + 1) and use it, or give the leaf its new value "
        "where it is made (x = torch.tensor(...))",
    ),
    Entry(
        key="hook_no_grad",
        prefix="cannot register a hook on a tensor that doesn't require gradient",
        title="a hook on a tensor that does not require grad",
        why="a hook runs on the gradient that backward() sends to its tensor, and no "
        "gradient is ever sent to a tensor with requires_grad=False (a constant, or a "
        "result computed only from constants or under torch.no_grad())",
        fix="register the hook on a tensor that requires grad: a leaf made with "
        "requires_grad=True or a result computed from one",
        in_cell="register the hook on a tensor that requires grad (made with "
        "requires_grad=True, or computed from one), or call requires_grad_() on it first",
    ),
)
BY_KEY = {e.key: e for e in GLOSSARY}


def lookup(message: str) -> Entry | None:
    """The entry whose prefix starts ``message`` (after whitespace), if any."""
    text = message.strip()
    return next((e for e in GLOSSARY if text.startswith(e.prefix)), None)
