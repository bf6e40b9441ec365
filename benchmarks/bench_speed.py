"""The speed table of the README, measured side by side in one invocation.

Each row runs both sides in fresh processes, interleaved, for several rounds, and prints the
median and the min-max of each side, the ratio of the medians (and, for the large tensor,
of the peak resident memory) and its target. Run from the repository root:

    python benchmarks/bench_speed.py [--rounds 5] [--device cpu|cuda] [--size 10000000]
        [--only grad|warm|help|large|check|shell] [--baseline PATH]

The warm worker (docs/worker.md) runs in a temporary ``XDG_RUNTIME_DIR``, never the
user's: the ``grad`` row measures a first call (no worker yet; the worker it starts is
stopped before the next round), the ``warm`` row a later call answered by the worker; the
other rows run with ``AUTOGRAD_CLI_NO_WORKER=1``, as the tool's own process.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / "benchmarks" / "baseline_large.py"
PYTHON = sys.executable
TOOL = [PYTHON, "-m", "autogradcli"]


# As on a user's machine: Python caches the compiled modules (this sandbox sets
# PYTHONDONTWRITEBYTECODE, which would compile autogradcli's sources in every process).
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"} | {"COLUMNS": "100"}
RUNTIME = tempfile.mkdtemp(prefix="agb", dir="/tmp")  # the worker's directory, this run's own
WORKER = ENV | {"XDG_RUNTIME_DIR": RUNTIME}
WORKER.pop("AUTOGRAD_CLI_NO_WORKER", None)
ENV = ENV | {"XDG_RUNTIME_DIR": RUNTIME, "AUTOGRAD_CLI_NO_WORKER": "1"}
README = ["grad", "2*x**4+x**3+3*x**2+5*x+1", "--x", "2"]


def run(
    command: list[str], stdin: str | None = None, env: dict[str, str] | None = None
) -> tuple[float, float]:
    """Wall seconds and peak resident memory (MB) of one fresh process."""
    start = time.perf_counter()
    process = subprocess.Popen(
        command,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=ENV if env is None else env,
    )
    if stdin is not None:
        assert process.stdin is not None
        process.stdin.write(stdin.encode())
        process.stdin.close()
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        raise SystemExit(f"{' '.join(command)} exited {code}")
    return wall, usage.ru_maxrss / 1024


def side_by_side(
    rounds: int, ours: Callable[[], tuple[float, float]], theirs: Callable[[], tuple[float, float]]
) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    ours(), theirs()  # one warm-up each (the OS file cache, Python's bytecode cache)
    a, b = [], []
    for _ in range(rounds):
        a.append(ours())
        b.append(theirs())
    return a, b


def summary(runs: list[tuple[float, float]]) -> str:
    walls = [w for w, _ in runs]
    return f"{statistics.median(walls):.3f} s ({min(walls):.3f}-{max(walls):.3f})"


def median(runs: list[tuple[float, float]], k: int = 0) -> float:
    return statistics.median(r[k] for r in runs)


def worker(action: str) -> str:
    """``autograd-cli worker ACTION`` in the benchmark's runtime directory."""
    done = subprocess.run([*TOOL, "worker", action], capture_output=True, text=True, env=WORKER)
    return done.stdout


def answered() -> int:
    """How many questions the benchmark's worker has answered (``worker status``)."""
    for line in worker("status").splitlines():
        if line.startswith("questions answered: "):
            return int(line.split()[2])
    raise SystemExit("the worker is not running")


def worker_ready(seconds: float = 300) -> None:
    """Wait until the worker answers."""
    end = time.monotonic() + seconds
    while not worker("status").startswith("worker: running"):
        if time.monotonic() > end:
            raise SystemExit("the worker did not start")
        time.sleep(0.2)


def first_call(command: list[str]) -> tuple[float, float]:
    """A call with no worker running (it starts one: waited for and stopped, so that it
    takes no core from the next measurement)."""
    took = run(command, env=WORKER)
    worker_ready()
    worker("stop")
    return took


def row_grad(rounds: int, device: str) -> list[str]:
    readme = [*TOOL, *README, "--device", device]
    ours, theirs = side_by_side(
        rounds, lambda: first_call(readme), lambda: run([PYTHON, "-c", "import torch, sympy"])
    )
    ratio = median(ours) / median(theirs)
    return [
        "first `grad` call, the README example (no worker yet)",
        '`python -c "import torch, sympy"`',
        summary(ours),
        summary(theirs),
        f"{ratio:.2f}x",
        "<= 1.10x",
    ]


def row_warm(rounds: int, device: str) -> list[str]:
    readme = [*TOOL, *README, "--device", device]
    run(readme, env=WORKER)  # the first call: it starts the worker
    worker_ready()
    before = answered()
    ours, theirs = side_by_side(rounds, lambda: run(readme, env=WORKER), lambda: run(readme))
    if answered() != before + rounds + 1:  # a stale worker: the calls ran in-process
        raise SystemExit("the warm row's calls were not all answered by the worker")
    worker("stop")
    return [
        "a later `grad` call, the README example, answered by the warm worker",
        "the same call in its own process (AUTOGRAD_CLI_NO_WORKER=1)",
        summary(ours),
        summary(theirs),
        f"{median(ours) / median(theirs):.2f}x",
        "median <= 0.2 s",
    ]


def row_help_client(rounds: int, device: str) -> list[str]:
    app_alone = [PYTHON, "-c", "from autogradcli.cli.app import main; main()", "--help"]
    ours, theirs = side_by_side(
        rounds, lambda: run([*TOOL, "--help"], env=WORKER), lambda: run(app_alone)
    )
    return [
        "`autograd-cli --help` through the client",
        "the app alone, without the client",
        summary(ours),
        summary(theirs),
        f"{median(ours) / median(theirs):.2f}x",
        "<= 1.05x (unchanged or faster)",
    ]


def row_help(rounds: int, device: str) -> list[str]:
    ours, theirs = side_by_side(
        rounds, lambda: run([*TOOL, "--help"]), lambda: run([PYTHON, "-c", "import typer"])
    )
    return [
        "`autograd-cli --help`",
        '`python -c "import typer"`',
        summary(ours),
        summary(theirs),
        f"{median(ours) / median(theirs):.2f}x",
        "<= 2.5x",
    ]


def row_large(rounds: int, device: str, size: int, baseline: Path, folder: Path) -> list[str]:
    import numpy as np

    data = folder / "X.npy"
    np.save(data, np.random.default_rng(0).random(size).astype("float32"))
    tool = [*TOOL, "grad", "mean(3*(x+2)**2)", "--x", f"@{data}", "--device", device]
    hand = [PYTHON, str(baseline), str(data), device]
    ours, theirs = side_by_side(rounds, lambda: run(tool), lambda: run(hand))
    wall = median(ours) / median(theirs)
    memory = median(ours, 1) / median(theirs, 1)
    return [
        f'`grad "mean(3*(x+2)**2)" --x @X.npy`, {size:.0e} float32, {device}',
        "the hand-written script (baseline_large.py)",
        f"{summary(ours)}, {median(ours, 1):.0f} MB",
        f"{summary(theirs)}, {median(theirs, 1):.0f} MB",
        f"{wall:.2f}x wall, {memory:.2f}x memory",
        "<= 1.3x wall, <= 1.5x memory",
    ]


CASES = [
    'grad "{a}*x**3 + {b}*x" --x {v}',
    'grad "sin({a}*x)*exp(x)" --x {v}',
    'grad "sum(x**2 + {a}*x)" --x "[{v}, 1., 2.]"',
    'grad "mean(exp({a}*x))" --x "[{v}, 0.5]"',
    'grad "log(1 + x**2)*{b}" --x {v}',
]


def cases_file(folder: Path, n: int) -> Path:
    import random

    pick = random.Random(0)
    lines = [
        pick.choice(CASES).format(
            a=pick.randint(1, 5), b=pick.randint(1, 5), v=round(pick.uniform(-2, 2), 3)
        )
        for _ in range(n)
    ]
    path = folder / f"cases{n}.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


def row_check(rounds: int, device: str, folder: Path, jobs: int) -> list[str]:
    many, one = cases_file(folder, 1000), cases_file(folder, 1)
    runs = []
    for _ in range(rounds):
        full, _ = run([*TOOL, "check", str(many), "--json", "--jobs", str(jobs)])
        start, _ = run([*TOOL, "check", str(one), "--json"])
        runs.append(999 / max(full - start, 1e-9))
    rate = statistics.median(runs)
    return [
        f"`check` on 1,000 small mixed cases, --jobs {jobs}",
        "`check` on one case (the start-up)",
        f"{rate:.0f} cases/s ({min(runs):.0f}-{max(runs):.0f})",
        "-",
        "-",
        ">= 200 cases/s",
    ]


def row_shell(rounds: int, device: str) -> list[str]:
    line = 'grad "2*x**4+x**3+3*x**2+5*x+1" --x 2\n'
    runs = []
    for _ in range(rounds):
        many, _ = run([*TOOL, "shell"], stdin=line * 51)
        one, _ = run([*TOOL, "shell"], stdin=line)
        runs.append((many - one) / 50 * 1000)
    return [
        "one shell line, scalar polynomial (piped)",
        "-",
        f"{statistics.median(runs):.1f} ms ({min(runs):.1f}-{max(runs):.1f})",
        "-",
        "-",
        "median <= 50 ms",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--size", type=int, default=10**7)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--only", choices=["grad", "warm", "help", "large", "check", "shell"])
    parser.add_argument("--baseline", type=Path, default=BASELINE)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="autograd-cli-bench-"))
    rows = {
        "grad": lambda: row_grad(args.rounds, args.device),
        "warm": lambda: row_warm(args.rounds, args.device),
        "help": lambda: row_help(args.rounds, args.device),
        "help-client": lambda: row_help_client(args.rounds, args.device),
        "large": lambda: row_large(args.rounds, args.device, args.size, args.baseline, folder),
        "check": lambda: row_check(args.rounds, args.device, folder, args.jobs),
        "shell": lambda: row_shell(args.rounds, args.device),
    }
    header = ["what", "compared with", "autograd-cli (median, min-max)", "baseline", "ratio"]
    print("| " + " | ".join([*header, "target"]) + " |")
    print("|" + " --- |" * (len(header) + 1))
    try:
        for name, make in rows.items():
            if args.only in (None, name.partition("-")[0]):
                print("| " + " | ".join(make()) + " |", flush=True)
    finally:
        worker("stop")
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(RUNTIME, ignore_errors=True)
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"\n{args.rounds} rounds, sides interleaved; python {sys.version.split()[0]}; "
        f"{platform.platform()}, {os.cpu_count()} cores, load average at the end {load}"
    )


if __name__ == "__main__":
    main()
