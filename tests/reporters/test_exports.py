"""Golden files for every export: JSON, CSV, Markdown (and the terminal tables).

The input is a synthetic result built deterministically; regenerate the files after an intended
change with ``RPCMETER_UPDATE_GOLDEN=1 pytest tests/reporters``.
"""

from __future__ import annotations

import base64
import csv
import io
import json
import os
import zlib
from pathlib import Path
from typing import Any

import pytest

from rpcmeter import model
from rpcmeter.analysis.derived import derive, dumps
from rpcmeter.reporters import csv as csv_reporter
from rpcmeter.reporters import json as json_reporter
from rpcmeter.reporters import markdown as markdown_reporter
from rpcmeter.reporters import terminal
from rpcmeter.reporters.build import build, comparison_view
from rpcmeter.reporters.format import fmt_num
from tests.support.synthetic import synthetic_result, with_case

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("RPCMETER_UPDATE_GOLDEN") == "1"


def golden_result() -> model.Result:
    t1, t4 = (("threads", 1),), (("threads", 4),)
    result = synthetic_result(
        {
            ("simple", t1, "default"): [100, 102, 98, 101, 99],
            ("simple", t1, "bind"): [70, 72, 69, 71, 70],
            ("simple", t4, "default"): [300, 305, 298, 302, 301],
            ("simple", t4, "bind"): [300, 390, 250, 310, 295],
            ("sub 1", t1, "default"): [200, 202, 198, 201, 199],
            ("sub 1", t1, "bind"): [260, 262, 258, 261, 259],
            ("sub 1", t4, "default"): [900, 905, 898, 902, 901],
            ("sub 1", t4, "bind"): [880, 905, 890, 902, 899],
        },
        samples=100,
        cpu=True,
    )
    return with_case(
        result, -1, status="failed", reason="server exited with status 1 during the case"
    )


def _decoded_buckets(value: Any) -> Any:
    """Histogram buckets compared decompressed (zlib builds may compress differently)."""
    if isinstance(value, dict):
        return {
            k: (
                zlib.decompress(base64.b64decode(v)).hex()
                if k == "buckets"
                else _decoded_buckets(v)
            )
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_decoded_buckets(v) for v in value]
    return value


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE or not path.exists():
        path.write_text(text, encoding="utf-8")
        if not UPDATE:
            pytest.fail(f"{path} did not exist; written, check it in")
    expected = path.read_text(encoding="utf-8")
    if name.endswith(".json"):
        assert _decoded_buckets(json.loads(text)) == _decoded_buckets(json.loads(expected))
    else:
        assert text == expected


def test_json_golden() -> None:
    result = golden_result()
    text = json_reporter.render(build(result))
    check_golden("result.json", text)
    assert json.loads(text)["comparisons"] == json.loads(
        json.dumps(derive(result).comparisons.to_json())
    )
    assert json.loads(text)["warnings"] == list(derive(result).warnings)


def test_csv_golden() -> None:
    text = csv_reporter.render(build(golden_result()))
    check_golden("result.csv", text)
    rows = list(csv.DictReader(io.StringIO(text)))
    assert {r["metric"] for r in rows} >= {
        "latency.mean_us",
        "latency.p99_us",
        "throughput_rps",
        "cpu.server_us_per_request",
    }
    assert len({(r["case"], r["metric"]) for r in rows}) == len(rows)  # tidy: one per pair
    # the count of successful requests is not a metric called like the status beside it
    assert "ok" not in {r["metric"] for r in rows} and "requests_ok" in {r["metric"] for r in rows}
    p99 = next(r for r in rows if r["metric"] == "latency.p99_us")
    assert p99["unit"] == "us" and p99["threads"] == "1" and p99["variant"] == "default"


def test_comparison_csv_golden() -> None:
    text = csv_reporter.render_comparison(comparison_view(derive(golden_result()).comparisons, []))
    check_golden("comparison.csv", text)
    assert "faster" in text and "slower" in text and "same" in text


def test_markdown_golden() -> None:
    text = markdown_reporter.render(build(golden_result()))
    check_golden("result.md", text)
    assert "| threads | variant | mean | p50 | p99 | req/s | server CPU | client CPU |" in text
    assert "**Failed cases**" in text and "**Warnings**" in text


def test_terminal_golden() -> None:
    text = terminal.render(build(golden_result()), width=130)
    check_golden("result.txt", text)
    assert "geometric mean of ratios each variant / default" in text


def test_reporters_are_pure() -> None:
    result = golden_result()
    before = dumps(result)
    view = build(result)
    outputs = [
        r(view) for r in (json_reporter.render, csv_reporter.render, markdown_reporter.render)
    ]
    assert dumps(result) == before
    assert outputs == [
        r(view) for r in (json_reporter.render, csv_reporter.render, markdown_reporter.render)
    ]


def test_markdown_and_terminal_show_the_wait_lines_of_the_view(spin_result: model.Result) -> None:
    # one set of lines, in the view; the Markdown and the terminal report both show them whole
    lines = build(spin_result).wait_lines
    assert len(lines) == 2
    assert 'wait = "spin" in matrix' in lines[0]
    assert "for at most 200 us after each reply or send" in lines[0]
    [spun] = [c for c in spin_result.cases if c.point["wait"] == "spin"]
    polls = (spun.counters or {})["polls"]
    assert polls >= spun.requests  # at least one poll per reply
    assert lines[1] == f"polls per request (client): wait=spin {fmt_num(polls / spun.requests)}"
    text = markdown_reporter.render(build(spin_result))
    for line in lines:
        assert f"\n{markdown_reporter._escape(line)}\n" in text
    shown = " ".join(terminal.render(build(spin_result), width=400).split())
    assert all(line in shown for line in lines)
    # a run whose clients all block has no such lines
    assert build(golden_result()).wait_lines == ()
