"""The client's first call (no worker yet): torch and SymPy load with the cycle collector
off and are frozen after (``client.Settled``), the answer comes before the worker is
started, and no request is built when no worker listens."""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from autogradcli import client
from autogradcli.worker import wire

PROBE = """
import gc
import sys
COLLECTING = gc.isenabled()
{extra}
"""


@pytest.fixture
def packages(tmp_path: Path) -> Iterator[Path]:
    """A folder on ``sys.path`` for throwaway packages; they, the finder and the frozen
    objects are gone afterwards, and the collector is on as before."""
    sys.path.insert(0, str(tmp_path))
    meta_path = list(sys.meta_path)
    try:
        yield tmp_path
    finally:
        sys.path.remove(str(tmp_path))
        sys.meta_path[:] = meta_path
        for name in [n for n in sys.modules if n.startswith("h27_")]:
            del sys.modules[name]
        gc.unfreeze()
        gc.enable()


def _package(root: Path, name: str, extra: str = "") -> None:
    (root / name).mkdir()
    (root / name / "__init__.py").write_text(PROBE.format(extra=extra))


def test_a_watched_package_loads_without_collection_then_is_frozen(packages):
    _package(packages, "h27_heavy")
    _package(packages, "h27_light")
    finder = client.Settled.install(frozenset({"h27_heavy"}))
    assert finder is not None and sys.meta_path[0] is finder
    gc.unfreeze()
    import h27_heavy
    import h27_light  # not watched: loads as before

    assert h27_light.COLLECTING is True
    assert h27_heavy.COLLECTING is False
    assert gc.isenabled() is True
    assert gc.get_freeze_count() > 0
    assert finder not in sys.meta_path  # every watched package is loaded: it is done
    assert type(h27_heavy.__loader__).__name__ == "SourceFileLoader"


def test_nested_watched_packages_collect_only_after_the_outermost(packages):
    _package(packages, "h27_inner")
    _package(packages, "h27_outer", "import h27_inner\nAFTER_INNER = gc.isenabled()")
    client.Settled.install(frozenset({"h27_outer", "h27_inner"}))
    import h27_outer

    assert (h27_outer.COLLECTING, h27_outer.AFTER_INNER) == (False, False)
    assert sys.modules["h27_inner"].COLLECTING is False
    assert gc.isenabled() is True


def test_a_collector_turned_off_before_stays_off(packages):
    _package(packages, "h27_heavy")
    client.Settled.install(frozenset({"h27_heavy"}))
    gc.disable()
    import h27_heavy  # noqa: F401

    assert gc.isenabled() is False


def test_a_failing_import_turns_collection_back_on(packages):
    _package(packages, "h27_broken", "raise ValueError('broken on purpose')")
    finder = client.Settled.install(frozenset({"h27_broken"}))
    with pytest.raises(ValueError, match="broken on purpose"):
        import h27_broken  # noqa: F401
    assert gc.isenabled() is True
    assert finder in sys.meta_path  # not loaded: still watching


def test_nothing_is_installed_when_the_packages_are_loaded():
    assert client.Settled.install(frozenset({"sys", "gc"})) is None


def test_the_first_call_answers_before_it_starts_the_worker(monkeypatch, tmp_path):
    events: list[str] = []

    def answer(consumed: bytes = b"") -> None:
        events.append("answered")
        raise SystemExit(2)  # a refused question starts the worker all the same

    monkeypatch.setattr(sys, "argv", ["autograd-cli", "grad", "x**2", "--x", "3"])
    monkeypatch.setattr(client.os, "environ", {"XDG_RUNTIME_DIR": str(tmp_path)})
    monkeypatch.setattr(client.Question, "ask", lambda self, place: None)
    monkeypatch.setattr(client, "in_process", answer)
    monkeypatch.setattr(client, "start_worker", lambda env: events.append("worker started"))
    with pytest.raises(SystemExit) as stopped:
        client.main()
    assert stopped.value.code == 2
    assert events == ["answered", "worker started"]


def test_no_request_is_made_when_no_worker_listens(monkeypatch, tmp_path):
    def request(self: client.Question) -> dict[str, object]:
        raise AssertionError("the request was built with no worker to send it to")

    monkeypatch.setattr(client.Question, "request", request)
    place = wire.Place(str(tmp_path), str(tmp_path / "none.sock"), "", "")
    assert client.Question(["grad", "x"], {}).ask(place) is None
