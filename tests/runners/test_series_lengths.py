"""A case's time series over its life: each interval as long as the time it covers (the last
few replies after the case's end make a short interval, not a whole one), the clients' CPU in
the intervals it was spent in, and the repetitions of a cell drawn as one series. A real run
through the command line, against the built-in HTTP server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rpcmeter.cli import main
from rpcmeter.reporters.build import build
from rpcmeter.result.document import Result

pytestmark = pytest.mark.timeout(120)

SUITE = """
name = "lengths"
repeat = 2
[target]
driver = "http"
transport = "tcp"
[workloads.noop]
[load]
duration_s = 0.6
warmup = 5
[matrix]
clients = [1]
threads = [4]
[timeseries]
interval_s = 0.25
[resources]
idle_s = 0
"""


def test_intervals_weigh_their_real_length_and_cpu(tmp_path: Path) -> None:
    suite, out, page = tmp_path / "s.toml", tmp_path / "r.json", tmp_path / "r.html"
    suite.write_text(SUITE, encoding="utf-8")
    args = ["run", str(suite), "--no-store", "--no-live", "-o", str(out), "--html", str(page)]
    assert main(args) == 0
    doc = json.loads(out.read_text(encoding="utf-8"))
    for case in doc["cases"]:
        intervals = case["series"]["intervals"]
        assert len(intervals) >= 3, intervals
        ends = [i["start_s"] + i["seconds"] for i in intervals]
        assert [i["start_s"] for i in intervals[1:]] == pytest.approx(ends[:-1])  # contiguous
        # the intervals cover the case's measured time, not whole intervals past its end
        assert ends[-1] == pytest.approx(case["wall_s"], abs=0.05)
        assert all(i["seconds"] <= 0.25 + 1e-9 for i in intervals)
        cpu = [i["client_cpu_s"] for i in intervals]
        client = case["cpu"]["client_user_s"] + case["cpu"]["client_sys_s"]
        assert sum(cpu) == pytest.approx(client, rel=0.01)  # every CPU second, once
        full = [c for i, c in zip(intervals, cpu, strict=True) if i["seconds"] > 0.2]
        assert all(c > 0.05 * client for c in full), cpu  # the first interval's too
        last = intervals[-1]
        if last["seconds"] < 0.2:  # a few replies after the end: its CPU for its few ms
            assert cpu[-1] <= client * (last["seconds"] / case["wall_s"] + 0.1), cpu
    # the two repetitions are one series: one pair of plots, no interval drawn as empty
    view = build(Result.from_json(doc))
    plots = [p for p in view.all_plots if p.kind.startswith("time-")]
    assert [p.kind for p in plots] == ["time-latency", "time-throughput"]
    assert "2 repetitions merged" in plots[0].x_label
    (rps,) = plots[1].series
    assert min(rps.y) > 0.3 * max(rps.y), rps.y
    html = page.read_text(encoding="utf-8")
    assert html.count('data-kind="time-throughput"') == 1
