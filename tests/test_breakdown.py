"""Where the time goes: the arithmetic, the interval, the warnings, and real runs against the
built-in raw server (which reports queue times) and a server that reports no times at all."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rpcmeter.breakdown import breakdown, warnings_for
from rpcmeter.execute import run_suite
from rpcmeter.metrics.histogram import Histogram
from rpcmeter.reporters.terminal import render
from rpcmeter.suite import build_suite
from tests.drivers.streams import run_cases
from tests.support.marks import timing_sensitive


def hist(values_us: list[float]) -> Histogram:
    h = Histogram()
    h.record_array(np.array([int(v * 1e3) for v in values_us], dtype=np.int64))
    return h


def test_latency_is_round_trip_queue_compute_and_overhead_per_request() -> None:
    latency = [100.0, 140.0, 120.0, 200.0]
    server = [30.0, 50.0, 40.0, 90.0]
    queue = [10.0, 0.0, 20.0, 5.0]
    net = [a - b - q for a, b, q in zip(latency, server, queue, strict=True)]
    out = breakdown(hist([20.0, 25.0]), hist([25.0]), hist(server), hist(net), hist(queue))
    floor = out["rtt_us"]["p50"]
    assert floor == pytest.approx(25.0, rel=0.01)  # the median of before and after
    assert out["rtt_us"]["before"] == pytest.approx(20.0, rel=0.01)
    assert out["rtt_us"]["after"] == pytest.approx(25.0, rel=0.01)
    assert out["queue_us"]["mean"] == pytest.approx(8.75)
    assert out["server_us"]["mean"] == pytest.approx(52.5)
    overhead = [n - floor for n in net]
    assert out["overhead_us"]["mean"] == pytest.approx(sum(overhead) / 4)
    # the spread of the per-request differences, not of latency or server time alone
    mean = sum(overhead) / 4
    sd = math.sqrt(sum((x - mean) ** 2 for x in overhead) / 3)
    assert out["overhead_us"]["stdev"] == pytest.approx(sd)
    assert out["rtt_requests"] == 3 and out["rtt_loops"] == 1
    lo, hi = out["overhead_us"]["ci95"]
    # at least the standard error of the mean plus half the drift (before 20, after 25)
    assert hi - lo >= 2 * (1.959964 * sd / 2 + 2.5) - 0.01
    assert lo < mean < hi and out["overhead_us"]["within_noise"] is False


def test_an_overhead_whose_interval_includes_zero_is_within_noise() -> None:
    out = breakdown(
        hist([10.0, 14.0]),
        hist([12.0]),
        hist([5.0] * 4),
        hist([11.0, 13.5, 12.5, 11.5]),
        hist([0.0] * 4),
    )
    o = out["overhead_us"]
    assert o["ci95"][0] < 0 < o["ci95"][1] and o["within_noise"] is True
    assert warnings_for({"cases": [{"status": "ok", "breakdown": out}]}) == []


def test_drift_between_before_and_after_widens_the_interval() -> None:
    steady = breakdown(hist([10.0] * 50), hist([10.0] * 50), hist([1.0]), hist([30.0]), Histogram())
    drift = breakdown(hist([5.0] * 50), hist([15.0] * 50), hist([1.0]), hist([30.0]), Histogram())
    width = [b["overhead_us"]["ci95"][1] - b["overhead_us"]["ci95"][0] for b in (steady, drift)]
    assert width[1] > width[0] + 9.0  # half the 10 us drift on each side


def test_negative_overhead_beyond_noise_warns_with_a_cause() -> None:
    def case(before: float, after: float) -> dict[str, object]:
        b = breakdown(
            hist([before] * 100),
            hist([after] * 100),
            hist([50.0] * 100),
            hist([2.0] * 100),
            Histogram(),
        )
        return {"status": "ok", "workload": "w", "variant": "v", "point": {}, "breakdown": b}

    [drifted] = warnings_for({"cases": [case(20.0, 30.0)]})
    assert "negative beyond the noise" in drifted and "moved from 20.0 us" in drifted
    [steady] = warnings_for({"cases": [case(20.0, 20.0)]})
    assert "w/v" in steady and "server's reported times exceed" in steady


def test_without_server_time_queue_compute_and_overhead_are_unknown() -> None:
    out = breakdown(hist([10.0, 12.0]), hist([11.0]), Histogram(), Histogram(), Histogram())
    assert out["server_us"] is None and out["overhead_us"] is None and out["queue_us"] is None
    assert out["rtt_us"]["mean"] == pytest.approx(11.0)


def test_version_1_documents_still_render() -> None:
    old = {
        "rtt_us": {"mean": 20.0, "stdev": 1.0},
        "server_us": {"mean": 5.0, "stdev": 1.0},
        "overhead_us": {"mean": -3.0, "stdev": 2.0},
        "rtt_requests": 10,
    }
    case = {
        "id": 0,
        "workload": "w",
        "variant": "default",
        "kind": "noop",
        "point": {},
        "status": "ok",
        "requests": 10,
        "ok": 10,
        "errors": {},
        "throughput_rps": 1.0,
        "histogram": hist([28.0] * 10).to_dict(),
        "breakdown": old,
    }
    text = render(
        {
            "suite": {"name": "t", "variants": {"default": {}}, "matrix_keys": []},
            "cases": [case],
            "status": "complete",
        }
    )
    assert "where the time goes" in text and "-0.003 ± 0.002" in text


@timing_sensitive
@pytest.mark.timeout(120)
def test_breakdown_with_queue_times_from_the_raw_server() -> None:
    cases = run_cases(
        "raw",
        {"noop": {}, "sleep": {"ms": 100, "requests": 10}},
        load={"requests": 100, "concurrency": 2, "connections": 2},
        breakdown={"rtt_requests": 50},
    )
    for case in cases.values():
        assert case["status"] == "ok"
        b = case["breakdown"]
        assert b["rtt_requests"] == 100 and b["rtt_loops"] == 1  # 50 before, 50 after, one loop
        assert b["rtt_us"]["mean"] > 0 and b["queue_us"] is not None
        # mean identity: latency = round trip (median) + queue + server + overhead
        parts = ("queue_us", "server_us", "overhead_us")
        total = b["rtt_us"]["p50"] + sum(b[k]["mean"] for k in parts)
        assert total == pytest.approx(case["latency"]["mean_us"], rel=1e-6)
        lo, hi = b["overhead_us"]["ci95"]
        assert lo <= b["overhead_us"]["mean"] <= hi
    sleep = cases["sleep"]["breakdown"]
    assert 99_500 <= sleep["server_us"]["mean"] < 500_000
    assert sleep["server_us"]["mean"] > sleep["rtt_us"]["mean"]
    assert sleep["server_us"]["mean"] > sleep["overhead_us"]["mean"]
    assert sleep["queue_us"]["mean"] < 50_000  # sleeps wait on a timer, not behind each other
    text = render(
        {
            "suite": {"name": "t", "variants": {"default": {}}, "matrix_keys": []},
            "cases": list(cases.values()),
            "status": "complete",
        }
    )
    assert "where the time goes" in text and "round trip" in text and "queue" in text


@pytest.mark.timeout(120)
def test_a_server_sending_no_times_gives_unknown_figures() -> None:
    """nginx-like: the HTTP driver against a server whose replies carry no Server-Timing (the
    built-in server's reply without the header, from a stub command server)."""
    stub = (
        "import socket,sys\n"
        "s=socket.create_server(('127.0.0.1',int(sys.argv[1])))\n"
        "print('ready',flush=True)\n"
        "while True:\n"
        " c,_=s.accept()\n"
        " f=c.makefile('rb')\n"
        " while True:\n"
        "  line=f.readline()\n"
        "  if not line: break\n"
        "  if line==b'\\r\\n': c.sendall(b'HTTP/1.1 200 OK\\r\\nContent-Length: 0\\r\\n\\r\\n')\n"
    )
    suite = build_suite(
        {
            "name": "no times",
            "target": {
                "driver": "http",
                "server": {"command": ["{python}", "-c", stub, "{port}"]},
            },
            "load": {"requests": 30, "warmup": 1, "timeout_s": 60},
            "workloads": {"noop": {}},
            "breakdown": {"rtt_requests": 20},
        }
    )
    cases = {c["workload"]: c for c in run_suite(suite)["cases"]}
    case = cases["noop"]
    assert case["status"] == "ok", case["reason"]
    b = case["breakdown"]
    assert b["rtt_us"]["mean"] > 0
    assert b["queue_us"] is None and b["server_us"] is None and b["overhead_us"] is None
    assert case["server_time"] is None
