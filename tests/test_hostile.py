"""Hostile and malformed input: each one ends in one `Error:` line and exit 2, runs nothing
(a sentinel file that any executed payload would create stays absent), allocates nothing
large, and answers quickly."""

from __future__ import annotations

import io
import json
import os
import pickle
import resource
import shlex
import time
from pathlib import Path

import pytest
import torch

import autogradcli as ag
from autogradcli.cli.shell import run_stream
from tests.conftest import cli

SENTINEL = Path(os.environ.get("TMPDIR", "/tmp")) / "autograd_cli_hostile_sentinel"
TOUCH = f"open('{SENTINEL}', 'w')"
SYSTEM = f"__import__('os').system('touch {SENTINEL}')"

EXPRESSIONS = [
    SYSTEM,
    TOUCH,
    f'eval("{TOUCH}")',
    f'exec("{TOUCH}")',
    "getattr(x, '__class__')",
    "x.__class__.__bases__[0].__subclasses__()",
    "x.__dict__",
    "x.grad",
    "x.T.__class__",
    "().__class__",
    "[c for c in ().__class__.__mro__]",
    "{k: 1 for k in x}",
    "(y for y in x)",
    "lambda: 1",
    "lambda x: x",
    "f'{x}'",
    "'%s' % x",
    "'{0.__class__}'.format(x)",
    "b'x'",
    "x[0]",
    "x[::-1]",
    "x if x else 1",
    "x and 1",
    "not x",
    "x < 1",
    "x := 1",
    "import os",
    "from os import system",
    "del x",
    "global x",
    "def f(): pass",
    "class A: pass",
    "while True: pass",
    "for i in range(9**9): pass",
    "with open('f') as g: pass",
    "try: x\nexcept: pass",
    "assert x",
    "raise SystemExit",
    "async def f(): pass",
    "yield x",
    "await x",
    "print(x)",
    "breakpoint()",
    "compile('1', 'f', 'eval')",
    "globals()",
    "vars()",
    "type(x)",
    "x @= x",
    "*x",
    "x.sin().__class__",
    "x.__class__.__bases__",
    "x.sum().__globals__",
    "x.sin.__self__",
    "x.__dict__['a']",
    "getattr(x, 'sin')()",
    "torch.nn.Linear(2, 2)(x)",
    "x[0](1)",
    "import subprocess; x",
    "import torch as np; x",
    "from torch import load; x",
    "torch.load('f')",
    "np.load('f.npy')",
    "x.register_hook(print)",
    "x.exp_()",
    "torch.manual_seed(__import__('os'))",
    "x = torch.tensor(__import__('os').system('ls')); x",
    "sum(torch.tensor(__import__('os')) * x)",
    "x.grad += 1",
    "9**9**9**9*x",
    "x**(10**10)",
    "x*" + "9" * 5000,
    "x+" * 6000 + "x",
    "(" * 1000 + "x" + ")" * 1000,
    "-" * 3000 + "x",
    "sin(" * 500 + "x" + ")" * 500,
    "x\x00",
    "x\u202e*2",
    "ｘ*2 + x",
    "x\u200b*2",
    "x ** 2 \\",
    "\ufeffx",
    "",
    "   ",
    "softmax(x, 10**100)",
    "sum(x, dim=__import__('os'))",
    "sum(x, x)",
]

VALUES = [
    ["--x", SYSTEM],
    ["--x", TOUCH],
    ["--x", "__import__('os')"],
    ["--x", "ones(10**12)"],
    ["--x", "zeros(100000, 100000)"],
    ["--x", "rand(9**9**9)"],
    ["--x", "arange(0, 1e300)"],
    ["--x", "linspace(0, 1, 10**12)"],
    ["--x", "full(2, 3, __import__('os'))"],
    ["--x", "[" * 500 + "1" + "]" * 500],
    ["--x", "[1, 'a']"],
    ["--x", "[1, [2, 3]]"],
    ["--x", "{1: 2}"],
    ["--x", "ones(-1)"],
    ["--x", "reshape(arange(6), 7)"],
    ["--x", "2", "--weights", SYSTEM],
    ["--x", "@/"],
    ["--x", "@/nonexistent/file.npy"],
    ["--x", "@/dev/zero"],
]


def _assert_clean_refusal(args: list[str]) -> None:
    SENTINEL.unlink(missing_ok=True)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    run = cli("grad", *args)
    elapsed = time.perf_counter() - start
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert run.exit_code == 2, (args, run.stdout[:300], run.stderr[:300])
    assert run.stderr.startswith("Error: ") and run.stderr.count("\n") == 1, run.stderr[:300]
    assert "Traceback" not in run.stderr + run.stdout
    assert not SENTINEL.exists(), "a payload ran"
    assert elapsed < 10, elapsed
    assert grown_mib < 200, grown_mib


@pytest.mark.parametrize("text", EXPRESSIONS, ids=[repr(t)[:40] for t in EXPRESSIONS])
def test_hostile_expression_is_refused_cleanly(text):
    _assert_clean_refusal(["--x", "2", "--", text])


@pytest.mark.parametrize("args", VALUES, ids=[repr(a[1])[:40] for a in VALUES])
def test_hostile_value_is_refused_cleanly(args):
    _assert_clean_refusal(["x*2", *args])


class Payload:
    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, (f"touch {SENTINEL}",))


def test_pickled_object_in_a_pt_file_is_not_loaded(tmp_path):
    path = tmp_path / "evil.pt"
    torch.save({"x": Payload()}, path)
    _assert_clean_refusal(["x*2", "--x", f"@{path}"])
    raw = tmp_path / "evil.pkl.pt"
    raw.write_bytes(pickle.dumps(Payload()))
    _assert_clean_refusal(["x*2", "--x", f"@{raw}"])


def test_directory_and_unreadable_files(tmp_path):
    _assert_clean_refusal(["x*2", "--x", f"@{tmp_path}"])
    locked = tmp_path / "locked.npy"
    locked.write_bytes(b"\x93NUMPY")
    locked.chmod(0)
    if os.access(locked, os.R_OK):  # root reads anyway; then it is a corrupt file
        pytest.skip("running as root: file permissions are not enforced")
    _assert_clean_refusal(["x*2", "--x", f"@{locked}"])


def test_corpus_size():
    assert len(EXPRESSIONS) + len(VALUES) + 4 >= 50


# --- the same corpus through the shell (piped), `check` and the Python API ---------------


def _lines() -> list[str]:
    """Each hostile expression and value as a command line (JSON where it holds a newline,
    which a line cannot)."""
    texts = [["--x", "2", "--", t] for t in EXPRESSIONS] + [["x*2", *a] for a in VALUES]
    lines = []
    for words in texts:
        if any("\n" in w for w in words):
            expression = words[-1]
            lines.append(json.dumps({"expression": expression, "values": {"x": 2}}))
        else:
            lines.append("grad " + " ".join(shlex.quote(w) for w in words))
    return lines


GOOD = 'grad "x**3" --x 2 --expect x=12'


def test_the_corpus_through_one_check_file_keeps_the_good_cases(tmp_path):
    SENTINEL.unlink(missing_ok=True)
    hostile = _lines()
    path = tmp_path / "cases.txt"
    path.write_text("\n".join(x for h in hostile for x in (GOOD, h)) + f"\n{GOOD}\n")
    run = cli("check", str(path), "--json")
    assert run.exit_code == 2
    done = [json.loads(x) for x in run.stdout.splitlines()][:-1]
    assert [(d["case"], d["status"]) for d in done] == [
        (n, "agree" if n % 2 else "bad input") for n in range(1, 2 * len(hostile) + 2)
    ]
    assert all(d["error"] and "internal error" not in d["error"] for d in done[1::2])
    assert not SENTINEL.exists(), "a payload ran"


def test_the_corpus_through_the_piped_shell(capsys):
    SENTINEL.unlink(missing_ok=True)
    hostile = _lines()
    script = "\n".join(x for h in hostile for x in (GOOD, h)) + f"\n{GOOD}\n"
    assert run_stream(io.BytesIO(script.encode("utf-8", "surrogatepass"))) == 2
    out, err = capsys.readouterr()
    assert out.count("autograd and SymPy agree") == len(hostile) + 1
    errors = err.splitlines()
    assert len(errors) == len(hostile) and all(e.startswith("Error: ") for e in errors)
    assert "Traceback" not in out + err
    assert not SENTINEL.exists(), "a payload ran"


def test_the_corpus_through_the_api_raises_only_domain_errors():
    SENTINEL.unlink(missing_ok=True)
    calls: list[tuple[str, dict[str, object]]] = [(t, {"x": 2}) for t in EXPRESSIONS]
    for args in VALUES:
        options = dict(zip(args[::2], args[1::2], strict=True))
        values = {"x": options["--x"]}
        extra = {"weights": options["--weights"]} if "--weights" in options else {}
        calls.append(("x*2", {**values, "__extra": extra}))
    for expression, values in calls:
        extra = values.pop("__extra", {})
        with pytest.raises(ag.AutogradCliError):
            ag.grad(expression, values, **extra)  # type: ignore[arg-type]
    assert not SENTINEL.exists(), "a payload ran"


# --- faults (issue 25): lines that write files, text XML cannot hold, input without end ---

# Lines of a shared sheet that would write a file: refused in a check file and a piped
# script unless the user running them gave --allow-writes (the sentinel stays absent).
WRITING = [
    f'graph "x*2" --x 1 --dot {SENTINEL}',
    f'graph "x*2" --x 1 --svg {SENTINEL}',
    f'graph "x*2" --x 1 --png {SENTINEL}',
    f'plot "x*2" --x 0:1 --output {SENTINEL}.png',
    f'autograd-cli graph "x*2" --x 1 --dot={SENTINEL}',
]


def test_lines_that_write_files_are_refused_in_a_check_file(tmp_path):
    SENTINEL.unlink(missing_ok=True)
    path = tmp_path / "sheet.txt"
    path.write_text("\n".join(WRITING) + "\n")
    run = cli("check", str(path), "--json")
    assert run.exit_code == 2
    done = [json.loads(x) for x in run.stdout.splitlines()][:-1]
    assert [d["document"]["error"]["code"] for d in done] == ["writes_not_allowed"] * len(WRITING)
    assert all(d["error"].endswith("run autograd-cli check with --allow-writes") for d in done)
    assert not SENTINEL.exists() and not Path(f"{SENTINEL}.png").exists()


def test_lines_that_write_files_are_refused_in_a_piped_script(capsys):
    SENTINEL.unlink(missing_ok=True)
    assert run_stream(io.BytesIO(("\n".join(WRITING) + "\n").encode())) == 2
    errors = capsys.readouterr().err.splitlines()
    assert len(errors) == len(WRITING)
    assert all(e.endswith("run autograd-cli shell with --allow-writes") for e in errors)
    assert not SENTINEL.exists() and not Path(f"{SENTINEL}.png").exists()


def test_the_junit_report_of_the_whole_corpus_is_well_formed_xml(tmp_path):
    """The hostile corpus holds NUL bytes, escapes, right-to-left marks and BOMs."""
    from xml.dom import minidom

    path = tmp_path / "cases.txt"
    hostile = [*_lines(), 'grad "x*\x1b[2J" --x 1', "grad x\x0b --x \x01", "\x7f\x1f"]
    path.write_text("\n".join(hostile) + "\n")
    report = tmp_path / "report.xml"
    run = cli("check", str(path), "--junit-xml", str(report))
    assert run.exit_code == 2 and "Traceback" not in run.stdout + run.stderr
    parsed = minidom.parse(str(report))
    assert len(parsed.getElementsByTagName("testcase")) == len(hostile)
