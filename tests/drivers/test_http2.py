"""The HTTP driver over HTTP/2 (``options.http = "2"``) against the built-in server's h2c, and
the built-in server's h2c against python-hyper's ``h2`` client side."""

from __future__ import annotations

import socket
import sys

import h2.config
import h2.connection
import h2.events
import pytest

from rpcmeter.errors import SuiteError
from rpcmeter.plan.load import build_suite
from rpcmeter.protocols.timing import parse_server_timing
from rpcmeter.servers.process import ServerProcess, new_endpoint
from tests.drivers.streams import assert_clean, run_cases

pytestmark = pytest.mark.timeout(120)
H2 = {"http": "2"}


def test_every_workload_validated_over_http2() -> None:
    cases = run_cases(
        "http",
        {
            "noop": {},
            "echo": {"request_bytes": 1000},
            "payload": {"request_bytes": 10, "reply_bytes": 300_000},  # beyond the windows
            "sleep": {"ms": 5, "requests": 5},
            "factorial": {"n": 5000, "requests": 5},
        },
        options=H2,
        load={"connections": 2, "concurrency": 6},
    )
    for name in ("noop", "echo", "payload"):
        assert_clean(cases[name], 50 * 6)
    for name in ("sleep", "factorial"):
        assert_clean(cases[name], 5 * 6)
    echo = cases["echo"]["bytes"]  # frames and header blocks count too
    assert 1000 < echo["out_per_request"] < 1100 and 1000 < echo["in_per_request"] < 1100
    assert cases["payload"]["bytes"]["in_per_request"] > 300_000
    sleep = cases["sleep"]
    assert sleep["server_time"]["mean_us"] >= 4_500
    assert sleep["latency"]["mean_us"] >= sleep["server_time"]["mean_us"]


def test_mismatches_statuses_and_unix_sockets_over_http2() -> None:
    cases = run_cases(
        "http",
        {"echo": {"request_bytes": 64}},
        transport="unix",
        options={**H2, "corrupt_every": 5},
        load={"requests": 100, "warmup": 0},
    )
    assert cases["echo"]["errors"] == {"mismatch": 20} and cases["echo"]["ok"] == 80
    cases = run_cases(
        "http",
        {"noop": {}},
        options={**H2, "path": "/nope", "method": "POST", "headers": {"X-Test": "1"}},
        load={"requests": 30, "warmup": 0, "concurrency": 2},
    )
    assert cases["noop"]["errors"] == {"http_404": 60}


def test_bad_http_version_fails_when_the_suite_loads() -> None:
    raw = {"target": {"driver": "http", "options": {"http": "3"}}, "workloads": {"noop": {}}}
    with pytest.raises(SuiteError, match=r'options.http: expected "1.1" or "2"'):
        build_suite(raw, "s.toml")


def test_the_server_speaks_h2c_to_another_client() -> None:
    """python-hyper's client side: every request answered, Server-Timing on each."""
    endpoint = new_endpoint("tcp")
    cmd = [sys.executable, "-m", "rpcmeter.servers.http_server", "--port", str(endpoint.port)]
    with ServerProcess(cmd, endpoint):
        assert endpoint.port is not None
        client = h2.connection.H2Connection(h2.config.H2Configuration(header_encoding=None))
        client.initiate_connection()
        base = [(b":scheme", b"http"), (b":authority", b"x")]
        client.send_headers(1, [(b":method", b"POST"), (b":path", b"/echo"), *base])
        client.send_data(1, b"hello", end_stream=True)
        client.send_headers(3, [(b":method", b"GET"), (b":path", b"/nope"), *base], end_stream=True)
        replies: dict[int, dict[bytes, bytes]] = {}
        bodies: dict[int, bytes] = {1: b"", 3: b""}
        ended: set[int] = set()
        with socket.create_connection((endpoint.host, endpoint.port), timeout=10) as s:
            s.sendall(client.data_to_send())
            while ended != {1, 3}:
                data = s.recv(65536)
                assert data
                for event in client.receive_data(data):
                    if isinstance(event, h2.events.ResponseReceived):
                        replies[event.stream_id] = dict(event.headers)
                    elif isinstance(event, h2.events.DataReceived):
                        bodies[event.stream_id] += event.data
                    elif isinstance(event, h2.events.StreamEnded):
                        ended.add(event.stream_id)
                s.sendall(client.data_to_send())
    assert replies[1][b":status"] == b"200" and bodies[1] == b"hello"
    # the queue time as over HTTP/1.1 (TCP: from the kernel's receive time), then the handling
    times = parse_server_timing(replies[1][b"server-timing"])
    assert replies[1][b"server-timing"].startswith(b"queue;dur=")
    assert times is not None and times[0] >= 0 and times[1] is not None and times[1] >= 0
    assert replies[3][b":status"] == b"404"
