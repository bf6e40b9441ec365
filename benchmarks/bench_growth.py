"""How the check's cost grows with the work (issue 29), in one warm process.

Rows: programs of named steps (``y1 = sin(x); y2 = y1*0.5 + sin(y1); ...``) of 10, 100 and
1,000 steps, the same with every step's constant different (no two steps alike, so no
derivative is shared between steps), and polynomials ``x**n + ... + x**2 + x + 1`` of 10,
100 and 1,000 terms. Each row is the median of ``--rounds`` calls of ``api.grad`` (float64,
SymPy's exact reference; ``sympy_seconds`` raised so that it never falls back) after one
warm-up call: wall-clock seconds, the process's CPU seconds (what other processes on the
machine do not change) and the load average after the row. Every timed call is a first
sight of its text in a warm process: SymPy's cache and the reference's kept patterns are
cleared before it. A polynomial's row also times SymPy's own differentiation of the same
terms (``sp.Add`` of the powers, then ``sp.diff``), its cache cleared the same way, and
prints the ratio of CPU seconds. Each group ends with the growth exponent fitted to its
rows (least squares of log time on log size; CPU seconds) and the target. ``--as-worker``
freezes the objects of the warm-up out of the cycle collector's sight (``gc.freeze()``)
before timing, as the warm worker does after its own warm-up. Run from the repository root:

    python benchmarks/bench_growth.py [--rounds 3] [--only programs|distinct|polynomials]
        [--as-worker]
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sympy.core.cache import clear_cache

from autogradcli import api
from autogradcli.reference.terms import forget_patterns

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


def timed(work: Callable[[], object], rounds: int) -> tuple[float, float]:
    """The median wall-clock and CPU seconds of ``rounds`` calls of ``work``, each after
    SymPy's cache and the reference's kept patterns are cleared (a first sight)."""
    walls, cpus = [], []
    for _ in range(rounds):
        clear_cache()
        forget_patterns()
        start, cpu = time.perf_counter(), time.process_time()
        work()
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus)


def load() -> str:
    """The load average of the last minute (other work on the machine's cores)."""
    return f"load {os.getloadavg()[0]:4.1f}"


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


def programs(rounds: int, distinct: bool, as_worker: bool) -> None:
    label = "distinct steps" if distinct else "steps"
    times = []
    for steps in SIZES:
        text = program(steps, distinct)
        check(text)  # warm-up
        settle(as_worker)
        wall, cpu = timed(lambda text=text: check(text), rounds)
        times.append(cpu)
        print(
            f"program of {steps:>5} {label:<15} {wall * 1000:8.0f} ms wall "
            f"{cpu * 1000:8.0f} ms CPU   {load()}"
        )
    slope = exponent(SIZES, times)
    print(
        f"  growth exponent {slope:.2f} (target <= 1.2); 1,000 steps in {times[-1]:.2f} s "
        "CPU (target < 1 s warm)"
    )


def polynomials(rounds: int, as_worker: bool) -> None:
    times = []
    for terms in SIZES:
        text = polynomial(terms)
        check(text)
        sympy_diff(terms)
        settle(as_worker)
        wall, cpu = timed(lambda text=text: check(text), rounds)
        _, own = timed(lambda terms=terms: sympy_diff(terms), rounds)
        times.append(cpu)
        print(
            f"polynomial of {terms:>5} terms {wall * 1000:8.0f} ms wall {cpu * 1000:8.0f} ms "
            f"CPU   SymPy's diff {own * 1000:8.0f} ms CPU   ratio {cpu / own:5.2f} "
            f"(target <= 2)   {load()}"
        )
    print(f"  growth exponent {exponent(SIZES, times):.2f}")


def settle(as_worker: bool) -> None:
    """As the warm worker after its warm-up: every object so far out of the cycle
    collector's sight (``--as-worker``); otherwise nothing (the Python API's process)."""
    if as_worker:
        gc.collect()
        gc.freeze()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", choices=("programs", "distinct", "polynomials"))
    parser.add_argument("--as-worker", action="store_true", help=settle.__doc__)
    args = parser.parse_args()
    frozen = ", the warm-up frozen out of the collector's sight (as the worker)"
    print(
        f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.1f}{frozen if args.as_worker else ''}"
    )
    if args.only in (None, "programs"):
        programs(args.rounds, False, args.as_worker)
    if args.only in (None, "distinct"):
        programs(args.rounds, True, args.as_worker)
    if args.only in (None, "polynomials"):
        polynomials(args.rounds, args.as_worker)


if __name__ == "__main__":
    main()
