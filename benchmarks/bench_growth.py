"""How the check's cost grows with the work (issue 29), in one warm process.

Rows: programs of named steps (``y1 = sin(x); y2 = y1*0.5 + sin(y1); ...``) of 10, 100 and
1,000 steps, the same with every step's constant different (no two steps alike, so no
derivative is shared between steps), and polynomials ``x**n + ... + x**2 + x + 1`` of 10,
100 and 1,000 terms. Each row is the median of ``--rounds`` calls of ``api.grad`` (float64,
SymPy's exact reference; ``sympy_seconds`` raised so that it never falls back) after one
warm-up call. A polynomial's row also times SymPy's own differentiation of the same terms
(``sp.Add`` of the powers, then ``sp.diff``) and prints the ratio. Each group ends with the
growth exponent fitted to its rows (least squares of log time on log size) and the target.
Run from the repository root:

    python benchmarks/bench_growth.py [--rounds 3] [--only programs|distinct|polynomials]
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autogradcli import api

SIZES = (10, 100, 1000)
X = 0.3


def program(steps: int, distinct: bool = False) -> str:
    """``y1 = sin(x); y2 = y1*0.5 + sin(y1); ...`` (``distinct``: each step's factor its own)."""
    lines = ["y1 = sin(x)"]
    for i in range(2, steps + 1):
        factor = f"{0.5 + i / 10_000:.4f}" if distinct else "0.5"
        lines.append(f"y{i} = y{i - 1}*{factor} + sin(y{i - 1})")
    return "\n".join(lines)


def polynomial(terms: int) -> str:
    """``x**n + ... + x**2 + x + 1`` with ``terms`` terms after the first power."""
    return " + ".join(f"x**{e}" for e in range(terms, 1, -1)) + " + x + 1"


def sympy_diff(terms: int) -> None:
    """SymPy's own work on the same polynomial: build it from its terms, differentiate."""
    import sympy as sp

    x = sp.Symbol("x", real=True)
    sp.diff(sp.Add(*(x**e for e in range(terms, 1, -1)), x, sp.Integer(1)), x)


def timed(work: Callable[[], object], rounds: int) -> float:
    """The median seconds of ``rounds`` calls of ``work``."""
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def check(text: str) -> None:
    """One checked call, as a user makes it; it must agree by SymPy's exact reference."""
    result = api.grad(text, x=X, dtype="float64", max_length=len(text), sympy_seconds=3600)
    if result.verdict != "agree" or result.expected_by != "SymPy":
        raise SystemExit(f"not checked exactly: {result.verdict}, {result.expected_by}")


def exponent(sizes: tuple[int, ...], times: list[float]) -> float:
    """The slope of log(time) on log(size), least squares."""
    xs, ys = [math.log(s) for s in sizes], [math.log(t) for t in times]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((a - mx) * (b - my) for a, b in zip(xs, ys, strict=True)) / sum(
        (a - mx) ** 2 for a in xs
    )


def programs(rounds: int, distinct: bool) -> None:
    label = "distinct steps" if distinct else "steps"
    times = []
    for steps in SIZES:
        text = program(steps, distinct)
        check(text)  # warm-up (and SymPy's caches of the first run)
        seconds = timed(lambda text=text: check(text), rounds)
        times.append(seconds)
        print(f"program of {steps:>5} {label:<15} {seconds * 1000:10.0f} ms")
    slope = exponent(SIZES, times)
    print(
        f"  growth exponent {slope:.2f} (target <= 1.2); 1,000 steps in {times[-1]:.2f} s "
        "(target < 1 s warm)"
    )


def polynomials(rounds: int) -> None:
    times = []
    for terms in SIZES:
        text = polynomial(terms)
        check(text)
        seconds = timed(lambda text=text: check(text), rounds)
        own = timed(lambda terms=terms: sympy_diff(terms), rounds)
        times.append(seconds)
        print(
            f"polynomial of {terms:>5} terms   {seconds * 1000:10.0f} ms   SymPy's diff "
            f"{own * 1000:8.0f} ms   ratio {seconds / own:5.2f} (target <= 2)"
        )
    print(f"  growth exponent {exponent(SIZES, times):.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", choices=("programs", "distinct", "polynomials"))
    args = parser.parse_args()
    print(
        f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    if args.only in (None, "programs"):
        programs(args.rounds, distinct=False)
    if args.only in (None, "distinct"):
        programs(args.rounds, distinct=True)
    if args.only in (None, "polynomials"):
        polynomials(args.rounds)


if __name__ == "__main__":
    main()
