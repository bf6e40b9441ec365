"""Write the pictures of real output the README and the site show (docs/images/).

Usage: ``python scripts/make_pictures.py [FOLDER]``. Rich's own SVG export of two reports
(``grad`` and a notebook cell) and one matplotlib plot per kind (a derivative, a kink, a
second derivative). tests/test_plot.py runs it and checks the report captures are what is
committed.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CAPTURES = {
    "grad.svg": ("2*x**4+x**3+3*x**2+5*x+1", {"x": 2}),
    "cell.svg": ((ROOT / "docs" / "examples" / "gentle_introduction.py").read_text(), {}),
}
PLOTS = {
    "plot-derivative.svg": ("x*sin(x)", (-6.0, 6.0), 1),
    "plot-kink.svg": ("relu(x) - abs(x - 1)", (-2.0, 3.0), 1),
    "plot-order-2.svg": ("exp(-x**2)", (-3.0, 3.0), 2),
}


def captures(folder: Path) -> None:
    """The reports as Rich draws them in a terminal 100 columns wide."""
    import io

    from rich.console import Console

    import autogradcli as ag
    from autogradcli.messages import CLI
    from autogradcli.render import renderable

    for name, (text, values) in CAPTURES.items():
        console = Console(record=True, width=100, file=io.StringIO(), color_system="truecolor")
        console.print(renderable(ag.grad(text, values, device="cpu"), CLI))
        console.save_svg(str(folder / name), title="autograd-cli")


def plots(folder: Path) -> None:
    from autogradcli.render.plot import to_file
    from autogradcli.sample import sample

    for name, (text, span, order) in PLOTS.items():
        to_file(sample(text, span=span, order=order, device="cpu"), folder / name)


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "images"
    target.mkdir(parents=True, exist_ok=True)
    captures(target)
    plots(target)
