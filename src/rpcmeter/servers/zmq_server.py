"""Built-in ZeroMQ reference server: the shared workload set over REQ/REP framing.

A request is one frame: a one-byte workload code (:data:`rpcmeter.protocols.bodies.OPS`) followed by the body of
:mod:`rpcmeter.protocols.bodies`. The reply is one frame: the server's compute time for the request
in nanoseconds as an 8-byte big-endian unsigned integer, followed by the reply body. A server that
knows how long the request waited after it arrived sets the top bit of that integer and puts the
wait (``queue_ns``, 8 bytes) after it (:mod:`rpcmeter.protocols.timing`); this one cannot know it
and leaves it out: unknown, not zero. libzmq's I/O thread reads the sockets (so there is no
kernel receive timestamp to ask for) and queues whole messages without a time of arrival;
``recv`` returning is the start of the handling itself, and a Python thread stamping messages as
they come would wait for the GIL that a computing handler holds (a factorial is one C call), so
it would report a busy server's queue as nearly 0.

The server binds a ROUTER socket (REQ clients talk to it as to a REP socket) on ``tcp://HOST:PORT``
or ``ipc://PATH`` (``--transport ipc --socket PATH``). With ``server_workers`` = 1 (default) one
thread serves every request in turn, like the REP server of study 002; with N > 1 the ROUTER hands
requests to N worker threads over ``inproc://`` (useful for ``sleep`` with several clients).

Server option ``server_mode`` picks how the server speaks ZeroMQ:

- ``"libzmq"`` (default): the pyzmq ROUTER socket above; no queue time.
- ``"zmtp"``: rpcmeter's own ZMTP 3.1 (:mod:`rpcmeter.protocols.zmtp`: greeting, ``NULL`` mechanism,
  ``READY`` as a ROUTER socket that REQ and DEALER peers talk to, ``PING``/``PONG``) on the event
  loop of the other built-in servers, whose TCP connections are read with the kernel's receive
  time (:class:`rpcmeter.servers.aio.StampedTransport`). It knows when each request's last bytes
  arrived, so its replies carry ``queue_ns``: the time from then until its handling began. Over
  ``ipc`` (a Unix socket, which has no receive time) the queue is left out, as by the raw server.
  One loop serves every request in turn, as the libzmq mode with one worker does (a ``sleep``
  holds the server); ``server_workers`` > 1 is refused. The reply to a message is its frames up
  to the last (a REQ peer's empty delimiter, a DEALER's envelope) followed by the reply frame,
  as a REP socket answers. A peer that breaks the protocol (another mechanism, a version below
  3, a message over ``max_message_bytes``, default 1 GiB) is closed with a note on stderr.
  Option ``queue_time = false`` reads with uvloop's own transports instead (no queue time).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import struct
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, cast

import zmq

from rpcmeter.protocols import zmtp
from rpcmeter.protocols.bodies import OPS, compute, sleep_seconds
from rpcmeter.protocols.timing import frame_times
from rpcmeter.protocols.zmq import address, server_mode
from rpcmeter.servers import aio
from rpcmeter.servers.common import (
    ServerArgs,
    announce_ready,
    exit_on_sigterm,
    parse_server_args,
    precise_sleep,
)
from rpcmeter.suite.workloads import lift_int_digit_limit


def handle(message: bytes, queued: int | None = None) -> bytes:
    """Serve one request frame; returns the reply frame (server time, ``queued`` when known, and
    the body). Both server modes answer with it."""
    t0 = time.perf_counter_ns()
    kind = OPS.get(message[:1])
    if kind is None:
        return frame_times(0, None) + b"error: unknown workload code " + message[:1]
    body = message[1:]
    try:
        if kind == "sleep":
            precise_sleep(sleep_seconds(body))
        reply = compute(kind, body)
    except (ValueError, struct.error) as exc:  # a malformed body: the client sees a mismatch
        return frame_times(0, None) + f"error: {kind}: {exc}".encode()
    return frame_times(time.perf_counter_ns() - t0, queued) + reply


def _worker(context: zmq.Context[zmq.Socket[bytes]], backend: str) -> None:
    sock = context.socket(zmq.REP)
    sock.connect(backend)
    try:
        while True:
            sock.send(handle(sock.recv()))
    except zmq.ContextTerminated:
        pass
    finally:
        sock.close(linger=0)


def serve(args: ServerArgs) -> None:
    workers = int(args.options.get("server_workers", 1))
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    front = context.socket(zmq.ROUTER)
    back: zmq.Socket[bytes] | None = None
    # closed however serve ends, SIGTERM right after the bind included: an open socket would keep
    # the context's termination at exit waiting for ever
    try:
        front.setsockopt(zmq.LINGER, 0)
        front.ipv6 = ":" in args.host
        if args.transport == "ipc" and not args.socket:
            raise SystemExit("--socket is required for the ipc transport")
        front.bind(address(args.endpoint()))
        announce_ready(front.getsockopt_string(zmq.LAST_ENDPOINT))
        if workers <= 1:
            while True:
                # the peer's identity and envelope, then the request: answered as in zmtp mode
                frames = front.recv_multipart()
                frames[-1] = handle(frames[-1])
                front.send_multipart(frames)
        else:
            back = context.socket(zmq.DEALER)
            back.bind("inproc://workers")
            for _ in range(workers):
                threading.Thread(
                    target=_worker, args=(context, "inproc://workers"), daemon=True
                ).start()
            zmq.proxy(front, back)
    finally:
        front.close(linger=0)
        if back is not None:
            back.close(linger=0)
        if args.socket:  # an ipc endpoint's file
            with contextlib.suppress(OSError):
                os.unlink(args.socket)


class ZmtpProtocol(asyncio.Protocol):
    """One peer's connection in the ``zmtp`` mode: a :class:`rpcmeter.protocols.zmtp.Connection` fed by the
    transport; every message it completes is answered before the next is read."""

    def __init__(self, max_message_bytes: int) -> None:
        self.zmtp = zmtp.Connection(max_message_bytes=max_message_bytes)
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are not subclasses
        self.transport.write(self.zmtp.data_to_send())

    def data_received(self, data: bytes) -> None:
        conn = self.zmtp
        transport = self.transport
        assert transport is not None
        for frames in conn.receive(data):
            # the handling starts now: the queue is the time since the read's bytes arrived
            frames[-1] = handle(frames[-1], aio.queue_ns(transport))
            conn.send(frames)
        out = conn.data_to_send()
        if out:
            transport.write(out)
        if conn.error is not None:
            peer = transport.get_extra_info("peername") or "a Unix socket peer"
            print(f"zmtp: closing the connection of {peer}: {conn.error}", file=sys.stderr)
            transport.close()


def zmtp_factory(options: Mapping[str, Any]) -> Callable[[], ZmtpProtocol]:
    limit = int(options.get("max_message_bytes", zmtp.DEFAULT_MAX_MESSAGE_BYTES))
    return lambda: ZmtpProtocol(limit)


def serve_zmtp(args: ServerArgs) -> None:
    """Serve in the ``zmtp`` mode until SIGTERM (``ipc`` is a Unix socket at ``--socket``)."""
    if args.transport == "ipc":
        if not args.socket:
            raise SystemExit("--socket is required for the ipc transport")
        args = dataclasses.replace(args, transport="unix")
    aio.serve(args, zmtp_factory(args.options))


def main() -> None:
    args = parse_server_args("rpcmeter's built-in ZeroMQ server")
    try:
        mode = server_mode(args.options)
    except ValueError as exc:
        raise SystemExit(f"--options: {exc}") from None
    if mode == "zmtp":
        serve_zmtp(args)
        return
    exit_on_sigterm()
    lift_int_digit_limit()
    serve(args)


if __name__ == "__main__":
    main()
