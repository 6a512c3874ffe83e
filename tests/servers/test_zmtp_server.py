"""The ZeroMQ server's zmtp mode (rpcmeter's own ZMTP on the event loop) against real libzmq
peers: pyzmq REQ and DEALER sockets over tcp and ipc, heartbeats, peers it refuses, and rpcmeter's
zmq driver through a suite."""

from __future__ import annotations

import math
import random
import socket
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
import zmq
from zmq.utils.monitor import recv_monitor_message

from rpcmeter.drivers.zmq import ZmqDriver
from rpcmeter.plan.load import build_suite
from rpcmeter.protocols import zmtp
from rpcmeter.protocols.timing import read_frame_times
from rpcmeter.protocols.zmq import address
from rpcmeter.run.execute import run_suite
from rpcmeter.servers.process import ServerProcess, new_endpoint
from rpcmeter.suite.workloads import lift_int_digit_limit
from tests.support.synthetic import written

pytestmark = pytest.mark.timeout(120)
ZMTP = {"server_mode": "zmtp"}
lift_int_digit_limit()


def start(transport: str, **options: Any) -> ServerProcess:
    endpoint = new_endpoint(transport)
    return ServerProcess(ZmqDriver.server_command(endpoint, {**ZMTP, **options}), endpoint)


@pytest.fixture(scope="module", params=["tcp", "ipc"])
def server(request: pytest.FixtureRequest) -> Iterator[ServerProcess]:
    with start(request.param) as proc:
        yield proc


@pytest.fixture
def context() -> Iterator[zmq.Context[zmq.Socket[bytes]]]:
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    yield ctx
    ctx.destroy(linger=0)


def connect(
    ctx: zmq.Context[zmq.Socket[bytes]], kind: int, server: ServerProcess
) -> zmq.Socket[bytes]:
    sock = ctx.socket(kind)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVTIMEO, 10_000)
    sock.connect(address(server.endpoint))
    return sock


def requests(n: int, seed: int) -> list[tuple[bytes, bytes]]:
    """``n`` requests and the reply bodies they must get: factorials, echoes of bodies short and
    long (past 255 bytes: long frames), noops."""
    rng = random.Random(seed)
    out: list[tuple[bytes, bytes]] = []
    for _ in range(n):
        pick = rng.randrange(3)
        if pick == 0:
            k = rng.randrange(0, 400)
            out.append((b"f%d" % k, str(math.factorial(k)).encode()))
        elif pick == 1:
            body = rng.randbytes(rng.choice((0, 1, 255, 256, 5_000, 100_000)))
            out.append((b"e" + body, body))
        else:
            out.append((b"n", b""))
    return out


def check_reply(reply: bytes, expected: bytes, server: ServerProcess) -> None:
    (app, queue), head = read_frame_times(reply)
    assert reply[head:] == expected
    assert app >= 0
    if server.endpoint.transport == "tcp":
        assert queue is not None and 0 <= queue < 10e9  # the kernel's receive time is known
    else:
        assert queue is None  # a Unix socket has none: unknown, not 0


def test_req_clients_many_requests(
    server: ServerProcess, context: zmq.Context[zmq.Socket[bytes]]
) -> None:
    socks = [connect(context, zmq.REQ, server) for _ in range(3)]
    work = requests(600, seed=1)
    for i in range(0, len(work), 3):  # three clients, each with one request outstanding
        batch = work[i : i + 3]
        for sock, (request, _) in zip(socks, batch, strict=False):
            sock.send(request)
        for sock, (_, expected) in zip(socks, batch, strict=False):
            check_reply(sock.recv(), expected, server)
    assert server.alive()


def test_dealer_pipelined_with_and_without_envelopes(
    server: ServerProcess, context: zmq.Context[zmq.Socket[bytes]]
) -> None:
    dealer = connect(context, zmq.DEALER, server)
    work = requests(200, seed=2)
    envelopes = [[b""], [b"route", b""], []]  # as a REQ would, a deeper envelope, none
    for i, (request, _) in enumerate(work):  # all sent before the first reply is read
        dealer.send_multipart([*envelopes[i % 3], request])
    for i, (_, expected) in enumerate(work):
        frames = dealer.recv_multipart()
        assert frames[:-1] == envelopes[i % 3]  # the envelope comes back, as from a REP socket
        check_reply(frames[-1], expected, server)


def test_heartbeats_keep_an_idle_connection(
    server: ServerProcess, context: zmq.Context[zmq.Socket[bytes]]
) -> None:
    """libzmq pings every 20 ms and drops a connection that has not answered within 100 ms: the
    server's PONGs keep it up through 0.8 s of silence."""
    dealer = context.socket(zmq.DEALER)
    dealer.setsockopt(zmq.LINGER, 0)
    dealer.setsockopt(zmq.HEARTBEAT_IVL, 20)
    dealer.setsockopt(zmq.HEARTBEAT_TIMEOUT, 100)
    monitor = dealer.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_DISCONNECTED)
    dealer.connect(address(server.endpoint))
    dealer.send_multipart([b"", b"n"])
    assert dealer.poll(10_000) and dealer.recv_multipart()[0] == b""
    time.sleep(0.8)
    dealer.send_multipart([b"", b"f5"])
    assert dealer.poll(10_000) and dealer.recv_multipart()[1].endswith(b"120")
    events = []
    while monitor.poll(100):
        events.append(recv_monitor_message(monitor)["event"])
    assert events == [zmq.EVENT_HANDSHAKE_SUCCEEDED], events  # one handshake, no disconnection
    dealer.disable_monitor()
    monitor.close(linger=0)
    dealer.close(linger=0)


def test_other_socket_types_are_refused(
    server: ServerProcess, context: zmq.Context[zmq.Socket[bytes]]
) -> None:
    pub = context.socket(zmq.PUB)
    pub.setsockopt(zmq.LINGER, 0)
    monitor = pub.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_DISCONNECTED)
    pub.connect(address(server.endpoint))
    event = recv_monitor_message(monitor)["event"] if monitor.poll(10_000) else 0
    assert event == zmq.EVENT_DISCONNECTED  # never a handshake
    pub.disable_monitor()
    monitor.close(linger=0)
    pub.close(linger=0)
    assert server.alive()


def raw_peer(server: ServerProcess) -> socket.socket:
    ep = server.endpoint
    if ep.path is not None:
        sock = socket.socket(socket.AF_UNIX)
        sock.connect(ep.path)
    else:
        assert ep.port is not None
        sock = socket.create_connection((ep.host, ep.port))
    sock.settimeout(10)
    return sock


def read_to_close(sock: socket.socket) -> bytes:
    got = b""
    while chunk := sock.recv(1 << 16):
        got += chunk
    return got


REQ_HELLO = zmtp.greeting() + zmtp.encode_command(
    b"READY", zmtp.encode_properties((("Socket-Type", b"REQ"), ("Identity", b"")))
)


@pytest.mark.parametrize(
    ("stream", "note", "answer"),
    [
        (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "not a ZMTP 3 peer", b""),
        (zmtp.greeting(b"PLAIN"), "unsupported security mechanism 'PLAIN'", b""),
        (
            REQ_HELLO + bytes((zmtp.LONG | zmtp.MORE,)) + (1 << 32).to_bytes(8, "big"),
            "a frame of 4,294,967,296 bytes exceeds the limit of 1,000,000 bytes",
            b"",
        ),
        (
            zmtp.greeting() + zmtp.encode_command(b"READY", b"\x0bSocket-Type\0\0\0\x03SUB"),
            "socket type SUB cannot talk to ROUTER",
            b"\x05ERROR",
        ),
    ],
)
def test_bad_peers_are_closed_with_a_note(stream: bytes, note: str, answer: bytes) -> None:
    with start("tcp", max_message_bytes=1_000_000) as server:
        for _ in range(2):  # and the server goes on serving
            with raw_peer(server) as sock:
                sock.sendall(stream)
                got = read_to_close(sock)
            assert got[:10] == zmtp.greeting()[:10]
            assert answer in got[64:]
            assert server.alive()
        with raw_peer(server) as sock:
            sock.sendall(REQ_HELLO + zmtp.encode_message([b"", b"f6"]))
            got = b""
            while not got.endswith(b"720"):
                got += sock.recv(1 << 16)
        log = server.log_path.read_text()
    assert log.count("zmtp: closing the connection of") == 2 and log.count(note) == 2, log


def test_driver_suite_end_to_end_with_queue_time() -> None:
    result = written(
        run_suite(
            build_suite(
                {
                    "target": {"driver": "zmq", "transport": "tcp", "options": ZMTP},
                    "repeat": 1,
                    "variants": {"block": {}, "poll": {"options": {"recv": "poll"}}},
                    "workloads": {
                        "echo": {"kind": "echo", "request_bytes": 300},
                        "f": {"kind": "factorial", "n": 200},
                    },
                    "load": {"requests": 100, "warmup": 5, "concurrency": 2},
                    "breakdown": {"rtt_requests": 10},
                    "validate": True,
                }
            )
        )
    )
    assert len(result["cases"]) == 4
    for case in result["cases"]:
        assert case["status"] == "ok", case["reason"]
        assert case["ok"] == case["requests"] == 200 and case["errors"] == {}
        b = case["breakdown"]
        assert b["queue_us"] is not None and b["queue_us"]["count"] == 200, b
        assert 0 <= b["queue_us"]["mean"] < case["latency"]["mean_us"]
        assert 0 < case["server_time"]["mean_us"] < case["latency"]["mean_us"]
        # 16 bytes of times before the body in every reply
        reply = 300 if case["workload"] == "echo" else len(str(math.factorial(200)))
        assert case["bytes"]["in_per_request"] == 16 + reply


def test_workers_are_refused_in_the_zmtp_mode() -> None:
    endpoint = new_endpoint("tcp")
    cmd = ZmqDriver.server_command(endpoint, {**ZMTP, "server_workers": 2})
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert done.stderr.strip().endswith(
        "--options: server_workers: the zmtp server mode serves on one loop (got 2)"
    )
