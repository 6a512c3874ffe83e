"""Server timing (rpcmeter.protocols.timing): the wire fields, and the queue time the built-in
event-loop servers report from the kernel's receive time."""

from __future__ import annotations

import socket
import sys
import time
from collections.abc import Callable

import pytest

from rpcmeter.protocols import zmtp
from rpcmeter.protocols.grpc import frame
from rpcmeter.protocols.raw import request_frame
from rpcmeter.protocols.timing import (
    QUEUE_FOLLOWS,
    ServerTime,
    frame_times,
    parse_server_timing,
    read_frame_times,
    server_timing_header,
    trailer_times,
)
from rpcmeter.servers.process import ServerProcess, new_endpoint
from tests.servers.h2calls import RawGrpc
from tests.support.marks import timing_sensitive

pytestmark = pytest.mark.timeout(120)


def test_frame_times_round_trip() -> None:
    assert read_frame_times(frame_times(1234, None)) == ((1234, None), 8)
    assert read_frame_times(frame_times(1234, 0)) == ((1234, 0), 16)
    assert read_frame_times(b"xx" + frame_times(5, 7), 2) == ((5, 7), 16)
    assert frame_times(5, 7)[0] & 0x80 and not frame_times(5, None)[0] & 0x80
    assert int.from_bytes(frame_times(5, 7)[:8], "big") == QUEUE_FOLLOWS | 5


def test_header_and_trailers() -> None:
    assert server_timing_header(1_500_000, None) == b"Server-Timing: app;dur=1.500000\r\n"
    line = server_timing_header(1_500_000, 250)
    assert line == b"Server-Timing: queue;dur=0.000250, app;dur=1.500000\r\n"
    assert parse_server_timing(line[15:-2]) == (1_500_000, 250)
    assert trailer_times((("rpcmeter-server-ns", "9"), ("rpcmeter-queue-ns", "3"))) == (9, 3)
    assert trailer_times((("rpcmeter-server-ns", "9"), ("other", "x"))) == (9, None)
    assert trailer_times((("rpcmeter-queue-ns", "3"),)) is None
    assert trailer_times(None) is None


def _start(module: str, *args: str) -> tuple[ServerProcess, int]:
    endpoint = new_endpoint("tcp")
    assert endpoint.port is not None
    cmd = [sys.executable, "-m", module, "--port", str(endpoint.port), *args]
    return ServerProcess(cmd, endpoint), endpoint.port


def _http(n: int) -> bytes:
    body = str(n).encode()
    return b"POST /factorial HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (
        len(body),
        body,
    )


def _read_http(sock: socket.socket) -> ServerTime:
    got = b""
    while b"\r\n\r\n" not in got:
        got += sock.recv(1 << 20)
    head = got.split(b"\r\n\r\n")[0]
    length = int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0])
    while len(got) < len(head) + 4 + length:
        got += sock.recv(1 << 20)
    times = parse_server_timing(head.split(b"Server-Timing: ")[1].split(b"\r\n")[0])
    assert times is not None
    return times


def _read_raw(sock: socket.socket) -> ServerTime:
    got = b""
    while len(got) < 4 or len(got) < 4 + int.from_bytes(got[:4], "big"):
        got += sock.recv(1 << 20)
    return read_frame_times(got, 5)[0]


def _read_zmtp(sock: socket.socket) -> ServerTime:
    """The times of the first reply on a ZMTP connection (read by the ZMTP core as a REQ peer)."""
    peer = zmtp.Connection("REQ", accept=("ROUTER",))
    while not (messages := peer.receive(sock.recv(1 << 20))):
        assert peer.error is None, peer.error
    return read_frame_times(messages[0][-1])[0]


def _zmtp_request(body: bytes) -> bytes:
    """A REQ peer's greeting, READY and one request, sent together."""
    ready = zmtp.encode_properties((("Socket-Type", b"REQ"), ("Identity", b"")))
    return zmtp.greeting() + zmtp.encode_command(b"READY", ready) + zmtp.encode_message([b"", body])


def charged_the_wait(
    module: str,
    slow: bytes,
    fast: bytes,
    read: Callable[[socket.socket], ServerTime],
    *args: str,
) -> None:
    """A request sent on a second connection while the single-threaded server computes another
    one waits until that one is done: the server reports the wait as its queue time, though its
    event loop could not read the request until then (the kernel stamped its arrival)."""
    server, port = _start(module, *args)
    with (
        server,
        socket.create_connection(("127.0.0.1", port)) as a,
        socket.create_connection(("127.0.0.1", port)) as b,
    ):
        a.sendall(slow)
        time.sleep(0.02)  # the server is computing by now
        b.sendall(fast)
        slow_times = read(a)
        fast_times = read(b)
    compute, _ = slow_times
    assert compute > 60e6, slow_times  # 60,000! takes longer than the 20 ms head start
    queued = fast_times[1]
    assert queued is not None
    # it arrived about 20 ms after the slow one began and waited for the rest of its compute
    assert compute - 20e6 - 15e6 < queued < compute + 50e6, (slow_times, fast_times)
    assert fast_times[0] < queued


@timing_sensitive
def test_http_request_arriving_while_the_server_computes_is_charged_the_wait() -> None:
    charged_the_wait("rpcmeter.servers.http_server", _http(60_000), _http(1), _read_http)


@timing_sensitive
def test_raw_request_arriving_while_the_server_computes_is_charged_the_wait() -> None:
    slow, fast = request_frame(b"f", b"60000"), request_frame(b"n", b"")
    charged_the_wait("rpcmeter.servers.raw_server", slow, fast, _read_raw)


@timing_sensitive
def test_grpc_h2_request_arriving_while_the_server_computes_is_charged_the_wait() -> None:
    slow, fast = RawGrpc(), RawGrpc()
    slow.call("/rpcmeter.Bench/Factorial", frame(b"60000"))
    fast.call("/rpcmeter.Bench/Noop", frame(b""))
    pending = [slow, fast]  # read in this order: the slow call's connection first

    def read(sock: socket.socket) -> ServerTime:
        [reply] = pending.pop(0).read(sock).values()
        assert reply.status() == b"0", reply
        times = reply.times()
        assert times is not None
        return times

    options = ["--options", '{"server_mode": "h2"}']
    module = "rpcmeter.servers.grpc_server"
    charged_the_wait(module, slow.outgoing(), fast.outgoing(), read, *options)


@timing_sensitive
def test_zmtp_request_arriving_while_the_server_computes_is_charged_the_wait() -> None:
    slow, fast = _zmtp_request(b"f60000"), _zmtp_request(b"n")
    options = ["--options", '{"server_mode": "zmtp"}']
    charged_the_wait("rpcmeter.servers.zmq_server", slow, fast, _read_zmtp, *options)


def test_unix_sockets_report_no_queue_time(tmp_path: object) -> None:
    """A Unix socket has no receive time: the queue is left out (unknown), not sent as 0."""
    endpoint = new_endpoint("unix")
    assert endpoint.path is not None
    cmd = [sys.executable, "-m", "rpcmeter.servers.raw_server", "--transport", "unix"]
    with (
        ServerProcess([*cmd, "--socket", endpoint.path], endpoint),
        socket.socket(socket.AF_UNIX) as s,
    ):
        s.connect(endpoint.path)
        s.sendall(request_frame(b"n", b""))
        times = _read_raw(s)
    assert times[1] is None and times[0] >= 0


def test_without_queue_time_the_server_sends_none() -> None:
    """Server option ``queue_time = false``: uvloop's own transports, no queue field."""
    endpoint = new_endpoint("tcp")
    assert endpoint.port is not None
    cmd = [sys.executable, "-m", "rpcmeter.servers.http_server", "--port", str(endpoint.port)]
    with (
        ServerProcess([*cmd, "--options", '{"queue_time": false}'], endpoint),
        socket.create_connection(("127.0.0.1", endpoint.port)) as s,
    ):
        s.sendall(_http(5))
        times = _read_http(s)
    assert times[1] is None and times[0] >= 0
