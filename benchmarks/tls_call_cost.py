"""The TLS transport's cost per HTTPS/1.1 request, in instructions: rpcmeter's
:class:`~rpcmeter.net.tls_transport.TlsTransport` (with a protocol that only counts replies and writes the next
request) against the floor's bare read and write through OpenSSL's memory BIOs, each in a client
process of its own under valgrind's callgrind, against nginx (HTTPS, one worker).

Each client runs ``--connections`` keep-alive connections for ``n`` requests each, once with
``--few`` and once with ``--many``; the difference of the two runs' instruction counts divided by
the difference of their requests is the count per request, without the start-up, the handshakes
and the end (exact and steady, where CPU time on a shared machine is not). A third client is
rpcmeter's transport on a context as the ``ssl`` module makes it, which frees OpenSSL's record
buffers after each record (rpcmeter's contexts keep them: :mod:`rpcmeter.net.tls_buffers`).

``--sslsocket`` adds two clients that let OpenSSL read the socket itself (an ``SSLSocket``, no
memory BIOs), as wrk does: ``sslsocket`` reads each record in two system calls (its 5-byte
header, then the rest); ``read-ahead`` has OpenSSL read all the socket holds in one, and then,
after each read, asks OpenSSL whether it holds more (``SSL_has_pending``, which the ``ssl``
module does not offer: through :mod:`ctypes`), since records it has read ahead are no longer
in the socket for the loop to see::

    python benchmarks/tls_call_cost.py [--connections 10] [--few 200] [--many 1200] [--sslsocket]

Needs valgrind and nginx; it takes a few minutes (the clients run some 50 times slower).
"""

from __future__ import annotations

import _ssl
import argparse
import asyncio
import ctypes
import functools
import os
import shutil
import socket
import ssl
import sys
from collections.abc import Callable
from typing import Any, NamedTuple

from versus import FLOOR_TLS_HANDSHAKE, callgrind_instructions, layout, serve

from rpcmeter.net.connect import open_stream
from rpcmeter.net.tls import ClientTls, RunCertificates, TlsSettings, client_context
from rpcmeter.net.tls_buffers import _openssl, record_buffers_kept


def client(kind: str, port: int, ca_file: str, conns: int, each: int) -> None:
    """One client process's work (run under valgrind): ``conns`` connections, ``each`` requests
    on each, by the floor's code or on rpcmeter's transport (``released``: on a context that
    releases the record buffers)."""
    import uvloop

    request = f"GET /noop HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
    if kind == "released":
        ctx = ssl.create_default_context(cafile=ca_file)
        ctx.set_alpn_protocols(["http/1.1"])
        assert record_buffers_kept(ctx) is False
    else:
        ctx = client_context(ClientTls(TlsSettings(), ca_file, None), ["http/1.1"])
        assert record_buffers_kept(ctx) is True

    async def main() -> None:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        left = [conns]

        def finished() -> None:
            left[0] -= 1
            if left[0] == 0:
                done.set_result(None)

        job = Job(loop, port, ctx, request, each, finished)
        socks: list[socket.socket] = []  # the floor's, held while it reads their descriptors
        if kind == "floor":
            socks = [floor_connection(job) for _ in range(conns)]
        elif kind in ("sslsocket", "read-ahead"):
            if kind == "read-ahead":
                set_read_ahead(ctx)
            socks = [sslsocket_connection(job, kind == "read-ahead") for _ in range(conns)]
        else:

            class Counting(asyncio.Protocol):
                count = each

                def connection_made(self, transport: asyncio.BaseTransport) -> None:
                    self.write = transport.write  # type: ignore[attr-defined]

                def data_received(self, data: bytes) -> None:
                    self.count -= 1
                    if self.count == 0:
                        finished()
                        return
                    self.write(request)

            for _ in range(conns):
                _, proto = await open_stream(
                    loop,
                    socket.AF_INET,
                    ("127.0.0.1", port),
                    Counting,
                    ssl_context=ctx,
                    server_hostname="127.0.0.1",
                )
                proto.write(request)
        await done
        for sock in socks:
            sock.close()

    uvloop.run(main())


class Job(NamedTuple):
    """What each of a client's connections does: ``each`` requests to ``port``, then
    ``finished()``."""

    loop: asyncio.AbstractEventLoop
    port: int
    ctx: ssl.SSLContext
    request: bytes
    each: int
    finished: Callable[[], None]


def floor_connection(job: Job) -> socket.socket:
    """The floor: a blocking handshake, then one ``read`` of the socket, one decrypted record,
    one encrypted request and one ``write`` per reply, in one closure (``os.read`` and
    ``os.write`` on the descriptor, as the transport's). Returns the socket, for the caller to
    hold while the loop reads it (once collected, it closes its descriptor)."""
    loop, port, ctx, request, each, finished = job
    names: dict[str, Any] = {"socket": socket, "ssl": ssl}
    exec(FLOOR_TLS_HANDSHAKE, names)  # the handshake of the other benchmarks' floors
    sock: socket.socket
    sock, tls, incoming, outgoing = names["handshake"](ctx, "127.0.0.1", port)
    c_tls = getattr(tls, "_sslobj", tls)
    feed, read, encrypt, encrypted = incoming.write, c_tls.read, c_tls.write, outgoing.read
    fd, os_read, os_write = sock.fileno(), os.read, os.write  # as the transport's
    left = [each]
    size = [65536]

    def readable() -> None:
        data = os_read(fd, size[0])
        feed(data)
        n = len(data)
        size[0] = 479 if n < 479 else 65536  # a short reply: a small read next, as the transport
        try:
            read(n)  # one record's plaintext is shorter than the record
        except ssl.SSLWantReadError:
            return
        left[0] -= 1
        if left[0] == 0:
            loop.remove_reader(fd)
            finished()
            return
        encrypt(request)
        os_write(fd, encrypted())

    loop.add_reader(fd, readable)
    encrypt(request)
    os_write(fd, encrypted())
    return sock


SSL_CTRL_SET_READ_AHEAD = 41  # OpenSSL's ssl.h


def set_read_ahead(ctx: ssl.SSLContext) -> None:
    """Have OpenSSL read all the socket holds, not one record's header and then its body."""
    reached = _openssl(ctx)
    assert reached is not None, "this Python's SSLContext is not one tls_buffers knows"
    ctrl, pointer = reached
    ctrl(pointer, SSL_CTRL_SET_READ_AHEAD, 1, None)


def has_pending(tls: ssl.SSLSocket, ctx: ssl.SSLContext) -> Callable[[], int]:
    """OpenSSL's ``SSL_has_pending`` for ``tls`` (whether it holds bytes it has read and not yet
    decrypted), through ctypes: CPython's ``PySSLSocket`` holds the ``SSL`` pointer after its
    object header and its socket's weak reference, checked against the context's pointer."""
    lib = ctypes.CDLL(getattr(_ssl, "__file__", None))
    lib.SSL_has_pending.argtypes = [ctypes.c_void_p]
    lib.SSL_has_pending.restype = ctypes.c_int
    lib.SSL_get_SSL_CTX.argtypes = [ctypes.c_void_p]
    lib.SSL_get_SSL_CTX.restype = ctypes.c_void_p
    c_tls = tls._sslobj  # type: ignore[attr-defined]
    pointer = ctypes.c_void_p.from_address(id(c_tls) + object.__basicsize__ + 8).value
    reached = _openssl(ctx)
    assert reached is not None and lib.SSL_get_SSL_CTX(pointer) == reached[1]
    return functools.partial(lib.SSL_has_pending, pointer)


def sslsocket_connection(job: Job, ahead: bool) -> ssl.SSLSocket:
    """An ``SSLSocket`` client: OpenSSL reads and writes the socket. A read takes one record's
    data (479 bytes asked after a short reply, as the floor's reads, and the rest of a longer
    record's in a second read); with ``ahead``, OpenSSL is then asked whether it holds more
    records. A whole reply never leaves any here (each reply is one record), so finding some
    ends the client process (an exception in a loop's callback is only logged: the run would
    wait forever)."""
    loop, port, ctx, request, each, finished = job
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    tls = ctx.wrap_socket(sock, server_hostname="127.0.0.1")
    tls.setblocking(False)
    c_tls = tls._sslobj  # type: ignore[attr-defined]
    read, write = c_tls.read, c_tls.write
    pending = has_pending(tls, ctx) if ahead else None
    fd = tls.fileno()
    left = [each]
    size = [65536]

    def readable() -> None:
        try:
            n = len(read(size[0]))
        except ssl.SSLWantReadError:
            return
        if n == size[0] and c_tls.pending():  # the rest of the record's data
            n += len(read(65536))
        size[0] = 479 if n < 479 else 65536
        if pending is not None and pending():
            raise SystemExit("OpenSSL holds more records than one reply")
        left[0] -= 1
        if left[0] == 0:
            loop.remove_reader(fd)
            finished()
            return
        write(request)

    loop.add_reader(fd, readable)
    write(request)
    return tls


def instructions(kind: str, port: int, ca_file: str, conns: int, each: int) -> int:
    """The instructions of one client process under callgrind."""
    return callgrind_instructions(
        __file__, "--client", kind, str(port), ca_file, str(conns), str(each)
    )


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--client":
        which, at, ca, conns, each = sys.argv[2:7]
        client(which, int(at), ca, int(conns), int(each))
        return 0
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--connections", type=int, default=10)
    parser.add_argument("--few", type=int, default=200, help="requests per connection, first run")
    parser.add_argument("--many", type=int, default=1200, help="and in the second run")
    parser.add_argument(
        "--sslsocket", action="store_true", help="add the clients that let OpenSSL read the socket"
    )
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        print("needs valgrind (Debian: apt-get install valgrind)", file=sys.stderr)
        return 2
    certs = RunCertificates()
    try:
        with serve("nginx", "https", layout(1), certs) as served:
            port = served.endpoint.port or 0
            counts: dict[str, float] = {}
            kinds = ["floor", "rpcmeter", "released"]
            if args.sslsocket:
                kinds += ["sslsocket", "read-ahead"]
            for kind in kinds:
                few = instructions(kind, port, certs.ca_file, args.connections, args.few)
                many = instructions(kind, port, certs.ca_file, args.connections, args.many)
                counts[kind] = (many - few) / ((args.many - args.few) * args.connections)
                print(f"  {kind:<10} {counts[kind]:9,.0f} instructions/request", flush=True)
    finally:
        certs.close()
    print(f"rpcmeter - floor: {counts['rpcmeter'] - counts['floor']:,.0f} instructions/request")
    kept = counts["released"] - counts["rpcmeter"]
    print(f"buffers released - kept: {kept:,.0f} instructions/request")
    return 0


if __name__ == "__main__":
    sys.exit(main())
