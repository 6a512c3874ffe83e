"""The rpyc driver end to end against the real built-in rpyc server (small counts)."""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import Any

import pytest
import rpyc
from rpyc.core.stream import SocketStream
from rpyc.utils.factory import connect_stream

from rpcmeter.drivers.base import DriverContext
from rpcmeter.drivers.rpyc import RpycDriver
from rpcmeter.net.endpoints import Endpoint
from rpcmeter.plan.load import build_suite
from rpcmeter.run.execute import run_suite
from rpcmeter.servers.rpyc_server import listen
from rpcmeter.suite.workloads import (
    RandomWaitParams,
    SimpleParams,
    random_wait_expected_s,
    random_wait_replay,
)
from tests.support.marks import timing_sensitive
from tests.support.synthetic import written

pytestmark = pytest.mark.timeout(180)


def run(raw: dict[str, Any]) -> dict[str, Any]:
    return written(run_suite(build_suite(raw)))


def cases_by(result: dict[str, Any], **match: Any) -> list[dict[str, Any]]:
    return [
        c
        for c in result["cases"]
        if all(c.get(k) == v or c["point"].get(k) == v for k, v in match.items())
    ]


@pytest.mark.parametrize("transport", ["unix", "tcp"])
def test_study_workloads_validated_both_variants(transport: str) -> None:
    result = run(
        {
            "target": {"driver": "rpyc", "transport": transport},
            "repeat": 1,
            "variants": {"default": {}, "bind": {"options": {"bind_threads": True}}},
            "workloads": {
                "simple": {},
                "sub 1": {"kind": "callback", "depth": 1},
                "sub 2": {"kind": "callback", "depth": 2},
                "sub 5": {"kind": "callback", "depth": 5, "requests": 20},
            },
            "load": {"requests": 60, "warmup": 3},
            "matrix": {"threads": [2], "clients": [2]},
            "validate": True,
            "seed": 3,
        }
    )
    assert result["status"] == "complete"
    assert len(result["cases"]) == 8
    for case in result["cases"]:
        assert case["status"] == "ok", case["reason"]
        expected = 2 * 2 * (20 if case["workload"] == "sub 5" else 60)
        assert case["requests"] == case["ok"] == expected
        assert case["errors"] == {}
        lat = case["latency"]
        assert 0 < lat["min_us"] <= lat["p50_us"] <= lat["p99_us"] <= lat["max_us"]
        assert case["throughput_rps"] > 0 and case["wall_s"] > 0
        assert case["endpoint"].startswith(transport + "://")
    # deeper nesting costs more round trips (medians: a busy machine's stalls move the means;
    # five nested round trips against none, since on a loaded machine one or two drown in noise)
    p50 = {c["workload"]: c["latency"]["p50_us"] for c in cases_by(result, variant="default")}
    assert p50["simple"] < p50["sub 5"], p50


def test_validation_counts_mismatches_from_a_corrupting_server() -> None:
    result = run(
        {
            "target": {"driver": "rpyc", "transport": "unix", "options": {"corrupt_every": 10}},
            "workloads": {"simple": {}},
            "load": {"requests": 100, "warmup": 0},
            "validate": True,
        }
    )
    case = result["cases"][0]
    assert case["errors"] == {"mismatch": 10}
    assert case["ok"] == 90 and case["requests"] == 100


@timing_sensitive
def test_random_wait_is_the_studys_sleep_plus_round_trips_and_bind_parallelises() -> None:
    params: dict[str, Any] = {"delay_p": 1.0, "delay_s": 0.01, "sub_p": 0.5, "max_depth": 2}
    seed, requests = 4093473691, 60
    result = run(
        {
            "target": {"driver": "rpyc", "transport": "unix"},
            "repeat": 1,
            "variants": {"default": {}, "bind": {"options": {"bind_threads": True}}},
            "workloads": {
                "random wait": {"kind": "random_wait", **params},
                # the same seeded draws and nested calls, every wait zero seconds: round trips
                "round trips": {"kind": "random_wait", **params, "delay_s": 0.0},
            },
            "load": {"requests": requests, "warmup": 0},
            "matrix": {"threads": [1, 4]},
            "seed": seed,
        }
    )
    assert all(c["status"] == "ok" for c in result["cases"])

    def mean_us(workload: str, variant: str = "default", threads: int = 1) -> float:
        (case,) = cases_by(result, workload=workload, variant=variant, threads=threads)
        return float(case["latency"]["mean_us"])

    # the sequence one thread replays: study 000's seeds, the sleeps and nested calls it makes
    p = RandomWaitParams(**params)
    slept_s, calls = random_wait_replay(p, seed, 0, requests)
    assert slept_s / requests == pytest.approx(random_wait_expected_s(p), rel=0.15)
    assert calls > requests
    # the round trips of that sequence are measured as the same sequence without waits
    expected_us = slept_s / requests * 1e6 + mean_us("round trips")
    assert mean_us("random wait") == pytest.approx(expected_us, rel=0.10)
    # study 000: without binding one connection serves one request at a time; with binding,
    # four threads wait concurrently, so latency stays near the single-thread figure.
    d4 = mean_us("random wait", threads=4)
    b4 = mean_us("random wait", variant="bind", threads=4)
    assert d4 > 2.0 * mean_us("random wait")
    assert b4 / d4 < 0.7


@timing_sensitive
def test_background_threads_serve_the_default_variant_concurrently() -> None:
    params = {"delay_p": 1.0, "delay_s": 0.008, "sub_p": 0.0, "max_depth": 0}
    result = run(
        {
            "target": {"driver": "rpyc", "transport": "tcp"},
            "repeat": 1,
            "variants": {"default": {}, "background": {"options": {"background": 4}}},
            "workloads": {"wait": {"kind": "random_wait", **params}},
            "load": {"requests": 30, "warmup": 0, "threads": 4},
        }
    )
    plain, bg = (c["latency"]["mean_us"] for c in result["cases"])
    assert bg < 0.7 * plain


@pytest.mark.parametrize("nodelay", [True, False])
@pytest.mark.timeout(30)
def test_tcp_connections_set_nodelay_on_both_ends_unless_told_not_to(nodelay: bool) -> None:
    """rpyc leaves Nagle's algorithm on; a nested call's frames then wait for the peer's delayed
    ACK (40 ms). rpcmeter sets TCP_NODELAY on both ends unless ``nodelay = false``."""
    listener = listen("tcp", "127.0.0.1", 0, None, queue_time=True, nodelay=nodelay)
    accepted: list[socket.socket] = []
    ready = threading.Event()

    def serve() -> None:  # rpyc's handshake needs a peer that answers
        sock, _ = listener.accept()
        accepted.append(sock)
        ready.set()
        with contextlib.suppress(EOFError, OSError):
            connect_stream(SocketStream(sock), rpyc.VoidService, {}).serve_all()

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    host, port = listener.getsockname()[:2]
    driver = RpycDriver(
        DriverContext(Endpoint("tcp", host, port), SimpleParams(), {"nodelay": nodelay})
    )
    driver.connect()
    try:
        assert ready.wait(10)
        for sock in (driver.conn._channel.stream.sock, accepted[0]):
            assert bool(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)) is nodelay
    finally:
        driver.close()
        server.join(10)
        listener.close()
