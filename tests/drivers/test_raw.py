"""Raw-socket (length-prefixed frames) driver and server."""

from __future__ import annotations

import socket
import struct
import sys

import pytest

from rpcmeter.drivers.base import ReplyError, ReplyMismatch
from rpcmeter.drivers.raw import RawConnection
from rpcmeter.protocols.raw import reply_frame, request_frame
from rpcmeter.protocols.timing import ServerTime, read_frame_times
from rpcmeter.servers.process import ServerProcess, new_endpoint
from tests.drivers.streams import assert_clean, run_cases

pytestmark = pytest.mark.timeout(120)


def test_every_workload_validated_over_unix() -> None:
    cases = run_cases(
        "raw",
        {
            "noop": {},
            "echo": {"request_bytes": 10_000},
            "payload": {"request_bytes": 10, "reply_bytes": 5000},
            "sleep": {"ms": 5, "requests": 5},
            "factorial": {"n": 5000, "requests": 5},
        },
        transport="unix",
        load={"connections": 2, "concurrency": 3},
    )
    for name in ("noop", "echo", "payload"):
        assert_clean(cases[name], 150)
    for name in ("sleep", "factorial"):
        assert_clean(cases[name], 15)
    # frames: 5 bytes of head out, 13 back
    assert cases["noop"]["bytes"] == {"out_per_request": 5.0, "in_per_request": 13.0}
    assert cases["echo"]["bytes"] == {"out_per_request": 10_005.0, "in_per_request": 10_013.0}
    assert cases["payload"]["bytes"]["in_per_request"] == 5013.0
    assert cases["sleep"]["server_time"]["mean_us"] >= 4_500


def test_tcp_mismatches_counted() -> None:
    cases = run_cases(
        "raw",
        {"echo": {"request_bytes": 100}},
        options={"corrupt_every": 4},
        load={"requests": 100, "warmup": 0},
    )
    assert cases["echo"]["errors"] == {"mismatch": 25}
    assert cases["echo"]["ok"] == 75


@pytest.mark.parametrize("io", ["blocking", "event"])
def test_one_loop_both_client_paths(io: str) -> None:
    cases = run_cases(
        "raw",
        {"echo": {"request_bytes": 300}, "factorial": {"n": 100, "requests": 20}},
        options={"io": io, "corrupt_every": 5},
        load={"requests": 50, "warmup": 0},
    )
    echo, fact = cases["echo"], cases["factorial"]
    assert echo["errors"] == {"mismatch": 10} and echo["ok"] == 40
    assert fact["errors"] == {"mismatch": 4} and fact["ok"] == 16
    # 4 + 1 + 8 + 8 (queue time, over TCP) bytes of head
    assert echo["bytes"] == {"out_per_request": 305.0, "in_per_request": 321.0}
    assert echo["server_time"]["mean_us"] > 0


def test_blocking_loops_sharing_a_connection_take_turns() -> None:
    cases = run_cases(
        "raw",
        {"sleep": {"ms": 2}},
        options={"io": "blocking"},
        load={"requests": 20, "warmup": 1, "concurrency": 3, "connections": 1},
    )
    assert_clean(cases["sleep"], 60)
    # one request at a time on the connection: three loops wait about 3 x 2 ms each
    assert cases["sleep"]["latency"]["mean_us"] > 2 * cases["sleep"]["server_time"]["mean_us"]


def collect(conn: RawConnection, n: int) -> list[tuple[ServerTime | None, BaseException | None]]:
    got: list[tuple[ServerTime | None, BaseException | None]] = []
    for expect in [b"abc", None, b"xyz"][:n]:
        conn.pending.append((b"", lambda s, e: got.append((s, e)), expect))
    return got


def test_reply_frames_split_anywhere_are_parsed() -> None:
    # a queue time or none: both frame shapes in one stream
    stream = (
        reply_frame(b"abc", 7, queued=70)
        + reply_frame(b"ignored", 8)
        + reply_frame(b"xyZ", 9, queued=0)
    )
    for step in (1, 2, 5, 13, 17, len(stream)):
        conn = RawConnection()
        got = collect(conn, 3)
        for i in range(0, len(stream), step):
            conn.data_received(stream[i : i + step])
        assert [s for s, _ in got] == [(7, 70), (8, None), (9, 0)]
        assert got[0][1] is None and got[1][1] is None
        assert isinstance(got[2][1], ReplyMismatch)
        assert conn.bytes_in == len(stream) and conn.buf == b""


def test_error_status_is_a_reply_error() -> None:
    conn = RawConnection()
    got = collect(conn, 1)
    conn.data_received(reply_frame(b"no such workload", 0, status=1))
    err = got[0][1]
    assert isinstance(err, ReplyError) and err.kind == "raw_error"


def read_replies(sock: socket.socket, n: int) -> list[tuple[int, ServerTime, bytes]]:
    """``n`` reply frames as (status, server times, body)."""
    got = b""
    replies: list[tuple[int, ServerTime, bytes]] = []
    while len(replies) < n:
        chunk = sock.recv(65536)
        assert chunk, "server closed the connection"
        got += chunk
        while len(got) >= 13 and len(got) >= 4 + int.from_bytes(got[:4], "big"):
            length, status = struct.unpack_from(">IB", got)
            times, size = read_frame_times(got, 5)
            replies.append((status, times, got[5 + size : 4 + length]))
            got = got[4 + length :]
    return replies


def test_server_frames_by_hand() -> None:
    endpoint = new_endpoint("tcp")
    cmd = [sys.executable, "-m", "rpcmeter.servers.raw_server", "--port", str(endpoint.port)]
    with ServerProcess(cmd, endpoint):
        assert endpoint.port is not None
        with socket.create_connection((endpoint.host, endpoint.port), timeout=10) as s:
            # pipelined: a 20 ms sleep, an echo, an unknown code; replies stay in order
            s.sendall(request_frame(b"s", b"20") + request_frame(b"e", b"hi") + b"\0\0\0\1?")
            sleep, echo, unknown = read_replies(s, 3)
    assert sleep[0] == 0 and sleep[1][0] >= 15_000_000 and sleep[2] == b""
    assert sleep[1][1] is not None and echo[1][1] is not None  # queue times over TCP
    assert echo[0] == 0 and echo[2] == b"hi"
    assert unknown[0] == 1 and unknown[2].endswith(b"?")
