"""What a run will hold, estimated from the bound program's shapes before torch allocates
anything, and refused past the memory budget (``autogradcli.memory``).

Bytes per element, each an upper bound measured on the CPU (``docs/trust.md``, "Memory"):
the inputs as read (float64), as leaves (the dtype) and as autograd saw them (float64);
every operation's result three times over in the dtype (the forward value, what autograd
saves for backward, the gradient flowing back); each pass's saved ``.grad`` and its
expected multiple; SymPy's reference and its comparisons, which work in blocks, a few
float64 arrays per element; the float64 re-run a ≈ verdict asks for; and, when the result
is printed as JSON, every array the document holds (``memory.PRINTED``).

Each command's check (``check_grad``, ``check_jacobian``...) needs only the bound program,
so the API runs it before torch and SymPy load: a refused run costs no import.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from autogradcli.lang.shapes import Shape, _Shapes
from autogradcli.lang.tree import Node
from autogradcli.memory import FLOAT64, ITEMSIZE, PRINTED, refuse

if TYPE_CHECKING:
    from autogradcli.bind import Bound

GRAPH = 3  # per operation, in the dtype: forward value, saved for backward, gradient
REFERENCE = 3  # float64 arrays per differentiated element: expected, kinks and bounds
COMPARE = 4  # float64 temporaries per element of the largest tensor (blocks, masks)
# Bytes per Jacobian or Hessian entry: autograd's, the functional cross-check's, SymPy's
# (or the numeric one's) in float64, and the comparison's.
ENTRY_BYTES = 4 * FLOAT64
BLOCK_ARRAYS = 4  # arrays a result prints per entry: autograd, cross-check, expected, numeric


class _Sizes(_Shapes):
    """Shape inference that also adds up the elements of every operation's result."""

    def __init__(self, shapes: dict[str, Shape], limits: Any) -> None:
        super().__init__(shapes, limits)
        self.elements = 0
        self.largest = 0

    def apply(self, node: Node, values: list[Shape]) -> Shape:
        shape = super().apply(node, values)
        size = int(math.prod(shape))
        self.elements += size
        self.largest = max(self.largest, size)
        return shape


@dataclass(frozen=True)
class Sizes:
    """Element counts of a bound program."""

    inputs: int  # every input
    differentiated: int  # the inputs autograd differentiates
    operations: int  # every operation's result, summed over the program
    largest: int  # the largest tensor, input or result


def sizes(bound: Bound) -> Sizes:
    """The element counts of ``bound``, from its shapes (counted once per bound: the
    budget's checks ask before and after torch loads)."""
    last = _COUNTED.get("last")
    if last is not None and last[0]() is bound:
        return last[1]
    found = _sizes(bound)
    _COUNTED["last"] = (weakref.ref(bound), found)
    return found


_COUNTED: dict[str, tuple[weakref.ref[Bound], Sizes]] = {}


def _sizes(bound: Bound) -> Sizes:
    fold = _Sizes(dict(bound.shapes), bound.limits)
    for root in bound.program.roots():
        fold(root)
    inputs = {n: int(math.prod(bound.shapes[n])) for n in bound.program.variables}
    largest = max([fold.largest, *inputs.values(), int(math.prod(bound.out_shape))])
    return Sizes(
        inputs=sum(inputs.values()),
        differentiated=sum(inputs[n] for n in bound.names),
        operations=fold.elements,
        largest=largest,
    )


def run_bytes(
    bound: Bound,
    passes: int = 1,
    graphs: int = 1,
    float64_again: bool = True,
    extra: int = 0,
    printed: int = 0,
) -> int:
    """The bytes a run of ``bound`` holds at most: ``passes`` backward passes, each saving
    ``.grad`` (float64 for the last, the dtype for the others) beside its expected multiple;
    ``graphs`` forward graphs alive at once (more for higher derivatives); the float64
    re-run a ≈ verdict asks for; ``extra`` bytes the command keeps besides (rows of a
    Jacobian); ``printed`` elements of the result's arrays, at ``memory.PRINTED`` bytes
    each (JSON output)."""
    passes, graphs, extra = int(passes), int(graphs), int(extra)  # NumPy integers overflow
    item = ITEMSIZE[bound.settings.dtype]
    count = sizes(bound)
    held = sum(a.nbytes for a in bound.arrays.values())
    held += 0 if bound.weights is None else bound.weights.nbytes
    held += count.inputs * (item + FLOAT64)  # leaves, and the inputs as autograd saw them
    held += graphs * GRAPH * item * count.operations
    kept = (passes - 1) * (item + FLOAT64) + 2 * FLOAT64  # the last pass: float64, twice
    held += (kept + item) * count.differentiated  # and .grad itself
    held += REFERENCE * FLOAT64 * count.differentiated + COMPARE * FLOAT64 * count.largest
    if bound.settings.numeric:  # central differences: the program twice more in float64
        held += 2 * FLOAT64 * (count.operations + count.inputs)
    if float64_again and bound.settings.dtype != "float64":
        held += GRAPH * FLOAT64 * count.operations + 4 * FLOAT64 * count.inputs
    return held + extra + int(printed) * PRINTED.get()


def check_run(bound: Bound, what: str, **plan: Any) -> None:
    """Refuse the run before anything is allocated if ``run_bytes`` passes the budget."""
    estimate = run_bytes(bound, **plan)
    if estimate > bound.limits.memory:
        elements = sizes(bound).inputs
        raise refuse(f"{what} on {elements} input elements", estimate, bound.limits.memory)


def _total(shape: tuple[int, ...]) -> int:
    return int(math.prod(shape))


def entries(bound: Bound) -> int:
    """Entries of the Jacobian of ``bound``'s output by its differentiated inputs."""
    return _total(bound.out_shape) * sum(_total(bound.shapes[n]) for n in bound.names)


def grad_printed(bound: Bound, repeat: int = 1, every: bool = False) -> int:
    """Elements of the arrays ``grad``'s JSON prints: the output (value, expected, weights,
    a suggestion's), every input's value, each differentiated input's ``.grad``, expected,
    numeric and suggested gradient, ``.grad`` and its expected multiple per pass; with
    ``every`` (named tensors, the chain rule node by node) four arrays per tensor."""
    count = sizes(bound)
    printed = 4 * _total(bound.out_shape) + count.inputs
    printed += (4 + 2 * int(repeat)) * count.differentiated
    if every:
        printed += 4 * (count.operations + count.inputs)
    return printed


def check_grad(bound: Bound, repeat: int = 1, explain: bool = False, every: bool = False) -> None:
    """``grad``'s run: ``repeat`` passes, a second graph kept for ``explain``; ``every``:
    named tensors are kept and printed."""
    printed = grad_printed(bound, repeat, every or explain)
    passes = "1 pass" if repeat == 1 else f"{repeat} passes"
    what = f"grad ({passes})"
    check_run(bound, what, passes=repeat, graphs=1 + explain, printed=printed)


def check_jacobian(bound: Bound, rows: bool = False) -> None:
    """The Jacobian (``rows``: each backward pass's one-hot gradient and grads kept)."""
    found = entries(bound)
    printed = sizes(bound).inputs + BLOCK_ARRAYS * found
    if rows:
        printed += _total(bound.out_shape) ** 2 + found
    check_run(bound, "the Jacobian", extra=found * ENTRY_BYTES, printed=printed)


def check_jvp(bound: Bound) -> None:
    """The Jacobian-vector product (its JSON: the inputs, the tangents, J·v's blocks)."""
    count = sizes(bound)
    printed = count.inputs + count.differentiated + BLOCK_ARRAYS * _total(bound.out_shape)
    what = "the Jacobian-vector product"
    check_run(bound, what, extra=entries(bound) * ENTRY_BYTES, printed=printed)


def check_hessian(bound: Bound) -> None:
    """The Hessian: two graphs, its entries, the square of the differentiated inputs."""
    count = sizes(bound)
    square = count.differentiated**2
    printed = count.inputs + BLOCK_ARRAYS * square
    check_run(bound, "the Hessian", graphs=2, extra=square * ENTRY_BYTES, printed=printed)


def check_derivative(bound: Bound, order: int) -> None:
    """The derivative of ``order``: that many graphs and one more alive at once."""
    count = sizes(bound)
    printed = count.inputs + BLOCK_ARRAYS * count.differentiated
    what = f"the derivative of order {order}"
    check_run(bound, what, graphs=order + 1, printed=printed)
