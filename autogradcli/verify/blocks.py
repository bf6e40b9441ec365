"""Checks of derivative blocks (a Jacobian per input, a Hessian per pair, a K-th derivative
per input): autograd's numbers against the reference, torch.autograd.functional's answer
and the numeric opinion, settled by the verdict policy."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from autogradcli.notes import Note
from autogradcli.policy.compare import Comparison, Marks, compare
from autogradcli.policy.verdict import AGREE, DISAGREE, ROUNDING, UNCHECKED, settle
from autogradcli.reference.numeric import DEFAULT as NUMERIC
from autogradcli.results import Block
from autogradcli.settings import Settings
from autogradcli.verify.diagnose import Compared, Evidence, check_cause, rounding_cause
from autogradcli.verify.judge import decided_notes, kink_cause_at
from autogradcli.verify.reconcile import Decided


@dataclass(frozen=True)
class BlockReference:
    """What a block is checked against: the reference's numbers (SymPy's when ``exact``,
    else central differences), its kink entries and their codes, what the one-sided
    derivatives decided there, and the numeric third opinion with its widening."""

    expected: np.ndarray
    exact: bool
    kinks: np.ndarray | None = None
    kink_codes: frozenset[str] = frozenset()
    decided: Decided | None = None
    numeric: np.ndarray | None = None
    numeric_widen: np.ndarray | float = 0.0


def make_block(
    key: str,
    autograd: np.ndarray,
    reference: BlockReference,
    settings: Settings,
    relative: float,
    cross: tuple[np.ndarray, str] | None = None,
) -> Block:
    """One block compared with its reference (the verdict is settled by ``settle_blocks``);
    ``cross``: torch.autograd.functional's answer and its name."""
    expected, kinks, decided = reference.expected, reference.kinks, reference.decided
    numeric, numeric_widen = reference.numeric, reference.numeric_widen
    rtol, atol = settings.tolerance
    if not reference.exact:  # central differences: their tolerance, widened by their rounding
        rtol, atol = max(rtol, NUMERIC.rtol), max(atol, NUMERIC.atol) + numeric_widen
    bounds = smooth = None
    if decided is not None and kinks is not None:
        expected, kinks = decided.expected, kinks & ~decided.decided
        bounds, smooth = decided.bounds, decided.smooth
    check = compare(autograd, expected, rtol, atol, Marks(kinks, bounds), relative)
    cross_agree = None
    if cross is not None:
        cross_agree = compare(autograd, cross[0], *settings.tolerance).agree
    numeric_agree = None
    if numeric is not None:
        third = compare(
            autograd,
            numeric,
            max(rtol, NUMERIC.rtol),
            max(atol, NUMERIC.atol) + numeric_widen,
            Marks(kinks),
        )
        numeric_agree = third.agree
    return Block(
        key=key,
        autograd=autograd,
        cross=None if cross is None else cross[0],
        cross_name="" if cross is None else cross[1],
        expected=expected,
        max_abs_error=check.max_abs_error,
        check=check,
        cross_agree=cross_agree,
        excluded=check.excluded,
        numeric=numeric,
        numeric_agree=numeric_agree,
        reference_verdict=AGREE if check.agree else DISAGREE,
        kink_codes=reference.kink_codes,
        smooth=smooth,
        bounds=bounds,
    )


def unchecked_block(
    key: str,
    autograd: np.ndarray,
    cross: tuple[np.ndarray, str] | None,
    settings: Settings,
    numeric: np.ndarray | None = None,
) -> Block:
    """A block no reference could check: autograd's numbers beside torch's cross-check, or
    beside a numeric estimate too coarse to judge them."""
    return Block(
        key=key,
        autograd=autograd,
        cross=None if cross is None else cross[0],
        cross_name="" if cross is None else cross[1],
        expected=np.full(autograd.shape, np.nan),
        max_abs_error=math.nan,
        check=Comparison(agree=True, max_abs_error=math.nan),
        cross_agree=None
        if cross is None
        else compare(autograd, cross[0], *settings.tolerance).agree,
        numeric=numeric,
        reference_verdict=UNCHECKED,
    )


def settle_blocks(
    blocks: tuple[Block, ...],
    dtype: str,
    relative: float,
    float64: Callable[[], Mapping[str, Block]],
    diagnose: Callable[[], Any],
    inputs_finite: bool,
) -> tuple[Block, ...]:
    """Each block's verdict (verdict.py): a low-precision block outside its tolerance is
    compared with the same block run in float64 (``float64()``, made only if needed); within
    the rounding bound with float64 agreeing it is ≈, otherwise ✗ with its cause."""
    failing = [b for b in blocks if not b.check.agree]
    if not failing:
        return blocks
    high = float64() if dtype != "float64" else {}
    forward = diagnose() if any(not b.check.within_bound or not high for b in failing) else None
    settled = []
    for block in blocks:
        if block.check.agree:
            settled.append(block)
            continue
        other = high.get(block.key)
        f64 = None if other is None or other.cross_agree is False else other.check
        verdict = settle(block.check, f64)
        if verdict == ROUNDING:
            assert f64 is not None
            cause = rounding_cause(block.check, f64, dtype, relative)
            cross = None if block.cross_agree is None else True
            settled.append(
                replace(block, reference_verdict=verdict, cause=cause, cross_agree=cross)
            )
            continue
        at_kink = kink_cause_at(
            block.autograd,
            block.expected,
            block.smooth,
            block.bounds,
            block.kink_codes,
            dtype,
        )
        if at_kink is not None:
            settled.append(replace(block, reference_verdict=DISAGREE, cause=at_kink))
            continue
        cause = check_cause(
            Compared(block.check, block.autograd, block.expected),
            Evidence(dtype, forward, f64, inputs_finite, set(block.kink_codes)),
        )
        settled.append(replace(block, reference_verdict=verdict, cause=cause))
    return tuple(settled)


def block_notes(blocks: tuple[Block, ...]) -> list[Note]:
    """Entries left out at kinks, with PyTorch's values there (named by block when several)."""
    notes = []
    for b in blocks:
        prefix = {"prefix": f"{b.key}: "} if len(blocks) > 1 else {}
        decided = decided_notes(b.kink_codes, b.smooth, b.expected, b.bounds, b.autograd)
        notes += [Note(n.code, {**n.data, **prefix}) for n in decided]
        if b.check.excluded:
            data: dict[str, Any] = {
                "codes": sorted(b.kink_codes),
                "excluded": b.check.excluded,
                "values": list(b.check.excluded_values),
            }
            if len(blocks) > 1:
                data["prefix"] = f"{b.key}: "
            notes.append(Note("kink", data))
    return notes
