#!/usr/bin/env python3
"""Large tensors checked against the hand-written script: the rows of issue 27 §2.

Each row runs ``autograd-cli grad`` and its hand-written baseline (the same forward and
backward pass and a closed-form check in float64, in ``baseline_*.py``) in fresh
processes, interleaved, for several rounds, and prints the median and min-max wall time
of each side, the ratio of the medians (wall, CPU time, peak resident memory), the target
and the load average at the row's end. Run from the repository root:

    python benchmarks/bench_large.py [--rounds 5] [--device cpu|cuda] [--sizes 1e6 1e7]
        [--only mean32|mean64|long|tutorial] [--before DIR]

The ``tutorial`` row is the verbatim "Learning PyTorch with Examples" training cell
(``docs/examples/tutorial_tensors_autograd.py``, 2,000 ``backward()`` calls) checked by
``autograd-cli grad @FILE --seed 0`` against ``python FILE``; it takes about a minute a
run, so ``--rounds`` applies to it as to the others (its sizes do not). The tool exits 1
on it: the last pass's float32 gradients of ``c`` and ``d`` are judged ✗ (a sum of 2,000
terms that cancel, docs/pytorch.md), and the row takes that exit code as its own.

``--before DIR`` adds a third side, interleaved with the other two: the tool as another
checkout at DIR has it (``python -m autogradcli`` run from DIR), for a before/after figure
on the same machine at the same time. The tool runs as its own process
(``AUTOGRAD_CLI_NO_WORKER=1``). On a loaded machine the ratios, not the times, are what
count.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
ENV |= {"COLUMNS": "100", "AUTOGRAD_CLI_NO_WORKER": "1"}
TARGET = "<= 1.3x wall"


@dataclass(frozen=True)
class Run:
    """One fresh process: wall seconds, CPU seconds (user + system), peak memory (MB)."""

    wall: float
    cpu: float
    memory: float


@dataclass(frozen=True)
class Row:
    """A large-tensor question, its files and the script a user would write instead."""

    key: str
    expression: str
    dtype: str
    inputs: tuple[str, ...]
    baseline: str
    extra: tuple[str, ...] = ()


ROWS = [
    Row("mean32", "mean(3*(x+2)**2)", "float32", ("x",), "baseline_large.py"),
    Row("mean64", "mean(3*(x+2)**2)", "float64", ("x",), "baseline_float64.py"),
    Row(
        "long",
        "sum(w*(tanh(x)*sigmoid(x) + log1p(x**2)))",
        "float32",
        ("x", "w"),
        "baseline_long.py",
        ("--memory", "8G"),  # two inputs of 10^7: past the default budget of 4 GiB
    ),
]


@dataclass(frozen=True)
class Script:
    """A Python program the tool checks (``grad @FILE``) against running it in Python."""

    key: str
    path: str  # from the repository root
    extra: tuple[str, ...] = ()
    codes: tuple[int, ...] = (0,)  # the tool's expected exit codes


SCRIPTS = [
    Script("tutorial", "docs/examples/tutorial_tensors_autograd.py", ("--seed", "0"), (1,)),
]


def run(command: list[str], cwd: Path | None = None, codes: tuple[int, ...] = (0,)) -> Run:
    """Time one fresh process; it must exit with one of ``codes`` (0: the check agrees)."""
    start = time.perf_counter()
    process = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=ENV,
        cwd=cwd,
    )
    assert process.stderr is not None
    errors = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code not in codes:
        raise SystemExit(f"{' '.join(command)} exited {code}: {errors.decode()[-500:]}")
    return Run(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024)


def summary(runs: list[Run]) -> str:
    walls = [r.wall for r in runs]
    return f"{statistics.median(walls):.2f} s ({min(walls):.2f}-{max(walls):.2f})"


def median(runs: list[Run], field: str) -> float:
    return statistics.median(getattr(r, field) for r in runs)


def ratios(ours: list[Run], theirs: list[Run]) -> str:
    wall, cpu, memory = (median(ours, f) / median(theirs, f) for f in ("wall", "cpu", "memory"))
    return f"{wall:.2f}x wall, {cpu:.2f}x CPU, {memory:.2f}x memory"


def files(row: Row, size: int, folder: Path) -> list[Path]:
    """The row's input files (uniform in [0, 1), seeded), made once per size."""
    paths = []
    for seed, name in enumerate(row.inputs):
        path = folder / f"{name}-{row.dtype}-{size}.npy"
        if not path.exists():
            values = np.random.default_rng(seed).random(size).astype(row.dtype)
            np.save(path, values)
        paths.append(path)
    return paths


def measure(
    row: Row, size: int, rounds: int, device: str, folder: Path, before: Path | None
) -> dict[str, list[Run]]:
    """The row's sides, interleaved: ours, the baseline, and the checkout ``before``."""
    paths = files(row, size, folder)
    given = [a for name, p in zip(row.inputs, paths, strict=True) for a in (f"--{name}", f"@{p}")]
    tool = ["-m", "autogradcli", "grad", row.expression, *given]
    tool += ["--dtype", row.dtype, "--device", device, *row.extra]
    hand = [PYTHON, str(ROOT / "benchmarks" / row.baseline), *map(str, paths), device]
    sides = {"ours": lambda: run([PYTHON, *tool], cwd=ROOT), "hand": lambda: run(hand)}
    if before is not None:
        sides["before"] = lambda: run([PYTHON, *tool], cwd=before)
    return interleave(sides, rounds)


def measure_script(
    script: Script, rounds: int, device: str, before: Path | None
) -> dict[str, list[Run]]:
    """The script's sides, interleaved: the tool checking it, Python running it as it is,
    and the checkout ``before``."""
    path = ROOT / script.path
    tool = ["-m", "autogradcli", "grad", f"@{path}", "--device", device, *script.extra]
    sides = {
        "ours": lambda: run([PYTHON, *tool], cwd=ROOT, codes=script.codes),
        "hand": lambda: run([PYTHON, str(path)]),
    }
    if before is not None:
        sides["before"] = lambda: run([PYTHON, *tool], cwd=before, codes=script.codes)
    return interleave(sides, rounds)


def interleave(sides: dict[str, Callable[[], Run]], rounds: int) -> dict[str, list[Run]]:
    """Each side once to warm up, then ``rounds`` rounds of each side in turn."""
    for side in sides.values():  # one warm-up each (the OS file cache, the bytecode cache)
        side()
    found: dict[str, list[Run]] = {name: [] for name in sides}
    for _ in range(rounds):
        for name, side in sides.items():
            found[name].append(side())
    return found


def line(what: str, found: dict[str, list[Run]], target: str) -> str:
    """One table row: the sides' times and memory, the ratios, the target, the load."""
    ours, hand = found["ours"], found["hand"]
    cells = [
        what,
        f"{summary(ours)}, {median(ours, 'memory'):.0f} MB",
        f"{summary(hand)}, {median(hand, 'memory'):.0f} MB",
        ratios(ours, hand),
    ]
    if "before" in found:
        old = found["before"]
        cells.append(f"{summary(old)}: {ratios(old, hand)}")
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    return "| " + " | ".join([*cells, target, load]) + " |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--sizes", type=float, nargs="+", default=[1e6, 1e7])
    parser.add_argument("--only", choices=[r.key for r in [*ROWS, *SCRIPTS]])
    parser.add_argument("--before", type=Path, help="another checkout, as a third side")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="autograd-cli-large-"))
    header = ["what", "autograd-cli (median, min-max)", "hand-written", "ratio"]
    header += ["before (ratio)"] if args.before else []
    print("| " + " | ".join([*header, "target", "load"]) + " |")
    print("|" + " --- |" * (len(header) + 2))
    try:
        for row in ROWS:
            if args.only not in (None, row.key):
                continue
            for size in (int(s) for s in args.sizes):
                found = measure(row, size, args.rounds, args.device, folder, args.before)
                what = (
                    f'`grad "{row.expression}"`, {size:.0e} {row.dtype}, {args.device} '
                    f"(`{row.baseline}`)"
                )
                print(line(what, found, TARGET), flush=True)
        for script in SCRIPTS:
            if args.only not in (None, script.key):
                continue
            found = measure_script(script, args.rounds, args.device, args.before)
            what = f"`grad @{script.path} {' '.join(script.extra)}`, {args.device} (`python FILE`)"
            print(line(what, found, "none set (issue 27 asks for the row)"), flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(
        f"\n{args.rounds} rounds, sides interleaved; python {sys.version.split()[0]}; "
        f"{platform.platform()}, {os.cpu_count()} cores"
    )


if __name__ == "__main__":
    main()
