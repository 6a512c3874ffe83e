"""The connection's and the streams' states (rpcmeter.protocols.h2.state): the tables, the states
a real exchange goes through, and the per-request paths that store a state without looking it up
agreeing with the tables."""

from __future__ import annotations

import struct

import pytest

from rpcmeter.protocols.h2.connection import (
    END_HEADERS,
    END_STREAM,
    GOAWAY,
    HEADERS,
    SETTINGS,
    ErrorCode,
    H2Connection,
    H2ConnectionError,
    Stream,
    frame,
)
from rpcmeter.protocols.h2.frames import CODES, FrameType, error_name
from rpcmeter.protocols.h2.state import (
    ACCEPTING,
    CONNECTION_TRANSITIONS,
    STREAM_TRANSITIONS,
    ConnectionEvent,
    ConnectionState,
    InvalidTransition,
    StreamEvent,
    StreamState,
    advance,
)
from tests.h2.peer import Peer, connected, ended, pump

GET = [(b":method", b"GET"), (b":scheme", b"http"), (b":path", b"/x"), (b":authority", b"h")]


def now(conn: H2Connection) -> ConnectionState:
    """The connection's state (read anew: mypy keeps what the last assert said of it)."""
    return conn.state


def at(stream: Stream) -> StreamState:
    return stream.state


def test_every_state_is_in_the_tables_and_every_target_is_a_state() -> None:
    for table, states in (
        (CONNECTION_TRANSITIONS, ConnectionState),
        (STREAM_TRANSITIONS, StreamState),
    ):
        assert set(table) == set(states)
        assert all(target in states for moves in table.values() for target in moves.values())
    assert StreamState.CLOSED not in {
        s for s, moves in STREAM_TRANSITIONS.items() if moves
    }  # a closed stream goes nowhere
    with pytest.raises(InvalidTransition, match="SEND_END in state IDLE"):
        advance(STREAM_TRANSITIONS, StreamState.IDLE, StreamEvent.SEND_END)
    with pytest.raises(InvalidTransition, match="RECV_SETTINGS in state CLOSED"):
        advance(CONNECTION_TRANSITIONS, ConnectionState.CLOSED, ConnectionEvent.RECV_SETTINGS)


def test_the_paths_that_store_a_state_directly_agree_with_the_table() -> None:
    # a request sent whole (H2Connection.request's per-call path)
    assert (
        advance(STREAM_TRANSITIONS, StreamState.IDLE, StreamEvent.START_ENDED)
        is StreamState.HALF_CLOSED_LOCAL
    )
    # a stream ending (H2Connection._end, the replay layer): CLOSED from wherever it may end
    for state, moves in STREAM_TRANSITIONS.items():
        for event in (StreamEvent.RECV_END, StreamEvent.RESET, StreamEvent.LOST):
            if event in moves:
                assert moves[event] is StreamState.CLOSED, (state, event)


def test_error_codes_are_named_by_the_enum() -> None:
    assert error_name(ErrorCode.FLOW_CONTROL_ERROR) == "FLOW_CONTROL_ERROR"
    assert error_name(0xD) == "HTTP_1_1_REQUIRED" and error_name(0x42) == "0x42"
    assert {int(c): c.name for c in ErrorCode} == CODES and len(CODES) == 14
    assert [int(t) for t in FrameType] == list(range(10))


def test_a_connection_goes_through_its_states() -> None:
    client = H2Connection()
    assert now(client) is ConnectionState.IDLE and client.accepting
    client.initiate()
    assert now(client) is ConnectionState.PREFACE_SENT and client.accepting
    assert not client.started
    client.receive(frame(SETTINGS, 0, 0))
    assert now(client) is ConnectionState.OPEN and client.started
    client.receive(frame(GOAWAY, 0, 0, struct.pack(">LL", 0, 0)))
    assert now(client) is ConnectionState.DRAINING and not client.accepting
    client.connection_lost(ConnectionResetError("gone"))
    assert now(client) is ConnectionState.CLOSED and isinstance(client.closed, OSError)
    assert {ConnectionState.IDLE, ConnectionState.PREFACE_SENT, ConnectionState.OPEN} == ACCEPTING
    ours = H2Connection()
    ours.initiate()
    ours.close()  # our GOAWAY
    assert now(ours) is ConnectionState.DRAINING and not ours.accepting
    failed = H2Connection()
    failed.initiate()
    failed.receive(b"HTTP/1.1 400 Bad Request\r\n\r\n")
    assert now(failed) is ConnectionState.CLOSED
    assert isinstance(failed.closed, H2ConnectionError) and failed.closed.reason == "http1_reply"
    out = H2Connection(first_stream_id=(1 << 31) - 1)  # one stream id left
    out.initiate()
    out.request(out.prepare(GET, None), lambda s: None)
    assert now(out) is ConnectionState.DRAINING and not out.accepting


def test_streams_go_through_their_states() -> None:
    peer = Peer()
    client = connected(peer)
    done, on_end = ended()
    req = client.prepare(GET, None)
    whole = client.request(req, on_end)
    assert at(whole) is StreamState.HALF_CLOSED_LOCAL
    streaming = client.open_stream(client.prepare(GET, b"a"), on_end)
    assert at(streaming) is StreamState.OPEN
    client.send_data(streaming, b"b", end_stream=False)
    assert at(streaming) is StreamState.OPEN
    client.send_data(streaming, b"c", end_stream=True)
    assert at(streaming) is StreamState.HALF_CLOSED_LOCAL
    pump(client, peer)
    assert done == [whole, streaming] and all(at(s) is StreamState.CLOSED for s in done)
    assert streaming.body() == b"abc"  # the echo of all it sent
    with pytest.raises(ValueError, match=r"closed for sending \(closed\)"):
        client.send_data(streaming, b"d", end_stream=True)
    reset = client.request(req, on_end)
    client.reset(reset)
    assert at(reset) is StreamState.CLOSED
    # above a graceful GOAWAY's last stream id: idle again, waiting to be sent elsewhere
    held = Peer(lambda p, sid, headers, body: None)
    other = connected(held)
    first, second = other.request(req, on_end), other.request(req, on_end)
    pump(other, held)
    other.receive(frame(GOAWAY, 0, 0, struct.pack(">LL", first.id, 0)))
    assert at(second) is StreamState.IDLE and at(first) is StreamState.HALF_CLOSED_LOCAL
    other.receive(frame(HEADERS, END_HEADERS | END_STREAM, first.id, b"\x88"))
    assert at(first) is StreamState.CLOSED
    other.connection_lost(ConnectionResetError("gone"))
    assert at(second) is StreamState.CLOSED  # nobody took it: it ended with the connection
