"""`autograd-cli graph`: the backward graph PyTorch built, compared with the graph PyTorch
builds for the same line typed as Python (node names and structure)."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.autograd.graph import get_gradient_edge

from tests.conftest import cli

Tree = Any  # (grad_fn name, leaf name or None, [children]) or None for an edge without gradient


def python_tree(out: torch.Tensor, names: dict[int, str]) -> Tree:
    """PyTorch's own graph of ``out``, as nested tuples (recursion is fine for small lines)."""

    def walk(fn: Any) -> Tree:
        if fn is None:
            return None
        variable = getattr(fn, "variable", None)
        leaf = None if variable is None else names[id(variable)]
        return (type(fn).__name__, leaf, [walk(nxt) for nxt, _ in fn.next_functions])

    return walk(get_gradient_edge(out).node)


def cli_tree(doc: dict[str, Any]) -> Tree:
    """The same nested form, built from ``graph --json``."""
    nodes = {n["id"]: n for n in doc["nodes"]}

    def walk(node_id: int | None) -> Tree:
        if node_id is None:
            return None
        node = nodes[node_id]
        return (node["grad_fn"], node["leaf"], [walk(k) for k in node["next"]])

    return walk(doc["root"])


def leaves(**values: Any) -> dict[str, torch.Tensor]:
    return {n: torch.tensor(v, requires_grad=True) for n, v in values.items()}


def graph_json(*args: str) -> dict[str, Any]:
    run = cli("graph", *args, "--json")
    assert run.exit_code == 0, run.stderr
    return run.json()


def seed000(t: dict[str, torch.Tensor]) -> torch.Tensor:
    y = t["x"] + 2
    z = y * y * 3
    return z.mean()


CASES = [
    ("y = x + 2; z = y*y*3; out = mean(z)", {"x": [[1.0, 1.0], [1.0, 1.0]]}, seed000),
    ("y*y*3", {"y": 2.0}, lambda t: t["y"] * t["y"] * 3),
    ("x - y", {"x": 1.0, "y": 2.0}, lambda t: t["x"] - t["y"]),
    ("2/x", {"x": 2.0}, lambda t: 2 / t["x"]),
    ("x/y", {"x": 1.0, "y": 2.0}, lambda t: t["x"] / t["y"]),
    ("-x + sin(x)*exp(y)", {"x": 1.0, "y": 2.0}, lambda t: -t["x"] + t["x"].sin() * t["y"].exp()),
    ("x**2 + y**3", {"x": [2.0, 2.0], "y": [4.0, 4.0]}, lambda t: t["x"] ** 2 + t["y"] ** 3),
    ("x / sum(x)", {"x": [1.0, 2.0]}, lambda t: t["x"] / t["x"].sum()),
    (
        "10 - (w1*a + w2*a)",
        {"a": 4.0, "w1": 2.0, "w2": 5.0},
        lambda t: 10 - (t["w1"] * t["a"] + t["w2"] * t["a"]),
    ),
    ("x", {"x": 3.0}, lambda t: t["x"]),
]


@pytest.mark.parametrize(("text", "values", "line"), CASES, ids=[c[0] for c in CASES])
def test_graph_is_the_one_pytorch_builds_for_the_python_line(text, values, line):
    tensors = leaves(**values)
    expected = python_tree(line(tensors), {id(t): n for n, t in tensors.items()})
    args = [a for n, v in values.items() for a in (f"--{n}", str(v))]
    assert cli_tree(graph_json(text, *args)) == expected


def test_named_examples_of_the_issue():
    tree = cli_tree(graph_json("y*y*3", "--y", "2"))
    assert tree[0] == "MulBackward0" and tree[2][0][0] == "MulBackward0"  # two MulBackward0
    assert cli_tree(graph_json("x - y", "--x", "1", "--y", "2"))[0] == "SubBackward0"


def test_a_constant_input_is_a_none_edge_like_requires_grad_false():
    tensors = {"x": torch.tensor(1.0, requires_grad=True), "y": torch.tensor(2.0)}
    expected = python_tree(tensors["x"] * tensors["y"], {id(tensors["x"]): "x"})
    assert cli_tree(graph_json("x*y", "--x", "1", "--y", "2", "--const", "y")) == expected


def test_json_labels_steps_leaves_and_parts_of_one_operation():
    doc = graph_json("y = x + 2; z = y*y*3; out = mean(z)", "--x", "ones(2,2)")
    labels = [(n["grad_fn"], n["label"]) for n in doc["nodes"]]
    assert labels == [
        ("MeanBackward0", "out = mean(z)"),
        ("MulBackward0", "z = y*y*3"),
        ("MulBackward0", "y*y"),
        ("AddBackward0", "y = x + 2"),
        ("AccumulateGrad", "x"),
    ]
    assert doc["nodes"][4]["shape"] == [2, 2] and doc["written"] == []
    parts = graph_json("2/x", "--x", "2")["nodes"]
    assert [(n["grad_fn"], n["label"]) for n in parts[:2]] == [
        ("MulBackward0", "out = 2/x"),
        ("ReciprocalBackward0", "(part of out = 2/x)"),
    ]


def test_rich_tree(monkeypatch):
    run = cli("graph", "y = x + 2; z = y*y*3; out = mean(z)", "--x", "ones(2,2)")
    none = "None  (no gradient flows here: a constant or a tensor with requires_grad=False)"
    assert run.exit_code == 0
    assert run.stdout.splitlines() == [
        "backward graph of out: 5 nodes, walked from the top by backward()",
        "MeanBackward0  out = mean(z)",
        "└── MulBackward0  z = y*y*3",
        "    ├── MulBackward0  y*y",
        "    │   ├── AddBackward0  y = x + 2",
        "    │   │   ├── AccumulateGrad  x [2, 2]  → x.grad",
        f"    │   │   └── {none}",
        "    │   └── AddBackward0  y = x + 2  (same node as above)",
        f"    └── {none}",
    ]
    leaf = cli("graph", "x", "--x", "3")
    assert leaf.stdout.splitlines() == [
        "backward graph of out: 1 node, walked from the top by backward()",
        "AccumulateGrad  x []  → x.grad",
    ]


def test_dot_file(tmp_path):
    path = tmp_path / "g.dot"
    run = cli("graph", "x*y", "--x", "1", "--y", "2", "--const", "y", "--dot", str(path))
    assert run.exit_code == 0 and run.stdout.endswith(f"wrote {path}\n")
    assert path.read_text().splitlines() == [
        "digraph backward {",
        '  graph [rankdir=TB, label="backward graph of x*y"];',
        '  node [shape=box, style="rounded,filled", fillcolor="#f5f5f5", fontname="Helvetica"];',
        '  n0 [label="MulBackward0\\nout = x*y"];',
        '  n1 [label="AccumulateGrad\\nx\\nshape []  → x.grad", fillcolor="#cfe8ff"];',
        '  n0 -> n1 [label="0"];',
        '  none1 [label="None", shape=plaintext, style="", fontsize=10];',
        '  n0 -> none1 [label="1", style=dashed];',
        "}",
    ]


def test_dot_escapes_quotes_in_labels(tmp_path):
    from autogradcli.render.dot import to_dot
    from autogradcli.results import Graph, GraphNode

    text = to_dot(Graph('a"b', "out", (GraphNode(0, "AccumulateGrad", 'x"', leaf='x"', shape=[]),)))
    assert 'label="backward graph of a\\"b"' in text and 'x\\"\\nshape' in text


@pytest.mark.parametrize("fmt", ["svg", "png"])
def test_image_without_graphviz_is_one_clear_error(tmp_path, monkeypatch, fmt):
    monkeypatch.setenv("PATH", str(tmp_path))  # no `dot` anywhere
    run = cli("graph", "x*2", "--x", "1", f"--{fmt}", str(tmp_path / f"g.{fmt}"))
    assert run.exit_code == 2
    assert run.stderr == (
        f"Error: --{fmt} needs Graphviz's 'dot' program, which is not installed; install "
        "Graphviz (e.g. apt install graphviz, brew install graphviz) or write the DOT text "
        "with --dot FILE and render it elsewhere\n"
    )
    assert not (tmp_path / f"g.{fmt}").exists()


def fake_dot(folder: Path, body: str) -> None:
    """A stand-in for Graphviz's ``dot`` on PATH (a shell script)."""
    script = folder / "dot"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(script.stat().st_mode | stat.S_IEXEC)


@pytest.mark.skipif(os.name != "posix", reason="the fake dot is a shell script")
def test_image_is_rendered_by_dot_from_the_dot_text(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # record the arguments, and write the DOT text it reads to the -o file
    fake_dot(bin_dir, 'echo "$@" > "$(dirname "$0")/args"\nshift 2\ncat > "$1"\n')
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    svg, dot = tmp_path / "g.svg", tmp_path / "g.dot"
    run = cli("graph", "x*x", "--x", "2", "--svg", str(svg), "--dot", str(dot), "--json")
    assert run.exit_code == 0, run.stderr
    assert sorted(run.json()["written"]) == sorted([str(svg), str(dot)])
    assert svg.read_text() == dot.read_text()
    assert (bin_dir / "args").read_text().split() == ["-Tsvg", "-o", str(svg)]


@pytest.mark.skipif(os.name != "posix", reason="the fake dot is a shell script")
def test_graphviz_failure_is_one_line(tmp_path, monkeypatch):
    fake_dot(tmp_path, 'echo "Error: syntax error in line 1" >&2\necho more >&2\nexit 1\n')
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    run = cli("graph", "x*2", "--x", "1", "--png", str(tmp_path / "g.png"))
    assert run.exit_code == 2
    assert run.stderr == (
        f"Error: Graphviz could not write {tmp_path / 'g.png'}: Error: syntax error in line 1\n"
    )


def test_graph_takes_the_same_arguments_and_errors_as_grad():
    run = cli("graph", "x*2", "--x", "1", "--const", "x")
    assert run.exit_code == 2
    assert run.stderr == (
        "Error: the output has no grad_fn: nothing it depends on requires grad, so PyTorch "
        "recorded no graph; drop --const for an input, or use a variable\n"
    )
    missing = cli("graph", "x*2")
    assert missing.exit_code == 2
    assert missing.stderr == "Error: variable 'x' needs a value, e.g. --x 2 (or --var x=2)\n"


def python_saved(out: torch.Tensor) -> list[Any]:
    """What each node of PyTorch's own graph keeps for backward, in the tree's pre-order:
    ``(grad_fn, [(attribute, shape, dtype, first numbers) or (attribute, value)])``."""
    found: list[Any] = []

    def walk(fn: Any) -> None:
        if fn is None:
            return
        kept = []
        for name in sorted(a for a in dir(fn) if a.startswith("_saved_")):
            value = getattr(fn, name)
            if isinstance(value, torch.Tensor):
                dtype = str(value.dtype).removeprefix("torch.")
                kept.append((name, list(value.shape), dtype, value.flatten()[:6].tolist()))
            else:
                kept.append((name, list(value) if isinstance(value, tuple) else value))
        found.append((type(fn).__name__, kept))
        for nxt, _ in fn.next_functions:
            walk(nxt)

    walk(get_gradient_edge(out).node)
    return found


def cli_saved(doc: dict[str, Any]) -> list[Any]:
    """The same list from ``graph --saved --json`` (a node reached twice listed twice)."""
    nodes = {n["id"]: n for n in doc["nodes"]}
    found: list[Any] = []

    def walk(node_id: int | None) -> None:
        if node_id is None:
            return
        node = nodes[node_id]
        kept = [
            (s["name"], s["shape"], s["dtype"], s["value"])
            if s["tensor"]
            else (s["name"], s["value"])
            for s in node["saved"]
        ]
        found.append((node["grad_fn"], kept))
        for nxt in node["next"]:
            walk(nxt)

    walk(doc["root"])
    return found


@pytest.mark.parametrize(("text", "values", "line"), CASES, ids=[c[0] for c in CASES])
def test_saved_are_what_pytorchs_own_nodes_keep(text, values, line):
    tensors = leaves(**values)
    expected = python_saved(line(tensors))
    args = [a for n, v in values.items() for a in (f"--{n}", str(v))]
    assert cli_saved(graph_json(text, *args, "--saved")) == expected


def test_saved_tensors_are_freed_by_backward_as_pytorch_says():
    doc = graph_json("y = x + 2; z = y*y*3; out = mean(z)", "--x", "ones(2,2)", "--saved")
    square = doc["nodes"][2]  # y*y keeps both factors, y = x + 2 = 3
    assert square["label"] == "y*y" and square["saved"] == [
        {"name": "_saved_other", "tensor": True, "shape": [2, 2], "dtype": "float32",
         "value": [3.0] * 4},
        {"name": "_saved_self", "tensor": True, "shape": [2, 2], "dtype": "float32",
         "value": [3.0] * 4},
    ]  # fmt: skip
    assert doc["nodes"][3]["saved"] == [
        {"name": "_saved_alpha", "tensor": False, "shape": None, "dtype": None, "value": 1}
    ]
    # PyTorch itself: after one backward() without retain_graph, the read raises
    x = torch.ones(2, 2, requires_grad=True)
    y = x + 2
    z = y * y * 3
    z.mean().backward()
    with pytest.raises(RuntimeError) as raised:
        _ = z.grad_fn.next_functions[0][0]._saved_self
    freed = doc["freed"]
    assert freed["name"] == "_saved_other" and freed["node"] == 1  # the first node with one
    assert freed["message"] == str(raised.value).splitlines()[0]
    assert freed["message"].startswith("Trying to backward through the graph a second time")
    # without --saved nothing of this is there
    plain = graph_json("y = x + 2; z = y*y*3; out = mean(z)", "--x", "ones(2,2)")
    assert plain["freed"] is None and all(n["saved"] is None for n in plain["nodes"])


def test_saved_rich_and_a_graph_that_saves_no_tensor(monkeypatch):
    run = cli("graph", "y = x + 2; z = y*y*3; out = mean(z)", "--x", "ones(2,2)", "--saved")
    lines = [" ".join(line.split()) for line in run.stdout.splitlines()]
    assert run.exit_code == 0
    assert "│ saved _saved_self: tensor [2, 2] float32 = [3, 3, 3, 3]" in lines
    assert "saved _saved_self_sym_sizes = [2, 2]" in lines
    assert "│ └── AddBackward0 y = x + 2 (same node as above)" in lines
    text = " ".join(lines)
    assert "the tensors among them are the buffers the first backward() frees" in text
    assert "reading MulBackward0._saved_other raises: Trying to backward through" in text
    # x + 1 keeps only alpha: PyTorch walks it twice without retain_graph, and the tool says so
    x = torch.tensor(2.0, requires_grad=True)
    out = x + 1
    out.backward()
    out.backward()
    assert x.grad.item() == 2.0
    add = graph_json("x + 1", "--x", "2", "--saved")
    assert add["freed"] is None and add["nodes"][0]["saved"][0]["name"] == "_saved_alpha"
    rich = " ".join(cli("graph", "x + 1", "--x", "2", "--saved").stdout.split())
    assert "no node keeps a tensor for backward, so backward() frees nothing" in rich


EXP = ("y = exp(x); out = sum(y*sin(x))", {"x": [0.5, 1.5]})
SAVED_BY_SYMPY = [
    # program, values, grad_fn, saved name, what PyTorch saves there as a SymPy expression
    (*EXP, "ExpBackward0", "_saved_result", "exp(x)"),
    (*EXP, "MulBackward0", "_saved_self", "exp(x)"),
    (*EXP, "MulBackward0", "_saved_other", "sin(x)"),
    (*EXP, "SinBackward0", "_saved_self", "x"),
    ("y = x + 2; out = sum(y*y)", {"x": [1.0, -0.5]}, "MulBackward0", "_saved_self", "x + 2"),
    ("out = sum(tanh(x*w))", {"x": [0.3, -2.0], "w": [1.5, 0.25]}, "TanhBackward0",
     "_saved_result", "tanh(x*w)"),
    ("out = sum(tanh(x*w))", {"x": [0.3, -2.0], "w": [1.5, 0.25]}, "MulBackward0",
     "_saved_other", "w"),
]  # fmt: skip


@pytest.mark.parametrize(("program", "values", "fn", "name", "formula"), SAVED_BY_SYMPY)
def test_saved_values_are_sympys_values_of_what_the_node_keeps(program, values, fn, name, formula):
    """Each saved tensor against SymPy's value of the sub-expression it holds (the formula is
    test code, evaluated per element at the inputs; float32 rounding allowed)."""
    import sympy

    args = [a for n, v in values.items() for a in (f"--{n}", str(v))]
    doc = graph_json(program, *args, "--saved")
    node = next(n for n in doc["nodes"] if n["grad_fn"] == fn)
    (saved,) = [s for s in node["saved"] if s["name"] == name]
    symbols = {n: sympy.Symbol(n) for n in values}
    expression = sympy.sympify(formula, locals=symbols)
    length = len(next(iter(values.values())))
    want = [
        float(expression.subs({symbols[n]: v[i] for n, v in values.items()}).evalf(30))
        for i in range(length)
    ]
    assert saved["tensor"] and saved["value"] == pytest.approx(want, rel=1e-6)
