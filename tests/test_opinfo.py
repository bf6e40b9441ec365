"""A differential test against PyTorch's own OpInfo samples
(``torch.testing._internal.common_methods_invocations.op_db``).

For every vocabulary entry that has an OpInfo, PyTorch's sample inputs in float64 go through
``ag.grad`` as the tool's user would write them: each tensor a value (floating tensors are
inputs with a gradient, the others constants), each number, tuple or word a positional or
keyword argument. The tool must say ✓. Where it does not, ``torch.autograd.gradcheck`` is a
third opinion: if PyTorch's gradient passes it, the tool's ✗ is false and the test fails; if
it fails, the tool's ✗ is right. A sample the tool cannot express (an argument the language
does not have, such as ``dtype=`` or ``ord=3``: an ``ExpressionError``) is counted as such;
any other refusal of a sample PyTorch computes fails the test.

The fast profile (CI) runs the first ``FAST`` expressible samples of each entry; with
``AUTOGRAD_CLI_LONG=1`` every sample and every reference input (large values, extremal
values, noncontiguous tensors) runs, gradcheck is asked about every ✓ as well (a false ✓),
and a summary is printed (``-s``). ``op_db`` needs the ``expecttest`` package; without it the
test is skipped.
"""

from __future__ import annotations

import math
import os
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

pytest.importorskip("expecttest")  # common_methods_invocations imports it

import torch

import autogradcli as ag
from autogradcli.errors import AutogradCliError, ExpressionError
from autogradcli.lang.vocabulary import OPS, SPELLINGS

LONG = os.environ.get("AUTOGRAD_CLI_LONG") == "1"
FAST = 1  # samples per entry in the fast profile: the first of at most FAST_ELEMENTS
FAST_ELEMENTS = 30
MAX_ELEMENTS = 1024  # larger samples are not run
SLOW = {"prod": 30}  # SymPy's product of 125 symbols takes 20 s: larger ones are not run


# Refusals of calls the language writes but whose shapes it does not take (one Error line
# that says so): dot() beyond two vectors, a class loss's input of no dims, a norm that needs
# singular values (torch.linalg.norm's ord 2, -2, 'nuc').
LIMITS = {"class_input", "class_target", "dot_shapes", "linalg_norm_order"}


@pytest.fixture(scope="module")
def op_db() -> Iterator[list[Any]]:
    """PyTorch's OpInfos. Their sample generators look for a ``unittest.TestCase`` on the
    stack to tag the inputs they track (``extract_test_fn``: ``inspect.stack()``, about 0.2 s
    a call under pytest's deep stack, twice per generator); a pytest function has none, so
    its answer here is None, given without the search. opinfo.core imported the function by
    name, so its own name is replaced as well (where the generators call it)."""
    from torch.testing._internal import common_utils
    from torch.testing._internal.common_methods_invocations import op_db
    from torch.testing._internal.opinfo import core

    patch = pytest.MonkeyPatch()
    patch.setattr(common_utils, "extract_test_fn", lambda: None)
    patch.setattr(core, "extract_test_fn", lambda: None)
    yield op_db
    patch.undo()


def spelling(name: str) -> str | None:
    """The tool's spelling of an OpInfo's function, if the vocabulary has it."""
    if name.startswith("nn.functional."):
        candidates = [f"F.{name.removeprefix('nn.functional.')}"]
    elif "." in name:
        candidates = [f"torch.{name}"]
    else:
        candidates = [f"torch.{name}", f"Tensor.{name}"]
    return next((c for c in candidates if c in SPELLINGS), None)


def covered(op_db: list[Any]) -> dict[str, list[Any]]:
    """Vocabulary entry -> the OpInfos that call it (operators' entries included)."""
    found: dict[str, list[Any]] = {}
    for info in op_db:
        way = spelling(info.name)
        if way is None or info.variant_test_name in ("with_dtype", "complex"):
            continue
        if SPELLINGS[way].kind == "constant":  # ones_like, zeros_like: no gradient to check
            continue
        if SPELLINGS[way].name == "one_hot":  # integers in, integers out: no gradient either
            continue
        found.setdefault(SPELLINGS[way].name, []).append(info)
    return found


@dataclass
class Call:
    """One sample written as the tool's expression, with its values."""

    text: str
    values: dict[str, np.ndarray]
    const: list[str]
    grads: list[str]  # the differentiable tensors, in order
    run: Any  # the same function of those tensors, for gradcheck


def literal(value: Any) -> str | None:
    """A non-tensor argument as the language writes it, or None."""
    if isinstance(value, bool) or value is None:
        return repr(value) if isinstance(value, bool) else None
    if isinstance(value, int):
        return repr(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else None
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, (tuple, list)) and all(type(v) is int for v in value):
        return "(" + "".join(f"{v}, " for v in value) + ")"
    return None


def written(info: Any, sample: Any) -> Call | None:
    """The sample as an expression the tool takes, or None where it has no such call."""
    way = spelling(info.name)
    sequence = isinstance(sample.input, (list, tuple))
    if way is None or not (sequence or isinstance(sample.input, torch.Tensor)):
        return None
    names = iter(("x", "y", "z", "w", "v"))
    values: dict[str, np.ndarray] = {}
    const: list[str] = []
    grads: list[str] = []
    tensors: list[torch.Tensor] = []

    def tensor(t: Any, differentiable: bool = True) -> str | None:
        if t.is_complex() or t.numel() > MAX_ELEMENTS:
            return None
        name = next(names)
        values[name] = t.detach().to(torch.float64).cpu().numpy()
        if t.dtype == torch.float64 and differentiable:
            grads.append(name)
            tensors.append(t)
        else:
            const.append(name)
        return name

    given = list(sample.input) if sequence else [sample.input]
    if not given or any(t.dtype != torch.float64 for t in given):
        return None
    heads = [tensor(t) for t in given]
    if None in heads:
        return None
    first = f"[{', '.join(heads)}]" if sequence else heads[0]
    args: list[str] = []
    for arg in sample.args:
        text = tensor(arg) if isinstance(arg, torch.Tensor) else literal(arg)
        if text is None:
            return None
        args.append(text)
    kwargs = dict(sample.kwargs)
    for key, arg in kwargs.items():  # weight=, pos_weight=: PyTorch gives them no gradient
        text = tensor(arg, False) if isinstance(arg, torch.Tensor) else literal(arg)
        if text is None:
            return None
        args.append(f"{key}={text}")
    head, *rest = [first, *args]
    if way.startswith("Tensor."):
        text = f"{head}.{way.removeprefix('Tensor.')}({', '.join(rest)})"
    else:
        text = f"{way}({', '.join([head, *rest])})"
    if info.name == "where":  # OpInfo's where is self.where(condition, other)
        text = f"torch.where({', '.join([rest[0], head, *rest[1:]])})"

    def run(*differentiable: torch.Tensor) -> torch.Tensor:
        swap = dict(zip((id(t) for t in tensors), differentiable, strict=True))
        again = [swap.get(id(a), a) if isinstance(a, torch.Tensor) else a for a in sample.args]
        keys = {
            k: swap.get(id(a), a) if isinstance(a, torch.Tensor) else a
            for k, a in sample.kwargs.items()
        }
        head = [swap[id(t)] for t in given] if sequence else swap[id(sample.input)]
        out = info.op(head, *again, **keys)
        return out[0] if isinstance(out, tuple) else out

    return Call(text, values, const, grads, run)


# Finite differences of step 1e-6 mean nothing on numbers this large.
GRADCHECK_LARGEST = 1e5


def gradcheck(call: Call) -> bool | None:
    """PyTorch's own finite-difference check of its gradient at the sample; None where it
    cannot judge (no elements, a NaN or infinity in the inputs, the output or the
    gradient, or inputs too large for its step)."""
    inputs = []
    for name in call.grads:
        inputs.append(torch.tensor(call.values[name], dtype=torch.float64, requires_grad=True))
    if not inputs or any(t.numel() == 0 for t in inputs):
        return None
    values = np.concatenate([v.reshape(-1) for v in call.values.values()])
    if not np.isfinite(values).all() or np.abs(values).max(initial=0) > GRADCHECK_LARGEST:
        return None
    try:
        out = call.run(*inputs)
        grads = torch.autograd.grad(out, inputs, torch.ones_like(out), allow_unused=True)
    except RuntimeError:
        return None
    if not torch.isfinite(out).all() or any(
        g is not None and not torch.isfinite(g).all() for g in grads
    ):
        return None
    for eps in (1e-6, 1e-9):  # the smaller step where 1e-6 reaches a singularity
        try:
            if torch.autograd.gradcheck(
                call.run, tuple(inputs), eps=eps, raise_exception=False, check_undefined_grad=False
            ):
                return True
        except (RuntimeError, ValueError):
            return None
    return False


def pytorch_numbers(call: Call) -> tuple[np.ndarray, dict[str, np.ndarray]] | None:
    """PyTorch's own output and gradients (weights of ones) for the call, or None."""
    inputs = [
        torch.tensor(call.values[n], dtype=torch.float64, requires_grad=True) for n in call.grads
    ]
    try:
        out = call.run(*inputs)
        out.backward(torch.ones_like(out))
    except (RuntimeError, ValueError, TypeError, IndexError):
        return None
    grads = {
        n: np.zeros(t.shape) if t.grad is None else t.grad.numpy()
        for n, t in zip(call.grads, inputs, strict=True)
    }
    return out.detach().numpy(), grads


def same_numbers(result: Any, call: Call) -> bool:
    """Whether the tool printed PyTorch's own numbers (it ran the same function)."""
    found = pytorch_numbers(call)
    if found is None:
        return True  # no numbers of PyTorch's to compare with
    out, grads = found
    pairs = [(np.asarray(result.output), out)]
    pairs += [(np.asarray(result.grads[n]), g) for n, g in grads.items()]
    return all(
        a.shape == b.shape and np.allclose(a, b, rtol=1e-12, atol=0, equal_nan=True)
        for a, b in pairs
    )


def pytorch_raises(call: Call) -> bool:
    """Whether PyTorch itself raises for the call, forward or backward."""
    inputs = [
        torch.tensor(call.values[n], dtype=torch.float64, requires_grad=True) for n in call.grads
    ]
    try:
        out = call.run(*inputs)
        out.backward(torch.ones_like(out))
    except (RuntimeError, ValueError, TypeError, IndexError):
        return True
    return False


@dataclass
class Tally:
    """What the samples gave."""

    run: int = 0
    agree: int = 0
    unexpressible: Counter[str] = field(default_factory=Counter)
    limits: Counter[str] = field(default_factory=Counter)
    pytorch_raises: int = 0  # refused where PyTorch itself raises: the same outcome
    refused: list[str] = field(default_factory=list)
    true_disagree: list[str] = field(default_factory=list)
    false_disagree: list[str] = field(default_factory=list)
    false_agree: list[str] = field(default_factory=list)
    undecided: list[str] = field(default_factory=list)  # ✗ where gradcheck cannot judge
    crashed: list[str] = field(default_factory=list)
    not_pytorch: list[str] = field(default_factory=list)  # printed numbers not PyTorch's
    per_entry: Counter[str] = field(default_factory=Counter)


def check_sample(info: Any, sample: Any, tally: Tally, entry: str, third: bool) -> None:
    """One sample through ``ag.grad``; gradcheck where the tool does not say ✓ (and, with
    ``third``, where it does)."""
    call = written(info, sample)
    if call is None:
        tally.unexpressible["argument"] += 1
        return
    where = f"{info.name}:{call.text} {_shapes(call)}"
    try:
        result = ag.grad(
            call.text,
            call.values,
            dtype="float64",
            weights="ones",
            const=call.const,
            suggest=False,
        )
    except AutogradCliError as exc:
        code = getattr(exc, "code", "")
        if isinstance(exc, ExpressionError):  # the language has no such call
            tally.unexpressible[code] += 1
        elif code in LIMITS:
            tally.limits[code] += 1
        elif pytorch_raises(call):
            tally.pytorch_raises += 1
        else:
            tally.refused.append(f"{where}: {code}: {exc}")
        return
    except Exception as exc:  # a traceback is always a failure
        tally.crashed.append(f"{where}: {type(exc).__name__}: {exc}")
        return
    tally.run += 1
    tally.per_entry[entry] += 1
    if not same_numbers(result, call):  # another function than PyTorch's, whatever the verdict
        tally.not_pytorch.append(f"{where}: {result.verdict}")
    if result.verdict == "agree":
        tally.agree += 1
        kinked = any("kink" in n.code for v in result.variables.values() for n in v.notes)
        if third and not kinked and gradcheck(call) is False:  # differences cross a kink
            tally.false_agree.append(where)
        return
    detail = f"{where}: {result.verdict} ({result.first_cause()})"
    opinion = gradcheck(call)
    if opinion is None:
        tally.undecided.append(detail)
    elif opinion:
        tally.false_disagree.append(detail)
    else:
        tally.true_disagree.append(detail)


def _size(sample: Any) -> int:
    """Elements of a sample's tensors."""
    first = list(sample.input) if isinstance(sample.input, (list, tuple)) else [sample.input]
    parts = [*first, *sample.args, *sample.kwargs.values()]
    return sum(t.numel() for t in parts if isinstance(t, torch.Tensor))


def _shapes(call: Call) -> str:
    return str({n: list(v.shape) for n, v in call.values.items()})


def samples(info: Any, long: bool) -> Iterator[Any]:
    """PyTorch's samples of an OpInfo in float64; when long, its reference inputs (which
    begin with the samples, then large, extremal and noncontiguous values)."""
    if long:
        try:
            yield from info.reference_inputs("cpu", torch.float64, requires_grad=False)
            return
        except (ValueError, RuntimeError, TypeError):
            pass  # a generator that cannot make float64 inputs without grad: the samples
    yield from info.sample_inputs("cpu", torch.float64, requires_grad=False)


def test_opinfo_samples_get_the_right_verdict(op_db: list[Any]) -> None:
    table = covered(op_db)
    tally = Tally()
    start = time.perf_counter()
    for entry, infos in sorted(table.items()):
        taken = 0
        elementwise = OPS[entry].elementwise
        for info in infos:
            for sample in samples(info, LONG):
                if not LONG and taken >= FAST:
                    break
                if _size(sample) > SLOW.get(entry, MAX_ELEMENTS):
                    continue
                if not LONG and _size(sample) > FAST_ELEMENTS and not elementwise:
                    continue
                before = tally.run
                check_sample(info, sample, tally, entry, third=LONG)
                taken += tally.run - before
    seconds = time.perf_counter() - start
    if LONG:
        print(
            f"\nOpInfo: {len(table)} entries, {tally.run} samples run in {seconds:.0f} s, "
            f"{tally.agree} agree; false ✓ {len(tally.false_agree)}, false ✗ "
            f"{len(tally.false_disagree)}, true ✗ {len(tally.true_disagree)}, ✗ gradcheck "
            f"cannot judge {len(tally.undecided)}, refused "
            f"{len(tally.refused)}, crashed {len(tally.crashed)}, not PyTorch's numbers "
            f"{len(tally.not_pytorch)}; PyTorch raises too "
            f"{tally.pytorch_raises}; limits {dict(tally.limits)}; not expressible: "
            f"{dict(tally.unexpressible)}"
        )
        for title, rows in (
            ("false ✓", tally.false_agree),
            ("false ✗", tally.false_disagree),
            ("true ✗", tally.true_disagree),
            ("✗, gradcheck cannot judge", tally.undecided),
            ("refused", tally.refused),
            ("crashed", tally.crashed),
            ("not PyTorch's numbers", tally.not_pytorch),
        ):
            for row in rows:
                print(f"  {title}: {row}")
    assert not tally.crashed, tally.crashed
    assert not tally.not_pytorch, tally.not_pytorch
    assert not tally.false_disagree, tally.false_disagree
    assert not tally.false_agree, tally.false_agree
    assert not tally.refused, tally.refused
    assert set(tally.per_entry) == set(table), set(table) - set(tally.per_entry)


def test_every_entry_with_an_opinfo_is_covered(op_db: list[Any]) -> None:
    """The entries the test reaches (a new vocabulary entry with an OpInfo joins by itself)."""
    table = covered(op_db)
    for entry in ("sin", "softplus", "sum", "logsumexp", "norm", "permute", "prod", "max"):
        assert entry in table
    # issue 26's spellings: their OpInfo samples run as they are
    for entry in ("amax", "amin", "cumsum", "cumprod", "gather", "inner", "linalg_norm"):
        assert entry in table
