"""Built-in rpyc reference server: the study-000 service (simple, callback, random_wait).

Options (JSON, from the suite's ``target.options`` and the variant's ``options``):

- ``bind_threads`` (bool): rpyc's thread binding protocol option.
- ``background`` (int): extra threads serving each connection, so that without thread binding
  several requests of one connection can run at once (study 000's ``--background``).
- ``seed`` (int): base seed of the random_wait generators (the generator for a client's thread
  ``t``: ``seed + t``, one per connection and thread, as in study 000).
- ``corrupt_every`` (int): for testing validation, every N-th ``simple`` reply is altered.
- ``stall_ms``, ``stall_after_s``, ``stall_every_s``: stall the server at a known moment
  (:class:`~rpcmeter.servers.common.Stall`).
- ``workload`` (object): the case's workload, ``kind`` and parameters (random_wait's delay_p,
  delay_s, sub_p and max_depth are read from it).
- ``spin_us`` (number): CPU time every ``simple`` call burns before it replies (measured on the
  serving thread's CPU clock, so it is the same however busy the machine is): a known server
  cost per request.
- ``wait`` (``"spin"`` or ``"block"``): serve every connection from one thread that waits for
  input with ``select``: ``block`` sleeps in it until a connection is readable, ``spin`` polls it
  with a zero timeout in a loop (busy polling). The two differ only in how they wait. Without
  ``wait``, rpyc's ThreadedServer serves (a thread per connection).
- ``queue_time`` (bool, default true): over TCP, read requests with ``recvmsg`` and the kernel's
  receive timestamps (:class:`StampedSocket`), so that ``simple_timed`` reports the queue time.
- ``nodelay`` (bool, default true): over TCP, set ``TCP_NODELAY`` on both ends, as load tools
  do. rpyc's own default leaves Nagle's algorithm on: a nested call's small frames then wait for
  the peer's delayed ACK (40 ms on Linux); ``nodelay = false`` measures that.

Server times: besides ``simple``, the service exposes ``simple_timed(value)``, the same call
answered with ``(value, handling_ns, queue_ns)``: how long the call ran and how long the request
waited after its last bytes reached the server's socket (the kernel's ``SO_TIMESTAMPNS`` stamp)
until the call began (rpyc's reading and decoding of the request, and any wait for the serving
thread: a ``wait`` server busy with another connection, the GIL). ``queue_ns`` is None (unknown)
over a Unix socket, which has no receive timestamps, with ``queue_time = false``, and with
``bind_threads``, where the thread that read a request may hand it to another one. The rpyc
driver calls it for workload ``simple`` when the server exposes it
(:mod:`rpcmeter.drivers.rpyc`).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import random
import select
import socket
import threading
import time
from typing import Any

import rpyc
from rpyc.core.stream import SocketStream
from rpyc.utils.factory import connect_stream
from rpyc.utils.server import ThreadedServer

from rpcmeter.protocols.rpyc import protocol_config
from rpcmeter.protocols.timing import SO_TIMESTAMPNS, STAMP_SPACE, kernel_stamp_ns
from rpcmeter.servers.common import (
    Stall,
    announce_ready,
    exit_on_sigterm,
    parse_server_args,
    stop_requested,
)
from rpcmeter.suite.workloads import RandomWaitParams, random_wait_level, random_wait_seeds

_arrival = threading.local()  # .ns: kernel receive time of the last bytes this thread read


class StampedSocket(socket.socket):
    """A connection whose ``recv`` is a ``recvmsg`` keeping the kernel's receive time
    (``SO_TIMESTAMPNS``) of the bytes read, per reading thread: rpyc reads a request's frame
    with ``recv`` and dispatches it on the same thread (without ``bind_threads``), so when a
    handler begins, its thread's stamp is that of the last bytes of its request."""

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        data, anc, _, _ = self.recvmsg(bufsize, STAMP_SPACE, flags)
        _arrival.ns = kernel_stamp_ns(anc)  # 0 (unknown) rather than an older read's stamp
        return data


class TcpListener(socket.socket):
    """A TCP listener whose connections have ``TCP_NODELAY`` set (with ``nodelay``: rpyc leaves
    Nagle's algorithm on, which holds a nested call's small frames for the peer's delayed ACK,
    up to 40 ms) and are :class:`StampedSocket` with timestamps on (with ``stamps``)."""

    stamps = False
    nodelay = True

    def accept(self) -> tuple[socket.socket, Any]:
        fd, addr = self._accept()  # type: ignore[attr-defined]
        kind = StampedSocket if self.stamps else socket.socket
        sock = kind(self.family, self.type, self.proto, fileno=fd)
        if socket.getdefaulttimeout() is None and self.gettimeout():
            sock.setblocking(True)
        if self.stamps:
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        if self.nodelay:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock, addr


def tuned(listener: socket.socket, stamps: bool, nodelay: bool) -> socket.socket:
    """``listener`` (TCP) as a :class:`TcpListener` (the same socket, its timeout kept)."""
    timeout = listener.gettimeout()
    new = TcpListener(fileno=listener.detach())
    new.settimeout(timeout)
    new.stamps, new.nodelay = stamps, nodelay
    if stamps:  # on the listener too, so that bytes sent before the accept are stamped as well
        new.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    return new


def queued_ns() -> int | None:
    """How long the request this thread is about to handle has waited since its last bytes
    arrived (None: read from a socket without timestamps)."""
    arrived = getattr(_arrival, "ns", 0)
    return max(0, time.time_ns() - arrived) if arrived else None


def serve_forever(conn: Any) -> None:
    """A background thread serving ``conn`` besides its own thread (the ``background`` option):
    while one thread runs a slow request, another can receive and run the next."""
    with contextlib.suppress(Exception):  # ends when the connection closes
        while not conn.closed:
            conn.serve(0.1)


def burn_cpu(us: float) -> None:
    """Spin until this thread has used ``us`` microseconds of CPU (user time: reading the thread's
    CPU clock is a system call, so it is read only every few microseconds of spinning)."""
    end = time.thread_time_ns() + int(us * 1000)
    while time.thread_time_ns() < end:
        for _ in range(200):
            pass


def make_service(options: dict[str, Any]) -> type[rpyc.Service]:
    background = int(options.get("background", 0))
    corrupt_every = int(options.get("corrupt_every", 0))
    served = itertools.count(1)
    stall = Stall(options)
    stalled = stall.check if stall.active else None
    spin_us = float(options.get("spin_us", 0))
    queue_known = not options.get("bind_threads", False)
    seed = int(options.get("seed", 0))
    workload = dict(options.get("workload", {}))
    # the suite validated these already; building the dataclass directly keeps start-up fast
    names = RandomWaitParams.field_names()
    rw = RandomWaitParams(
        **(
            {k: v for k, v in workload.items() if k in names}
            if workload.get("kind") == "random_wait"
            else {}
        )
    )

    class BenchService(rpyc.Service):  # type: ignore[misc]
        def on_connect(self, conn: Any) -> None:
            self._rngs: dict[int, random.Random] = {}
            self._lock = threading.Lock()
            for i in range(background):
                threading.Thread(
                    target=serve_forever, args=(conn,), name=f"bg-{i}", daemon=True
                ).start()

        def exposed_simple(self, value: Any = None) -> Any:
            if spin_us:
                burn_cpu(spin_us)
            if stalled:
                stalled()
            if corrupt_every and next(served) % corrupt_every == 0:
                return None if value is None else value + 1
            return value

        def exposed_noop(self) -> None:
            """Nothing (the round trip of ``[breakdown]``: no spin, no stall)."""

        def exposed_simple_timed(self, value: Any = None) -> tuple[Any, int, int | None]:
            """``simple``, answered with ``(value, handling_ns, queue_ns)`` (module docstring)."""
            queued = queued_ns() if queue_known else None
            t0 = time.perf_counter_ns()
            value = self.exposed_simple(value)
            return value, time.perf_counter_ns() - t0, queued

        def exposed_callback(self, depth: int, fn: Any, value: Any = None) -> Any:
            if stalled:
                stalled()
            if depth > 0:
                return fn(depth - 1, value)
            return value

        def _rng(self, thread: int) -> random.Random:
            rng = self._rngs.get(thread)
            if rng is None:
                with self._lock:
                    server_seed = random_wait_seeds(seed, thread)[0]
                    rng = self._rngs.setdefault(thread, random.Random(server_seed))
            return rng

        def exposed_random_wait(self, value: Any, depth: int, thread: int, fn: Any) -> Any:
            """Study 000's random wait, server side: ``thread`` is the calling thread's index
            within its client (a connection is one client), ``fn(value, depth)`` the client's
            level."""
            if stalled:
                stalled()
            random_wait_level(self._rng(thread), rw, depth, fn)
            return value

    return BenchService


def listen(
    transport: str, host: str, port: int, path: str | None, queue_time: bool, nodelay: bool
) -> socket.socket:
    if transport == "unix":
        assert path is not None, "--socket is required for the unix transport"
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(path)
        sock.listen(128)
        return sock
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.create_server((host, port), family=family, backlog=128)
    return tuned(listener, queue_time, nodelay)


def serve_select(
    service: type[rpyc.Service], config: dict[str, Any], listener: socket.socket, spin: bool
) -> None:
    """Serve every connection from this thread, waiting for input in ``select``: blocking in it
    (``spin=False``) or polling it with a zero timeout (``spin=True``)."""
    listener.setblocking(False)
    conns: dict[socket.socket, Any] = {}
    timeout = 0.0 if spin else None
    # SIGTERM raises SystemExit here, unless it arrives while rpyc runs a request (rpyc sends the
    # exception to the client instead): then the flag ends the loop
    while not stop_requested():
        readable, _, _ = select.select([listener, *conns], [], [], timeout)
        for sock in readable:
            if sock is listener:
                try:
                    client, _ = listener.accept()
                except BlockingIOError:
                    continue
                client.setblocking(True)
                conns[client] = connect_stream(SocketStream(client), service, config)
                continue
            conn = conns[sock]
            try:
                conn.serve(0)
            except Exception:  # EOF or a broken connection: drop it, keep serving the others
                del conns[sock]
                with contextlib.suppress(Exception):
                    conn.close()


def main() -> None:
    args = parse_server_args("rpcmeter's built-in rpyc server")
    exit_on_sigterm()
    service = make_service(args.options)
    config = protocol_config(args.options)
    wait = args.options.get("wait")
    queue_time = bool(args.options.get("queue_time", True))
    nodelay = bool(args.options.get("nodelay", True))
    if wait is not None:
        if wait not in ("spin", "block"):
            raise SystemExit(f"rpyc server: option wait: expected 'spin' or 'block', got {wait!r}")
        listener = listen(args.transport, args.host, args.port, args.socket, queue_time, nodelay)
        announce_ready(args.socket or "{}:{}".format(*listener.getsockname()[:2]))
        try:
            serve_select(service, config, listener, spin=wait == "spin")
        finally:
            listener.close()
            if args.socket:
                with contextlib.suppress(OSError):
                    os.unlink(args.socket)
        return
    if args.transport == "unix":
        assert args.socket is not None, "--socket is required for the unix transport"
        server = ThreadedServer(service, socket_path=args.socket, protocol_config=config)
        where = args.socket
    else:
        server = ThreadedServer(
            service,
            hostname=args.host,
            port=args.port,
            protocol_config=config,
            ipv6=":" in args.host,
        )
        server.listener = tuned(server.listener, queue_time, nodelay)
        where = f"{args.host}:{server.port}"
    announce_ready(where)
    try:
        server.start()
    finally:
        server.close()
        if args.socket:
            with contextlib.suppress(OSError):
                os.unlink(args.socket)


if __name__ == "__main__":
    main()
