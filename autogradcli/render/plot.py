"""Draw a ``PlotResult``: in the terminal with plotext, to a PNG, SVG or PDF file with
matplotlib (the ``plot`` extra). f, autograd's derivative and SymPy's, with the points
where they disagree, the kinks and the undefined points marked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from autogradcli.errors import ValueSpecError
from autogradcli.messages import CLI, Style
from autogradcli.policy.verdict import Verdict
from autogradcli.results import PlotResult

FORMATS = (".png", ".svg", ".pdf")


def render(result: PlotResult, style: Style = CLI) -> Any:
    """The terminal picture and the verdict line, as a Rich renderable (``rich.print`` of
    a ``PlotResult``, a notebook's display, the ``plot`` command)."""
    from rich.console import Group
    from rich.text import Text

    from autogradcli.render.numbers import STYLES

    mark = Verdict(result.verdict).mark
    picture = Text.from_ansi(terminal(result), no_wrap=True, overflow="ignore")
    return Group(picture, Text(verdict_line(result), style=STYLES[mark]))


def verdict_line(result: PlotResult) -> str:
    """``✓ autograd and SymPy agree at the 200 points`` (and the kinks and undefined
    points counted)."""
    verdict = Verdict(result.verdict)
    n, wrong = result.x.size, int(result.disagree.sum())
    where = f"at {wrong} of {n} points" if wrong else f"at the {n} points"
    verb = {"agree": "agree", "rounding": "agree within rounding"}.get(verdict, "disagree")
    extra = f"; {int(result.kinks.sum())} at kinks" if result.kinks.any() else ""
    extra += f"; {int(result.undefined.sum())} undefined" if result.undefined.any() else ""
    return f"{verdict.mark} autograd and SymPy {verb} {where}{extra}"


def _label(result: PlotResult) -> str:
    prime = "'" * result.order if result.order <= 3 else f"^({result.order})"
    return f"f{prime}"


def terminal(result: PlotResult, width: int = 100, height: int = 24) -> str:
    """The plot as text (plotext), with a legend line."""
    import plotext as plt

    plt.clear_figure()
    plt.plotsize(width, height)
    x = result.x.tolist()
    plt.plot(x, _finite(result.f), label="f", marker="braille")
    plt.plot(x, _finite(result.expected), label=f"{_label(result)} SymPy", marker="braille")
    plt.plot(x, _finite(result.autograd), label=f"{_label(result)} autograd", marker="dot")
    for mask, label, marker in (
        (result.disagree, "disagree", "x"),
        (result.kinks, "kink", "o"),
    ):
        if mask.any():
            plt.scatter(
                result.x[mask].tolist(), result.autograd[mask].tolist(), label=label, marker=marker
            )
    plt.title(f"{result.expression}  over {result.wrt}")
    plt.theme("clear")
    return str(plt.build())


def _finite(values: np.ndarray) -> list[float]:
    """plotext draws no NaN: undefined points become gaps at the nearest finite value."""
    out = np.where(np.isfinite(values), values, np.nan)
    if np.isnan(out).all():
        return [0.0] * len(out)
    fill = np.nanmin(out)
    return np.where(np.isnan(out), fill, out).tolist()


def to_file(result: PlotResult, path: Path) -> None:
    """The plot in a PNG, SVG or PDF file (matplotlib)."""
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise ValueSpecError("plot_format", path=str(path))
    try:
        import matplotlib
    except ImportError:
        raise ValueSpecError("plot_extra", suffix=suffix) from None
    matplotlib.use("Agg")
    matplotlib.rcParams["svg.hashsalt"] = "autograd-cli"  # the same plot, the same bytes
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(figsize=(7, 4.2), dpi=120)
    axes.plot(result.x, result.f, label="f", color="0.55")
    axes.plot(result.x, result.expected, label=f"{_label(result)} (SymPy)", lw=2.5, color="C0")
    axes.plot(result.x, result.autograd, "--", label=f"{_label(result)} (autograd)", color="C1")
    if result.disagree.any():
        axes.plot(result.x[result.disagree], result.autograd[result.disagree], "x", color="C3",
                  label="disagree")  # fmt: skip
    if result.kinks.any():
        axes.plot(result.x[result.kinks], result.autograd[result.kinks], "o", mfc="none",
                  color="C2", label="kink (PyTorch's value)")  # fmt: skip
    edges = result.x[result.undefined]
    for edge in edges[:20]:
        axes.axvline(edge, color="0.85", lw=0.8)
    axes.set_xlabel(result.wrt)
    axes.set_title(f"{result.expression}   verdict: {result.verdict}")
    axes.grid(alpha=0.3)
    axes.legend(loc="best", fontsize="small")
    figure.tight_layout()
    try:
        figure.savefig(path, metadata=_metadata(suffix))
    except OSError as exc:
        raise ValueSpecError(
            "cannot_write", path=str(path), detail=str(exc.strerror or exc)
        ) from None
    finally:
        pyplot.close(figure)


def _metadata(suffix: str) -> dict[str, object] | None:
    """No dates in the files, so the same plot gives the same bytes."""
    if suffix == ".svg":
        return {"Date": None}
    if suffix == ".pdf":
        return {"CreationDate": None}
    return None
