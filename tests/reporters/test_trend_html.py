"""The trend page and plots: structure, and the real page in headless Chromium."""

from __future__ import annotations

from pathlib import Path

import pytest

from rpcmeter.analysis.compare import metric
from rpcmeter.history.store import Store
from rpcmeter.history.trend import Trend, collect
from rpcmeter.reporters import trend as reporter
from tests.reporters.test_html import Page, chromium
from tests.support.synthetic import CellSpec, document, synthetic_result

__all__ = ["chromium"]  # the fixture, used by name


@pytest.fixture(scope="module")
def trends(tmp_path_factory: pytest.TempPathFactory) -> list[Trend]:
    """Twelve stored runs of two variants; `a` becomes 1.4x slower from the sixth run on."""
    path = tmp_path_factory.mktemp("trend") / "h.db"
    with Store(path) as store:
        for i in range(12):
            f = 1.4 if i >= 5 else 1.0
            spec: CellSpec = {
                ("w", (("threads", 4),), "a"): [100 * f, 101 * f, 99 * f],
                ("w", (("threads", 4),), "b"): [90.0, 91.0, 89.0],
            }
            doc = document(synthetic_result(spec, seed=i))
            doc["suite"]["git"] = {"commit": f"{i:x}" * 40, "branch": "main", "dirty": i == 7}
            doc["started_at"] = f"2026-11-{10 + i}T09:00:00+00:00"
            store.save(doc)
        runs = [(info, store.load(info.id)) for info in reversed(store.runs())]
    return collect(runs, [metric("mean"), metric("throughput")])


def test_terminal_table_and_sentences(trends: list[Trend]) -> None:
    text = reporter.render(trends, "run", width=160)
    assert "mean latency per run, oldest first (12 points)" in text
    assert "▁▁▁▁▁│███████" in text  # the sparkline, the step marked before the sixth point
    assert "slower at run 6" in text
    assert "synthetic · w · threads=4 · a: mean latency 1.3" in text  # 1.4x, sampled
    assert "at run 6 (5555555, 2026-11-15 09:00)" in text
    assert "no step" in text  # variant b


def test_plot_marks_steps_and_labels_points(trends: list[Trend]) -> None:
    p = reporter.plot(trends[0], "run")
    assert p.kind == "trend" and len(p.series) == 1
    (s,) = p.series
    assert len(s.y) == 12 and s.lo is not None and s.hi is not None
    assert all(lo <= y <= hi for lo, y, hi in zip(s.lo, s.y, s.hi, strict=True))
    assert p.marks == ((4.5, p.marks[0][1]),) and p.marks[0][1].endswith("x slower")
    assert p.categories[5] == "6\n5555555\n11-15"  # the step's point is always labelled
    assert p.categories[7] in ("", "8\n7777777*\n11-17")  # a dirty tree's revision has a *


@pytest.mark.timeout(180)
def test_trend_page_in_headless_chromium(
    trends: list[Trend], chromium: str, tmp_path: Path
) -> None:
    page_path = reporter.write_html(trends, "run", "rpcmeter trend · test", tmp_path / "t.html")
    text = page_path.read_text(encoding="utf-8")
    assert "<script" not in text and "<link" not in text
    page = Page(chromium)
    try:
        info = page.open(page_path.resolve().as_uri())
        page.call("Runtime.evaluate", expression="1", returnByValue=True)  # late messages
    finally:
        page.close()
    assert page.errors() == []
    assert page.requested() == {page_path.resolve().as_uri()}  # nothing fetched
    assert info["title"] == "rpcmeter trend · test"
    plots = {p["id"]: p for p in info["plots"]}
    assert len(plots) == 4 and all(p["kind"] == "trend" for p in plots.values())
    for ident, p in plots.items():
        assert p["width"] > 300 and p["height"] > 150, ident
        assert all(p["drawn"]), ident
        assert any("4444444" in t for t in p["texts"]), ident  # revisions under the points
    stepped = plots["trend-synthetic-w-threads-4-a-mean"]
    assert any(t.endswith("x slower") for t in stepped["texts"])
    assert not any("slower" in t for t in plots["trend-synthetic-w-threads-4-b-mean"]["texts"])
