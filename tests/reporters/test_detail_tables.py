"""The terminal's detail tables in Markdown and HTML: where the time goes, streaming per message,
CPU and memory, connection costs and whole commands, each with the figures the terminal shows,
drawn from one view; and every format through the registry."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from rpcmeter import model
from rpcmeter.metrics.histogram import Histogram
from rpcmeter.reporters import html, markdown, registry, terminal
from rpcmeter.reporters.build import build
from rpcmeter.reporters.tables import Grid
from rpcmeter.reporters.view import View
from rpcmeter.result.document import read_json
from tests.reporters.test_html import chromium, evaluate_in_page
from tests.support.synthetic import document, synthetic_result

GOLDEN = Path(__file__).parent / "golden"
__all__ = ["chromium"]  # the fixture, imported for the browser test


def hist_of(*us: float) -> dict[str, Any]:
    h = Histogram()
    for value in us:
        h.record(int(value * 1e3))
    return h.to_dict()


def detailed_result() -> model.Result:
    """Two variants, two repetitions; every case with a breakdown, bytes, CPU and memory of both
    sides, streaming figures and connection costs."""
    t1 = (("threads", 1),)
    result = document(
        synthetic_result(
            {("echo", t1, "plain"): [100, 100], ("echo", t1, "tls"): [150, 150]}, cpu=True
        )
    )
    for case in result["cases"]:
        tls = case["variant"] == "tls"
        case["breakdown"] = {
            "rtt_us": {"mean": 80.0, "stdev": 4.0, "p50": 78.0, "p99": 120.0},
            "queue_us": {"mean": 6.0, "stdev": 1.0},
            "server_us": {"mean": 20.0, "stdev": 2.0},
            "overhead_us": {"mean": 12.5, "stdev": 1.0, "ci95": [11.0, 14.0]},
        }
        case["bytes"] = {"out_per_request": 201.0, "in_per_request": 908.0}
        case["cpu"].update(server_util_pct=55.0, client_util_pct=70.0, server_idle_pct=45.0)
        case["memory"]["server_peak_rss_bytes"] = 12_300_000
        case["stream"] = {
            "streams_per_s": 250.0,
            "messages_per_s": 25_000.0,
            "first_message_histogram": hist_of(400.0),
            "message_histogram": hist_of(35.0, 35.0, 36.0),
            "bytes_out_per_message": 64.0,
            "bytes_in_per_message": 1_024.0,
            "cpu_us_per_message": {"client": 3.25, "server": 4.5},
        }
        case["connections"] = {
            "opened": 2,
            "connect": {"histogram": hist_of(150.0, 150.0)},
            **({"handshake": {"histogram": hist_of(2_500.0)}} if tls else {}),
        }
    return model.Result.from_json(result)


def rows_of(grid: Grid) -> list[list[str]]:
    """The grid's rows as the text of each cell (what every format shows)."""
    return [[c if isinstance(c, str) else getattr(c, "text", "") for c in row] for row in grid.rows]


def tables_of(view: View) -> dict[str, Grid]:
    return {g.title: g for w in view.workloads for g in w.tables}


def test_the_view_has_every_detail_table_with_its_figures() -> None:
    tables = tables_of(build(detailed_result()))
    assert list(tables) == [
        "echo · where the time goes",
        "echo · per message",
        "echo · CPU and memory",
        "echo · connections",
    ]
    breakdown = rows_of(tables["echo · where the time goes"])
    assert breakdown[0][:2] == ["1", "plain"]
    assert breakdown[0][4:] == [
        "0.078 (p99 0.120)",
        "0.006 ± 0.001",
        "0.020 ± 0.002",
        "0.013 ± 0.002",  # overhead: mean ± half its 95 % interval
        "201",
        "908",
    ]
    stream = rows_of(tables["echo · per message"])[0]
    assert stream[2:4] == ["250", "25,000"] and stream[-4:] == ["64", "1,024", "3.2", "4.5"]
    resources = rows_of(tables["echo · CPU and memory"])
    assert resources[1][:2] == ["1", "tls"] and resources[1][4:] == [
        "55.0",
        "70.0",
        "45.0",
        "12",
        "30",
    ]
    connections = {r[1]: r[2:] for r in rows_of(tables["echo · connections"])}
    assert tables["echo · connections"].columns[-2:] == ["connect", "TLS handshake"]
    assert connections["plain"][0] == "2" and connections["plain"][2] == "-"
    assert connections["tls"][2].startswith("2.5")  # the handshake's p50, ms


def markdown_rows(text: str, grid: Grid) -> list[list[str]]:
    """The body rows of the Markdown table of ``grid`` (under its heading and note)."""
    note = f"\n\n_{grid.note}_" if grid.note else ""
    block = text[text.index(f"### {grid.title}{note}\n") :].split("\n\n")
    table = next(b for b in block[1:] if b.startswith("|"))
    return [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines()[2:]]


def test_markdown_shows_the_terminal_tables_with_the_same_figures() -> None:
    view = build(detailed_result())
    text = markdown.render(view)
    for title, grid in tables_of(view).items():
        assert markdown_rows(text, grid) == [
            [c.replace("*", "") for c in row] + [""] * (len(grid.columns) - len(row))
            for row in rows_of(grid)
        ], title
    assert "where the time goes" in text and "| server us/req |" in text
    # the terminal shows the same figures
    shown = terminal.render(view, width=200)
    for grid in tables_of(view).values():
        for row in rows_of(grid):
            assert all(cell in shown for cell in row), row


class Tables(HTMLParser):
    """Every table of a page: its cells' text by row, after the heading above it."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.heading = ""
        self.in_heading = False
        self.cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "h3":
            self.in_heading, self.heading = True, ""
        elif tag == "table":
            self.tables[self.heading] = []
        elif tag == "tr" and self.heading in self.tables:
            self.tables[self.heading].append([])
        elif tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "h3":
            self.in_heading = False
        elif tag in ("td", "th") and self.cell is not None and self.heading in self.tables:
            self.tables[self.heading][-1].append(" ".join("".join(self.cell).split()))
            self.cell = None

    def handle_data(self, data: str) -> None:
        if self.in_heading:
            self.heading += data
        if self.cell is not None:
            self.cell.append(data)


def test_html_shows_the_terminal_tables_with_the_same_figures() -> None:
    view = build(detailed_result())
    parser = Tables()
    parser.feed(html.render(view))
    for title, grid in tables_of(view).items():
        heading = title + (f" ({grid.note})" if grid.note else "")
        got = parser.tables[heading]
        assert ["".join(c.split()) for c in got[0]] == ["".join(c.split()) for c in grid.columns]
        assert got[1:] == [row + [""] * (len(grid.columns) - len(row)) for row in rows_of(grid)], (
            title
        )


def busy_polling() -> model.Result:
    return read_json(GOLDEN / "busy_polling_quick.json")


def test_whole_command_tables_in_markdown_and_html() -> None:
    view = build(busy_polling())
    commands = [w.command for w in view.workloads if w.command is not None]
    assert commands and all(w.kind == "command" for w in view.workloads)
    text = markdown.render(view)
    parser = Tables()
    parser.feed(html.render(view))
    for grid in commands:
        assert "wall ratio" in grid.columns and "peak MB" in grid.columns
        rows = rows_of(grid)
        assert markdown_rows(text, grid) == [[c.replace("*", "") for c in row] for row in rows]
        assert parser.tables[f"{grid.title} ({grid.note})"][1:] == rows
        # the figures are the runs' own: the baseline's mean wall time over its runs
        keys = view.run.matrix_keys
        for row in rows:
            point = dict(zip(keys, row, strict=False))
            walls = [
                run.wall_s
                for case in busy_polling().cases
                if case.workload == grid.title
                and case.variant == row[len(keys)]
                and {k: str(v) for k, v in case.point.items()} == point
                for run in case.runs or []
            ]
            assert row[grid.columns.index("wall s")] == f"{sum(walls) / len(walls):.3f}"
    # the Markdown of a whole command shows its runs, not a latency table
    assert "mean ms" not in text


def test_every_format_goes_through_the_registry(tmp_path: Path) -> None:
    view = build(detailed_result())
    options = registry.Options(width=100)
    as_markdown, as_text = registry.get("markdown").render, registry.get("text").render
    assert as_markdown is not None and as_text is not None
    assert as_markdown(view, options) == markdown.render(view)
    assert as_text(view, options) == terminal.render(view, width=100)
    assert set(registry.REPORTERS) == {"text", "json", "csv", "markdown", "html", "plots"}
    assert registry.TEXT_FORMATS == ("text", "json", "csv", "markdown")
    said = registry.get("html").write(view, tmp_path / "sub" / "r.html")
    assert said == f"HTML report written to {tmp_path / 'sub' / 'r.html'}"
    assert (tmp_path / "sub" / "r.html").read_text(encoding="utf-8") == html.render(view)
    said = registry.get("csv").write(view, tmp_path / "r.csv")
    assert said.startswith("CSV written to") and (tmp_path / "r.csv").read_text().count("\n") > 10


def test_detail_tables_render_in_headless_chromium(chromium: str, tmp_path: Path) -> None:
    report = tmp_path / "detail.html"
    report.write_text(html.render(build(detailed_result())), encoding="utf-8")
    found = evaluate_in_page(
        chromium,
        report,
        "JSON.stringify([...document.querySelectorAll('div.grid')].map(d => "
        "[d.dataset.table, d.querySelector('table').getBoundingClientRect().width, "
        "d.querySelectorAll('tr').length]))",
    )
    grids = json.loads(found)
    assert [g[0] for g in grids] == [
        "echo-where-the-time-goes",
        "echo-per-message",
        "echo-cpu-and-memory",
        "echo-connections",
    ]
    assert all(width > 200 and rows == 3 for _, width, rows in grids), grids
