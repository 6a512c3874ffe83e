"""HTTP/1.1 driver: keep-alive connections driven from one uvloop event loop per client process.

The client path is a raw asyncio protocol whose replies are parsed by httptools (the fastest
Python client path measured; see ``benchmarks/vs_wrk.py``). Each client opens
``load.connections`` connections, and its ``load.concurrency`` (or ``load.threads``) loops
share them round-robin. A connection carries one request at a time, as wrk, oha and h2load do:
with more loops than connections, the client opens one connection per loop instead, and the
result says so (:func:`rpcmeter.analysis.checks.http1_connections`). ``pipeline = true`` pipelines the
loops' requests over ``load.connections`` instead (the result says so too).

Requests follow the built-in server's URL scheme (:mod:`rpcmeter.servers.http_server`) unless the
options say otherwise. Options (target or variant ``options``):

- ``method`` (default ``GET`` for ``noop``, ``POST`` otherwise), ``path`` (path and query
  string; default ``/noop``, ``/echo``, ``/payload?reply_bytes=N``, ``/sleep``, ``/factorial``),
  ``headers`` (table of extra request headers), ``body`` (text sent instead of the workload's
  body, :mod:`rpcmeter.protocols.bodies`), ``host`` (the ``Host`` header; default the endpoint's
  address).
- ``event_loop``: ``uvloop`` (default) or ``asyncio``.
- ``pipeline``: ``true`` pipelines HTTP/1.1 requests when ``load.concurrency`` exceeds
  ``load.connections`` (default ``false``: a connection per loop instead; see above).
- ``http``: ``"1.1"`` (default) or ``"2"``: HTTP/2, the loops' requests multiplexed as streams
  over the connections (:class:`rpcmeter.drivers.http2.Http2Driver`, the path the registry picks
  for it); cleartext with prior knowledge (h2c), or over TLS negotiated by ALPN ``h2``.

Connections are kept alive. A server that ends one after a number of requests (``Connection:
close`` on its last reply, as nginx and Apache httpd do) gets a new one, and the requests
pipelined after that reply are sent again there (:mod:`rpcmeter.drivers.stream`). A server that
closes them after each reply (HTTP/1.0 without keep-alive, ``Connection: close`` on the first
reply) fails the case with :class:`~rpcmeter.drivers.http_connection.KeepAliveRequired`, unless the suite sets ``load.reuse =
false``: then every request opens its own connection
(:class:`~rpcmeter.drivers.stream.StreamDriver`), counted as ``connects``.

HTTPS: the target's or variant's ``tls`` (:mod:`rpcmeter.net.tls`) runs every connection over TLS
(ALPN ``http/1.1``; with ``http = "2"``, ALPN ``h2``). With ``load.reuse = false`` every HTTP/1.1
request says ``Connection: close``; over HTTP/2 every request opens a connection and is its one
stream.

A status other than 2xx counts as an error of kind ``http_STATUS``. The server's times are read
from a ``Server-Timing`` header: metrics ``app`` (compute) and ``queue`` (time waited after
arrival), ``dur`` in milliseconds (:mod:`rpcmeter.protocols.timing`; without ``app``, the first
``dur`` is the compute time); replies without it report none. With ``validate``, every reply
body is compared with the expected one (echo: the request body; payload: ``reply_bytes`` bytes;
factorial: ``math.factorial``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, cast

from rpcmeter.drivers import http_plan
from rpcmeter.drivers.base import STALL_OPTIONS, Channel, Done, Driver, DriverContext
from rpcmeter.drivers.http_connection import HttpConnection
from rpcmeter.drivers.http_plan import default_path
from rpcmeter.drivers.stream import StreamDriver, workload_body
from rpcmeter.drivers.stream_connection import StreamConnection
from rpcmeter.drivers.varying import Fill, LoopState, MixChannel, Plan, channel_of, loop_of
from rpcmeter.errors import SuiteError
from rpcmeter.protocols.bodies import KINDS, check_variant_options, expected_reply
from rpcmeter.protocols.http_request import HttpRequest, expect_filler, h1_filler
from rpcmeter.protocols.http_request import build_request as build_request
from rpcmeter.protocols.templates import Template
from rpcmeter.suite.workloads import EchoParams, MixParams, WorkloadParams

if TYPE_CHECKING:
    from rpcmeter.suite.model import Suite


def check_options(opts: Mapping[str, Any]) -> None:
    """The driver's options make sense (SuiteError naming the option)."""
    http = opts.get("http", "1.1")
    if str(http) not in ("1.1", "2"):
        raise SuiteError(f'options.http: expected "1.1" or "2" (got {http!r})')
    pipeline = opts.get("pipeline", False)
    if not isinstance(pipeline, bool):
        raise SuiteError(f"options.pipeline: expected true or false (got {pipeline!r})")
    if pipeline and str(http) == "2":
        raise SuiteError(
            'options.pipeline: HTTP/2 multiplexes its requests; pipelining is for http = "1.1"'
        )


H1Payload = bytes | tuple[bytes, bytes | None]  # a request, or a request and the reply due


def validated(
    req: HttpRequest, w: WorkloadParams, validate: bool
) -> tuple[HttpRequest, bytes | None]:
    """``req`` with the reply a validating run expects of the built-in server (``expect`` of
    the request's body for ``echo``; the workload's reply otherwise), unless the request has an
    ``expect`` of its own: the request, and a fixed reply expected (None: none, or in ``expect``)."""
    if not validate or req.expect is not None or isinstance(w, MixParams):
        return req, None
    body = req.body_bytes()
    if body is None:
        if isinstance(w, EchoParams) and isinstance(req.body, Template):
            return replace(req, expect=req.body), None
        return req, None
    return req, expected_reply(w, body)


def h1_payloads(
    reqs: tuple[HttpRequest, ...], host: str, close: bool, w: WorkloadParams, validate: bool
) -> tuple[list[Any], bool]:
    """The HTTP/1.1 payloads of one call's entries, each its bytes or how to make them from a
    request's values; when any entry checks its reply (``expect``, or a validating run), every
    payload is a pair of the bytes and the reply due (None: that one is not checked), and the
    second value is True."""
    made: list[tuple[bytes | Fill[bytes], bytes | Fill[bytes] | None]] = []
    for req in reqs:
        req, due = validated(req, w, validate)
        exprs = req.exprs
        fill = h1_filler(req, host, exprs, close)
        expect = expect_filler(req, exprs)
        data: bytes | Fill[bytes] = Fill(exprs, fill) if exprs else fill(())
        reply: bytes | Fill[bytes] | None = due
        if expect is not None:
            reply = Fill(exprs, expect) if exprs else expect(())
        made.append((data, reply))
    if all(reply is None for _, reply in made):
        return [data for data, _ in made], False
    return [_pair(data, reply) for data, reply in made], True


def _pair(
    data: bytes | Fill[bytes], reply: bytes | Fill[bytes] | None
) -> H1Payload | Fill[H1Payload]:
    if not isinstance(data, Fill):
        assert not isinstance(reply, Fill)
        return (data, reply)
    fill = data.fill
    if isinstance(reply, Fill):
        check = reply.fill
        return Fill(data.exprs, lambda values: (fill(values), check(values)))
    return Fill(data.exprs, lambda values: (fill(values), reply))


def sender(
    send: Callable[[bytes, Done, bytes | None], None], checked: bool
) -> Callable[[Any, Done], object]:
    """``send(payload, done)`` through ``send(data, done, expect)`` (``checked``: payloads are
    pairs of the bytes and the reply due)."""
    if not checked:
        return cast(Callable[[Any, Done], object], send)  # its expect defaults to None
    return lambda payload, done: send(payload[0], done, payload[1])


class HttpCommon(Driver):
    """The HTTP driver as a suite sees it (transports, options, server, TLS), and what its two
    client paths share: the request's method, path, ``Host`` and body. The registry picks the
    path by ``options.http`` (:data:`rpcmeter.drivers.CLIENT_PATHS`): :class:`HttpDriver`
    (HTTP/1.1) or :class:`rpcmeter.drivers.http2.Http2Driver` (HTTP/2)."""

    name: ClassVar[str] = "http"
    transports: ClassVar[tuple[str, ...]] = ("tcp", "unix")
    reports_server_time: ClassVar[bool] = True
    connection_per_request: ClassVar[bool] = True
    builtin_server: ClassVar[str | None] = "rpcmeter.servers.http_server"
    packages: ClassVar[tuple[str, ...]] = ("httptools", "uvloop")
    tls: ClassVar[bool] = True
    url_scheme: ClassVar[str | None] = "http"
    option_keys: ClassVar[frozenset[str] | None] = (
        STALL_OPTIONS
        | {
            "method",
            "path",
            "headers",
            "body",
            "host",
            "event_loop",
            "http",
            "pipeline",
            "corrupt_every",  # server
            "queue_time",  # server
            "kv_capacity",  # server
            "kv_miss_us",  # server
        }
        | http_plan.OPTION_KEYS
    )
    workloads: ClassVar[frozenset[str]] = frozenset({*KINDS, "mix"})

    @classmethod
    def check_suite(cls, suite: Suite, where: str) -> None:
        check_variant_options(suite, where, cls.name, check_options)
        http_plan.prepare_suite(suite, where, cls.name)

    def __init__(self, ctx: DriverContext) -> None:
        super().__init__(ctx)
        # the requests when they vary (templates, a data file, a mix; None: one fixed request)
        known = ctx.prepared.get(http_plan.DATA_KEY)
        self.plan: Plan[HttpRequest] | None = http_plan.http_plan(
            ctx.options, ctx.workload, http_plan.file_data(Path.cwd(), known)
        )

    def host(self) -> str:
        ep = self.ctx.endpoint
        host = self.ctx.options.get("host")
        return str(host or ("localhost" if ep.path else ep.describe().split("//")[1]))

    def method(self) -> str:
        default = "GET" if self.ctx.workload.kind == "noop" else "POST"
        return str(self.ctx.options.get("method") or default).upper()

    def path(self) -> str:
        return str(self.ctx.options.get("path") or default_path(self.ctx.workload))

    def headers(self) -> dict[str, Any]:
        return dict(self.ctx.options.get("headers") or {})

    def request_body(self, variant: int) -> bytes:
        body = self.ctx.options.get("body")
        if body is not None:
            return str(body).encode("utf-8")
        return workload_body(self.ctx, variant)


class HttpDriver(HttpCommon, StreamDriver):
    """HTTP/1.1 (see the module doc)."""

    alpn: ClassVar[tuple[str, ...]] = ("http/1.1",)

    def __init__(self, ctx: DriverContext) -> None:
        # one request in flight per connection (as wrk, oha, h2load): a connection per loop
        # when there are more loops than connections, unless the suite asks to pipeline
        self.asked = ctx.connections
        self.shared = ctx.reuse and ctx.threads > ctx.connections  # more loops than connections
        if self.shared and not ctx.options.get("pipeline"):
            ctx = replace(ctx, connections=ctx.threads)
        super().__init__(ctx)
        self.payloads: list[tuple[list[Any], bool]] | None = None

    def setup(self) -> dict[str, int]:
        if not self.shared:  # else what the result says of it (checks.http1_connections)
            return {}
        return {
            "http1.loops": self.ctx.threads,
            "http1.connections": self.ctx.connections,
            "http1.connections_asked": self.asked,
        }

    def new_connection(self) -> StreamConnection:
        if self.plan is not None:  # every reply of a HEAD request is a head without its body
            heads = [e.method == "HEAD" for call in self.plan.calls for e in call.entries]
            return HttpConnection(head_only=all(heads))
        return HttpConnection(head_only=self.method() == "HEAD")

    def channel(self, index: int) -> Channel:
        if self.plan is None:
            return super().channel(index)
        plan, ctx = self.plan, self.ctx
        state = LoopState(loop_of(ctx, index))
        if self.payloads is None:
            host, close = self.host(), not ctx.reuse
            self.payloads = [
                h1_payloads(call.entries, host, close, ctx.workload, ctx.validate)
                for call in plan.calls
            ]
        send = self.one_shot if not ctx.reuse else self.slots[index % len(self.slots)].conn.send
        channels = [
            channel_of(payloads, state, not plan.mix, sender(send, checked))
            for payloads, checked in self.payloads
        ]
        return MixChannel(channels, plan, state) if plan.mix else channels[0]

    def encode(self, body: bytes) -> bytes:
        headers = self.headers()
        if not self.ctx.reuse:  # one request per connection (load.reuse = false)
            headers.setdefault("Connection", "close")
        return build_request(self.method(), self.path(), self.host(), headers, body)
