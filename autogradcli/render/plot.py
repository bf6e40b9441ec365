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
    verdict = Text(verdict_line(result), style=STYLES[mark])
    left_out = left_out_line(result)
    return Group(picture, Text(left_out), verdict) if left_out else Group(picture, verdict)


def left_out_line(result: PlotResult) -> str:
    """``note: 23 of 200 points are not drawn ...`` where f or a derivative is not finite
    (an overflow, a point outside the domain); empty when every point is drawn."""
    count = int(result.not_finite.sum())
    if not count:
        return ""
    return (
        f"note: {count} of {result.x.size} points are not drawn: f or a derivative is not "
        "finite there (an overflow, or outside the domain)"
    )


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
    """The plot as text (plotext), with a legend line. Each curve is drawn at its finite
    points only: plotext fails on NaN and infinity (``left_out_line`` says how many).

    No larger than the terminal of this call (``shutil.get_terminal_size``: ``COLUMNS``,
    ``LINES``, standard output's terminal), less a line for the prompt. The size is set
    here, not by plotext's own limit: that one takes a second line off when the builtin
    ``__IPYTHON__`` exists, which any IPython shell that ever ran in the process leaves
    behind, so a process that had run one drew a shorter picture than a fresh process or
    the warm worker."""
    import shutil

    import plotext as plt

    columns, lines = shutil.get_terminal_size()
    plt.clear_figure()  # a new master figure: settings of an earlier plot do not carry
    plt.limit_size(False, False)
    plt.plotsize(max(1, min(width, columns)), max(1, min(height, lines - 1)))
    label = _label(result)
    for values, name, marker in (
        (result.f, "f", "braille"),
        (result.expected, f"{label} SymPy", "braille"),
        (result.autograd, f"{label} autograd", "dot"),
    ):
        keep = np.isfinite(values)
        if keep.any():
            plt.plot(result.x[keep].tolist(), values[keep].tolist(), label=name, marker=marker)
    for mask, name, marker in (
        (result.disagree, "disagree", "x"),
        (result.kinks, "kink", "o"),
    ):
        keep = mask & np.isfinite(result.autograd)
        if keep.any():
            plt.scatter(
                result.x[keep].tolist(), result.autograd[keep].tolist(), label=name, marker=marker
            )
    plt.title(f"{result.expression}  over {result.wrt}")
    plt.theme("clear")
    return str(plt.build())


def to_file(result: PlotResult, path: Path) -> None:
    """The plot in a PNG, SVG or PDF file (matplotlib)."""
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise ValueSpecError("plot_format", path=str(path))
    try:
        import matplotlib
        from matplotlib.figure import Figure
    except ImportError:
        raise ValueSpecError("plot_extra", suffix=suffix) from None
    # A Figure of its own, not pyplot's: no backend chosen for the process, no figure left
    # in pyplot's list, and the rcParams changed only inside this call (a notebook's or a
    # caller's settings stay as they were).
    with matplotlib.rc_context({"svg.hashsalt": "autograd-cli"}):  # same plot, same bytes
        figure = Figure(figsize=(7, 4.2), dpi=120)
        _draw(result, figure.subplots())
        figure.tight_layout()
        try:
            figure.savefig(path, metadata=_metadata(suffix))
        except OSError as exc:
            raise ValueSpecError(
                "cannot_write", path=str(path), detail=str(exc.strerror or exc)
            ) from None


def _draw(result: PlotResult, axes: Any) -> None:
    """f, the two derivatives, the points that disagree, the kinks and the undefined
    points on matplotlib's ``axes``."""
    f, expected, autograd = (_gaps(v) for v in (result.f, result.expected, result.autograd))
    axes.plot(result.x, f, label="f", color="0.55")
    axes.plot(result.x, expected, label=f"{_label(result)} (SymPy)", lw=2.5, color="C0")
    axes.plot(result.x, autograd, "--", label=f"{_label(result)} (autograd)", color="C1")
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


def _gaps(values: np.ndarray) -> np.ndarray:
    """Infinities as NaN, which matplotlib leaves as gaps in a line."""
    return np.where(np.isfinite(values), values, np.nan)


def _metadata(suffix: str) -> dict[str, object] | None:
    """No dates in the files, so the same plot gives the same bytes."""
    if suffix == ".svg":
        return {"Date": None}
    if suffix == ".pdf":
        return {"CreationDate": None}
    return None
