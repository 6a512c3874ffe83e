"""Where the time goes: the arithmetic, the interval, the warnings, and real runs against the
built-in raw server (which reports queue times) and a server that reports no times at all."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from rpcmeter.metrics.histogram import Histogram
from rpcmeter.model import Breakdown
from rpcmeter.plan.load import build_suite
from rpcmeter.reporters.terminal import render
from rpcmeter.result.breakdown import breakdown, warnings_for
from rpcmeter.run.execute import run_suite
from rpcmeter.runners.recording import LoadOutcome
from rpcmeter.runners.round_trip import floor
from tests.drivers.streams import run_cases
from tests.support.marks import timing_sensitive
from tests.support.synthetic import completed, view_of, written


def hist(values_us: list[float]) -> Histogram:
    h = Histogram()
    h.record_array(np.array([int(v * 1e3) for v in values_us], dtype=np.int64))
    return h


def _f(value: float | None) -> float:
    assert value is not None
    return value


def _ci(b: Breakdown) -> list[float | None]:
    """The overhead's 95 % interval (there must be one)."""
    assert b.overhead_us is not None and b.overhead_us.ci95 is not None
    return b.overhead_us.ci95


def test_latency_is_round_trip_queue_compute_and_overhead_per_request() -> None:
    latency = [100.0, 140.0, 120.0, 200.0]
    server = [30.0, 50.0, 40.0, 90.0]
    queue = [10.0, 0.0, 20.0, 5.0]
    net = [a - b - q for a, b, q in zip(latency, server, queue, strict=True)]
    out = breakdown(hist([20.0, 25.0]), hist([25.0]), hist(server), hist(net), hist(queue))
    rtt, queued, served, o = out.rtt_us, out.queue_us, out.server_us, out.overhead_us
    assert rtt is not None and queued is not None and served is not None and o is not None
    floor = _f(rtt.p50)
    assert floor == pytest.approx(25.0, rel=0.01)  # the median of before and after
    assert rtt.before == pytest.approx(20.0, rel=0.01)
    assert rtt.after == pytest.approx(25.0, rel=0.01)
    assert queued.mean == pytest.approx(8.75)
    assert served.mean == pytest.approx(52.5)
    overhead = [n - floor for n in net]
    assert o.mean == pytest.approx(sum(overhead) / 4)
    # the spread of the per-request differences, not of latency or server time alone
    mean = sum(overhead) / 4
    sd = math.sqrt(sum((x - mean) ** 2 for x in overhead) / 3)
    assert o.stdev == pytest.approx(sd)
    assert out.rtt_requests == 3 and out.rtt_loops == 1
    lo, hi = map(_f, _ci(out))
    # at least the standard error of the mean plus half the drift (before 20, after 25)
    assert hi - lo >= 2 * (1.959964 * sd / 2 + 2.5) - 0.01
    assert lo < mean < hi and o.within_noise is False


def test_an_overhead_whose_interval_includes_zero_is_within_noise() -> None:
    out = breakdown(
        hist([10.0, 14.0]),
        hist([12.0]),
        hist([5.0] * 4),
        hist([11.0, 13.5, 12.5, 11.5]),
        hist([0.0] * 4),
    )
    low, high = _ci(out)
    assert _f(low) < 0 < _f(high) and out.overhead_us is not None
    assert out.overhead_us.within_noise is True
    assert warnings_for(completed({"cases": [{"status": "ok", "breakdown": out}]})) == []


def test_drift_between_before_and_after_widens_the_interval() -> None:
    steady = breakdown(hist([10.0] * 50), hist([10.0] * 50), hist([1.0]), hist([30.0]), Histogram())
    drift = breakdown(hist([5.0] * 50), hist([15.0] * 50), hist([1.0]), hist([30.0]), Histogram())
    width = [_f(ci[1]) - _f(ci[0]) for ci in (_ci(steady), _ci(drift))]
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

    [drifted] = warnings_for(completed({"cases": [case(20.0, 30.0)]}))
    assert "negative beyond the noise" in drifted and "moved from 20.0 us" in drifted
    [steady] = warnings_for(completed({"cases": [case(20.0, 20.0)]}))
    assert "w/v" in steady and "server's reported times exceed" in steady


def test_without_server_time_queue_compute_and_overhead_are_unknown() -> None:
    out = breakdown(hist([10.0, 12.0]), hist([11.0]), Histogram(), Histogram(), Histogram())
    assert out.server_us is None and out.overhead_us is None and out.queue_us is None
    assert out.rtt_us is not None and out.rtt_us.mean == pytest.approx(11.0)


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
        view_of(
            completed(
                {
                    "suite": {"name": "t", "variants": {"default": {}}, "matrix_keys": []},
                    "cases": [case],
                    "status": "complete",
                }
            )
        )
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
        assert b["loops"] == 2 and b["wait"] == "block"  # the case's own, per client
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
        view_of(
            completed(
                {
                    "suite": {"name": "t", "variants": {"default": {}}, "matrix_keys": []},
                    "cases": list(cases.values()),
                    "status": "complete",
                }
            )
        )
    )
    assert "where the time goes" in text and "round trip" in text and "queue" in text


# Servers whose replies carry no times at all (command servers): nginx-like HTTP (no
# Server-Timing), and gRPC, rpyc servers with the rpcmeter.Bench service or the rpyc service but
# no timing fields (no trailers; no simple_timed).
HTTP_STUB = (
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
GRPC_STUB = (
    "import sys,grpc\n"
    "from concurrent import futures\n"
    "h=grpc.unary_unary_rpc_method_handler(lambda req,ctx: b'')\n"
    "s=grpc.server(futures.ThreadPoolExecutor(2))\n"
    "s.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("
    "'rpcmeter.Bench',{'Noop':h}),))\n"
    "s.add_insecure_port('127.0.0.1:'+sys.argv[1])\n"
    "s.start()\n"
    "print('ready',flush=True)\n"
    "s.wait_for_termination()\n"
)
RPYC_STUB = (
    "import sys,rpyc\n"
    "from rpyc.utils.server import ThreadedServer\n"
    "class S(rpyc.Service):\n"
    " def exposed_simple(self,value=None): return value\n"
    "t=ThreadedServer(S,hostname='127.0.0.1',port=int(sys.argv[1]))\n"
    "print('ready',flush=True)\n"
    "t.start()\n"
)
NO_TIMES_SERVERS = {
    "http": (HTTP_STUB, "noop"),
    "grpc": (GRPC_STUB, "noop"),
    "rpyc": (RPYC_STUB, "simple"),
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("driver", list(NO_TIMES_SERVERS))
def test_a_server_sending_no_times_gives_unknown_figures(driver: str) -> None:
    stub, kind = NO_TIMES_SERVERS[driver]
    suite = build_suite(
        {
            "name": "no times",
            "target": {
                "driver": driver,
                "server": {"command": ["{python}", "-c", stub, "{port}"]},
            },
            "load": {"requests": 30, "warmup": 1, "timeout_s": 60},
            "workloads": {"w": {"kind": kind}},
            "breakdown": {"rtt_requests": 20},
        }
    )
    cases = {c["workload"]: c for c in written(run_suite(suite))["cases"]}
    case = cases["w"]
    assert case["status"] == "ok", case["reason"]
    assert case["ok"] == 30
    b = case["breakdown"]
    assert b["rtt_us"]["mean"] > 0
    assert b["queue_us"] is None and b["server_us"] is None and b["overhead_us"] is None
    assert case["server_time"] is None


# Every built-in server, single-threaded and kept busy by four loops: (driver, options,
# workload, whether it reports the queue). gRPC's core (the gRPC server's default mode) and libzmq
# read requests on their own threads, so those servers cannot say when a request arrived: their
# queue is unknown. The gRPC server's h2 mode and the ZeroMQ server's zmtp mode read them
# themselves, with the kernel's receive time.
BUSY_SERVERS: dict[str, tuple[str, dict[str, Any], dict[str, Any], bool]] = {
    "http/1.1": ("http", {}, {"kind": "factorial", "n": 5000}, True),
    "http/2": ("http", {"http": "2"}, {"kind": "factorial", "n": 5000}, True),
    "raw": ("raw", {}, {"kind": "factorial", "n": 5000}, True),
    "grpc": ("grpc", {}, {"kind": "factorial", "n": 5000}, False),
    "grpc h2": ("grpc", {"server_mode": "h2"}, {"kind": "factorial", "n": 5000}, True),
    "zmq": ("zmq", {}, {"kind": "factorial", "n": 5000}, False),
    "zmq zmtp": ("zmq", {"server_mode": "zmtp"}, {"kind": "factorial", "n": 5000}, True),
    # the select server (one thread for every connection) and four client processes: the loops
    # of one client share its rpyc connection, and wait mostly in the client, not the server
    "rpyc": ("rpyc", {"spin_us": 5000, "wait": "block"}, {"kind": "simple"}, True),
}


def _busy_case(driver: str, options: dict[str, Any], workload: dict[str, Any]) -> dict[str, Any]:
    load: dict[str, Any] = {"requests": 40, "concurrency": 4, "connections": 4}
    if driver == "rpyc":
        load = {"requests": 40, "clients": 4}
    cases = run_cases(
        driver, {"busy": workload}, options=options, load=load, breakdown={"rtt_requests": 20}
    )
    case = cases["busy"]
    assert case["status"] == "ok", case["reason"]
    return case


def busy_server_reports_its_queue(server: str) -> None:
    """Four loops on a server that handles one request at a time: each request waits behind the
    others, and the server says so (queue > 0), or, where it cannot know, says nothing (null);
    the parts add up to the latency."""
    driver, options, workload, reports_queue = BUSY_SERVERS[server]
    case = _busy_case(driver, options, workload)
    b = case["breakdown"]
    compute = b["server_us"]["mean"]
    assert compute > 2_000  # 5000! (about 10 ms) or 5 ms of spinning per request
    if reports_queue:
        # each request waits for about one to three others' handling
        assert b["queue_us"]["mean"] > compute / 2, b
        assert b["queue_us"]["count"] == b["server_us"]["count"] == case["ok"]
        parts: tuple[str, ...] = ("queue_us", "server_us", "overhead_us")
    else:
        assert b["queue_us"] is None, b  # unknown, never 0
        # the wait is left in the overhead, where the breakdown says it may be
        assert b["overhead_us"]["mean"] > compute / 2, b
        parts = ("server_us", "overhead_us")
    total = b["rtt_us"]["p50"] + sum(b[k]["mean"] for k in parts)
    assert total == pytest.approx(case["latency"]["mean_us"], rel=1e-6)


# one test per server (not parametrized), so that each is one timing-sensitive test
@timing_sensitive
@pytest.mark.timeout(180)
def test_a_busy_http_1_1_server_reports_its_queue() -> None:
    busy_server_reports_its_queue("http/1.1")


@timing_sensitive
@pytest.mark.timeout(180)
def test_a_busy_http_2_server_reports_its_queue() -> None:
    busy_server_reports_its_queue("http/2")


@timing_sensitive
@pytest.mark.timeout(180)
def test_a_busy_raw_server_reports_its_queue() -> None:
    busy_server_reports_its_queue("raw")


@timing_sensitive
@pytest.mark.timeout(180)
def test_a_busy_grpc_server_reports_no_queue() -> None:
    busy_server_reports_its_queue("grpc")


@timing_sensitive
@pytest.mark.timeout(180)
def test_a_busy_grpc_h2_server_reports_its_queue() -> None:
    busy_server_reports_its_queue("grpc h2")


@timing_sensitive
@pytest.mark.timeout(180)
def test_a_busy_zmq_server_reports_no_queue() -> None:
    busy_server_reports_its_queue("zmq")


@timing_sensitive
@pytest.mark.timeout(180)
def test_a_busy_zmq_server_in_zmtp_mode_reports_its_queue() -> None:
    busy_server_reports_its_queue("zmq zmtp")


@timing_sensitive
@pytest.mark.timeout(180)
def test_a_busy_rpyc_server_reports_its_queue() -> None:
    busy_server_reports_its_queue("rpyc")


# The built-in servers told to send no queue field (those that have one to leave out).
NO_QUEUE_SERVERS: dict[str, tuple[str, dict[str, Any], str]] = {
    "http/1.1": ("http", {"queue_time": False}, "tcp"),
    "http/2": ("http", {"http": "2", "queue_time": False}, "tcp"),
    "raw unix": ("raw", {}, "unix"),
    "grpc h2 unix": ("grpc", {"server_mode": "h2"}, "unix"),
    "grpc h2": ("grpc", {"server_mode": "h2", "queue_time": False}, "tcp"),
    "zmq zmtp ipc": ("zmq", {"server_mode": "zmtp"}, "ipc"),
    "zmq zmtp": ("zmq", {"server_mode": "zmtp", "queue_time": False}, "tcp"),
    "rpyc unix": ("rpyc", {}, "unix"),
    "rpyc": ("rpyc", {"queue_time": False}, "tcp"),
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("server", list(NO_QUEUE_SERVERS))
def test_a_server_sending_no_queue_time_gives_unknown_not_zero(server: str) -> None:
    driver, options, transport = NO_QUEUE_SERVERS[server]
    workload = {"kind": "simple"} if driver == "rpyc" else {"kind": "echo", "request_bytes": 64}
    cases = run_cases(
        driver,
        {"w": workload},
        transport=transport,
        options=options,
        load={"requests": 30},
        breakdown={"rtt_requests": 10},
    )
    case = cases["w"]
    assert case["status"] == "ok", case["reason"]
    b = case["breakdown"]
    assert b["queue_us"] is None and b["server_us"]["count"] == case["ok"] > 0
    assert b["overhead_us"] is not None


def test_the_round_trip_is_the_no_op_less_what_its_server_reported() -> None:
    """A no-op request waits after it arrives too (the server wakes up and reads it): that wait
    is in the case's queue column, so the round trip leaves it out, and the four parts add up
    without counting it twice. Without server times for every no-op, the latencies as they are."""
    timed = LoadOutcome()
    for latency, app, queue in [(100_000, 2_000, 30_000), (120_000, 2_000, 40_000)]:
        timed.hist.record(latency)
        timed.net_hist.record(latency - app - queue)
    assert floor(timed) is timed.net_hist
    assert floor(timed).percentile(50) < 80_000  # not the latencies' 100-120 us
    partly = LoadOutcome()
    for latency in (100_000, 120_000):
        partly.hist.record(latency)
    partly.net_hist.record(68_000)
    assert floor(partly) is partly.hist
