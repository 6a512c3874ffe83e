"""gRPC as rpcmeter speaks it, shared by the gRPC driver and the built-in gRPC server: the names
of service ``rpcmeter.Bench``, the address format, the length-prefixed message framing, the
``grpc-timeout`` header and the status codes sent or read by name.

The service has one unary method per workload (``/rpcmeter.Bench/Noop``, ``Echo``, ``Payload``,
``Sleep``, ``Factorial``) and one method per streaming mode (``StreamServer``, ``StreamClient``,
``StreamBidi``), all with raw ``bytes`` bodies (:mod:`rpcmeter.protocols.bodies`). A message on
the wire is a 5-byte prefix (flag 0: uncompressed, then its length as 4-byte big-endian) and its
bytes. The server's times travel as trailers ``rpcmeter-server-ns`` and ``rpcmeter-queue-ns``
(:mod:`rpcmeter.protocols.timing`).
"""

from __future__ import annotations

import struct

from rpcmeter.net.endpoints import Endpoint
from rpcmeter.protocols.timing import QUEUE_TIME_KEY, SERVER_TIME_KEY

SERVICE = "rpcmeter.Bench"
STREAM_MODES = ("server", "client", "bidi")

# the status codes sent or read by number (grpc.StatusCode names them all)
OK, INVALID_ARGUMENT, DEADLINE_EXCEEDED, UNIMPLEMENTED, INTERNAL = 0, 3, 4, 12, 13
RESOURCE_EXHAUSTED = 8
MAX_MESSAGE_BYTES = 4 * 1024 * 1024  # gRPC's default limit on a received message

SERVER_TIME = SERVER_TIME_KEY.encode()  # the trailers' names as HTTP/2 header names
QUEUE_TIME = QUEUE_TIME_KEY.encode()


def method_name(kind: str) -> str:
    """``echo`` -> ``Echo`` (the method of workload ``kind`` in service ``rpcmeter.Bench``)."""
    return kind.title().replace("_", "")


def method_path(kind: str) -> str:
    """Full method path of workload ``kind``: ``/rpcmeter.Bench/Echo``."""
    return f"/{SERVICE}/{method_name(kind)}"


def stream_method_path(mode: str) -> str:
    """Full method path of streaming ``mode``: ``/rpcmeter.Bench/StreamBidi``."""
    return f"/{SERVICE}/Stream{mode.title()}"


def target(endpoint: Endpoint) -> str:
    """gRPC address of an endpoint: ``host:port`` or ``unix:PATH``."""
    if endpoint.path is not None:
        return f"unix:{endpoint.path}"
    return endpoint.describe().removeprefix(f"{endpoint.transport}://")


class BadMessage(Exception):
    """Bytes that are not gRPC messages as rpcmeter reads them (a compressed one, or a body
    that is not whole messages)."""


PREFIX = struct.Struct(">BI").pack  # a message's prefix: compressed (0: not), its length


def frame(message: bytes) -> bytes:
    """A gRPC length-prefixed message (uncompressed)."""
    return PREFIX(0, len(message)) + message


def messages(buffer: bytearray) -> list[bytes]:
    """The whole messages at the start of ``buffer``, taken out of it (a partial one stays)."""
    out = []
    while len(buffer) >= 5:
        if buffer[0]:
            raise BadMessage("compressed messages are not supported")
        end = 5 + int.from_bytes(buffer[1:5], "big")
        if len(buffer) < end:
            break
        out.append(bytes(buffer[5:end]))
        del buffer[:end]
    return out


def unframe(body: bytes) -> bytes:
    """The one message of a unary call's body."""
    if len(body) < 5 or body[0] or int.from_bytes(body[1:5], "big") != len(body) - 5:
        if len(body) >= 5 and body[0]:
            raise BadMessage("compressed messages are not supported")
        raise BadMessage(f"a request of {len(body)} bytes is not one message")
    return body[5:]


def grpc_timeout(seconds: float) -> bytes:
    """The ``grpc-timeout`` header value (at most 8 digits and a unit)."""
    for unit, scale in (("u", 1e6), ("m", 1e3), ("S", 1.0), ("M", 1 / 60), ("H", 1 / 3600)):
        value = max(1, round(seconds * scale))
        if value < 10**8:
            return f"{value}{unit}".encode()
    return b"99999999H"
