"""Time the symbolic check against the autograd run it checks, side by side.

For growing inputs it times (a) the PyTorch forward + backward alone and (b) the whole
``autogradcli.grad`` (parse, autograd, SymPy derivative evaluated over the tensor,
comparison), and prints their ratio: how much the SymPy check costs on top of autograd.

    python benchmarks/bench_vectorised.py [--sizes 1000 100000 10000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import functools
import time
from collections.abc import Callable

import torch

import autogradcli as ag

EXPRESSIONS = {
    "polynomial": (
        "sum(2*x**4 + x**3 + 3*x**2 + 5*x + 1)",
        lambda x: torch.sum(2 * x**4 + x**3 + 3 * x**2 + 5 * x + 1),
    ),
    "reduction inside": ("sum((x - mean(x))**2)", lambda x: torch.sum((x - torch.mean(x)) ** 2)),
    "functions": (
        "mean(sin(x)*exp(-x) + sigmoid(x))",
        lambda x: torch.mean(torch.sin(x) * torch.exp(-x) + torch.sigmoid(x)),
    ),
}


def best_of(repeat: int, work: Callable[[], None]) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times)


def run_autograd(line: Callable[[torch.Tensor], torch.Tensor], size: int) -> None:
    x = torch.linspace(-1, 1, size, requires_grad=True)
    line(x).backward()


def run_tool(text: str, size: int) -> None:
    result = ag.grad(text, {"x": f"linspace(-1, 1, {size})"}, device="cpu")
    assert result.agree, text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 100_000, 10_000_000])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, float32, CPU")
    print(f"{'expression':<18}{'elements':>12}{'autograd s':>13}{'autograd-cli s':>16}{'ratio':>8}")
    for label, (text, line) in EXPRESSIONS.items():
        for size in args.sizes:
            base = best_of(args.repeat, functools.partial(run_autograd, line, size))
            full = best_of(args.repeat, functools.partial(run_tool, text, size))
            print(f"{label:<18}{size:>12}{base:>13.4f}{full:>16.4f}{full / base:>8.1f}")


if __name__ == "__main__":
    main()
