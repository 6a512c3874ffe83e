"""Open-loop load on the event-driven HTTP driver (HTTP/1.1 and HTTP/2) against the real HTTP
reference server, one run with the server stalling at a known moment and one without."""

from __future__ import annotations

import pytest

from rpcmeter.plan.load import build_suite
from rpcmeter.run.execute import run_suite
from tests.support.marks import timing_sensitive
from tests.support.stall import check_stall
from tests.support.synthetic import written

pytestmark = pytest.mark.timeout(120)


@timing_sensitive
def test_http_open_loop_rate_and_stall() -> None:
    open_loop_rate_and_stall("1.1", 1000)


@timing_sensitive
def test_http2_open_loop_rate_and_stall() -> None:
    # the built-in server's HTTP/2 (python-hyper's h2) costs it several times its HTTP/1.1
    open_loop_rate_and_stall("2", 400)


def open_loop_rate_and_stall(http: str, rate: int) -> None:
    stall_s, duration_s = 0.25, 3.0
    suite = build_suite(
        {
            "target": {"driver": "http", "transport": "tcp", "options": {"http": http}},
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
    result = written(run_suite(suite))
    steady, stall = result["cases"]
    assert steady["status"] == stall["status"] == "ok", (steady["reason"], stall["reason"])
    ol = steady["open_loop"]
    assert ol["achieved_rps"] == pytest.approx(rate, rel=0.02)
    assert ol["late"] < 0.5 * ol["sent"]  # 10 ms behind: rare unless the machine is busy
    # the steady run shows no stall: its tail is far below the stalled run's
    assert steady["latency"]["p99_us"] < stall["latency"]["p99_us"] / 2
    assert steady["server_time"] is not None  # Server-Timing is kept in open loop too
    check_stall(stall, rate, stall_s, duration_s)


@timing_sensitive
def test_requests_per_second_on_the_schedules_time_base() -> None:
    """The server stalls just before sending ends, so the last replies arrive well after it:
    the case's requests/s and the schedule's achieved rate still agree (the wait for those
    replies is their latency, not time without requests), while wall_s counts the wait."""
    rate, duration_s, stall_s = 1000, 1.0, 0.5
    suite = build_suite(
        {
            "target": {
                "driver": "http",
                "options": {"stall_ms": stall_s * 1e3, "stall_after_s": duration_s - 0.1},
            },
            "workloads": {"noop": {}},
            "load": {
                "mode": "open",
                "rate": rate,
                "concurrency": 200,
                "duration_s": duration_s,
                "warmup": 0,
            },
            "resources": {"idle_s": 0},
            "placement": {"server_cpus": "none", "client_cpus": "none"},
        }
    )
    (case,) = written(run_suite(suite))["cases"]
    assert case["status"] == "ok" and case["errors"] == {}, case["reason"]
    ol = case["open_loop"]
    assert case["ok"] == ol["sent"]
    assert case["throughput_rps"] == pytest.approx(ol["achieved_rps"], rel=1e-9)
    assert case["wall_s"] > duration_s + stall_s / 2  # the drain: ok / wall_s would be far lower
