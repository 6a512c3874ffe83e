"""The errors of an HTTP/2 connection: a failed connection (:class:`H2ConnectionError`), a stream
never processed (:class:`H2Unavailable`), a stream the peer reset (:class:`StreamReset`)."""

from __future__ import annotations

import re

from mypy_extensions import mypyc_attr

from rpcmeter.protocols.h2.frames import ErrorCode, error_name

__all__ = ["H2ConnectionError", "H2Error", "H2Unavailable", "StreamReset", "bad_block"]

MEMORY_REPR = re.compile(r"\s*(?:from\s*)?<memory at 0x[0-9a-fA-F]+>:?")


def bad_block(block: bytes, exc: BaseException) -> str:
    """Why a header block could not be decoded, its first bytes shown (hpack's messages name
    the buffer as ``<memory at 0x...>``: left out)."""
    why = MEMORY_REPR.sub("", str(exc)).strip() or type(exc).__name__
    head = block[:16].hex(" ") + (" ..." if len(block) > 16 else "")
    return f"bad header block of {len(block)} bytes ({head}): {why}"


@mypyc_attr(native_class=False)
class H2Error(ConnectionError):
    """Base of this module's errors (a ``ConnectionError``: the request did not complete)."""


@mypyc_attr(native_class=False)
class H2ConnectionError(H2Error):
    """The connection failed; ``reason`` is a short word (``protocol_error``, ``unavailable``...),
    also the ``kind`` its requests' errors are counted under; ``detail`` the message after it."""

    def __init__(
        self, reason: str, message: str, code: ErrorCode = ErrorCode.PROTOCOL_ERROR
    ) -> None:
        super().__init__(f"{reason}: {message}")
        self.detail = message
        self.reason = reason
        self.kind = reason
        self.code = code


@mypyc_attr(native_class=False)
class H2Unavailable(H2ConnectionError):
    """The stream was not processed: above a GOAWAY's last stream id, or never started on a
    connection that closed."""

    def __init__(self, message: str) -> None:
        super().__init__("unavailable", message, ErrorCode.NO_ERROR)


@mypyc_attr(native_class=False)
class StreamReset(H2Error):
    """The peer reset the stream (RST_STREAM); ``code`` is the HTTP/2 error code."""

    def __init__(self, code: int) -> None:
        super().__init__(f"stream reset: {error_name(code)}")
        self.code = code
        self.kind = f"rst_stream:{error_name(code)}"
