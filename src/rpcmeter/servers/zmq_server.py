"""Built-in ZeroMQ reference server: the shared workload set over REQ/REP framing.

A request is one frame: a one-byte workload code (:data:`rpcmeter.servers.bodies.OPS`) followed by the body of
:mod:`rpcmeter.servers.bodies`. The reply is one frame: the server's compute time for the request
in nanoseconds as an 8-byte big-endian unsigned integer, followed by the reply body. A server that
knows how long the request waited after it arrived sets the top bit of that integer and puts the
wait (``queue_ns``, 8 bytes) after it (:mod:`rpcmeter.servers.timing`); this one cannot know it
and leaves it out: unknown, not zero. libzmq's I/O thread reads the sockets (so there is no
kernel receive timestamp to ask for) and queues whole messages without a time of arrival;
``recv`` returning is the start of the handling itself, and a Python thread stamping messages as
they come would wait for the GIL that a computing handler holds (a factorial is one C call), so
it would report a busy server's queue as nearly 0.

The server binds a ROUTER socket (REQ clients talk to it as to a REP socket) on ``tcp://HOST:PORT``
or ``ipc://PATH`` (``--transport ipc --socket PATH``). With ``server_workers`` = 1 (default) one
thread serves every request in turn, like the REP server of study 002; with N > 1 the ROUTER hands
requests to N worker threads over ``inproc://`` (useful for ``sleep`` with several clients).
"""

from __future__ import annotations

import contextlib
import os
import struct
import threading
import time

import zmq

from rpcmeter.endpoints import Endpoint
from rpcmeter.servers.bodies import OPS, compute, sleep_seconds
from rpcmeter.servers.common import (
    ServerArgs,
    announce_ready,
    exit_on_sigterm,
    parse_server_args,
    precise_sleep,
)
from rpcmeter.servers.timing import frame_times
from rpcmeter.workloads import lift_int_digit_limit


def handle(message: bytes) -> bytes:
    """Serve one request frame; returns the reply frame (server time + body)."""
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
    return frame_times(time.perf_counter_ns() - t0, None) + reply


def address(endpoint: Endpoint) -> str:
    """ZeroMQ address of an endpoint: ``tcp://HOST:PORT`` or ``ipc://PATH``."""
    return endpoint.describe()


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
                ident, empty, message = front.recv_multipart()
                front.send_multipart((ident, empty, handle(message)))
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


def main() -> None:
    args = parse_server_args("rpcmeter's built-in ZeroMQ server")
    exit_on_sigterm()
    lift_int_digit_limit()
    serve(args)


if __name__ == "__main__":
    main()
