"""Open-loop load on the event-driven HTTP driver against the real HTTP reference server, one
run with the server stalling at a known moment and one without."""

from __future__ import annotations

import pytest

from rpcmeter.execute import run_suite
from rpcmeter.suite import build_suite

pytestmark = pytest.mark.timeout(120)


def test_http_open_loop_rate_and_stall() -> None:
    rate, stall_s, duration_s = 1000, 0.25, 3.0
    suite = build_suite(
        {
            "target": {"driver": "http", "transport": "tcp"},
            "repeat": 1,
            "variants": {
                "steady": {},
                "stall": {"options": {"stall_ms": stall_s * 1e3, "stall_after_s": 1.0}},
            },
            "workloads": {"noop": {}},
            # two requests in flight at most: uncorrected, only those two see the stall
            "load": {
                "mode": "open",
                "rate": rate,
                "concurrency": 2,
                "duration_s": duration_s,
                "warmup": 0,
                "late_ms": 10,
            },
            "placement": {"server_cpus": "none", "client_cpus": "none"},
        }
    )
    result = run_suite(suite)
    steady, stall = result["cases"]
    assert steady["status"] == stall["status"] == "ok", (steady["reason"], stall["reason"])
    ol = steady["open_loop"]
    assert ol["achieved_rps"] == pytest.approx(rate, rel=0.02)
    assert ol["late"] < 0.5 * ol["sent"]  # 10 ms behind: rare unless the machine is busy
    assert steady["latency"]["p99_us"] < stall_s * 1e6 / 4
    assert steady["server_time"] is not None  # Server-Timing is kept in open loop too

    corrected, uncorrected = stall["latency"], stall["latency_uncorrected"]
    for key, q in (("p99_us", 0.99), ("p999_us", 0.999)):
        expected_us = (stall_s - (1 - q) * duration_s) * 1e6
        assert expected_us * 0.85 < corrected[key] < stall_s * 1e6 * 2, key
    assert uncorrected["p999_us"] < stall_s * 1e6 / 4
    assert uncorrected["max_us"] == pytest.approx(stall_s * 1e6, rel=0.5)
    assert stall["open_loop"]["late"] >= rate * stall_s * 0.8
