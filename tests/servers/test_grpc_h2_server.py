"""The built-in gRPC server's ``server_mode = "h2"`` (rpcmeter.servers.grpc_h2_server): every
workload with both gRPC clients over TCP, a Unix socket and TLS, the queue time over TCP, the
errors it answers, and calls no driver makes (python-hyper's client)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from rpcmeter.drivers.grpc import GrpcDriver, GrpcError
from rpcmeter.plan.load import build_suite
from rpcmeter.protocols.grpc import frame
from rpcmeter.run.execute import run_suite
from rpcmeter.servers.process import ServerProcess, new_endpoint
from rpcmeter.suite.workloads import parse_params
from tests.drivers import calls
from tests.drivers.streams import assert_clean, run_cases
from tests.servers.h2calls import RawGrpc
from tests.support.synthetic import written

pytestmark = pytest.mark.timeout(120)
H2 = {"server_mode": "h2"}


server = calls.server_fixture(GrpcDriver, ("tcp", "unix"), H2)
client = calls.grpc_client_fixture()


@pytest.mark.parametrize(("kind", "params", "reply_len"), calls.WORKLOAD_CASES)
def test_every_unary_workload_with_both_clients_and_the_queue_over_tcp(
    server: ServerProcess, kind: str, params: dict[str, Any], reply_len: int, client: str
) -> None:
    tcp = server.endpoint.transport == "tcp"
    d, counters = calls.three_timed_calls(
        GrpcDriver, server.endpoint, kind, params, client=client, reports_queue=tcp
    )
    assert counters["bytes_in"] == 3 * reply_len
    assert counters["bytes_out"] == 3 * len(d.request)


def _status_of(server: ServerProcess, client: str, **options: Any) -> str:
    d = calls.connected(
        GrpcDriver, server.endpoint, parse_params("noop", {}), client=client, **options
    )
    try:
        with pytest.raises(GrpcError) as info:
            d.caller(0)()
        return f"{type(info.value).__name__}: {info.value}"
    finally:
        d.close()


def test_an_unknown_method_is_unimplemented(server: ServerProcess, client: str) -> None:
    got = _status_of(server, client, method="/rpcmeter.Bench/Nope")
    assert got == "grpc:UNIMPLEMENTED: unknown method /rpcmeter.Bench/Nope"


def test_a_request_the_workload_cannot_read_is_an_invalid_argument(
    server: ServerProcess, client: str
) -> None:
    got = _status_of(server, client, method="/rpcmeter.Bench/Factorial", request_text="ten")
    assert got.startswith("grpc:INVALID_ARGUMENT: bad factorial request: "), got


@contextmanager
def connected_h2_server() -> Iterator[socket.socket]:
    """A connection to the server in h2 mode over TCP, started for the test."""
    endpoint = new_endpoint("tcp")
    assert endpoint.port is not None
    with (
        ServerProcess(GrpcDriver.server_command(endpoint, H2), endpoint),
        socket.create_connection(("127.0.0.1", endpoint.port), timeout=10) as sock,
    ):
        yield sock


def test_malformed_messages_other_content_types_and_broken_frames() -> None:
    with connected_h2_server() as sock:
        raw = RawGrpc()
        echo = "/rpcmeter.Bench/Echo"
        good = raw.call(echo, frame(b"hello"))
        short = raw.call(echo, b"\0\0\0\0\x09abc")  # says 9 bytes, has 3
        two = raw.call(echo, frame(b"a") + frame(b"b"))
        packed = raw.call(echo, b"\1" + frame(b"x")[1:])  # the compressed flag
        text = raw.call(echo, frame(b"x"), content_type=b"text/plain")
        stream = raw.call("/rpcmeter.Bench/StreamClient", frame(b"x") + b"\0\0")
        sock.sendall(raw.outgoing())
        replies = raw.read(sock)
        assert replies[good].body == frame(b"hello") and replies[good].status() == b"0"
        times = replies[good].times()
        assert times is not None and times[0] > 0 and times[1] is not None and times[1] >= 0
        for sid in (short, two, packed, stream):
            assert replies[sid].status() == b"13", (sid, replies[sid])  # INTERNAL
            assert replies[sid].headers[b":status"] == b"200"
        assert replies[packed].headers[b"grpc-message"] == b"compressed messages are not supported"
        assert replies[text].headers[b":status"] == b"415" and replies[text].status() is None
        # frames that break HTTP/2 (DATA on stream 0): GOAWAY, and the connection closes
        sock.sendall(b"\0\0\1\0\0\0\0\0\0x")
        got = b""
        while data := sock.recv(65536):
            got += data
        assert got[3:4] == b"\7"  # a GOAWAY frame


def test_streaming_every_mode_with_both_clients() -> None:
    big = {"messages": 5, "request_bytes": 200_000, "reply_bytes": 200_000}
    workloads = {
        "server": {"kind": "stream", "mode": "server", "messages": 7, "reply_bytes": 70},
        "client": {"kind": "stream", "mode": "client", "messages": 7, "request_bytes": 30},
        "ping_pong": {"kind": "stream", "mode": "bidi", "messages": 7},
        "flood": {"kind": "stream", "mode": "bidi", "pattern": "flood", "messages": 7},
        # past the flow-control windows both ways
        "big_server": {"kind": "stream", "mode": "server", **big, "request_bytes": 10},
        "big_bidi": {"kind": "stream", "mode": "bidi", **big},
    }
    for client in ("h2", "grpcio"):
        cases = run_cases(
            "grpc",
            workloads,
            options={**H2, "client": client},
            load={"requests": 4, "warmup": 1, "concurrency": 2, "connections": 1},
        )
        for name, case in cases.items():
            assert_clean(case, 8)
            messages = 5 if name.startswith("big") else 7
            assert case["stream"]["messages"] == 8 * messages, (client, name)


def test_tls_with_both_clients() -> None:
    variants = {
        c: {"options": {**H2, "client": c, "connect_timeout_s": 5}} for c in ("h2", "grpcio")
    }
    result = written(
        run_suite(
            build_suite(
                {
                    "target": {"driver": "grpc", "tls": True},
                    "variants": variants,
                    "workloads": {"echo": {"request_bytes": 100}},
                    "load": {"requests": 20, "warmup": 2},
                    "validate": True,
                    "repeat": 1,
                }
            )
        )
    )
    for case in result["cases"]:
        assert_clean(case, 20)
        assert case["server_time"]["mean_us"] > 0


def test_a_server_stream_asked_for_no_replies_still_ends_with_its_status() -> None:
    with connected_h2_server() as sock:
        raw = RawGrpc()
        path = "/rpcmeter.Bench/StreamServer"
        none = raw.call(path, frame(b""), metadata=[(b"rpcmeter-messages", b"0")])
        three = raw.call(path, frame(b""), metadata=[(b"rpcmeter-messages", b"3")])
        bad = raw.call(path, frame(b""), metadata=[(b"rpcmeter-messages", b"many")])
        sock.sendall(raw.outgoing())
        replies = raw.read(sock)
    assert replies[none].body == b"" and replies[none].status() == b"0"
    assert replies[three].body == frame(b"") * 3 and replies[three].status() == b"0"
    assert replies[bad].status() == b"3"  # INVALID_ARGUMENT
