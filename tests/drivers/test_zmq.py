"""The ZeroMQ driver against the real built-in ZeroMQ server: every workload, both transports,
every receive mode, validation, server time and byte counters."""

from __future__ import annotations

import math
import sys
import threading
import time
from functools import partial
from typing import Any

import pytest
import zmq

from rpcmeter.drivers.base import ReplyMismatch
from rpcmeter.drivers.zmq import ZmqDriver
from rpcmeter.errors import SuiteError
from rpcmeter.plan.load import build_suite
from rpcmeter.protocols.timing import ServerTime, frame_times
from rpcmeter.protocols.zmq import address
from rpcmeter.run.execute import run_suite
from rpcmeter.servers.process import ServerProcess, new_endpoint, probe
from rpcmeter.suite.workloads import factorial_digits, parse_params
from tests.drivers import calls
from tests.support.synthetic import written

pytestmark = pytest.mark.timeout(120)
server = calls.server_fixture(ZmqDriver, ("tcp", "ipc"))
driver = partial(calls.connected, ZmqDriver)


@pytest.mark.parametrize(("kind", "params", "reply_len"), calls.WORKLOAD_CASES)
def test_workloads_validated_with_server_time(
    server: ServerProcess, kind: str, params: dict[str, Any], reply_len: int
) -> None:
    d, counters = calls.three_timed_calls(ZmqDriver, server.endpoint, kind, params)
    assert counters == {"bytes_out": 3 * len(d.request), "bytes_in": 3 * (8 + reply_len)}


@pytest.mark.parametrize(
    "options", [{"recv": "poll"}, {"recv": "sleep", "sleep_us": 100}, {"recv": "block"}]
)
def test_receive_modes(server: ServerProcess, options: dict[str, Any]) -> None:
    d = driver(server.endpoint, parse_params("sleep", {"ms": 5}), threads=2, **options)
    try:
        handled = 0  # the server's time on the six requests
        for t in range(2):
            call = d.caller(t)
            for _ in range(3):
                times = call()
                assert isinstance(times, tuple) and times[0] >= 4_500_000 and times[1] is None
                handled += times[0]
        counters = d.counters()
        assert counters["bytes_out"] == 6 * len(d.request)
        if options["recv"] == "block":
            assert "would_block_ns" not in counters
        else:
            # six replies that each took the server at least 5 ms to send: the client waited
            # for most of that time (on a busy machine it may start waiting late: the send
            # returns before the clock is read)
            assert counters["would_block_ns"] >= handled // 2
    finally:
        d.close()


def test_wrong_reply_is_a_mismatch(server: ServerProcess) -> None:
    d = driver(server.endpoint, parse_params("factorial", {"n": 20}))
    d.expected = str(math.factorial(21)).encode()  # what a wrong server would be checked against
    try:
        with pytest.raises(ReplyMismatch):
            d.caller(0)()
    finally:
        d.close()


def test_unknown_receive_mode_is_a_suite_error(server: ServerProcess) -> None:
    with pytest.raises(SuiteError, match=r"options\.recv"):
        driver(server.endpoint, parse_params("noop", {}), recv="spin")


def test_reply_timeout_is_fatal() -> None:
    endpoint = new_endpoint("ipc")  # nobody listens
    for recv in ("block", "poll"):
        d = driver(endpoint, parse_params("noop", {}), recv=recv, call_timeout_s=0.05)
        try:
            with pytest.raises(TimeoutError):
                d.caller(0)()
            assert issubclass(TimeoutError, ZmqDriver.fatal_errors)
        finally:
            d.close()


def test_probe_sees_ipc_server() -> None:
    endpoint = new_endpoint("ipc")
    assert not probe(endpoint)
    with ServerProcess(ZmqDriver.server_command(endpoint, {}), endpoint):
        assert probe(endpoint)
    assert not probe(endpoint)


def test_worker_threads_serve_sleeps_concurrently() -> None:
    endpoint = new_endpoint("tcp")
    cmd = ZmqDriver.server_command(endpoint, {"server_workers": 4})
    with ServerProcess(cmd, endpoint):
        d = driver(endpoint, parse_params("sleep", {"ms": 200}), threads=4)
        try:
            results: list[ServerTime] = []
            callers = [d.caller(t) for t in range(4)]
            threads = [threading.Thread(target=lambda c=c: results.append(c())) for c in callers]
            t0 = time.monotonic()
            for th in threads:
                th.start()
            for th in threads:
                th.join(10)
            elapsed = time.monotonic() - t0
            assert len(results) == 4 and all(r[0] >= 190_000_000 for r in results)
            assert elapsed < 0.7  # one after another they would take 0.8 s
        finally:
            d.close()


def test_suite_end_to_end_records_server_time_bytes_and_blocking() -> None:
    result = written(
        run_suite(
            build_suite(
                {
                    "target": {"driver": "zmq", "transport": "ipc"},
                    "repeat": 1,
                    "variants": {"block": {}, "poll": {"options": {"recv": "poll"}}},
                    "workloads": {"payload": {"request_bytes": 200, "reply_bytes": 900}},
                    "load": {"requests": 100, "warmup": 5, "concurrency": 2},
                    "validate": True,
                }
            )
        )
    )
    assert [c["variant"] for c in result["cases"]] == ["block", "poll"]
    for case in result["cases"]:
        assert case["status"] == "ok", case["reason"]
        assert case["ok"] == case["requests"] == 200 and case["errors"] == {}
        assert 0 < case["server_time"]["mean_us"] < case["latency"]["mean_us"]
        # warmup calls are not counted: exactly 201 B out, 8 + 900 B back per request
        assert case["bytes"] == {"out_per_request": 201.0, "in_per_request": 908.0}
    block, poll = result["cases"]
    assert "would_block_ns" not in block["counters"]
    assert 0 < poll["counters"]["would_block_ns"] / 200 < poll["latency"]["mean_us"] * 1e3


# a REP server that is not rpcmeter's: replies b"pong:" + the request, knows no workload codes
FOREIGN_SERVER = """
import sys, zmq
sock = zmq.Context().socket(zmq.REP)
sock.bind(sys.argv[1])
print("ready", flush=True)
while True:
    sock.send(b"pong:" + sock.recv())
"""


@pytest.mark.parametrize("transport", ["tcp", "ipc"])
def test_any_rep_server_with_raw_framing(transport: str) -> None:
    endpoint = new_endpoint(transport)
    cmd = [sys.executable, "-c", FOREIGN_SERVER, address(endpoint)]
    with ServerProcess(cmd, endpoint):
        d = driver(
            endpoint,
            parse_params("noop", {}),
            framing="raw",
            request_text="ping",
            expect_text="pong:ping",
        )
        try:
            call = d.caller(0)
            assert [call() for _ in range(3)] == [None] * 3  # validated; no server time
            assert d.counters() == {"bytes_out": 12, "bytes_in": 27}
        finally:
            d.close()
        d = driver(endpoint, parse_params("noop", {}), framing="raw", request_text="ping")
        d.expected = b"ping"  # what a server that echoes would have sent
        try:
            with pytest.raises(ReplyMismatch):
                d.caller(0)()
        finally:
            d.close()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"recv": "spin"}, "variants.v: options.recv: expected one of block, poll, sleep"),
        ({"sleep_us": -1}, "variants.v.options.sleep_us: Input should be greater than or equal"),
        ({"framing": "json"}, "variants.v: options.framing: expected rpcmeter or raw"),
        ({"request_hex": "zz"}, "variants.v: options.request_hex: cannot read"),
        ({"server_mode": "fast"}, "variants.v: options.server_mode: expected one of libzmq, zmtp"),
        (
            {"server_mode": "zmtp", "server_workers": 2},
            "variants.v: options.server_workers: the zmtp server mode serves on one loop",
        ),
        ({"max_message_bytes": 0}, "variants.v.options.max_message_bytes: Input should be greater"),
    ],
)
def test_bad_options_fail_when_the_suite_loads(options: dict[str, Any], message: str) -> None:
    raw = {
        "target": {"driver": "zmq"},
        "variants": {"ok": {}, "v": {"options": options}},
        "workloads": {"noop": {}},
    }
    assert calls.suite_error(raw).startswith(f"s.toml: {message}")


def test_malformed_request_is_answered_not_fatal(server: ServerProcess) -> None:
    d = driver(server.endpoint, parse_params("factorial", {"n": 5}))
    d.request = b"fnot-a-number"  # a client that speaks the framing badly
    try:
        with pytest.raises(ReplyMismatch, match="error: factorial"):
            d.caller(0)()
    finally:
        d.close()
    assert server.alive()


def test_queue_time_of_another_server_is_read() -> None:
    """A server of one's own that sets the top bit of ``server_ns`` and sends ``queue_ns``: the
    driver reads both (and validates the body after them)."""
    endpoint = new_endpoint("tcp")
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    rep = context.socket(zmq.REP)
    rep.setsockopt(zmq.LINGER, 0)
    rep.bind(address(endpoint))

    def serve() -> None:
        for times in ((1234, 77), (5678, None)):
            rep.recv()
            rep.send(frame_times(*times) + factorial_digits(5))

    th = threading.Thread(target=serve, daemon=True)
    th.start()
    d = driver(endpoint, parse_params("factorial", {"n": 5}))
    try:
        call = d.caller(0)
        assert [call(), call()] == [(1234, 77), (5678, None)]
    finally:
        d.close()
        th.join(5)
        rep.close(linger=0)
        context.term()


def test_dealer_envelopes_come_back_as_from_a_rep_socket(server: ServerProcess) -> None:
    """A DEALER peer with a REQ's empty delimiter, a deeper envelope or none: the reply is the
    same frames but the last, then the reply frame (the server's zmtp mode answers alike)."""
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    dealer = context.socket(zmq.DEALER)
    dealer.setsockopt(zmq.LINGER, 0)
    dealer.connect(address(server.endpoint))
    try:
        for envelope in ([b""], [b"route", b""], []):
            dealer.send_multipart([*envelope, b"f5"])
            assert dealer.poll(10_000)
            frames = dealer.recv_multipart()
            assert frames[:-1] == envelope and frames[-1][8:] == b"120"
        assert server.alive()
    finally:
        dealer.close(linger=0)
        context.term()
