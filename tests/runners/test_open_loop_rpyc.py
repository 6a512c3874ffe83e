"""Open-loop load end to end against the real rpyc reference server: a server stall at a known
moment, the achieved rate when the server keeps up, and late requests when it does not."""

from __future__ import annotations

from typing import Any

import pytest

from rpcmeter.execute import run_suite
from rpcmeter.metrics.histogram import Histogram
from rpcmeter.result import CaseDoc
from rpcmeter.suite import build_suite

pytestmark = pytest.mark.timeout(120)


def suite_of(raw: dict[str, Any]) -> Any:
    base: dict[str, Any] = {
        "target": {"driver": "rpyc", "transport": "unix"},
        "placement": {"server_cpus": "none", "client_cpus": "none"},
    }
    return build_suite({**base, **raw})


def test_stall_shows_in_corrected_p999_and_not_in_uncorrected() -> None:
    """Rate R, one loop, a stall of S seconds one second in, D seconds of schedule: the requests
    due during the stall wait for its end, so the corrected latency of the tail is spread
    linearly over (0, S]: P(corrected > x) = (S - x) / ((1 - rho) D) with rho the server's load,
    i.e. p(q) = S - (1 - q) (1 - rho) D. Uncorrected, only the one request in flight sees it.
    (The exact arithmetic, with no machine noise, is tested in-process in
    test_open_loop_schedule.py; here a busy machine only moves the tail towards S and above.
    A virtual machine also adds hiccups of its own: an idle server waking up on an idle vCPU
    sometimes answers a plain call after 50-200 ms, in either histogram. So the uncorrected tail
    is judged against the corrected one, by how many requests each holds above S / 4.)"""
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
    result = run_suite(suite)
    case = result["cases"][0]
    assert case["status"] == "ok", case["reason"]
    ol = case["open_loop"]
    assert ol["sent"] == pytest.approx(rate * duration_s, rel=0.02)
    corrected = case["latency"]
    uncorrected = case["latency_uncorrected"]
    for key, q in (("p99_us", 0.99), ("p999_us", 0.999)):
        # the arithmetic for an idle server (rho = 0); a loaded one only moves it towards S
        expected_us = (stall_s - (1 - q) * duration_s) * 1e6
        assert expected_us * 0.85 < corrected[key] < stall_s * 1e6 * 2, key
    assert uncorrected["p99_us"] < corrected["p99_us"] / 2
    assert uncorrected["max_us"] >= stall_s * 1e6 * 0.9  # the request in flight
    # above S / 4: R * 3S / 4 = 90 corrected requests, and the one in flight uncorrected
    threshold_ns = stall_s * 1e9 / 4
    above_corrected = count_above(Histogram.from_dict(case["histogram"]), threshold_ns)
    above_uncorrected = count_above(
        Histogram.from_dict(case["histogram_uncorrected"]), threshold_ns
    )
    assert above_corrected >= rate * stall_s * 3 / 4 * 0.8, above_corrected
    assert 1 <= above_uncorrected <= above_corrected / 5, (above_uncorrected, above_corrected)
    # at least the R * S requests due during the stall could not go out on time (hiccups add more)
    assert rate * stall_s * 0.8 <= ol["late"] <= ol["sent"]
    # the stored histograms carry the same figures
    assert Histogram.from_dict(case["histogram"]).percentile(99.9) / 1e3 == pytest.approx(
        corrected["p999_us"]
    )
    assert Histogram.from_dict(case["histogram_uncorrected"]).count == ol["sent"]


def count_above(histogram: Histogram, threshold_ns: float) -> int:
    values, counts = histogram.bucket_values()
    return sum(c for v, c in zip(values, counts, strict=True) if v > threshold_ns)


def by_workload(cases: list[CaseDoc]) -> dict[str, CaseDoc]:
    return {c["workload"]: c for c in cases}


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
    result = run_suite(suite)
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
