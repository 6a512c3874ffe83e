"""Where the time goes: the arithmetic, and a real run against the built-in raw server."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rpcmeter.breakdown import breakdown
from rpcmeter.metrics.histogram import Histogram
from rpcmeter.reporters.terminal import render
from tests.drivers.streams import run_cases
from tests.support.marks import timing_sensitive


def hist(values_us: list[float]) -> Histogram:
    h = Histogram()
    h.record_array(np.array([int(v * 1e3) for v in values_us], dtype=np.int64))
    return h


def test_overhead_is_latency_minus_rtt_minus_server_per_request() -> None:
    latency = [100.0, 140.0, 120.0, 200.0]
    server = [30.0, 50.0, 40.0, 90.0]
    rtt = hist([20.0, 30.0, 25.0])  # mean 25
    out = breakdown(rtt, hist(server), hist([a - b for a, b in zip(latency, server, strict=True)]))
    overhead = [a - 25.0 - b for a, b in zip(latency, server, strict=True)]  # 45 65 55 85
    assert out["rtt_us"]["mean"] == pytest.approx(25.0)
    assert out["rtt_us"]["stdev"] == pytest.approx(5.0)
    assert out["server_us"]["mean"] == pytest.approx(52.5)
    assert out["overhead_us"]["mean"] == pytest.approx(sum(overhead) / 4)
    # the spread of the per-request differences, not of latency or server time alone
    sd = math.sqrt(sum((x - 62.5) ** 2 for x in overhead) / 3)
    assert out["overhead_us"]["stdev"] == pytest.approx(sd)
    assert out["rtt_requests"] == 3


def test_without_server_time_only_the_round_trip_is_known() -> None:
    out = breakdown(hist([10.0, 12.0]), Histogram(), Histogram())
    assert out["server_us"] is None and out["overhead_us"] is None
    assert out["rtt_us"]["mean"] == pytest.approx(11.0)


@timing_sensitive
@pytest.mark.timeout(120)
def test_breakdown_measured_before_each_case() -> None:
    cases = run_cases(
        "raw",
        {"noop": {}, "sleep": {"ms": 100, "requests": 10}},
        load={"requests": 100, "concurrency": 2, "connections": 2},
        breakdown={"rtt_requests": 50},
    )
    for case in cases.values():
        assert case["status"] == "ok"
        b = case["breakdown"]
        assert b["rtt_requests"] == 100  # 50 per loop, 2 loops
        assert b["rtt_us"]["mean"] > 0
        # mean identity: latency = rtt + server + overhead
        total = b["rtt_us"]["mean"] + b["server_us"]["mean"] + b["overhead_us"]["mean"]
        assert total == pytest.approx(case["latency"]["mean_us"], rel=1e-6)
    sleep = cases["sleep"]["breakdown"]
    assert 99_500 <= sleep["server_us"]["mean"] < 500_000
    # a 100 ms server wait is server time, not overhead or round trip (long enough to stand out
    # of the round trips of a busy machine, whose mean a few stalls can take to tens of ms)
    assert sleep["server_us"]["mean"] > sleep["rtt_us"]["mean"]
    assert sleep["server_us"]["mean"] > sleep["overhead_us"]["mean"]
    text = render(
        {
            "suite": {"name": "t", "variants": {"default": {}}, "matrix_keys": []},
            "cases": list(cases.values()),
            "status": "complete",
        }
    )
    assert "where the time goes" in text and "round trip" in text and "overhead" in text
