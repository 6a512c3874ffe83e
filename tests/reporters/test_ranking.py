"""The ranking table on a real (small) demo run."""

from __future__ import annotations

import copy
import io

from rich import box
from rich.console import Console
from rich.table import Table

from rpcmeter import model
from rpcmeter.reporters.build import build
from rpcmeter.reporters.terminal import grid_table, render
from rpcmeter.result.cells import cells
from rpcmeter.result.document import Result
from tests.support.synthetic import document


def ranking_table(result: Result, workload: str) -> Table:
    """The ranking table of one workload, as the terminal draws it."""
    grid = next(w.ranking for w in build(result).workloads if w.name == workload)
    assert grid is not None
    return grid_table(grid)


def text(table: Table) -> str:
    """The table's rows drawn with column separators, which :func:`rows` splits on."""
    table.box, table.show_edge, table.show_header = box.SQUARE, False, False
    buf = io.StringIO()
    Console(file=buf, width=200, color_system=None).print(table)
    return buf.getvalue()


def rows(out: str) -> list[list[str]]:
    return [
        [p.strip() for p in line.split("│")] for line in out.splitlines() if line.count("│") >= 5
    ]


def test_variants_ranked_by_requests_per_second(demo_result: Result) -> None:
    for workload, grid in cells(demo_result).items():
        table = ranking_table(demo_result, workload)
        out = text(table)
        headers = [str(column.header) for column in table.columns]
        assert {"p90 ms", "p95 ms", "p99 ms"} <= set(headers)
        assert "B out" not in headers  # rpyc counts no bytes
        # the built-in rpyc server reports its times for simple calls (simple_timed) only
        kinds = {c.kind for c in demo_result.cases if c.workload == workload}
        assert ("server ms" in headers) == (kinds == {"simple"}), (workload, headers)
        table_rows = rows(out)
        assert len(table_rows) == sum(len(row) for row in grid.values())
        for i, (point, row) in enumerate(grid.items()):
            block = table_rows[i * len(row) : (i + 1) * len(row)]
            expected = sorted(row.values(), key=lambda c: -c.mean("throughput_rps"))
            assert [r[2] for r in block] == [c.variant for c in expected], point
            for r in block:
                if r[2] == "default":  # the baseline's ratio to itself
                    assert r[4] == "1.00"


def test_counters_bytes_and_server_time_get_columns(demo_result: Result) -> None:
    doc = document(demo_result)
    for case in doc["cases"]:
        case["bytes"] = {"out_per_request": 201.0, "in_per_request": 908.0}
        case["counters"] = {"would_block_ns": 250_000 * case["requests"]}
        case["server_time"] = {"mean_us": 40.0}
    result = model.Result.from_json(doc)
    table = ranking_table(result, next(iter(cells(result))))
    out = text(table)
    headers = [str(column.header) for column in table.columns]
    assert "would block ms" in headers and "server ms" in headers
    first = rows(out)[0]
    assert first[-4:] == ["0.040", "0.250", "201", "908"]


def test_terminal_shows_ranking_and_drops_ratios_when_too_wide(demo_result: Result) -> None:
    out = render(build(demo_result), width=200)
    assert out.count("ranked by requests/s") == len(cells(demo_result))
    ratios = "each variant / default, ratio"
    assert out.count(ratios) == len(cells(demo_result))  # the comparison table is there too
    wide = document(demo_result)
    extra = []
    for name in ("third", "fourth"):
        for case in wide["cases"]:
            extra.append({**copy.deepcopy(case), "variant": name})
        wide["suite"]["variants"][name] = {}
    wide["cases"] += extra
    out = render(build(model.Result.from_json(wide)), width=200)
    assert "as ratios to it" not in out
    assert out.count("ranked by requests/s") == len(cells(demo_result))
    assert out.count(ratios) == len(cells(demo_result))  # ratios for any number of variants
    table = out[out.index(ratios) :]
    assert all(f" {name} " in table for name in ("bind", "third", "fourth"))
    assert "fourth" in out
