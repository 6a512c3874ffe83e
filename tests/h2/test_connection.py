"""The sans-I/O HTTP/2 client connection: against a real server side (python-hyper's ``h2``, in
memory) and against hand-made frames."""

from __future__ import annotations

import itertools
import struct
from typing import Any

import h2.events
import hpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rpcmeter.protocols.h2.connection import (
    ACK,
    CONTINUATION,
    DATA,
    END_HEADERS,
    END_STREAM,
    GOAWAY,
    HEADERS,
    PADDED,
    PING,
    PREFACE,
    RST_STREAM,
    SETTINGS,
    WINDOW_UPDATE,
    H2Connection,
    H2ConnectionError,
    H2Unavailable,
    Stream,
    StreamReset,
    frame,
)
from tests.h2.peer import Peer, connected, ended, pump

GET = [(b":method", b"GET"), (b":scheme", b"http"), (b":path", b"/x"), (b":authority", b"h")]
POST = [(b":method", b"POST"), (b":scheme", b"http"), (b":path", b"/p"), (b":authority", b"h")]


def frames(data: bytes) -> list[tuple[int, int, int, bytes]]:
    """(type, flags, stream id, payload) of each frame in ``data``."""
    out = []
    while data:
        n = int.from_bytes(data[:3])
        out.append((data[3], data[4], int.from_bytes(data[5:9]) & 0x7FFFFFFF, data[9 : 9 + n]))
        data = data[9 + n :]
    return out


def started(**kwargs: object) -> H2Connection:
    """A client that saw an empty SETTINGS from a hand-made server."""
    client = H2Connection(**kwargs)  # type: ignore[arg-type]
    assert client.initiate().startswith(PREFACE)
    client.receive(frame(SETTINGS, 0, 0))
    assert frames(client.data_to_send()) == [(SETTINGS, ACK, 0, b"")]
    return client


def block(headers: list[tuple[bytes, bytes]], encoder: hpack.Encoder | None = None) -> bytes:
    return (encoder or hpack.Encoder()).encode(headers)


# ---------------------------------------------------------------------------------------------
# against the h2 library's server side


def test_requests_replies_and_trailers_against_a_real_server() -> None:
    peer = Peer()
    client = connected(peer)
    done, on_end = ended()
    post = client.prepare(POST, b"hello")
    get = client.prepare(GET, None)
    streams = [
        client.request(post, on_end),
        client.request(get, on_end),
        client.request(post, on_end),
    ]
    assert [s.id for s in streams] == [1, 3, 5]  # ids advance by 2
    pump(client, peer)
    assert done == streams
    for s, body in zip(streams, (b"hello", b"", b"hello"), strict=True):
        assert s.error is None
        assert s.headers == [(b":status", b"200"), (b"content-type", b"application/grpc")]
        assert s.trailers[0] == (b"grpc-status", b"0")
        assert s.body() == body
    assert dict(peer.headers[3])[b":method"] == b"GET"
    assert not client.streams


def test_bodies_beyond_the_windows_are_split_and_resumed() -> None:
    peer = Peer(initial_window_size=1000, max_frame_size=16384)
    client = connected(peer)
    done, on_end = ended()
    body = bytes(range(256)) * 1000  # 256 kB: beyond the stream (1000) and connection windows
    client.request(client.prepare(POST, body), on_end)
    assert client.blocked  # paused for window
    pump(client, peer, rounds=2000)
    (s,) = done
    assert s.error is None and s.body() == body  # the echo came back whole
    # the peer never saw more than its window in flight: h2 would have raised otherwise
    sent = [e for e in peer.events if isinstance(e, h2.events.DataReceived)]
    assert sum(len(e.data) for e in sent) == len(body)
    assert max(len(e.data) for e in sent) <= 16384


def test_received_data_is_acknowledged_with_window_updates() -> None:
    peer = Peer()
    client = connected(peer, window=100_000)
    done, on_end = ended()
    body = b"x" * 300_000  # more than our windows: the peer stalls without our WINDOW_UPDATEs
    client.request(client.prepare(POST, body), on_end)
    pump(client, peer, rounds=2000)
    assert done and done[0].body() == body
    updates = [e for e in peer.events if isinstance(e, h2.events.WindowUpdated)]
    assert {e.stream_id for e in updates} >= {0, 1}


def test_max_concurrent_streams_is_obeyed() -> None:
    held: list[int] = []
    peer = Peer(lambda p, sid, headers, body: held.append(sid), max_concurrent_streams=2)
    client = connected(peer)
    done, on_end = ended()
    req = client.prepare(GET, None)
    streams = [client.request(req, on_end) for _ in range(5)]
    pump(client, peer)
    assert held == [1, 3] and len(client.waiting) == 3
    peer.h2.send_headers(1, [(b":status", b"204")], end_stream=True)
    pump(client, peer)
    assert held == [1, 3, 5] and done == [streams[0]]


def test_a_stream_reset_while_waiting_to_start_is_never_sent() -> None:
    held: list[int] = []
    peer = Peer(lambda p, sid, headers, body: held.append(sid), max_concurrent_streams=1)
    client = connected(peer)
    done, on_end = ended()
    req = client.prepare(GET, None)
    first, second, third = (client.request(req, on_end) for _ in range(3))
    pump(client, peer)
    assert held == [1] and client.holds(second) and client.holds(first)
    client.reset(second)
    assert not client.holds(second) and client.data_to_send() == b""  # nothing to say of it
    peer.h2.send_headers(1, [(b":status", b"204")], end_stream=True)
    pump(client, peer)
    assert held == [1, 3] and third.id == 3 and done == [first]
    assert not client.forget(second)


def test_ping_is_answered_and_settings_acknowledged() -> None:
    peer = Peer()
    client = connected(peer)
    peer.h2.ping(b"12345678")
    peer.h2.update_settings({h2.settings.SettingCodes.MAX_FRAME_SIZE: 20_000})
    pump(client, peer)
    assert any(isinstance(e, h2.events.PingAckReceived) for e in peer.events)
    assert any(isinstance(e, h2.events.SettingsAcknowledged) for e in peer.events)
    assert client.peer_frame == 20_000


def test_a_graceful_goaway_moves_unprocessed_streams_back_to_waiting() -> None:
    """RFC 9113, 6.8: the streams above a GOAWAY's last stream id were never processed. After
    a graceful one they wait, in order, for the owner to send them on a new connection (the
    real server answers them there); the streams below it finish on the old connection, and
    its close fails none of the moved ones."""
    held: list[int] = []
    peer = Peer(lambda p, sid, headers, body: held.append(sid))
    client = connected(peer)
    moved: list[tuple[Stream, Any]] = []

    class Owner:  # what rpcmeter.protocols.h2.transport.Session does when told
        def on_goaway(self, last_stream_id: int, code: int, debug: bytes) -> None:
            moved.extend(client.take_waiting())

        def on_closed(self, error: BaseException) -> None:
            moved.extend(client.take_waiting())

    client.listener = Owner()
    done, on_end = ended()
    post = client.prepare(POST, b"x" * 100)
    streams = [client.request(post, on_end, user=i) for i in range(3)]
    pump(client, peer)
    assert held == [1, 3, 5]
    client.receive(frame(GOAWAY, 0, 0, struct.pack(">LL", 1, 0) + b"restarting"))
    assert done == [] and not client.accepting and client.goaway_id == 1
    assert [s.user for s, _ in moved] == [1, 2]
    later = client.request(post, on_end, user=3)  # waits: the connection takes no new stream
    assert later.id == 0
    client.receive(frame(HEADERS, END_HEADERS | END_STREAM, 1, b"\x88"))  # :status 200
    assert done == [streams[0]] and streams[0].error is None  # below the last id: completes
    client.connection_lost(ConnectionResetError("closed"))  # the server closes, as nginx does
    assert done == [streams[0]]  # no stream failed: the others never reached the server
    assert [s.user for s, _ in moved] == [1, 2, 3]  # in the order they were sent
    fresh = Peer()
    again = connected(fresh)
    for stream, req in moved:
        again.submit(stream, req)
    pump(again, fresh)
    assert [s.user for s in done] == [0, 1, 2, 3] and all(s.error is None for s in done)
    assert [s.id for s in done[1:]] == [1, 3, 5]  # the new connection's stream ids
    assert all(s.body() == b"x" * 100 for s in done[1:])  # the echo of the request sent again


@pytest.mark.parametrize(
    ("last", "code"),
    [(1, 2), (0, 0)],  # an error (INTERNAL_ERROR); nothing processed on the connection at all
)
def test_other_goaways_fail_the_streams_above_the_last_id(last: int, code: int) -> None:
    peer = Peer(lambda p, sid, headers, body: None)
    client = connected(peer)
    done, on_end = ended()
    req = client.prepare(GET, None)
    for _ in range(3):
        client.request(req, on_end)
    pump(client, peer)
    client.receive(frame(GOAWAY, 0, 0, struct.pack(">LL", last, code) + b"restarting"))
    failed = [s.id for s in done]
    assert failed == [3, 5] if last else [1, 3, 5]
    assert all(isinstance(s.error, H2Unavailable) for s in done)
    assert str(done[0].error).startswith(f"unavailable: stream {failed[0]} above the last")
    assert "restarting)" in str(done[0].error) and client.take_waiting() == []


def test_a_stream_that_sent_or_received_more_is_not_sent_again() -> None:
    peer = Peer(lambda p, sid, headers, body: None)
    client = connected(peer)
    done, on_end = ended()
    req = client.prepare(POST, b"a")
    first = client.request(req, on_end)  # processed (the last id)
    streaming = client.open_stream(req, on_end)
    client.send_data(streaming, b"more", end_stream=True)  # more than its request: not again
    answered = client.request(req, on_end)
    pump(client, peer)
    client.receive(frame(HEADERS, END_HEADERS, answered.id, b"\x88"))  # a reply began
    plain = client.request(req, on_end)
    client.receive(frame(GOAWAY, 0, 0, struct.pack(">LL", first.id, 0)))
    assert [s for s, _ in client.take_waiting()] == [plain]
    assert done == [streaming, answered] and all(isinstance(s.error, H2Unavailable) for s in done)


def test_reset_streams_are_counted_by_code() -> None:
    peer = Peer(lambda p, sid, headers, body: p.h2.reset_stream(sid, 7))
    client = connected(peer)
    done, on_end = ended()
    req = client.prepare(GET, None)
    for _ in range(2):
        client.request(req, on_end)
    pump(client, peer)
    assert all(isinstance(s.error, StreamReset) for s in done) and len(done) == 2
    assert client.resets == {"REFUSED_STREAM": 2}
    assert isinstance(done[0].error, StreamReset)
    assert done[0].error.kind == "rst_stream:REFUSED_STREAM"


def test_streaming_sends_and_receives_in_pieces() -> None:
    """A stream left open for send_data, its replies seen as they come (for streaming calls)."""
    got: list[bytes] = []

    def reply(p: Peer, sid: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
        p.h2.send_headers(sid, [(b":status", b"200")])
        for piece in (body[:3], body[3:]):
            p.h2.send_data(sid, piece)
        p.h2.send_headers(sid, [(b"grpc-status", b"0")], end_stream=True)

    peer = Peer(reply)
    client = connected(peer)
    done, on_end = ended()
    s = client.open_stream(client.prepare(POST, b"ab"), on_end)
    s.on_data = lambda stream, data: got.append(data)
    pump(client, peer)
    assert not done
    client.send_data(s, b"cd", end_stream=False)
    client.send_data(s, b"ef", end_stream=True)
    pump(client, peer)
    assert done == [s] and b"".join(got) == b"abcdef" and not s.chunks
    with pytest.raises(ValueError, match="closed for sending"):
        client.send_data(s, b"x", end_stream=True)


# ---------------------------------------------------------------------------------------------
# hand-made frames


def test_stream_ids_run_out_and_the_connection_stops_accepting() -> None:
    client = started(first_stream_id=(1 << 31) - 3)
    _done, on_end = ended()
    req = client.prepare(GET, None)
    a, b = client.request(req, on_end), client.request(req, on_end)
    assert a.id == (1 << 31) - 3 and b.id == (1 << 31) - 1
    assert not client.accepting
    c = client.request(req, on_end)
    assert c.id == 0 and [s for s, _ in client.take_waiting()] == [c]


def test_prepared_requests_patch_the_stream_id_and_never_index() -> None:
    client = started()
    _done, on_end = ended()
    req = client.prepare([*POST, (b"x-meta", b"v" * 20)], b"body")
    client.request(req, on_end)
    client.request(req, on_end)
    out = frames(client.data_to_send())
    assert [(t, f, sid) for t, f, sid, _ in out] == [
        (HEADERS, END_HEADERS, 1),
        (DATA, END_STREAM, 1),
        (HEADERS, END_HEADERS, 3),
        (DATA, END_STREAM, 3),
    ]
    assert out[0][3] == out[2][3]  # the same block: no dynamic-table state in it
    decoder = hpack.Decoder()
    assert list(decoder.decode(out[0][3], raw=True))[-1] == (b"x-meta", b"v" * 20)
    assert len(decoder.header_table.dynamic_entries) == 0
    # a header block larger than the peer's frame size goes out as HEADERS + CONTINUATION
    big = client.prepare([*GET, (b"x-big", b"y" * 40_000)], None)
    client.request(big, on_end)
    kinds = [(t, f) for t, f, _, _ in frames(client.data_to_send())]
    assert kinds[0] == (HEADERS, END_STREAM) and kinds[-1] == (CONTINUATION, END_HEADERS)


def reply_frames(sid: int, status: bytes, body: bytes, enc: hpack.Encoder) -> bytes:
    return (
        frame(HEADERS, END_HEADERS, sid, enc.encode([(b":status", status)]))
        + frame(DATA, 0, sid, body)
        + frame(HEADERS, END_HEADERS | END_STREAM, sid, enc.encode([(b"grpc-status", b"0")]))
    )


def test_padding_continuation_and_a_reply_split_anywhere() -> None:
    enc = hpack.Encoder()
    head = enc.encode([(b":status", b"200")])
    data = (
        frame(HEADERS, 0, 1, head[:1])
        + frame(CONTINUATION, END_HEADERS, 1, head[1:])
        + frame(DATA, PADDED, 1, b"\x03abc\0\0\0")
        + frame(DATA, END_STREAM, 1, b"de")
    )
    for cut in range(len(data)):
        client = started()
        done, on_end = ended()
        client.request(client.prepare(GET, None), on_end)
        client.receive(data[:cut])
        client.receive(data[cut:])
        (s,) = done
        assert s.error is None and s.headers == [(b":status", b"200")] and s.body() == b"abcde"


def test_trailers_only_reply() -> None:
    client = started()
    done, on_end = ended()
    client.request(client.prepare(GET, None), on_end)
    block_ = block([(b":status", b"200"), (b"grpc-status", b"12")])
    client.receive(frame(HEADERS, END_HEADERS | END_STREAM, 1, block_))
    assert done[0].headers[1] == (b"grpc-status", b"12") and done[0].trailers is None


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"HTTP/1.1 400 Bad Request\r\n\r\n", "http1_reply"),
        (frame(PING, 0, 0, b"short"), "frame_size_error"),
        (frame(DATA, 0, 7, b"x"), "protocol_error"),  # a stream never opened
        (frame(HEADERS, END_HEADERS, 1, b"\xff\xff\xff\xff"), "compression_error"),
        (frame(CONTINUATION, END_HEADERS, 1, b""), "protocol_error"),
        (frame(SETTINGS, 0, 0, struct.pack(">HL", 5, 100)), "protocol_error"),  # frame size
        (frame(WINDOW_UPDATE, 0, 0, struct.pack(">L", 0)), "protocol_error"),
        (frame(5, END_HEADERS, 1, b"\0\0\0\2"), "protocol_error"),  # PUSH_PROMISE
        (b"\xff\xff\xff" + b"\0" * 20, "frame_size_error"),  # 16 MB frame
    ],
)
def test_malformed_input_fails_the_connection_with_a_reason(data: bytes, reason: str) -> None:
    client = H2Connection()
    client.initiate()
    if not data.startswith(b"HTTP"):
        client.receive(frame(SETTINGS, 0, 0))
        client.data_to_send()
    done, on_end = ended()
    client.request(client.prepare(GET, None), on_end)
    client.data_to_send()
    client.receive(data)
    assert isinstance(client.closed, H2ConnectionError)
    assert client.closed.reason == reason, client.closed
    assert len(done) == 1 and done[0].error is client.closed
    if reason != "http1_reply":  # a GOAWAY with the code tells the server why
        goaway = [f for f in frames(client.data_to_send()) if f[0] == GOAWAY]
        assert goaway and int.from_bytes(goaway[0][3][4:8]) == client.closed.code
    with pytest.raises(H2ConnectionError):
        client.request(client.prepare(GET, None), on_end)


def test_an_oversized_header_block_and_a_settings_flood() -> None:
    client = started(max_header_block=1000)
    done, on_end = ended()
    client.request(client.prepare(GET, None), on_end)
    head = frame(HEADERS, 0, 1, b"\0" * 600) + frame(CONTINUATION, 0, 1, b"\0" * 600)
    client.receive(head)
    assert isinstance(client.closed, H2ConnectionError)
    assert client.closed.reason == "header_too_large" and done[0].error is client.closed

    client = started()
    client.receive(frame(SETTINGS, 0, 0) * (H2Connection.FLOOD_FRAMES + 1))
    assert isinstance(client.closed, H2ConnectionError)
    assert client.closed.reason == "settings_flood"
    # ... while SETTINGS between replies are fine
    client = started()
    enc = hpack.Encoder()
    req = client.prepare(GET, None)
    for i in range(3 * H2Connection.FLOOD_FRAMES):
        client.request(req, lambda s: None)
        client.receive(frame(SETTINGS, 0, 0) + reply_frames(2 * i + 1, b"200", b"", enc))
    assert client.closed is None


def test_flow_control_of_the_connection_window_from_the_peer() -> None:
    client = started()
    done, on_end = ended()
    client.request(client.prepare(POST, b"a" * 70_000), on_end)
    sent = sum(len(p) for t, _, _, p in frames(client.data_to_send()) if t == DATA)
    assert sent == 65_535  # the default windows
    client.receive(frame(WINDOW_UPDATE, 0, 0, struct.pack(">L", 10)))
    assert frames(client.data_to_send()) == []  # the stream's window is still closed
    client.receive(frame(WINDOW_UPDATE, 0, 1, struct.pack(">L", 10_000)))
    (last,) = frames(client.data_to_send())
    assert last[0] == DATA and len(last[3]) == 10 and not last[1] & END_STREAM
    client.receive(frame(WINDOW_UPDATE, 0, 0, struct.pack(">L", 10_000)))
    (last,) = frames(client.data_to_send())
    assert len(last[3]) == 70_000 - 65_545 and last[1] & END_STREAM
    # a smaller INITIAL_WINDOW_SIZE makes windows negative: nothing more is sent
    client.receive(frame(SETTINGS, 0, 0, struct.pack(">HL", 4, 0)))
    assert client.peer_window == 0
    client.receive(frame(RST_STREAM, 0, 1, struct.pack(">L", 8)))
    assert isinstance(done[0].error, StreamReset) and client.resets == {"CANCEL": 1}


# ---------------------------------------------------------------------------------------------
# the header-block cache agrees with decoding every block

HEADER = st.tuples(
    st.sampled_from([b":status", b"grpc-status", b"x-a", b"x-b", b"content-type"]),
    st.sampled_from([b"0", b"200", b"1", b"text", b"a-longer-value-" * 3]),
)


@settings(max_examples=150, deadline=None)
@given(
    blocks=st.lists(
        st.tuples(st.lists(HEADER, min_size=1, max_size=4), st.booleans()), min_size=1, max_size=30
    ),
    table_size=st.sampled_from([0, 64, 4096]),
)
def test_the_block_cache_agrees_with_full_decoding(
    blocks: list[tuple[list[tuple[bytes, bytes]], bool]], table_size: int
) -> None:
    """A server's encoder indexing freely (and a small table that evicts): every block, decoded
    through the cache, gives what decoding every block gives."""
    enc = hpack.Encoder()
    enc.header_table_size = table_size
    encoded = []
    for headers, never in blocks:
        items = [hpack.NeverIndexedHeaderTuple(n, v) if never else (n, v) for n, v in headers]
        encoded.append(enc.encode(items))
    cached, plain = started(), started(cache_blocks=0)
    results: dict[int, list[Stream]] = {}
    for client in (cached, plain):
        done, on_end = ended()
        req = client.prepare(GET, None)
        for i, b in enumerate(encoded):
            client.request(req, on_end)
            client.receive(frame(HEADERS, END_HEADERS | END_STREAM, 2 * i + 1, b))
        results[id(client)] = done
    got = [s.headers for s in results[id(cached)]]
    assert got == [s.headers for s in results[id(plain)]]
    assert got == [list(h) for h, _ in blocks]


def test_the_cache_skips_repeated_blocks_and_forgets_when_the_table_changes() -> None:
    client = started()
    decodes = 0
    real = client.blocks.decoder.decode

    def counting(data: bytes) -> Any:
        nonlocal decodes
        decodes += 1
        return real(data)

    client.blocks.decoder.decode = counting  # type: ignore[method-assign]
    enc = hpack.Encoder()
    req = client.prepare(GET, None)
    first = enc.encode([(b":status", b"200"), (b"x-a", b"1")])  # indexes x-a: 1
    again = enc.encode([(b":status", b"200"), (b"x-a", b"1")])  # refers to the dynamic entry
    assert first != again
    for i, b in enumerate([first, again, again, again]):
        client.request(req, lambda s: None)
        client.receive(frame(HEADERS, END_HEADERS | END_STREAM, 2 * i + 1, b))
    assert decodes == 2  # the last two came from the cache
    changed = enc.encode([(b"x-b", b"2")])  # a new entry: again's index now names x-b
    client.request(req, lambda s: None)
    client.receive(frame(HEADERS, END_HEADERS | END_STREAM, 9, changed))
    assert client.cache == {}
    seen: list[Stream] = []
    client.request(req, seen.append)
    client.receive(frame(HEADERS, END_HEADERS | END_STREAM, 11, again))
    assert seen[0].headers == [(b":status", b"200"), (b"x-b", b"2")]


REPLY_SHAPES = st.sampled_from(["grpc", "grpc2", "http", "trailers_only", "other_body", "ping"])


def replies_through(
    shapes: list[str], cuts: list[int], replay: bool, inline: bool = True, split: int = 0
) -> tuple[list[tuple[object, ...]], int, int]:
    """Replies of ``shapes`` (three times over) read in batches of ``cuts`` replies (each batch
    read in two where ``split`` bytes, modulo its length, say: a reply's frames in two reads),
    by a client replaying recorded replies or not, handling the usual frames in its loop
    (``inline``) or each by its handler: what each
    stream ended with, the connection's receive window, and how many streams were replayed."""
    enc = hpack.Encoder()
    # the server's first use of each block indexes it (a prime stream carries those); later
    # replies carry the same indexed bytes
    blocks: dict[str, bytes] = {}
    prime = b""
    for round_ in range(2):
        blocks = {
            "head": enc.encode([(b":status", b"200"), (b"content-type", b"application/grpc")]),
            "trail": enc.encode([(b"grpc-status", b"0")]),
            "only": enc.encode([(b":status", b"200"), (b"grpc-status", b"5")]),
        }
        if round_ == 0:
            prime = (
                frame(HEADERS, END_HEADERS, 1, blocks["head"])
                + frame(HEADERS, END_HEADERS | END_STREAM, 1, blocks["trail"])
                + frame(HEADERS, END_HEADERS | END_STREAM, 3, blocks["only"])
            )

    def reply(shape: str, sid: int) -> bytes:
        if shape == "trailers_only":
            return frame(HEADERS, END_HEADERS | END_STREAM, sid, blocks["only"])
        if shape == "http":
            return frame(HEADERS, END_HEADERS, sid, blocks["head"]) + frame(
                DATA, END_STREAM, sid, b"hello"
            )
        body = b"\0\0\0\0\2hi" if shape != "other_body" else b"\0\0\0\0\2ho"
        data = frame(DATA, 0, sid, body)
        if shape == "grpc2":
            data = frame(DATA, 0, sid, body[:3]) + frame(DATA, 0, sid, body[3:])
        out = frame(HEADERS, END_HEADERS, sid, blocks["head"]) + data
        if shape == "ping":
            out += frame(PING, 0, 0, b"12345678")
        return out + frame(HEADERS, END_HEADERS | END_STREAM, sid, blocks["trail"])

    def run() -> tuple[list[tuple[object, ...]], int, int]:
        client = started(replay=replay, inline=inline)
        req = client.prepare(GET, None)
        client.request(req, lambda s: None)
        client.request(req, lambda s: None)
        client.receive(prime)
        done, on_end = ended()
        stream_id = 5
        batch = b""
        sizes = iter(cuts * 50 or [1])
        want = next(sizes, 1)
        for shape in shapes * 3:
            client.request(req, on_end)
            batch += reply(shape, stream_id)
            stream_id += 2
            want -= 1
            if want <= 0:
                cut = split % len(batch)
                client.receive(batch[:cut])
                client.receive(batch[cut:])
                batch, want = b"", next(sizes, 1)
        client.receive(batch)
        got: list[tuple[object, ...]] = [
            (s.id, s.headers, s.trailers, s.body(), s.received, repr(s.error)) for s in done
        ]
        # a replayed stream holds the recorded payload objects: count the reused ones
        firsts = [s.chunks[0] for s in done if s.chunks]
        replays = len(firsts) - len({id(c) for c in firsts})
        return got, client.recv_window, replays

    return run()


@settings(max_examples=100, deadline=None)
@given(
    shapes=st.lists(REPLY_SHAPES, min_size=1, max_size=40),
    cuts=st.lists(st.integers(1, 5)),
    split=st.integers(0, 200),
)
def test_replayed_replies_agree_with_parsing_every_frame(
    shapes: list[str], cuts: list[int], split: int
) -> None:
    """Replies of a few shapes, repeated, some with a PING in between, read in batches (split
    anywhere): a client replaying recorded replies, and one handling the usual frames in its
    loop, end every stream as one handing every frame to its handler does, and use their window
    the same."""
    replayed, window, _ = replies_through(shapes, cuts, replay=True, split=split)
    inlined, window3, none3 = replies_through(shapes, cuts, replay=False, split=split)
    parsed, window2, none = replies_through(shapes, cuts, False, inline=False, split=split)
    assert replayed == parsed and window == window2 and none == 0
    assert inlined == parsed and window3 == window2 and none3 == 0
    assert len(parsed) == 3 * len(shapes)


@pytest.mark.parametrize("shape", ["grpc", "grpc2", "http"])
def test_repeated_replies_are_replayed(shape: str) -> None:
    shapes = [shape, "ping", *[shape] * 40]  # a PING inside a reply: that one is not recorded
    replayed, _, count = replies_through(shapes, [2, 3], replay=True)
    assert count >= 40 and replayed == replies_through(shapes, [2, 3], False, inline=False)[0]


def test_replies_in_pieces_record_no_trailers_as_a_reply() -> None:
    """gRPC replies whose headers and trailers blocks are as long (both indexed), read in
    pieces: a read that begins with a reply's trailers records no one-block reply of them, and
    tries no recorded reply at a trailers block; once whole replies come, they are replayed."""
    enc = hpack.Encoder()
    head = [(b":status", b"200"), (b"content-type", b"application/grpc")]
    trail = [(b"grpc-status", b"0"), (b"grpc-message", b"")]
    client = started(replay=True)
    req = client.prepare(POST, b"\0\0\0\0\0")
    done, on_end = ended()
    client.request(req, on_end)  # the first reply indexes both blocks
    client.receive(
        frame(HEADERS, END_HEADERS, 1, enc.encode(head))
        + frame(DATA, 0, 1, b"\0\0\0\0\2hi")
        + frame(HEADERS, END_HEADERS | END_STREAM, 1, enc.encode(trail))
    )

    def reply(sid: int) -> list[bytes]:
        return [
            frame(HEADERS, END_HEADERS, sid, enc.encode(head)),
            frame(DATA, 0, sid, b"\0\0\0\0\2hi"),
            frame(HEADERS, END_HEADERS | END_STREAM, sid, enc.encode(trail)),
        ]

    assert len(reply(3)[0]) == len(reply(3)[2])  # as long: only the flags tell them apart
    pieces = [p for sid in range(3, 3 + 2 * 300, 2) for p in reply(sid)]
    for _ in range(300):
        client.request(req, on_end)
    assert client.replayer is not None
    # reads of three frames, each beginning with a reply's trailers
    client.receive(pieces[0] + pieces[1])
    for i in range(2, len(pieces), 3):
        client.receive(b"".join(pieces[i : i + 3]))
        recorded = client.replayer.recorded
        assert recorded is None or recorded.size > len(pieces[2])  # a whole reply, or none
    assert [s.trailers for s in done[1:]] == [done[0].trailers] * 300
    whole = 200  # then whole replies, ten a read
    for _ in range(whole):
        client.request(req, on_end)
    replies = [b"".join(reply(sid)) for sid in range(603, 603 + 2 * whole, 2)]
    for i in range(0, whole, 10):
        client.receive(b"".join(replies[i : i + 10]))
    replayed = [s for s in done[301:] if s.replay is not None]
    assert len(done) == 501 and len(replayed) >= whole // 2
    assert all(s.body() == b"\0\0\0\0\2hi" and s.trailers == done[0].trailers for s in done)


# ---------------------------------------------------------------------------------------------
# nginx's replies: every field added to the dynamic table, on every reply

NGINX_BLOCK = bytes.fromhex(
    "887689aa6355e580ae212e1f6196df3dbf4a09c5349fba82009c5021b810dc0094c5a37f"
    "5f87497ca58ae819aa5c0135"
)  # :status 200, server, date, content-type text/plain, content-length 5 (GET / of nginx 1.22)


def nginx_block(second: int) -> bytes:
    """The block with the date's seconds changed (the Huffman code of two digits is the same
    length: the block keeps its size)."""
    date = f"Thu, 26 Nov 2026 11:11:{second % 60:02d} GMT".encode()
    literal = hpack.Encoder().encode([(b"date", date)], huffman=True)  # 0x61: static name 33
    start = NGINX_BLOCK.index(bytes.fromhex("6196"))
    return NGINX_BLOCK[:start] + literal + NGINX_BLOCK[start + 24 :]


@settings(max_examples=40, deadline=None)
@given(
    seconds=st.lists(st.tuples(st.integers(0, 59), st.integers(1, 80)), min_size=1, max_size=4),
    cuts=st.lists(st.integers(1, 7), min_size=1),
)
def test_nginx_replies_agree_with_decoding_every_block(
    seconds: list[tuple[int, int]], cuts: list[int]
) -> None:
    """nginx's replies (HEADERS adding four fields to the table, then DATA), the date changing
    now and then, read in batches: a client with its caches and replays ends every stream as the
    hpack library's decoding of every block says, and keeps the library's table."""
    blocks = [nginx_block(s) for s, times in seconds for _ in range(times)]
    lib = hpack.Decoder()
    want = [[tuple(h) for h in lib.decode(b, raw=True)] for b in blocks]
    for replay, inline in ((True, True), (False, True), (False, False)):
        client = started(replay=replay, inline=inline)
        req = client.prepare(GET, None)
        done, on_end = ended()
        batch, sizes = b"", itertools.cycle(cuts)
        size = next(sizes)
        for i, b in enumerate(blocks):
            client.request(req, on_end)
            sid = 2 * i + 1
            batch += frame(HEADERS, END_HEADERS, sid, b) + frame(DATA, END_STREAM, sid, b"hello")
            size -= 1
            if size == 0:
                client.receive(batch)
                batch, size = b"", next(sizes)
        client.receive(batch)
        assert [s.headers for s in done] == want
        assert all(s.body() == b"hello" and s.error is None for s in done)
        table = client.blocks.decoder
        assert list(table.entries) == list(lib.header_table.dynamic_entries)


def test_nginx_replies_are_replayed_once_the_table_holds_only_their_fields() -> None:
    client = started()
    req = client.prepare(GET, None)
    done, on_end = ended()
    for i in range(200):
        client.request(req, on_end)
        sid = 2 * i + 1
        client.receive(
            frame(HEADERS, END_HEADERS, sid, NGINX_BLOCK) + frame(DATA, END_STREAM, sid, b"hello")
        )
    replayed = [s for s in done if s.replay is not None]
    assert len(done) == 200 and len(replayed) > 100
    assert all(s.headers == done[0].headers for s in done)
