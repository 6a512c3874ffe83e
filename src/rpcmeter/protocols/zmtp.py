"""ZMTP 3.x, the wire protocol of ZeroMQ, as a sans-I/O core: fed bytes, it returns messages and
keeps the bytes to send; it opens no socket and reads no clock.

What it speaks (RFC 23/ZMTP 3.0 and RFC 37/ZMTP 3.1 at rfc.zeromq.org):

- the greeting: signature (``0xFF``, 8 bytes of padding, ``0x7F``), version 3.1 (peers of any
  version 3.x are accepted; older ones are refused), mechanism ``NULL``, as-server, filler (64
  bytes in all). Ours is sent whole at once, which peers that send theirs in parts (libzmq
  sends its signature first and waits for the other side's) accept;
- the ``NULL`` mechanism: each side sends a ``READY`` command with its metadata (``Socket-Type``
  and ``Identity``); a peer whose socket type is not one of ``accept`` is sent an ``ERROR``
  command and refused;
- frames: a flags byte (``MORE``, ``LONG``, ``COMMAND``), a 1-byte or 8-byte big-endian size and
  the body; messages (frames with ``MORE`` up to the last without it) and commands;
- ``PING`` (ZMTP 3.1 heartbeats) answered with a ``PONG`` carrying the ping's context; ``PONG``
  and commands it does not know are ignored; the peer's ``ERROR`` ends the connection.

A peer that breaks the protocol (a wrong signature, another mechanism, a version below 3, a
message larger than ``max_message_bytes``, reserved flag bits, a message before the handshake)
sets :attr:`Connection.error`, a one-line note; what is left to send (an ``ERROR`` command, when
the peer can still read one) should be sent and the connection closed. The caller owns the
socket: it writes :meth:`Connection.data_to_send` and closes.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

MORE, LONG, COMMAND = 0x01, 0x02, 0x04
RESERVED = 0xF8
VERSION = (3, 1)
GREETING_BYTES = 64
SIGNATURE_BYTES = 10
MECHANISM_BYTES = 20
NULL = b"NULL"
MAX_PING_CONTEXT = 16
DEFAULT_MAX_MESSAGE_BYTES = 1 << 30
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")

# the socket types a ROUTER talks to (RFC 28: REQ and DEALER clients)
ROUTER_PEERS = frozenset({"REQ", "DEALER"})


def greeting(
    mechanism: bytes = NULL, as_server: bool = False, version: tuple[int, int] = VERSION
) -> bytes:
    """The 64-byte greeting."""
    if len(mechanism) > MECHANISM_BYTES:
        raise ValueError(f"mechanism name longer than {MECHANISM_BYTES} bytes: {mechanism!r}")
    return (
        b"\xff" + bytes(8) + b"\x7f"
        + bytes(version)
        + mechanism.ljust(MECHANISM_BYTES, b"\0")
        + (b"\x01" if as_server else b"\x00")
        + bytes(31)
    )  # fmt: skip


def encode_frame(body: bytes, flags: int = 0) -> bytes:
    """One frame: flags (``MORE``, ``COMMAND``; ``LONG`` is set here when the body needs it)."""
    n = len(body)
    if n <= 255:
        return bytes((flags & ~LONG, n)) + body
    return bytes((flags | LONG,)) + _U64.pack(n) + body


def encode_message(frames: Sequence[bytes]) -> bytes:
    """A message of one or more frames (every frame but the last with ``MORE``)."""
    if not frames:
        raise ValueError("a message has at least one frame")
    last = len(frames) - 1
    return b"".join(encode_frame(f, MORE if i < last else 0) for i, f in enumerate(frames))


def encode_command(name: bytes, data: bytes = b"") -> bytes:
    """A command frame: the name (1 to 255 bytes, with its length) then the data."""
    if not 0 < len(name) <= 255:
        raise ValueError(f"a command name has 1 to 255 bytes: {name!r}")
    return encode_frame(bytes((len(name),)) + name + data, COMMAND)


def encode_properties(properties: Iterable[tuple[str, bytes]]) -> bytes:
    """Metadata of a ``READY`` command: name (1-byte length) and value (4-byte length) pairs."""
    out = bytearray()
    for name, value in properties:
        raw = name.encode("ascii")
        if not 0 < len(raw) <= 255:
            raise ValueError(f"a property name has 1 to 255 bytes: {name!r}")
        out += bytes((len(raw),)) + raw + _U32.pack(len(value)) + value
    return bytes(out)


def decode_properties(data: bytes) -> dict[str, bytes]:
    """The metadata of a ``READY`` command, names lower-cased (they are case-insensitive).
    Raises ``ValueError`` when a property runs past the end."""
    out: dict[str, bytes] = {}
    at = 0
    while at < len(data):
        n = data[at]
        name_end = at + 1 + n
        if n == 0 or name_end + 4 > len(data):
            raise ValueError(f"metadata property at byte {at} runs past the end")
        (size,) = _U32.unpack_from(data, name_end)
        value_end = name_end + 4 + size
        if value_end > len(data):
            raise ValueError(f"metadata value at byte {name_end} runs past the end")
        out[data[at + 1 : name_end].decode("ascii", "replace").lower()] = data[
            name_end + 4 : value_end
        ]
        at = value_end
    return out


def split_command(body: bytes) -> tuple[bytes, bytes]:
    """A command frame's name and data. Raises ``ValueError`` when the name runs past the end."""
    if not body or body[0] == 0 or 1 + body[0] > len(body):
        raise ValueError("command name runs past the end of its frame")
    return body[1 : 1 + body[0]], body[1 + body[0] :]


class Connection:
    """One side of a ZMTP 3.x connection with the ``NULL`` mechanism.

    Our greeting is queued at once (:meth:`data_to_send`); :meth:`receive` takes the peer's bytes
    as they come, in pieces of any size, and returns the messages they complete (each a list of
    frames); :meth:`send` queues a message. :attr:`ready` turns true once the peer's ``READY`` has
    been accepted; :attr:`error` is set (a one-line note) when the connection must close.
    """

    def __init__(
        self,
        socket_type: str = "ROUTER",
        identity: bytes = b"",
        accept: Iterable[str] = ROUTER_PEERS,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    ) -> None:
        self.socket_type = socket_type
        self.identity = identity
        self.accept = frozenset(accept)
        self.max_message_bytes = max_message_bytes
        self.out = bytearray(greeting())
        self.buf = bytearray()
        self.greeted = False  # the peer's greeting has been read
        self.ready = False  # the peer's READY has been accepted
        self.error: str | None = None
        self.peer_version: tuple[int, int] | None = None
        self.peer_properties: dict[str, bytes] = {}
        self.frames: list[bytes] = []  # the frames so far of the message being received
        self.message_bytes = 0

    @property
    def peer_socket_type(self) -> str | None:
        value = self.peer_properties.get("socket-type")
        return None if value is None else value.decode("ascii", "replace")

    @property
    def peer_identity(self) -> bytes:
        return self.peer_properties.get("identity", b"")

    def data_to_send(self) -> bytes:
        """The bytes queued for the peer (taken: a second call returns only newer ones)."""
        out = bytes(self.out)
        self.out.clear()
        return out

    def send(self, frames: Sequence[bytes]) -> None:
        """Queue a message for the peer (after the handshake)."""
        if not self.ready:
            raise RuntimeError("the ZMTP handshake has not completed")
        self.out += encode_message(frames)

    def receive(self, data: bytes) -> list[list[bytes]]:
        """Take the peer's next bytes; returns the messages they complete. After an error the
        bytes are ignored (and :attr:`error` says why)."""
        if self.error is not None:
            return []
        buf = self.buf
        buf += data
        if not self.greeted and not self._greeting():
            return []
        messages: list[list[bytes]] = []
        at = 0
        end = len(buf)
        while end - at >= 2:
            flags = buf[at]
            if flags & LONG:
                if end - at < 9:
                    break
                (size,) = _U64.unpack_from(buf, at + 1)
                start = at + 9
            else:
                size = buf[at + 1]
                start = at + 2
            if flags & RESERVED:
                self._fail(f"frame flags 0x{flags:02x} have reserved bits set")
                break
            if size + self.message_bytes > self.max_message_bytes:
                self._fail(
                    f"a frame of {size:,} bytes exceeds the limit of "
                    f"{self.max_message_bytes:,} bytes per message"
                )
                break
            if end - start < size:
                break
            body = bytes(buf[start : start + size])
            at = start + size
            if flags & COMMAND:
                if flags & MORE:
                    self._fail("a command frame with the MORE flag")
                    break
                self._command(body)
                if self.error is not None:
                    break
                continue
            if not self.ready:
                self._fail("a message before the handshake completed", refuse=True)
                break
            self.frames.append(body)
            if flags & MORE:
                self.message_bytes += size
                continue
            messages.append(self.frames)
            self.frames = []
            self.message_bytes = 0
        del buf[:at]
        return messages

    def _fail(self, note: str, refuse: bool = False) -> None:
        """End the connection; ``refuse``: tell the peer why with an ``ERROR`` command (it still
        reads our commands: the greetings were exchanged)."""
        self.error = note
        self.buf.clear()
        if refuse:
            reason = note.encode("ascii", "replace")[:255]
            self.out += encode_command(b"ERROR", bytes((len(reason),)) + reason)

    def _greeting(self) -> bool:
        """Read the peer's greeting as far as it has come; True once it is whole and good."""
        buf = self.buf
        if len(buf) >= SIGNATURE_BYTES and not (buf[0] == 0xFF and buf[9] == 0x7F):
            self._fail(f"not a ZMTP 3 peer: signature {bytes(buf[:SIGNATURE_BYTES]).hex()}")
            return False
        if len(buf) > SIGNATURE_BYTES and buf[SIGNATURE_BYTES] < 3:
            self._fail(f"unsupported ZMTP version {buf[SIGNATURE_BYTES]} (3.x is spoken)")
            return False
        if len(buf) < GREETING_BYTES:
            return False
        self.peer_version = (buf[10], buf[11])
        mechanism = bytes(buf[12 : 12 + MECHANISM_BYTES]).rstrip(b"\0")
        if mechanism != NULL:
            self._fail(f"unsupported security mechanism {mechanism.decode('ascii', 'replace')!r}")
            return False
        del buf[:GREETING_BYTES]
        self.greeted = True
        self.out += encode_command(
            b"READY",
            encode_properties(
                (("Socket-Type", self.socket_type.encode()), ("Identity", self.identity))
            ),
        )
        return True

    def _command(self, body: bytes) -> None:
        try:
            name, data = split_command(body)
        except ValueError as exc:
            self._fail(str(exc), refuse=not self.ready)
            return
        if name == b"PING" and self.ready:
            if len(data) < 2:
                self._fail("a PING without its 2-byte time to live")
                return
            self.out += encode_command(b"PONG", data[2 : 2 + MAX_PING_CONTEXT])
        elif name == b"ERROR":
            reason = data[1 : 1 + data[0]] if data else b""
            self._fail(f"the peer sent ERROR: {reason.decode('ascii', 'replace')}")
        elif name == b"READY":
            self._ready(data)
        elif not self.ready:
            self._fail(f"{name.decode('ascii', 'replace')} command before READY", refuse=True)
        # other commands (PONG, SUBSCRIBE, ...) mean nothing to this socket: ignored

    def _ready(self, data: bytes) -> None:
        if self.ready:
            self._fail("a second READY command")
            return
        try:
            self.peer_properties = decode_properties(data)
        except ValueError as exc:
            self._fail(f"READY: {exc}", refuse=True)
            return
        kind = self.peer_socket_type
        if kind is None:
            self._fail("READY without a Socket-Type", refuse=True)
        elif kind.upper() not in self.accept:
            self._fail(f"socket type {kind} cannot talk to {self.socket_type}", refuse=True)
        else:
            self.ready = True
