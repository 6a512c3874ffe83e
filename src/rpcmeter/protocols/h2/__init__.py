"""HTTP/2: a sans-I/O client connection (:mod:`rpcmeter.protocols.h2.connection`) and its asyncio
transport (:mod:`rpcmeter.protocols.h2.transport`)."""

from rpcmeter.protocols.h2.connection import H2Connection
from rpcmeter.protocols.h2.errors import H2ConnectionError, H2Error, H2Unavailable, StreamReset
from rpcmeter.protocols.h2.request import Request
from rpcmeter.protocols.h2.stream import Stream

__all__ = [
    "H2Connection",
    "H2ConnectionError",
    "H2Error",
    "H2Unavailable",
    "Request",
    "Stream",
    "StreamReset",
]
