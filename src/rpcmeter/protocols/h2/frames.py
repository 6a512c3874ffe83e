"""HTTP/2's wire vocabulary (RFC 9113): frame types, flags, SETTINGS identifiers, error codes,
the frame header, and one whole frame. No state."""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import Final

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
HEAD = struct.Struct(">HBBBL")  # length (24 bits: 16 + 8), type, flags, stream id
HEAD_LEN: Final = 9


def stream_id_at(data: bytes, pos: int) -> int:
    """The stream id (its 4 bytes as sent, the reserved bit too) of the frame header at ``pos``,
    read byte by byte: compiled, native ints, with no slice and no call into Python."""
    return data[pos + 5] << 24 | data[pos + 6] << 16 | data[pos + 7] << 8 | data[pos + 8]


class FrameType(IntEnum):
    DATA = 0
    HEADERS = 1
    PRIORITY = 2
    RST_STREAM = 3
    SETTINGS = 4
    PUSH_PROMISE = 5
    PING = 6
    GOAWAY = 7
    WINDOW_UPDATE = 8
    CONTINUATION = 9


(
    DATA,
    HEADERS,
    PRIORITY,
    RST_STREAM,
    SETTINGS,
    PUSH_PROMISE,
    PING,
    GOAWAY,
    WINDOW_UPDATE,
    CONTINUATION,
) = FrameType

# flags (one bit each; which frames carry which: RFC 9113, section 6)
# (Final: the compiled build inlines them where they are read; see Contributing)
END_STREAM: Final = 0x1
ACK: Final = 0x1
END_HEADERS: Final = 0x4
PADDED: Final = 0x8
PRIORITY_FLAG: Final = 0x20


class SettingCode(IntEnum):
    HEADER_TABLE_SIZE = 1
    ENABLE_PUSH = 2
    MAX_CONCURRENT_STREAMS = 3
    INITIAL_WINDOW_SIZE = 4
    MAX_FRAME_SIZE = 5
    MAX_HEADER_LIST_SIZE = 6


class ErrorCode(IntEnum):
    """The error codes of RST_STREAM and GOAWAY (RFC 9113, section 7)."""

    NO_ERROR = 0x0
    PROTOCOL_ERROR = 0x1
    INTERNAL_ERROR = 0x2
    FLOW_CONTROL_ERROR = 0x3
    SETTINGS_TIMEOUT = 0x4
    STREAM_CLOSED = 0x5
    FRAME_SIZE_ERROR = 0x6
    REFUSED_STREAM = 0x7
    CANCEL = 0x8
    COMPRESSION_ERROR = 0x9
    CONNECT_ERROR = 0xA
    ENHANCE_YOUR_CALM = 0xB
    INADEQUATE_SECURITY = 0xC
    HTTP_1_1_REQUIRED = 0xD


CODES = {int(code): code.name for code in ErrorCode}

MAX_WINDOW: Final = (1 << 31) - 1
MAX_STREAM_ID: Final = (1 << 31) - 1
DEFAULT_WINDOW: Final = 65_535
DEFAULT_FRAME: Final = 16_384
MAX_FRAME_LIMIT: Final = (1 << 24) - 1


def error_name(code: int) -> str:
    """The RFC name of an HTTP/2 error code (``0x1`` -> ``PROTOCOL_ERROR``; one it does not
    define as hex)."""
    return CODES.get(code) or f"0x{code:x}"


def frame(kind: int, flags: int, stream_id: int, payload: bytes = b"") -> bytes:
    """One whole frame."""
    n = len(payload)
    return HEAD.pack(n >> 8, n & 0xFF, kind, flags, stream_id) + payload
