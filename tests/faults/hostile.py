"""Misbehaving servers, one small one per protocol, each with a ``--mode`` saying how it fails.

Run as a suite's ``server.command``::

    python tests/faults/hostile.py PROTOCOL MODE --port {port}

Modes (every protocol unless said otherwise):

- ``ok``: answers every request correctly (the control).
- ``hang``: reads requests and never answers.
- ``die``: answers :data:`SERVED` requests, then the whole process exits (status 3).
- ``close``: answers :data:`WARMUP` requests on a connection, then closes it at once, before
  the measurement begins (keeps listening).
- ``fail``: answers every request with an error (HTTP 500, raw status 1).
- ``twice``: sends every reply twice (http, raw).
- ``negative``: a reply whose length is negative (http: ``Content-Length: -40``) or below the
  frame's minimum (raw: length 3).
- ``bad400``: answers ``400 Bad Request`` with ``Connection: close`` and closes (http).
- ``garbage``: answers bytes that are not a reply at all (grpc: its reflection service,
  ``grpc.reflection.v1`` and ``v1alpha``, answers every request with bytes that are not a
  reflection reply).
- ``big``: answers every unary call with a message of :data:`BIG` bytes (grpc).

The grpc server (grpcio, no stubs: bytes in, bytes out) answers every other unary call with an
empty message.

A reply carries no server time (raw: 0 ns). Served counts are per process (``die``) or per
connection (``close``); the probe connection rpcmeter makes before the case sends nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator

SERVED = 15  # requests answered before ``die`` strikes (after a warmup of 10)
WARMUP = 10  # requests answered before ``close`` strikes: right after the warmup
REPLY_HEAD = struct.Struct(">IBQ")  # raw: length, status, server_ns
BIG = 10_000_000  # grpc ``big``: a reply over gRPC's default limit of 4 MiB
_count = 0
_lock = threading.Lock()


def _served() -> int:
    global _count
    with _lock:
        _count += 1
        return _count


def http_requests(conn: socket.socket) -> bytes | None:
    """Read one HTTP request (head and Content-Length body); None at the end of the stream."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        data = conn.recv(65536)
        if not data:
            return None
        buf += data
    head, _, body = buf.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        data = conn.recv(65536)
        if not data:
            return None
        body += data
    return body


def http_reply(status: int, body: bytes, extra: str = "", length: int | None = None) -> bytes:
    n = len(body) if length is None else length
    head = f"HTTP/1.1 {status} X\r\nContent-Length: {n}\r\n{extra}\r\n"
    return head.encode() + body


HTTP_REPLIES = {
    "ok": http_reply(200, b"ok"),
    "fail": http_reply(500, b"no"),
    "twice": http_reply(200, b"ok") * 2,
    "negative": http_reply(200, b"ok" * 30, length=-40),
    "bad400": http_reply(400, b"bad", "Connection: close\r\n"),
    "garbage": b"\x00\x01garbage\r\n\r\n",
}


def serve(
    conn: socket.socket,
    mode: str,
    read: Callable[[socket.socket], bytes | None],
    replies: dict[str, bytes],
) -> None:
    """Answer requests on one connection as ``mode`` says (the module doc)."""
    answered = 0
    while read(conn) is not None:
        answered += 1
        if mode == "hang":
            continue
        if mode == "die" and _served() > SERVED:
            os._exit(3)
        conn.sendall(replies.get(mode, replies["ok"]))
        if mode == "bad400" or (mode == "close" and answered == WARMUP):
            return


def raw_request(conn: socket.socket) -> bytes | None:
    """Read one raw request frame; None at the end of the stream."""
    buf = b""
    while len(buf) < 4 or len(buf) < 4 + struct.unpack(">I", buf[:4])[0]:
        data = conn.recv(65536)
        if not data:
            return None
        buf += data
    return buf


def raw_reply(body: bytes, status: int = 0, length: int | None = None) -> bytes:
    return REPLY_HEAD.pack(9 + len(body) if length is None else length, status, 0) + body


RAW_REPLIES = {
    "ok": raw_reply(b""),
    "fail": raw_reply(b"no", status=1),
    "twice": raw_reply(b"") * 2,
    "negative": raw_reply(b"", length=3),
    "garbage": b"\xff" * 20,
}


def serve_stream(protocol: str, mode: str, port: int) -> None:
    read, replies = (
        (http_requests, HTTP_REPLIES) if protocol == "http" else (raw_request, RAW_REPLIES)
    )
    listener = socket.create_server(("127.0.0.1", port))

    def handle(conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            serve(conn, mode, read, replies)

    while True:
        conn, _ = listener.accept()
        threading.Thread(target=handle, args=(conn,), daemon=True).start()


def serve_zmq(mode: str, port: int) -> None:
    import zmq

    sock = zmq.Context().socket(zmq.REP)
    sock.bind(f"tcp://127.0.0.1:{port}")
    while True:
        sock.recv()
        if mode == "hang":
            time.sleep(3600)
        if mode == "die" and _served() > SERVED:
            os._exit(3)
        if mode == "garbage":
            sock.send(b"\x01")  # shorter than the server time it must carry
        elif mode == "fail":
            sock.send(struct.pack(">Q", 0) + b"error: refused")
        else:
            sock.send(struct.pack(">Q", 0))


def serve_grpc(mode: str, port: int) -> None:
    from concurrent import futures

    import grpc

    def reflection(requests: Iterator[bytes], context: object) -> Iterator[bytes]:
        for _ in requests:
            yield b"\xff" * 20  # not a ServerReflectionResponse: wire format corrupt

    def unary(request: bytes, context: object) -> bytes:
        return b"\x00" * BIG if mode == "big" else b""

    class Handler(grpc.GenericRpcHandler):  # type: ignore[misc]
        def service(self, details: grpc.HandlerCallDetails) -> object:
            if details.method.endswith("/ServerReflectionInfo"):
                garbage = mode == "garbage"
                return grpc.stream_stream_rpc_method_handler(reflection) if garbage else None
            return grpc.unary_unary_rpc_method_handler(unary)

    server = grpc.server(
        futures.ThreadPoolExecutor(4),
        handlers=[Handler()],
        options=[("grpc.max_send_message_length", -1)],
    )
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    server.wait_for_termination()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("protocol", choices=["http", "raw", "zmq", "grpc"])
    parser.add_argument("mode")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    if args.protocol == "zmq":
        serve_zmq(args.mode, args.port)
    elif args.protocol == "grpc":
        serve_grpc(args.mode, args.port)
    else:
        serve_stream(args.protocol, args.mode, args.port)


if __name__ == "__main__":
    main()
