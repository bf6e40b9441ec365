"""`plot`: sampled data against closed forms, kinks and undefined points marked, files of
each format, the terminal picture, and the pictures the docs show."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import numpy as np
import pytest

from autogradcli.sample import parse_range, sample
from tests.conftest import cli
from tests.schemas import validate

ROOT = Path(__file__).resolve().parent.parent


def test_first_derivative_against_the_closed_form():
    r = sample("x*sin(x)", span=(-3, 3), points=61, dtype="float64")
    x = np.linspace(-3, 3, 61)
    np.testing.assert_allclose(r.x, x)
    np.testing.assert_allclose(r.f, x * np.sin(x), rtol=1e-12)
    np.testing.assert_allclose(r.autograd, np.sin(x) + x * np.cos(x), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(r.expected, np.sin(x) + x * np.cos(x), rtol=1e-10, atol=1e-12)
    assert r.verdict == "agree" and not r.disagree.any() and not r.kinks.any()


def test_second_derivative_and_fixed_variables():
    r = sample("exp(-a*x**2)", {"a": 0.5}, wrt="x", span=(-2, 2), points=41, order=2)
    x = np.linspace(-2, 2, 41)
    closed = (x**2 - 1) * np.exp(-0.5 * x**2)
    np.testing.assert_allclose(r.expected, closed, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(r.autograd, closed, rtol=1e-5, atol=1e-6)
    assert r.order == 2 and r.fixed == {"a": "0.5"} and r.verdict == "agree"


def test_kinks_and_undefined_points_are_marked():
    kink = sample("relu(x)", span=(-1, 1), points=21)
    assert kink.verdict == "agree"
    assert kink.x[kink.kinks].tolist() == [0.0]
    edge = sample("sqrt(x)", span=(-1, 1), points=21)
    assert edge.undefined[edge.x < 0].all() and not edge.undefined[edge.x > 0].any()


@pytest.mark.parametrize(
    ("expression", "span", "kinks", "size"),
    [
        ("relu(x) - abs(x - 1)", (-2, 3), [0.0, 1.0], 202),  # the docs' picture, 200 points
        ("abs(sin(x))", (-4, 4), [-np.pi, 0.0, np.pi], 203),  # transcendental switches
        ("clamp(x, -1, 1)", (-3, 3), [-1.0, 1.0], 202),
        ("where(x > 1, x, 2*x)", (-3, 3), [1.0], 201),
        ("x**2", (-3, 3), [], 200),
    ],
)
def test_every_kink_of_the_range_is_sampled_and_circled(expression, span, kinks, size):
    r = sample(expression, span=span)
    assert r.x.size == size and r.verdict == "agree"
    assert r.x[r.kinks].tolist() == pytest.approx(kinks, abs=1e-12)


def test_a_switch_without_a_kink_is_sampled_and_checked():
    r = sample("relu(x) - relu(-x)", span=(-2, 3))  # the function is x: no kink at 0
    assert r.x.size == 201 and not r.kinks.any()
    assert r.verdict == "disagree" and r.x[r.disagree].tolist() == [0.0]
    run = cli("plot", "relu(x) - relu(-x)", "--x", "-2:3", "--json")
    assert run.exit_code == 1 and run.json()["disagree"].count(True) == 1


def test_kinks_at_a_fixed_value_of_another_variable():
    r = sample("abs(x - a)", {"a": 0.5}, span=(-1, 1), points=5)
    assert r.x.tolist() == [-1.0, -0.5, 0.0, 0.5, 1.0] and r.x[r.kinks].tolist() == [0.5]
    shifted = sample("abs(x - a)", {"a": 0.3}, span=(-1, 1), points=5)
    assert shifted.x.size == 6 and shifted.x[shifted.kinks].tolist() == [0.3]


def test_a_wrong_derivative_marks_the_points(wrong_sin):
    r = sample("sin(x)", span=(0.5, 1.5), points=11)
    assert r.verdict == "disagree" and r.disagree.all()
    run = cli("plot", "sin(x)", "--x", "0.5:1.5", "--points", "11")
    assert run.exit_code == 1
    assert run.stdout.rstrip().endswith("✗ autograd and SymPy disagree at 11 of 11 points")


def test_terminal_plot_and_json():
    run = cli("plot", "x**2", "--x", "-2:2", "--points", "21")
    assert run.exit_code == 0
    assert "f' SymPy" in run.stdout and "f' autograd" in run.stdout
    assert run.stdout.rstrip().endswith("✓ autograd and SymPy agree at the 21 points")
    document = cli("plot", "x**2", "--x", "-2:2", "--points", "5", "--json").json()
    validate(document)
    assert document["autograd"] == [-4.0, -2.0, 0.0, 2.0, 4.0]


@pytest.mark.parametrize(
    ("suffix", "magic"), [(".png", b"\x89PNG"), (".svg", b"<?xml"), (".pdf", b"%PDF")]
)
def test_files_of_each_format(tmp_path, suffix, magic):
    path = tmp_path / f"plot{suffix}"
    run = cli("plot", "x*abs(x)", "--x", "-1:1", "--output", str(path))
    assert run.exit_code == 0 and run.stdout.startswith(f"wrote {path}")
    assert path.read_bytes().startswith(magic)


def test_missing_matplotlib_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    run = cli("plot", "x", "--x", "0:1", "--output", str(tmp_path / "p.png"))
    assert run.exit_code == 2
    assert run.stderr == (
        'Error: writing a .png file needs matplotlib: pip install "autograd-cli[plot]" (or '
        "leave out --output to plot in the terminal)\n"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["x", "--x", "3:1"],
         "Error: '3:1' is not a range; write LOW:HIGH with LOW < HIGH, e.g. -3:3\n"),
        (["sum(x)", "--x", "0:1"], "Error: the output does not have one value per point of x: plot "
         "needs an elementwise expression of x (no sum, mean or matrix product over it)\n"),
        (["x*y", "--x", "0:1"], "Error: variable 'y' needs a value, e.g. --y 2 (or --var y=2)\n"),
        (["x", "--x", "0:1", "--output", "p.gif"],
         "Error: 'p.gif': write the plot to a .png, .svg or .pdf file\n"),
    ],
)  # fmt: skip
def test_bad_plots_are_one_line(args, message):
    run = cli("plot", *args)
    assert run.exit_code == 2 and run.stderr == message


def test_parse_range():
    assert parse_range("-3:3") == (-3.0, 3.0)


def test_the_pictures_the_docs_show_are_what_the_script_draws(tmp_path):
    """The script's two steps in this process (its ``__main__`` block calls them on its
    folder; a new process would import torch again for them)."""
    script = runpy.run_path(str(ROOT / "scripts" / "make_pictures.py"), run_name="pictures")
    script["captures"](tmp_path)
    script["plots"](tmp_path)
    for name in (
        "grad.svg",
        "cell.svg",
        "plot-derivative.svg",
        "plot-kink.svg",
        "plot-order-2.svg",
    ):
        assert (tmp_path / name).read_bytes() == (ROOT / "docs" / "images" / name).read_bytes(), (
            name
        )
