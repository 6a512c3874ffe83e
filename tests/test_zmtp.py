"""The sans-I/O ZMTP 3.x core (rpcmeter.protocols.zmtp) alone: greeting and handshake bytes, frames short
and long, split reads, PING/PONG and the peers it refuses."""

from __future__ import annotations

import pytest

from rpcmeter.protocols import zmtp
from rpcmeter.protocols.zmtp import COMMAND, LONG, MORE, Connection

# a REQ peer's greeting (ZMTP 3.1, NULL) and READY, spelled out byte by byte
PEER_GREETING = (
    b"\xff" + bytes(8) + b"\x7f" + b"\x03\x01" + b"NULL" + bytes(16) + b"\x00" + bytes(31)
)
REQ_READY = (
    b"\x04\x26"  # command, short, 38 bytes
    + b"\x05READY"
    + b"\x0bSocket-Type\x00\x00\x00\x03REQ"
    + b"\x08Identity\x00\x00\x00\x00"
)


def ready_bytes(socket_type: bytes, identity: bytes = b"") -> bytes:
    props = zmtp.encode_properties((("Socket-Type", socket_type), ("Identity", identity)))
    return zmtp.encode_command(b"READY", props)


def handshaken(peer_ready: bytes = REQ_READY) -> Connection:
    conn = Connection()
    conn.data_to_send()
    assert conn.receive(PEER_GREETING + peer_ready) == []
    assert conn.ready and conn.error is None
    conn.data_to_send()
    return conn


def test_greeting_is_64_bytes_of_zmtp_3_1_null() -> None:
    assert len(PEER_GREETING) == 64
    assert zmtp.greeting() == PEER_GREETING
    assert zmtp.greeting(b"CURVE", as_server=True)[12:18] == b"CURVE\x00"
    assert zmtp.greeting(as_server=True)[32] == 1
    assert zmtp.encode_properties((("Socket-Type", b"REQ"), ("Identity", b""))) == REQ_READY[8:]


def test_handshake_bytes_both_ways() -> None:
    conn = Connection(identity=b"srv")
    assert conn.data_to_send() == PEER_GREETING  # ours goes out before the peer says anything
    assert conn.data_to_send() == b""
    assert conn.receive(PEER_GREETING) == []
    ready = b"\x05READY\x0bSocket-Type\x00\x00\x00\x06ROUTER\x08Identity\x00\x00\x00\x03srv"
    assert conn.data_to_send() == bytes((COMMAND, len(ready))) + ready
    assert not conn.ready
    assert conn.receive(REQ_READY) == []
    assert conn.ready and conn.peer_version == (3, 1)
    assert conn.peer_socket_type == "REQ" and conn.peer_identity == b""
    assert conn.data_to_send() == b""


def test_a_3_0_peer_with_an_identity_is_accepted() -> None:
    conn = Connection()
    greeting = bytearray(PEER_GREETING)
    greeting[11] = 0
    conn.receive(bytes(greeting) + ready_bytes(b"DEALER", b"me"))
    assert conn.ready and conn.peer_version == (3, 0)
    assert conn.peer_socket_type == "DEALER" and conn.peer_identity == b"me"


def test_messages_of_a_req_peer_and_the_reply_bytes() -> None:
    conn = handshaken()
    # the empty delimiter (MORE) then the body
    assert conn.receive(b"\x01\x00\x00\x03abc") == [[b"", b"abc"]]
    conn.send([b"", b"reply"])
    assert conn.data_to_send() == b"\x01\x00\x00\x05reply"
    # two messages and the start of a third in one read
    got = conn.receive(b"\x01\x00\x00\x01x" + b"\x00\x01y" + b"\x01\x00")
    assert got == [[b"", b"x"], [b"y"]]
    assert conn.receive(b"\x00\x01z") == [[b"", b"z"]]


def test_long_frames_both_ways() -> None:
    body = bytes(range(256)) * 4  # 1,024 bytes: a long frame
    frame = zmtp.encode_frame(body)
    assert frame[:9] == bytes((LONG,)) + (1024).to_bytes(8, "big") and frame[9:] == body
    assert zmtp.encode_frame(b"x" * 255)[:2] == b"\x00\xff"  # the longest short frame
    assert zmtp.encode_message([b"", body])[:3] == bytes((MORE, 0, LONG))
    assert zmtp.encode_message([body, b""])[0] == MORE | LONG
    conn = handshaken()
    assert conn.receive(zmtp.encode_message([b"", body, b"tail"])) == [[b"", body, b"tail"]]


def test_every_split_of_the_stream_gives_the_same_messages() -> None:
    big = b"L" * 300
    stream = (
        PEER_GREETING
        + REQ_READY
        + zmtp.encode_message([b"", b"first"])
        + zmtp.encode_command(b"PING", b"\x00\x0actx")
        + zmtp.encode_message([b"", big])
        + zmtp.encode_message([b"only"])
    )
    expected = [[b"", b"first"], [b"", big], [b"only"]]
    whole = Connection()
    assert whole.receive(stream) == expected
    bytewise = Connection()
    got: list[list[bytes]] = []
    for i in range(len(stream)):
        got += bytewise.receive(stream[i : i + 1])
        assert bytewise.error is None, (i, bytewise.error)
    assert got == expected
    assert bytewise.data_to_send() == whole.data_to_send()  # greeting, READY and the PONG
    for cut in range(1, len(stream)):  # every split in two
        conn = Connection()
        assert conn.receive(stream[:cut]) + conn.receive(stream[cut:]) == expected, cut


def test_ping_is_answered_with_pong_and_its_context() -> None:
    conn = handshaken()
    assert conn.receive(b"\x04\x0a\x04PING\x00\x64ctx") == []
    assert conn.data_to_send() == b"\x04\x08\x04PONGctx"
    conn.receive(zmtp.encode_command(b"PING", b"\x00\x01"))  # no context
    assert conn.data_to_send() == b"\x04\x05\x04PONG"
    conn.receive(zmtp.encode_command(b"PING", b"\x00\x01" + b"c" * 20))
    assert conn.data_to_send() == zmtp.encode_command(b"PONG", b"c" * 16)  # at most 16 bytes
    conn.receive(zmtp.encode_command(b"PONG", b"x") + zmtp.encode_command(b"SUBSCRIBE", b"t"))
    assert conn.error is None and conn.data_to_send() == b""  # ignored


@pytest.mark.parametrize(
    ("stream", "note"),
    [
        (b"GET / HTTP/1.1\r\n", "not a ZMTP 3 peer: signature 474554202f2048545450"),
        (PEER_GREETING[:10] + b"\x02\x00", "unsupported ZMTP version 2 (3.x is spoken)"),
        (PEER_GREETING[:12] + b"CURVE" + bytes(52), "unsupported security mechanism 'CURVE'"),
    ],
)
def test_greetings_that_are_refused(stream: bytes, note: str) -> None:
    conn = Connection()
    conn.data_to_send()
    assert conn.receive(stream) == []
    assert conn.error == note
    assert conn.data_to_send() == b""  # the peer cannot read our commands: just close
    assert conn.receive(PEER_GREETING + REQ_READY) == [] and not conn.ready


@pytest.mark.parametrize(
    ("after_greeting", "note"),
    [
        (ready_bytes(b"PUB"), "socket type PUB cannot talk to ROUTER"),
        (ready_bytes(b"REP"), "socket type REP cannot talk to ROUTER"),
        (zmtp.encode_command(b"READY", b""), "READY without a Socket-Type"),
        (zmtp.encode_command(b"READY", b"\x0bSocket-Type\x00\x00\x00\x09REQ"), "READY: metadata"),
        (zmtp.encode_message([b"", b"x"]), "a message before the handshake completed"),
        (zmtp.encode_command(b"HELLO", b""), "HELLO command before READY"),
    ],
)
def test_peers_refused_with_an_error_command(after_greeting: bytes, note: str) -> None:
    conn = Connection()
    conn.data_to_send()
    conn.receive(PEER_GREETING)
    conn.data_to_send()
    assert conn.receive(after_greeting) == []
    assert conn.error is not None and conn.error.startswith(note) and not conn.ready
    sent = conn.data_to_send()
    assert sent[0] == COMMAND and sent[2:8] == b"\x05ERROR"
    reason = sent[9 : 9 + sent[8]]
    assert reason == conn.error.encode()


@pytest.mark.parametrize(
    ("stream", "note"),
    [
        (b"\x08\x00", "frame flags 0x08 have reserved bits set"),
        (b"\x05\x05\x04PING", "a command frame with the MORE flag"),
        (b"\x04\x02\x09P", "command name runs past the end of its frame"),
        (REQ_READY, "a second READY command"),
        (zmtp.encode_command(b"PING", b"\x00"), "a PING without its 2-byte time to live"),
        (zmtp.encode_command(b"ERROR", b"\x03bye"), "the peer sent ERROR: bye"),
    ],
)
def test_protocol_errors_after_the_handshake(stream: bytes, note: str) -> None:
    conn = handshaken()
    assert conn.receive(zmtp.encode_message([b"", b"ok"]) + stream) == [[b"", b"ok"]]
    assert conn.error == note
    assert conn.receive(zmtp.encode_message([b"", b"ok"])) == []  # nothing after the error


def test_a_message_over_the_limit_is_refused_before_it_arrives() -> None:
    conn = handshaken()
    conn.max_message_bytes = 1000
    assert conn.receive(zmtp.encode_message([b"", b"x" * 1000])) == [[b"", b"x" * 1000]]
    # the size of a long frame is enough to refuse it, its body never comes
    assert conn.receive(bytes((LONG,)) + (1 << 40).to_bytes(8, "big")) == []
    assert conn.error == (
        "a frame of 1,099,511,627,776 bytes exceeds the limit of 1,000 bytes per message"
    )
    conn = handshaken()
    conn.max_message_bytes = 1000
    # frames each under the limit, together over it
    assert conn.receive(zmtp.encode_message([b"a" * 600, b"b" * 600])) == []
    assert conn.error is not None and "a frame of 600 bytes exceeds" in conn.error


def test_send_before_the_handshake_is_a_programming_error() -> None:
    with pytest.raises(RuntimeError, match="handshake"):
        Connection().send([b"x"])
    with pytest.raises(ValueError, match="at least one frame"):
        zmtp.encode_message([])
    with pytest.raises(ValueError, match="command name"):
        zmtp.encode_command(b"")
    with pytest.raises(ValueError, match="mechanism name"):
        zmtp.greeting(b"M" * 21)
