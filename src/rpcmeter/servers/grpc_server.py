"""Built-in gRPC reference server: the shared workload set as service ``rpcmeter.Bench``.

No generated code: one generic handler with raw ``bytes`` requests and replies, one unary method
per workload (``/rpcmeter.Bench/Noop``, ``Echo``, ``Payload``, ``Sleep``, ``Factorial``). The
bodies are those of :mod:`rpcmeter.protocols.bodies`; every reply carries the handler's own compute
time in nanoseconds as trailing metadata ``rpcmeter-server-ns`` (:mod:`rpcmeter.protocols.timing`).
On grpcio (``server_mode`` ``aio`` and ``sync``) it sends no ``rpcmeter-queue-ns`` (the queue time
is unknown, not zero): gRPC's core reads the connection on its own threads and tells Python of a
call only when a thread holding the GIL polls its completion queue. The moments Python can observe
(an interceptor, the handler's start, the sync server's poll thread taking the call) all come
after any wait behind a request that holds the GIL or the event loop, so they would report a busy
server's queue as nearly 0; the arrival the core knows is not exposed (its deadline, computed from
``grpc-timeout`` on arrival, has millisecond resolution and needs the client's cooperation).
``server_mode = "h2"`` serves the same service without grpcio, on python-hyper's ``h2`` over the
event loop's receive-stamped transport (:mod:`rpcmeter.servers.grpc_h2_server`), and sends
``rpcmeter-queue-ns`` over TCP: the handler's start minus the kernel's receive time of the
request's last bytes.

Streaming (workload ``stream``): one method per mode, raw bytes too: ``StreamServer`` answers
its one request with as many replies as the call's metadata asks (see
:mod:`rpcmeter.protocols.bodies`), ``StreamClient`` reads every request and answers once,
``StreamBidi`` answers each request as it arrives.

Transports: ``tcp`` (``--host``/``--port``) and ``unix`` (``--socket``, gRPC target ``unix:PATH``).

Options (JSON): ``server_mode`` = ``"aio"`` (default: grpc.aio, one event loop), ``"sync"`` (the
threaded server, ``server_workers`` threads, default 16) or ``"h2"`` (python-hyper's ``h2`` on one
uvloop event loop, with queue times; ``queue_time = false``: uvloop's own transports, none);
``tls``: serve over TLS (:func:`add_port`; ``h2``: :func:`rpcmeter.net.tls.server_context`, ALPN
``h2``, no queue time).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc

from rpcmeter.protocols.bodies import KINDS, compute, sleep_seconds, stream_reply
from rpcmeter.protocols.grpc import SERVICE, method_name, target
from rpcmeter.protocols.timing import SERVER_TIME_KEY
from rpcmeter.servers.aio import sleep_precisely
from rpcmeter.servers.common import (
    ServerArgs,
    announce_ready,
    exit_on_sigterm,
    parse_server_args,
    precise_sleep,
)
from rpcmeter.suite.workloads import lift_int_digit_limit


def _sync_stream_handlers() -> dict[str, grpc.RpcMethodHandler]:
    def server(request: bytes, context: Any) -> Iterator[bytes]:
        n, reply = stream_reply(context.invocation_metadata())
        for _ in range(n):
            yield reply

    def client(requests: Iterator[bytes], context: Any) -> bytes:
        _, reply = stream_reply(context.invocation_metadata())
        for _ in requests:
            pass
        return reply

    def bidi(requests: Iterator[bytes], context: Any) -> Iterator[bytes]:
        _, reply = stream_reply(context.invocation_metadata())
        for _ in requests:
            yield reply

    return {
        "StreamServer": grpc.unary_stream_rpc_method_handler(server),
        "StreamClient": grpc.stream_unary_rpc_method_handler(client),
        "StreamBidi": grpc.stream_stream_rpc_method_handler(bidi),
    }


def _aio_stream_handlers() -> dict[str, grpc.RpcMethodHandler]:
    async def server(request: bytes, context: Any) -> AsyncIterator[bytes]:
        n, reply = stream_reply(context.invocation_metadata())
        for _ in range(n):
            yield reply

    async def client(requests: AsyncIterator[bytes], context: Any) -> bytes:
        _, reply = stream_reply(context.invocation_metadata())
        async for _ in requests:
            pass
        return reply

    async def bidi(requests: AsyncIterator[bytes], context: Any) -> AsyncIterator[bytes]:
        _, reply = stream_reply(context.invocation_metadata())
        async for _ in requests:
            yield reply

    return {
        "StreamServer": grpc.unary_stream_rpc_method_handler(server),
        "StreamClient": grpc.stream_unary_rpc_method_handler(client),
        "StreamBidi": grpc.stream_stream_rpc_method_handler(bidi),
    }


def _sync_method(kind: str) -> Callable[[bytes, Any], bytes]:
    def call(request: bytes, context: Any) -> bytes:
        t0 = time.perf_counter_ns()
        if kind == "sleep":
            precise_sleep(sleep_seconds(request))
        return _reply(kind, request, context, t0)

    return call


def _aio_method(kind: str) -> Callable[[bytes, Any], Awaitable[bytes]]:
    async def call(request: bytes, context: Any) -> bytes:
        t0 = time.perf_counter_ns()
        if kind == "sleep":
            await sleep_precisely(sleep_seconds(request))
        return _reply(kind, request, context, t0)

    return call


def _reply(kind: str, request: bytes, context: Any, t0: int) -> bytes:
    """The reply body, with the time since ``t0`` (ns) as trailing metadata."""
    reply = compute(kind, request)
    context.set_trailing_metadata(((SERVER_TIME_KEY, str(time.perf_counter_ns() - t0)),))
    return reply


def generic_handler(aio: bool) -> grpc.GenericRpcHandler:
    """The ``rpcmeter.Bench`` service: bytes in, bytes out (no (de)serializers)."""
    make = _aio_method if aio else _sync_method
    handlers = {method_name(k): grpc.unary_unary_rpc_method_handler(make(k)) for k in KINDS}
    handlers.update(_aio_stream_handlers() if aio else _sync_stream_handlers())
    return grpc.method_handlers_generic_handler(SERVICE, handlers)


def address(args: ServerArgs) -> str:
    if args.transport == "unix" and not args.socket:
        raise SystemExit("--socket is required for the unix transport")
    return target(args.endpoint())


def add_port(server: Any, addr: str, options: dict[str, Any]) -> int:
    """Listen at ``addr``: over TLS when the options carry ``tls`` (``cert_file``, ``key_file``;
    ``client_ca_files``: require client certificates issued by them)."""
    conf = options.get("tls")
    if not conf:
        return int(server.add_insecure_port(addr))
    key = Path(conf["key_file"]).read_bytes()
    chain = Path(conf["cert_file"]).read_bytes()
    cas = b"".join(Path(p).read_bytes() for p in conf.get("client_ca_files") or [])
    creds = grpc.ssl_server_credentials(
        [(key, chain)], root_certificates=cas or None, require_client_auth=bool(cas)
    )
    return int(server.add_secure_port(addr, creds))


def _bound(addr: str, port: int) -> str:
    return addr if addr.startswith("unix:") else addr.rsplit(":", 1)[0] + f":{port}"


async def serve_aio(args: ServerArgs) -> None:
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((generic_handler(aio=True),))
    addr = address(args)
    port = add_port(server, addr, args.options)
    await server.start()
    announce_ready(_bound(addr, port))
    try:
        await server.wait_for_termination()
    finally:
        await server.stop(None)


def serve_sync(args: ServerArgs) -> None:
    workers = int(args.options.get("server_workers", 16))
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers))
    server.add_generic_rpc_handlers((generic_handler(aio=False),))
    addr = address(args)
    port = add_port(server, addr, args.options)
    server.start()
    announce_ready(_bound(addr, port))
    try:
        server.wait_for_termination()
    finally:
        server.stop(None)


def main() -> None:
    args = parse_server_args("rpcmeter's built-in gRPC server")
    exit_on_sigterm()
    lift_int_digit_limit()
    mode = args.options.get("server_mode", "aio")
    if mode == "sync":
        serve_sync(args)
    elif mode == "aio":
        asyncio.run(serve_aio(args))
    elif mode == "h2":
        from rpcmeter.servers.grpc_h2_server import serve_h2

        address(args)  # the endpoint is complete
        serve_h2(args)
    else:
        raise SystemExit(f"--options: server_mode must be 'aio', 'sync' or 'h2', not {mode!r}")


if __name__ == "__main__":
    main()
