"""gRPC driver: unary and streaming calls, named from a protobuf schema or sent as raw bytes; no
generated stubs.

Two client paths, one class each, picked by the registry from ``options.client``
(:data:`rpcmeter.drivers.CLIENT_PATHS`): rpcmeter's own HTTP/2 client on the event loop
(:class:`GrpcDriver`, the default; see :mod:`rpcmeter.drivers.grpc_h2`), and grpcio's blocking
stubs on threads (``options.client = "grpcio"``: :class:`rpcmeter.drivers.grpcio.GrpcioDriver`).
Both send the same messages and read the same statuses (:class:`GrpcCommon`).

By default it calls rpcmeter's built-in service (``rpcmeter.Bench``, see
:mod:`rpcmeter.servers.grpc_server`) with the workload's request body
(:mod:`rpcmeter.protocols.bodies`). With the ``method`` option it calls any unary method of any
server by its full path, sending a raw request body, so a server written in any language can be
driven without its generated code (the body is the serialized protobuf message; an empty body is a
message with every field at its default). With a schema (``proto``, ``protoset`` or
``reflection = true``) it calls a method named by ``call``, the request written as JSON
(``data``) and the replies checked field by field (``expect``): see
:mod:`rpcmeter.drivers.grpc_calls`.

Options:

- ``method``: full method path, e.g. ``"/grpc.health.v1.Health/Check"``.
- ``request_hex`` / ``request_base64`` / ``request_text`` / ``request_file``: the raw request body
  (at most one; without any, the workload's built-in body is sent).
- ``expect_hex`` / ``expect_base64`` / ``expect_text`` / ``expect_file``: the reply body every
  call must return when the suite validates (without one, the built-in expectation of the
  workload is used when the request is the built-in body).
- ``proto`` (+ ``import_paths``) / ``protoset`` / ``reflection``, ``call``, ``data`` /
  ``data_file``, ``expect``: a call named from a schema (:mod:`rpcmeter.drivers.grpc_calls`).
- ``metadata``: a table of request metadata (``{ authorization = "..." }``), sent with every
  call (and with the reflection calls).
- ``call_timeout_s``: deadline of every call (default: none).
- ``connect_timeout_s``: how long each channel may take to connect (default 10).
- ``client``: ``"h2"`` (default) or ``"grpcio"``.
- ``event_loop``: ``uvloop`` (default) or ``asyncio`` (the ``h2`` client).

The ``h2`` client: each client process opens ``load.connections`` HTTP/2 connections and runs
``load.concurrency`` closed loops as callbacks on one event loop, their calls multiplexed as
streams over the connections (round-robin). ``call_timeout_s`` is sent as ``grpc-timeout`` and the
client enforces it too (``grpc:DEADLINE_EXCEEDED``, the stream cancelled). Measured against ghz on a Go server, it makes several times ghz's calls per
second of client CPU (``benchmarks/vs_ghz.py``).

The ``grpcio`` client: each client process opens ``load.connections`` channels, each its own HTTP/2
connection (a local subchannel pool and a per-channel argument keep grpcio from sharing one), and
runs ``load.concurrency`` closed loops whose calls are spread over them round-robin. The loops are
threads calling the blocking stubs: measured against grpc.aio in one event loop on a 2-CPU machine,
grpc.aio was not faster (``benchmarks/grpc_client_modes.py`` prints the ratio). Either way the
Python gRPC client costs far more CPU per call than the HTTP driver's (130-220 us against 9-14 us
in ``examples/grpc-vs-rest.toml``), so with one client CPU it is usually the client that limits a gRPC run.

TLS: the target's or variant's ``tls`` (:mod:`rpcmeter.net.tls`) makes every channel a secure one
(grpcio's own credentials: ``ca_file`` or the system's CAs, ``cert_file``/``key_file`` for mutual
TLS, ``server_name`` as the target name override); grpcio cannot skip verification, so
``verify = false`` is a suite error. A channel that does not connect is diagnosed with one
handshake from Python's ssl module, so the failure names its cause. grpcio does not expose
connect and handshake times; rpcmeter's own client (the default) reports them.

Bytes out/in count message bodies (not gRPC framing nor HTTP/2 headers).

Server time: read from trailing metadata ``rpcmeter-server-ns`` (compute) and
``rpcmeter-queue-ns`` (time waited after arrival; :mod:`rpcmeter.protocols.timing`), which any
server may send; replies without them report none (unknown). A failed call counts as
``grpc:CODE``; ``UNAVAILABLE`` means the server is gone and stops the loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import grpc

from rpcmeter.drivers import grpc_calls
from rpcmeter.drivers.base import (
    RAW_BODY_OPTIONS,
    Channel,
    Driver,
    DriverContext,
    EventDriver,
    ReplyCheck,
)
from rpcmeter.drivers.grpc_calls import SCHEMA_OPTIONS
from rpcmeter.drivers.grpc_h2 import GrpcH2Client
from rpcmeter.drivers.grpc_plan import (
    GrpcEntry,
    PlanCall,
    fixed_headers,
    grpc_plan,
    h2_channels,
    plan_checks,
)
from rpcmeter.drivers.grpc_stream import GrpcStreamH2, stream_messages
from rpcmeter.drivers.stream import ExactReply
from rpcmeter.drivers.varying import LoopState, MixChannel, Plan, loop_of
from rpcmeter.errors import SuiteError
from rpcmeter.metrics.connections import ConnectionCosts
from rpcmeter.net.tls import ClientTls
from rpcmeter.protocols.bodies import (
    KINDS,
    bodies_from_options,
    check_raw_options,
    check_variant_options,
    stream_metadata,
)
from rpcmeter.protocols.grpc import MAX_MESSAGE_BYTES, method_path, stream_method_path
from rpcmeter.protocols.grpc_schema import PreparedCall
from rpcmeter.suite.workloads import MixParams, StreamParams

if TYPE_CHECKING:
    from rpcmeter.net.endpoints import Endpoint
    from rpcmeter.suite.model import Suite


class GrpcError(Exception):
    """A call that ended with a non-OK status (counted as ``grpc:CODE``)."""


class GrpcUnavailable(GrpcError):
    """``UNAVAILABLE``: the server cannot be reached (fatal for the loop)."""

    kind = "grpc:UNAVAILABLE"


_ERRORS: dict[grpc.StatusCode, type[GrpcError]] = {
    code: (
        GrpcUnavailable
        if code is grpc.StatusCode.UNAVAILABLE
        else type(f"grpc:{code.name}", (GrpcError,), {})
    )
    for code in grpc.StatusCode
}
GrpcUnavailable.__name__ = "grpc:UNAVAILABLE"


def status_error(exc: grpc.RpcError) -> GrpcError:
    code = exc.code() if isinstance(exc, grpc.Call) else grpc.StatusCode.UNKNOWN
    details = exc.details() if isinstance(exc, grpc.Call) else str(exc)
    return _ERRORS.get(code, _ERRORS[grpc.StatusCode.UNKNOWN])(details or code.name)


CLIENTS = ("h2", "grpcio")
SERVER_MODES = ("aio", "sync", "h2")  # the built-in server's (rpcmeter.servers.grpc_server)


def error_for(code: int, message: str) -> GrpcError:
    """The error of a non-OK status ``code`` (``grpc:NOT_FOUND``...)."""
    for status in grpc.StatusCode:
        if status.value[0] == code:
            return _ERRORS[status](message or status.name)
    return _ERRORS[grpc.StatusCode.UNKNOWN](f"status {code}: {message}")


def check_options(opts: Mapping[str, Any]) -> None:
    """The driver's and the built-in server's options make sense (SuiteError naming the option)."""
    method = opts.get("method")
    if method is not None and not (
        isinstance(method, str) and method.startswith("/") and method.count("/") == 2
    ):
        raise SuiteError(f"options.method: expected /package.Service/Method (got {method!r})")
    client = opts.get("client", "h2")
    if client not in CLIENTS:
        raise SuiteError(f"options.client: expected h2 or grpcio (got {client!r})")
    mode = opts.get("server_mode", "aio")
    if mode not in SERVER_MODES:
        raise SuiteError(f"options.server_mode: expected aio, sync or h2 (got {mode!r})")
    if not isinstance(opts.get("metadata") or {}, dict):
        raise SuiteError("options.metadata: expected a table")
    check_raw_options(opts)


class GrpcCommon(Driver):
    """The gRPC driver as a suite sees it (transports, options, server, TLS, schemas), and what
    its two client paths share: the method, the request and the check of replies, the metadata
    and the deadline. The registry picks the path by ``options.client``
    (:data:`rpcmeter.drivers.CLIENT_PATHS`): :class:`GrpcDriver` (rpcmeter's own HTTP/2 client)
    or :class:`rpcmeter.drivers.grpcio.GrpcioDriver`."""

    name: ClassVar[str] = "grpc"
    transports: ClassVar[tuple[str, ...]] = ("tcp", "unix")
    workloads: ClassVar[frozenset[str]] = frozenset({*KINDS, "stream", "mix"})
    builtin_server: ClassVar[str | None] = "rpcmeter.servers.grpc_server"
    reports_server_time: ClassVar[bool] = True
    packages: ClassVar[tuple[str, ...]] = ("grpcio", "hpack", "uvloop", "protobuf")
    option_keys: ClassVar[frozenset[str] | None] = (
        RAW_BODY_OPTIONS
        | SCHEMA_OPTIONS
        | {
            "method",
            "metadata",
            "call_timeout_s",
            "connect_timeout_s",
            "client",
            "event_loop",
            "server_mode",  # client and server
            "server_workers",
            "queue_time",  # server (server_mode = "h2")
            "max_message_bytes",
        }
    )
    fork_safe: ClassVar[bool] = False  # grpc's core must start after the fork
    tls: ClassVar[bool] = True
    url_scheme: ClassVar[str | None] = "http"
    fatal_errors: ClassVar[tuple[type[BaseException], ...]] = (OSError, EOFError, GrpcUnavailable)
    # grpcio's own log lines (a failed handshake, every retry) would go to the terminal: a
    # connection that fails is named in the case's reason instead
    client_env: ClassVar[Mapping[str, str]] = {"GRPC_VERBOSITY": "NONE"}

    @classmethod
    def check_suite(cls, suite: Suite, where: str) -> None:
        check_variant_options(suite, where, cls.name, check_options)
        grpc_calls.prepare_suite(suite, where, cls.name)
        for vname in suite.variants:
            tls = suite.tls_of(vname)
            if suite.driver_of(vname) == cls.name and tls is not None and not tls.verify:
                raise SuiteError(
                    f"{where}: variants.{vname}.tls.verify: the grpc driver (grpcio) cannot "
                    "skip verification: give the server's CA as ca_file"
                )

    @classmethod
    def asks_server(cls, options: Mapping[str, Any]) -> bool:
        return options.get("reflection") is True

    @classmethod
    def ask_server(
        cls, suite: Suite, variant: str, endpoint: Endpoint, tls: ClientTls | None
    ) -> dict[str, Any]:
        return grpc_calls.ask_server(suite, variant, endpoint, tls)

    @classmethod
    def describe_prepared(cls, prepared: Mapping[str, Any]) -> dict[str, Any] | None:
        return grpc_calls.describe_prepared(prepared)

    def __init__(self, ctx: DriverContext) -> None:
        super().__init__(ctx)
        opts = ctx.options
        w = ctx.workload
        self.stream = w if isinstance(w, StreamParams) else None
        self.metadata = tuple((str(k), str(v)) for k, v in (opts.get("metadata") or {}).items())
        call = self.schema_call()
        self.check: ReplyCheck | None
        if call is not None:  # a call named from a schema: its request and its expect
            self.request, self.path, self.check = call.request, call.path, call.reply_check()
        elif isinstance(w, MixParams):  # its calls' own (grpc_plan)
            self.request, self.path, self.check = b"", "", None
        else:
            self.request, expect = bodies_from_options(opts, w)
            self.check = ExactReply(expect) if expect is not None and ctx.validate else None
            stream = self.stream
            builtin = stream_method_path(stream.mode) if stream is not None else method_path(w.kind)
            self.path = str(opts.get("method") or builtin)
            if self.stream is not None and not opts.get("method"):
                self.metadata += stream_metadata(self.stream)
        self.max_message = int(opts.get("max_message_bytes", MAX_MESSAGE_BYTES))
        timeout = opts.get("call_timeout_s")
        self.timeout = float(timeout) if timeout is not None else None
        self.connect_timeout_s = float(opts.get("connect_timeout_s", 10.0))
        # the requests when they vary (templates, a data file, a mix; None: one fixed request)
        self.plan: Plan[GrpcEntry] | None = None
        if self.stream is None:
            self.plan = grpc_plan(ctx, call, self.path, self.request, self.metadata)
        # a stream's request message, when it varies (None: every stream sends self.request)
        self.messages = stream_messages(call) if self.stream is not None else None

    def schema_call(self) -> PreparedCall | None:
        """The call the run prepared (a schema's), or one compiled here from the options of a
        context made by hand (``proto`` or ``protoset``, relative to the working directory)."""
        prepared = self.ctx.prepared.get(grpc_calls.CALL_KEY)
        if isinstance(prepared, PreparedCall):
            return prepared
        opts = self.ctx.options
        source = grpc_calls.source_of(opts)
        if source is None or opts.get("call") is None:  # none, or a mix's (its calls' own)
            return None
        if source == "reflection":
            raise SuiteError("options.reflection: the run asks the server before the cases")
        grpc_calls.check_call_options(opts)
        schema = grpc_calls.load_file_schema(opts, Path.cwd())
        return grpc_calls.prepare_call(opts, schema, Path.cwd())


class GrpcDriver(GrpcCommon, EventDriver):
    """Unary and streaming calls over rpcmeter's own HTTP/2 client on the event loop (the
    default path; see the module doc)."""

    def __init__(self, ctx: DriverContext) -> None:
        super().__init__(ctx)
        self.h2: GrpcH2Client | None = None
        self.plan_calls: list[PlanCall] = []

    async def open(self) -> None:
        if self.plan is not None:
            await self.open_plan(self.plan)
            return
        args = (
            self.ctx,
            self.path,
            self.request,
            self.check,
            self.metadata,
            self.timeout,
            error_for,
            GrpcUnavailable,
        )
        if self.stream is not None:
            self.h2 = GrpcStreamH2(
                *args,
                params=self.stream,
                max_message_bytes=self.max_message,
                messages=self.messages,
            )
        else:
            self.h2 = GrpcH2Client(*args, max_message_bytes=self.max_message)
        await self.h2.open(self.connect_timeout_s)

    async def open_plan(self, plan: Plan[GrpcEntry]) -> None:
        """A :class:`PlanCall` for each call of the plan, on the first one's connections."""
        for k, call in enumerate(plan.calls):
            entry = call.entries[0]
            check, templated = plan_checks(entry, self.check)
            client = PlanCall(
                self.ctx,
                entry.path,
                b"",
                check,
                fixed_headers(entry.metadata),
                self.timeout,
                error_for,
                GrpcUnavailable,
                templated=templated,
                max_message_bytes=self.max_message,
            )
            if k == 0:
                await client.open(self.connect_timeout_s)
                self.h2 = client
            else:
                assert self.h2 is not None
                client.share(self.h2)
            self.plan_calls.append(client)

    def channel(self, index: int) -> Channel:
        assert self.h2 is not None, "open() first"
        if self.plan is not None:
            state = LoopState(loop_of(self.ctx, index))
            channels = h2_channels(self.plan_calls, self.plan, index, state)
            return MixChannel(channels, self.plan, state) if self.plan.mix else channels[0]
        return self.h2.channel(index)

    def close(self) -> None:
        if self.h2 is not None:
            self.h2.close()

    def connection_costs(self) -> ConnectionCosts | None:
        return self.h2.costs if self.h2 is not None else None

    def counters(self) -> dict[str, int]:
        if self.plan_calls:
            each = [c.counters() for c in self.plan_calls]
            return {k: sum(c[k] for c in each) for k in ("bytes_out", "bytes_in")}
        return self.h2.counters() if self.h2 is not None else {}


__all__ = ["GrpcCommon", "GrpcDriver", "GrpcError", "status_error"]
