"""The HTTP driver over HTTP/2 (``options.http = "2"``): cleartext HTTP/2 with prior knowledge
(h2c), or HTTP/2 over TLS negotiated by ALPN ``h2`` when the case has ``tls``; ``load.concurrency`` streams multiplexed over ``load.connections`` connections, on
rpcmeter's HTTP/2 connection (:mod:`rpcmeter.protocols.h2`).

Requests are the HTTP/1.1 driver's (method, path, ``headers``, body; ``host`` becomes
``:authority``), header names in lower case as HTTP/2 wants them. A status other than 2xx counts
as ``http_STATUS``, a reset stream as ``rst_stream:CODE``; the server's time comes from
``Server-Timing``. Bytes out/in count every byte of the connection (frames and headers).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from rpcmeter.drivers.base import Channel, Done, DriverContext, EventDriver, ReplyError
from rpcmeter.drivers.h2client import H2Client
from rpcmeter.drivers.http import HttpCommon, validated
from rpcmeter.drivers.stream import loop_bodies
from rpcmeter.drivers.stream_connection import mismatch
from rpcmeter.drivers.varying import Fill, LoopState, MixChannel, Plan, channel_of, loop_of
from rpcmeter.metrics.connections import ConnectionCosts
from rpcmeter.protocols.bodies import expected_reply
from rpcmeter.protocols.h2.fields import block_filler
from rpcmeter.protocols.h2.request import Request
from rpcmeter.protocols.h2.stream import Stream as H2Stream
from rpcmeter.protocols.http_request import (
    CONTENT_LENGTH,
    HttpRequest,
    expect_filler,
    h2_fields,
)
from rpcmeter.protocols.templates import BytesFormat, Template, Values, text_parts
from rpcmeter.protocols.timing import ServerTime, parse_server_timing
from rpcmeter.suite.workloads import WorkloadParams


@dataclass(frozen=True, slots=True)  # read on every reply: slots read quickest
class HttpView:
    status: int
    server_ns: ServerTime | None
    ok: bool = False  # a 2xx status (tested once per distinct header block, not per reply)


def http_view(headers: list[tuple[bytes, bytes]]) -> HttpView:
    status = 0
    server_ns = None
    for name, value in headers:
        if name == b":status":
            status = int(value) if value.isdigit() else 0
        elif name == b"server-timing" and server_ns is None:
            server_ns = parse_server_timing(value)
    return HttpView(status, server_ns, 200 <= status < 300)


def status_error(status: int) -> ReplyError:
    """The error of a reply whose status is not 2xx (0: it had no valid ``:status``)."""
    if not status:
        return ReplyError("http2_malformed", "a reply without a valid :status")
    return ReplyError(f"http_{status}", f"HTTP status {status}")


def request_headers(
    method: str,
    path: str,
    authority: str,
    headers: Mapping[str, Any],
    body: bytes,
    scheme: bytes = b"http",
) -> list[tuple[bytes, bytes]]:
    """The header list of one request without placeholders (pseudo-headers first)."""
    req = HttpRequest(
        method,
        Template(path, (path,), ()),
        tuple((str(k), Template(str(v), (str(v),), ())) for k, v in headers.items()),
        body,
    )
    return [(k, v) for k, v in h2_fields(req, authority, scheme) if isinstance(v, bytes)]


class Http2Client(H2Client):
    """This client process's HTTP/2 sessions and the per-request handling of
    :class:`Http2Driver`."""

    def __init__(
        self,
        ctx: DriverContext,
        method: str,
        path: str,
        authority: str,
        headers: Mapping[str, Any],
    ) -> None:
        super().__init__(ctx)
        self.method = method
        self.path = path
        self.authority = authority
        self.extra = headers

    def view(self, headers: list[tuple[bytes, bytes]]) -> HttpView:
        return http_view(headers)

    def prepare(self, index: int, body: bytes) -> Request:
        heads = request_headers(
            self.method, self.path, self.authority, self.extra, body, self.scheme
        )
        return self.preparer(index).prepare(heads, body or None)

    def channel(self, index: int, bodies: list[bytes], expects: list[bytes] | None) -> Channel:
        """Loop ``index``'s channel, sending ``bodies`` in turn (checking replies against
        ``expects`` when given)."""
        requests = [self.prepare(index, b) for b in bodies]
        request = self.session(index).start if self.ctx.reuse else self.one_shot
        if expects is None:
            return partial(request, requests[0], self.on_end)
        pairs = list(zip(requests, expects, strict=True))
        turn = 0
        on_end = self.on_end_checked

        def validated(done: Done) -> None:
            nonlocal turn
            req, expect = pairs[turn]
            turn = (turn + 1) % len(pairs)
            request(req, on_end, (done, expect))

        return validated

    def plan_channels(
        self,
        index: int,
        plan: Plan[HttpRequest],
        state: LoopState,
        w: WorkloadParams,
        validated: Callable[..., tuple[HttpRequest, bytes | None]],
    ) -> list[Channel]:
        """Loop ``index``'s channel of each call of ``plan`` (requests that vary: see
        :mod:`rpcmeter.drivers.http_plan`); ``validated`` gives an entry's reply check."""
        conn = self.preparer(index)
        request = self.session(index).start if self.ctx.reuse else self.one_shot
        out = []
        for call in plan.calls:
            payloads: list[Any] = []
            checked = False
            for entry in call.entries:
                req, due = validated(entry, w, self.ctx.validate)
                expect = expect_filler(req, req.exprs)
                checked = checked or due is not None or expect is not None
                payloads.append((req, due, expect))
            made = [self.payload(conn, req, due, expect, checked) for req, due, expect in payloads]
            if checked:
                on_checked = self.on_end_checked
                out.append(
                    channel_of(
                        made,
                        state,
                        not plan.mix,
                        lambda p, done, c=on_checked: request(p[0], c, (done, p[1])),
                    )
                )
            else:
                out.append(channel_of(made, state, not plan.mix, request, self.on_end))
        return out

    def payload(
        self,
        conn: Any,
        req: HttpRequest,
        due: bytes | None,
        expect: Callable[[Values], bytes] | None,
        checked: bool,
    ) -> Any:
        """One entry's request (with the reply due when ``checked``), or how to make it."""
        exprs = req.exprs
        body = req.body_bytes()
        if not exprs:
            prepared = conn.prepare(h2_fields(req, self.authority, self.scheme), body or None)
            reply = expect(()) if expect is not None else due
            return (prepared, reply) if checked else prepared
        length = [0]  # the length of the body being made (a varying body's content-length)
        fields: list[tuple[bytes, bytes | Callable[[Values], bytes]]] = []
        for name, value in h2_fields(req, self.authority, self.scheme):
            if isinstance(value, bytes):
                fields.append((name, value))
            elif value.exprs == (CONTENT_LENGTH,):
                fields.append((name, lambda values: b"%d" % length[0]))
            else:
                fields.append((name, BytesFormat.of(text_parts(value), exprs).formatter()))
        block = block_filler(fields, lambda run: conn.prepare(run, None).block)
        frame_size = conn.peer_frame
        if isinstance(req.body, Template) and body is None:
            fill_body = BytesFormat.of(text_parts(req.body), exprs).formatter()

            def make(values: Values) -> Request:
                data = fill_body(values)
                length[0] = len(data)
                return Request.framed(block(values), data, frame_size)

        else:
            fixed = body or None

            def make(values: Values) -> Request:
                return Request.framed(block(values), fixed, frame_size)

        if not checked:
            return Fill(exprs, make)
        if expect is not None:
            check = expect
            return Fill(exprs, lambda values: (make(values), check(values)))
        return Fill(exprs, lambda values: (make(values), due))

    def on_end(self, stream: H2Stream) -> None:
        done: Done = stream.user
        view: HttpView | None = stream.headers
        if stream.error is not None or view is None:
            done(None, self.failure(stream))
        elif view.ok:
            done(view.server_ns, None)
        else:
            done(view.server_ns, status_error(view.status))

    def on_end_checked(self, stream: H2Stream) -> None:
        done, expect = stream.user
        view: HttpView | None = stream.headers
        if stream.error is not None or view is None:
            done(None, self.failure(stream))
        elif not view.ok:
            done(view.server_ns, status_error(view.status))
        else:
            done(view.server_ns, mismatch(stream.body(), expect))

    def failure(self, stream: H2Stream) -> BaseException:
        if stream.error is None:
            return ReplyError("http2_malformed", "a stream ended without a response")
        return self.stream_error(stream.error)

    def counters(self) -> dict[str, int]:
        out, inp = self.traffic()
        counters = {"bytes_out": out, "bytes_in": inp}
        if not self.ctx.reuse:
            counters["connects"] = self.connects
        return counters


class Http2Driver(HttpCommon, EventDriver):
    """The HTTP driver's HTTP/2 path (``options.http = "2"``; see the module doc)."""

    def __init__(self, ctx: DriverContext) -> None:
        super().__init__(ctx)
        self.client: Http2Client | None = None

    async def open(self) -> None:
        self.client = Http2Client(self.ctx, self.method(), self.path(), self.host(), self.headers())
        await self.client.open()

    def channel(self, index: int) -> Channel:
        assert self.client is not None, "open() first"
        if self.plan is not None:  # the requests vary (see rpcmeter.drivers.varying)
            ctx, plan = self.ctx, self.plan
            state = LoopState(loop_of(ctx, index))
            channels = self.client.plan_channels(index, plan, state, ctx.workload, validated)
            return MixChannel(channels, plan, state) if plan.mix else channels[0]
        bodies = loop_bodies(self.ctx, index, self.request_body)
        expects = None
        if self.ctx.validate:
            expects = [expected_reply(self.ctx.workload, b) for b in bodies]
        else:
            bodies = bodies[:1]
        return self.client.channel(index, bodies, expects)

    def counters(self) -> dict[str, int]:
        return self.client.counters() if self.client is not None else {}

    def connection_costs(self) -> ConnectionCosts | None:
        return self.client.costs if self.client is not None else None

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
