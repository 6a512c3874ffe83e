"""The per-reply checks of rpcmeter's own gRPC client (:class:`GrpcH2Client`) on replies parsed
frame by frame (no recorded reply matched them, as when a server's replies come in pieces): a
reply that is the last good one again (the same header views and message) passes as it did and
is counted; any other is checked in full. The views of the same header block are the same
object on every connection."""

from __future__ import annotations

from typing import Any

from rpcmeter.drivers.base import DriverContext, ReplyMismatch
from rpcmeter.drivers.grpc import GrpcUnavailable, error_for
from rpcmeter.drivers.grpc_h2 import GrpcH2Client
from rpcmeter.drivers.stream import ExactReply
from rpcmeter.errors import ReplyError, error_kind
from rpcmeter.net.endpoints import Endpoint
from rpcmeter.protocols.grpc import frame
from rpcmeter.protocols.h2.connection import Stream, new_stream
from rpcmeter.suite.workloads import NoopParams

REPLY = b"hello"
HEAD = [(b":status", b"200"), (b"content-type", b"application/grpc")]
OK = [(b"grpc-status", b"0"), (b"rpcmeter-server-ns", b"1500")]
FAILED = [(b"grpc-status", b"5"), (b"grpc-message", b"no%20such%20thing")]


def make_client() -> GrpcH2Client:
    ctx = DriverContext(Endpoint("tcp", "127.0.0.1", 1), NoopParams(), {}, threads=1)
    return GrpcH2Client(
        ctx, "/a.B/C", b"hi", ExactReply(REPLY), (), None, error_for, GrpcUnavailable
    )


def reply(
    client: GrpcH2Client,
    payload: bytes,
    trailers: list[tuple[bytes, bytes]] = OK,
    pieces: int = 1,
) -> tuple[Stream, list[tuple[Any, BaseException | None]]]:
    """A stream ended with ``payload`` (in ``pieces`` DATA frames) between the views a
    connection made of HEAD and ``trailers``; what its loop was told."""
    told: list[tuple[Any, BaseException | None]] = []
    stream = new_stream(client.on_end, lambda server_ns, err: told.append((server_ns, err)))
    stream.headers = client.view(HEAD)
    stream.trailers = client.view(trailers)
    cut = len(payload) // pieces
    stream.chunks = tuple(payload[i * cut : (i + 1) * cut or None] for i in range(pieces))
    if pieces > 1:
        stream.chunks = [*stream.chunks[:-1], payload[(pieces - 1) * cut :]]
    stream.received = len(payload)
    return stream, told


def end(client: GrpcH2Client, *args: Any, **kwargs: Any) -> tuple[Any, BaseException | None]:
    stream, told = reply(client, *args, **kwargs)
    stream.on_end(stream)
    assert len(told) == 1
    return told[0]


def test_the_same_header_block_has_one_view_on_every_connection() -> None:
    client = make_client()
    first, second = client.view(list(OK)), client.view(list(OK))
    assert first is second
    assert client.view(FAILED) is not first


def test_a_good_reply_again_passes_as_it_did_and_is_counted() -> None:
    client = make_client()
    for _ in range(5):
        assert end(client, frame(REPLY)) == ((1500, None), None)
    assert client.last_good[0].count == 4  # the first was checked in full
    assert client.calls() == 5
    assert client.counters()["bytes_in"] == 5 * len(REPLY)
    assert client.last_good[0].count == 0  # folded into the counts


def test_a_different_message_after_good_ones_is_checked() -> None:
    client = make_client()
    end(client, frame(REPLY))
    end(client, frame(REPLY))
    server_ns, err = end(client, frame(b"jello"))
    assert server_ns is None and isinstance(err, ReplyMismatch)
    assert end(client, frame(REPLY)) == ((1500, None), None)
    assert client.calls() == 4  # every reply that was one message (the wrong one too)


def test_a_failed_status_with_the_good_message_is_an_error() -> None:
    client = make_client()
    end(client, frame(REPLY))
    server_ns, err = end(client, frame(REPLY), FAILED)
    assert server_ns is None and err is not None
    assert err is not None and error_kind(err) == "grpc:NOT_FOUND"
    assert str(err) == "no such thing"


def test_a_reply_in_pieces_or_not_one_message_is_checked_in_full() -> None:
    client = make_client()
    end(client, frame(REPLY))
    assert end(client, frame(REPLY), pieces=2) == ((1500, None), None)
    server_ns, err = end(client, frame(REPLY)[:-1])
    assert server_ns is None
    assert isinstance(err, ReplyError) and err.kind == "grpc_malformed"
    assert client.calls() == 2


def test_a_failed_stream_with_the_good_reply_is_its_error() -> None:
    client = make_client()
    end(client, frame(REPLY))
    stream, told = reply(client, frame(REPLY))
    stream.error = ConnectionResetError("gone")
    stream.on_end(stream)
    assert told[0][1] is not None and told[0][0] is None


def test_no_reply_passes_before_a_good_one() -> None:
    client = make_client()
    stream, told = reply(client, b"")
    stream.headers = stream.trailers = None
    stream.on_end(stream)
    assert told[0][1] is not None
