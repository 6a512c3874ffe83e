"""Open-loop load end to end against the real rpyc reference server: a server stall at a known
moment, the achieved rate when the server keeps up, and late requests when it does not."""

from __future__ import annotations

from typing import Any

import pytest

from rpcmeter.metrics.histogram import Histogram
from rpcmeter.plan.load import build_suite
from rpcmeter.run.execute import run_suite
from tests.support.marks import timing_sensitive
from tests.support.stall import check_stall
from tests.support.synthetic import written

pytestmark = pytest.mark.timeout(120)


def suite_of(raw: dict[str, Any]) -> Any:
    base: dict[str, Any] = {
        "target": {"driver": "rpyc", "transport": "unix"},
        "placement": {"server_cpus": "none", "client_cpus": "none"},
    }
    return build_suite({**base, **raw})


@timing_sensitive
def test_stall_shows_in_corrected_p999_and_not_in_uncorrected() -> None:
    """One loop: uncorrected, only the one request in flight sees the stall."""
    rate, stall_s, duration_s = 400, 0.3, 3.0
    suite = suite_of(
        {
            "target": {
                "driver": "rpyc",
                "transport": "unix",
                "options": {"stall_ms": stall_s * 1e3, "stall_after_s": 1.0},
            },
            "workloads": {"simple": {}},
            "load": {"mode": "open", "rate": rate, "duration_s": duration_s, "warmup": 0},
        }
    )
    result = written(run_suite(suite))
    case = result["cases"][0]
    assert case["status"] == "ok", case["reason"]
    ol = case["open_loop"]
    assert ol["sent"] == pytest.approx(rate * duration_s, rel=0.02)
    check_stall(case, rate, stall_s, duration_s)
    # the stored histograms carry the same figures
    assert Histogram.from_dict(case["histogram"]).percentile(99.9) / 1e3 == pytest.approx(
        case["latency"]["p999_us"]
    )
    assert Histogram.from_dict(case["histogram_uncorrected"]).count == ol["sent"]


def by_workload(cases: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {c["workload"]: c for c in cases}


@timing_sensitive
def test_achieved_rate_when_the_server_keeps_up_and_late_when_it_does_not() -> None:
    rate = 300
    suite = suite_of(
        {
            "workloads": {
                "simple": {},
                # one uniform(0, 20 ms) wait per request: about 100 req/s per connection
                "slow": {
                    "kind": "random_wait",
                    "delay_p": 1.0,
                    "delay_s": 0.02,
                    "sub_p": 0.0,
                    "max_depth": 0,
                },
            },
            # late: more than 10 ms behind (a busy machine delays wake-ups by milliseconds)
            "load": {
                "mode": "open",
                "rate": rate,
                "clients": 2,
                "duration_s": 2.0,
                "warmup": 5,
                "late_ms": 10,
            },
        }
    )
    result = written(run_suite(suite))
    cases = by_workload(result["cases"])
    fast, slow = cases["simple"], cases["slow"]
    assert fast["status"] == slow["status"] == "ok"
    ol = fast["open_loop"]
    assert ol["offered_rps"] == pytest.approx(rate)
    assert ol["achieved_rps"] == pytest.approx(rate, rel=0.02)
    assert ol["sent"] == pytest.approx(rate * 2.0, rel=0.02)
    assert ol["dropped"] <= 0.02 * ol["scheduled"]
    assert ol["late"] < 0.5 * ol["sent"]  # 10 ms behind: rare unless the machine is busy
    assert fast["throughput_rps"] == pytest.approx(rate, rel=0.1)
    slow_ol = slow["open_loop"]
    assert slow_ol["achieved_rps"] < 0.85 * rate
    assert slow_ol["late"] > 0.3 * slow_ol["sent"]
    assert slow_ol["late"] > 5 * max(1, ol["late"])
    assert slow_ol["dropped"] > 0
    assert slow["latency"]["p99_us"] > 5 * slow["latency_uncorrected"]["p99_us"]
    warnings = result["warnings"]
    assert any("slow" in w and "target rate not reached" in w for w in warnings)
    assert not any("simple" in w and "target rate not reached" in w for w in warnings)
