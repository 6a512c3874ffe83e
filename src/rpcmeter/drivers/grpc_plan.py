"""The gRPC driver's requests that vary (placeholders in ``data``, ``metadata`` and
``expect``, a ``data_file`` of messages, mixes of calls), over its HTTP/2 client and grpcio.

The calls were compiled when the suite was loaded (:mod:`rpcmeter.drivers.grpc_calls`): every
message is bytes or a :class:`~rpcmeter.protocols.grpc_schema.MessageTemplate`. Here a client
turns them into what it sends:

- over rpcmeter's HTTP/2 client, each call of the plan has a :class:`PlanCall` (a
  :class:`~rpcmeter.drivers.grpc_h2.GrpcH2Client` on the first call's connections: its own
  path, headers, reply check and counts); an entry that does not vary is one prepared request
  (a data file's, prepared once for every loop and sent in turn by one call: :func:`_h2_turns`),
  one that varies is framed per request (:meth:`Request.framed
  <rpcmeter.protocols.h2.connection.Request.framed>`), its header block from
  :func:`~rpcmeter.protocols.h2.fields.block_filler`; the usual one (metadata that does not
  vary) has its message's varying part made alone and joined to a head kept per size, in the
  loop's request made again in place (:func:`_spliced`), and a call whose request number alone
  varies makes it in one Python call (:func:`_h2_numbered`);
- over grpcio, each call is a stub of its method, its message and metadata made per call.

An ``expect`` with placeholders is checked with the values the request was made with: the loop
has one request in flight, so its values wait under the loop's ``done`` until the reply comes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc

from rpcmeter.drivers.base import Caller, Channel, Done, DriverContext, ReplyCheck
from rpcmeter.drivers.grpc_h2 import GrpcH2Client
from rpcmeter.drivers.varying import (
    MIX_KEY,
    NUMBER_ONLY,
    Call,
    Fill,
    LoopState,
    MixCaller,
    Plan,
    channel_of,
    mix_key,
    source,
)
from rpcmeter.protocols.grpc import MAX_MESSAGE_BYTES, PREFIX, frame
from rpcmeter.protocols.grpc_schema import MessageTemplate, PreparedCall, TemplatedExpect
from rpcmeter.protocols.h2.connection import Request
from rpcmeter.protocols.h2.connection import Stream as H2Stream
from rpcmeter.protocols.h2.fields import block_filler
from rpcmeter.protocols.request_data import Rotation
from rpcmeter.protocols.templates import (
    Expr,
    Template,
    Values,
    distinct,
    is_template,
    parse,
    text_formatter,
)
from rpcmeter.protocols.timing import ServerTime, trailer_times
from rpcmeter.suite.workloads import MixParams

HEADS_KEPT = 4096  # the sizes of a message's varying part whose head _spliced keeps


@dataclass(frozen=True)
class GrpcEntry:
    """One request of a plan: its method's ``path``, its message (bytes or a template), its
    metadata (values may hold placeholders) and the schema call it belongs to (None: a raw
    call)."""

    path: str
    message: bytes | MessageTemplate
    metadata: tuple[tuple[str, str], ...] = ()
    call: PreparedCall | None = None

    def templates(self) -> list[tuple[str, Template]]:
        return [(k, parse(v)) for k, v in self.metadata if is_template(v)]

    def expect(self) -> TemplatedExpect | None:
        return self.call.templated_check() if self.call is not None else None

    def exprs(self) -> tuple[Expr, ...]:
        """The entry's distinct placeholders: its message's, its metadata's, its expect's."""
        found = [*(self.message.exprs if isinstance(self.message, MessageTemplate) else ())]
        found += [e for _, t in self.templates() for e in t.exprs]
        expect = self.expect()
        if expect is not None:
            found += expect.exprs
        return tuple(dict.fromkeys(found))

    def varies(self) -> bool:
        return bool(self.exprs())


def grpc_plan(
    ctx: DriverContext,
    call: PreparedCall | None,
    path: str,
    request: bytes,
    metadata: tuple[tuple[str, str], ...],
) -> Plan[GrpcEntry] | None:
    """The client's requests (None: one fixed request, the driver's own path): a mix's calls
    (compiled with the suite, in ``ctx.prepared``), a schema call's messages, or a raw call's
    one request with metadata that varies."""
    w = ctx.workload
    if isinstance(w, MixParams):
        mix = (ctx.prepared.get(MIX_KEY) or {}).get(mix_key(w))
        if mix is None:
            raise ValueError("no compiled calls for this mix (the suite's load compiles them)")
        return Plan(
            tuple(
                Call(
                    m.name,
                    m.weight,
                    tuple(
                        GrpcEntry(m.call.path, msg, m.metadata, m.call) for msg in m.call.entries()
                    ),
                )
                for m in mix
            ),
            mix=True,
        )
    if call is not None:
        entries = tuple(GrpcEntry(path, msg, metadata, call) for msg in call.entries())
    else:
        entries = (GrpcEntry(path, request, metadata),)
    if len(entries) == 1 and not entries[0].varies():
        return None
    return Plan((Call("", 1.0, entries),))


def message_fill(
    entry: GrpcEntry, exprs: tuple[Expr, ...], framed: bool = False
) -> Callable[[Values], bytes]:
    """The entry's message, from a request's values (``framed``: with its gRPC prefix)."""
    msg = entry.message
    if isinstance(msg, bytes):
        body = frame(msg) if framed else msg
        return lambda values: body
    assert entry.call is not None, "a template is a schema call's"
    return msg.filler(entry.call.files, exprs, framed)


def metadata_fills(
    entry: GrpcEntry, exprs: tuple[Expr, ...]
) -> list[tuple[str, str | Callable[[Values], str]]]:
    """The entry's metadata, each value fixed or from a request's values."""
    varying = dict(entry.templates())
    return [
        (k, text_formatter(varying[k], exprs) if k in varying else v) for k, v in entry.metadata
    ]


# ---- rpcmeter's HTTP/2 client -------------------------------------------------------------------


class PlanCall(GrpcH2Client):
    """One call of a plan on rpcmeter's HTTP/2 client: its path, fixed headers and reply check
    as a :class:`GrpcH2Client` has them; the connections are the first call's (``share``). Its
    ``bytes_out`` are, for a call of one fixed message, the message's size per call answered
    (as :class:`GrpcH2Client` counts them), else the sizes of the messages it sent (``sent``);
    with an ``expect`` that varies, each reply is checked with the values of its loop's
    request (``values``, by the loop's ``done``)."""

    def __init__(
        self,
        *args: Any,
        templated: TemplatedExpect | None = None,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
    ) -> None:
        super().__init__(*args)
        self.max_message = max_message_bytes
        self.sent = [0]  # message bytes sent (calls whose messages vary)
        self.fixed_size: int | None = None  # the size of its one fixed message
        self.turns: list[Request] | None = None  # its fixed messages in turn (_h2_turns)
        self.values: dict[Done, Values] = {}
        self.templated = templated
        self.bound: Callable[[bytes, Values], Any] | None = None
        if templated is not None:
            self.check = _Current(self)

    def share(self, main: GrpcH2Client) -> None:
        """Send over ``main``'s connections (opened already)."""
        self.sessions = main.sessions
        self.loop = main.loop
        self.one_shot = main.one_shot  # type: ignore[method-assign]

    def counters(self) -> dict[str, int]:
        self.fold()
        out = self.sent[0]
        if self.fixed_size is not None:
            out += self.counts[0] * self.fixed_size
        return {"bytes_out": out, "bytes_in": self.counts[1]}

    def on_end(self, stream: H2Stream) -> None:
        if self.templated is None:
            super().on_end(stream)
            return
        self.check.values = self.values.get(stream.user)  # type: ignore[union-attr]
        self.check_end(stream)  # replayed replies are checked again: the values differ


class _Current:
    """The :class:`~rpcmeter.drivers.base.ReplyCheck` of an ``expect`` that varies: checks a
    reply with the values its call set before checking it."""

    last: bytes | None = None

    def __init__(self, owner: PlanCall) -> None:
        self.owner = owner
        self.values: Values | None = None

    def __call__(self, body: bytes) -> Any:
        bound = self.owner.bound
        assert bound is not None and self.values is not None
        return bound(body, self.values)


def h2_channels(
    calls: list[PlanCall], plan: Plan[GrpcEntry], index: int, state: LoopState
) -> list[Channel]:
    """Loop ``index``'s channel of each call of ``plan`` (HTTP/2)."""
    out = []
    for client, call in zip(calls, plan.calls, strict=True):
        session = client.session(index)
        conn = session.proto.conn
        exprs = call_exprs(call)
        keeps = client.templated is not None  # its expect varies: every request keeps values
        if keeps and client.bound is None:
            assert client.templated is not None
            client.bound = client.templated.bind(exprs)
        if len(call.entries) > 1 and _turns_alone(client, call):
            out.append(_h2_turns(client, session, call, state))
            continue
        if (
            len(call.entries) == 1
            and not plan.mix  # (a mix loop numbers its requests itself)
            and exprs == NUMBER_ONLY
            and _plain(client)
            and (spliced := _spliced(client, call.entries[0], exprs, conn)) is not None
        ):
            out.append(_h2_numbered(client, session, spliced, state))
            continue
        payloads: list[Any] = []
        for entry in call.entries:
            if not entry.exprs() and not keeps:
                assert isinstance(entry.message, bytes)
                req = conn.prepare(client.headers, frame(entry.message))
                req.build(conn.peer_frame)  # once here, not on its first call
                payloads.append(req)
                continue
            make = _h2_maker(client, entry, exprs, conn)
            payloads.append(Fill(exprs, _keeping(make) if keeps else make))
        if len(payloads) == 1 and not isinstance(payloads[0], Fill):
            client.fixed_size = payloads[0].size - 5
        out.append(_h2_channel(client, session, payloads, state, not plan.mix))
    return out


def _plain(client: PlanCall) -> bool:
    """Whether a call sends on kept connections, without a deadline or an ``expect`` that
    varies (each loop one request at a time, through the session)."""
    return client.ctx.reuse and client.timeout_s is None and client.templated is None


def _turns_alone(client: PlanCall, call: Call[GrpcEntry]) -> bool:
    """Whether a call's entries are fixed messages alone (a data file), sent in turn by
    :func:`_h2_turns` (:func:`_plain`)."""
    return _plain(client) and all(
        isinstance(e.message, bytes) and not e.exprs() for e in call.entries
    )


def _h2_turns(client: PlanCall, session: Any, call: Call[GrpcEntry], state: LoopState) -> Channel:
    """A loop's channel of fixed messages in turn (a data file), from the loop's offset: each
    entry one prepared request, made once for every loop of the client under the call's one
    header block (:meth:`Request.framer <rpcmeter.protocols.h2.connection.Request.framer>`:
    the frames' head and the block shared), so that thousands of entries cost the hot path
    little more than one fixed request."""
    conn = session.proto.conn
    if client.turns is None:
        make = Request.framer(conn.prepare(client.headers, None).block, conn.peer_frame)
        client.turns = [make(frame(e.message)) for e in call.entries]  # type: ignore[arg-type]
    reqs = client.turns
    request = session.start
    on_end = super(PlanCall, client).on_end
    sent = client.sent
    n = len(reqs)
    turn = Rotation(n, state.loop).i

    def turns(done: Done) -> None:
        nonlocal turn
        req = reqs[turn]
        turn = turn + 1 if turn + 1 < n else 0
        sent[0] += req.size - 5
        request(req, on_end, done)

    return turns


def call_exprs(call: Call[GrpcEntry]) -> tuple[Expr, ...]:
    """The placeholders of a call's entries together (one value tuple fits them all)."""
    return tuple(dict.fromkeys(e for entry in call.entries for e in entry.exprs()))


def _h2_maker(
    client: PlanCall, entry: GrpcEntry, exprs: tuple[Expr, ...], conn: Any
) -> Callable[[Values], Request]:
    """How one entry's request is made from a request's values: its header block (metadata
    that varies appended as literals) and its message, framed for the peer's frame size."""
    spliced = _spliced(client, entry, exprs, conn)
    sent = client.sent
    if spliced is not None:
        piece, heads, head_of, framer = spliced

        def make_request(values: Values) -> Request:
            p = piece(values)
            start, n = heads.get(len(p)) or head_of(len(p))
            sent[0] += n
            return framer(start + p)

        return make_request
    block = block_filler(_fields(client, entry, exprs), lambda run: conn.prepare(run, None).block)
    frame_size = conn.peer_frame
    framed = Request.framed
    message = message_fill(entry, exprs, framed=True)

    def make(values: Values) -> Request:
        body = message(values)
        sent[0] += len(body) - 5
        return framed(block(values), body, frame_size)

    return make


Spliced = tuple[
    Callable[[Values], bytes],
    dict[int, tuple[bytes, int]],
    Callable[[int], tuple[bytes, int]],
    Callable[[bytes | None], Request],
]


def _spliced(
    client: PlanCall, entry: GrpcEntry, exprs: tuple[Expr, ...], conn: Any
) -> Spliced | None:
    """The usual request that varies: the same header block every call (no metadata that
    varies), its message's varying part made alone (:meth:`MessageTemplate.splice
    <rpcmeter.protocols.grpc_schema.MessageTemplate.splice>`) and joined to what comes before
    it (the gRPC prefix, the fixed fields, the varying field's tag and length), kept per size
    of that part. Gives ``piece(values)`` (a request number alone in a string field: the
    format's own ``%``, no Python call), ``heads`` (by size: what comes before, the message's
    size), ``head_of(size)`` (one not kept yet) and the loop's ``framer`` (its request made
    again in place once nothing holds it). None for any other."""
    msg = entry.message
    if not isinstance(msg, MessageTemplate) or entry.call is None:
        return None
    splice = msg.splice(entry.call.files, exprs)
    if splice is None or any(callable(v) for _, v in _fields(client, entry, exprs)):
        return None
    framer = Request.framer(conn.prepare(client.headers, None).block, conn.peer_frame, True)
    fmt, piece, before = splice
    heads: dict[int, tuple[bytes, int]] = {}

    def head_of(k: int) -> tuple[bytes, int]:
        start = before(k)
        n = len(start) + k
        head = (PREFIX(0, n) + start, n)
        if len(heads) < HEADS_KEPT:
            heads[k] = head
        return head

    if fmt is not None and fmt.picks == (0,) and len(exprs) == 1 and not fmt.encode[0]:
        piece = fmt.fmt.__mod__  # fmt % values: the one value, a number
    return piece, heads, head_of, framer


def _fields(
    client: PlanCall, entry: GrpcEntry, exprs: tuple[Expr, ...]
) -> list[tuple[bytes, bytes | Callable[[Values], bytes]]]:
    """A request's header fields: the client's, then the metadata that varies."""
    fields: list[tuple[bytes, bytes | Callable[[Values], bytes]]] = list(client.headers)
    for name, value in metadata_fills(entry, exprs):
        if callable(value):
            fields.append((name.lower().encode(), _encoded(value)))
    return fields


def _h2_numbered(client: PlanCall, session: Any, spliced: Spliced, state: LoopState) -> Channel:
    """A loop's channel of one call whose request number alone varies, spliced
    (:func:`_spliced`): each request made in one Python call, the framer's aside."""
    piece, heads, head_of, framer = spliced
    request = session.start
    on_end = super(PlanCall, client).on_end
    sent = client.sent
    counter = state.counter

    def number(done: Done) -> None:
        n = counter.n
        p = piece((n,))
        start, size = heads.get(len(p)) or head_of(len(p))
        sent[0] += size
        request(framer(start + p), on_end, done)
        counter.n = n + counter.step

    return number


def _encoded(fill: Callable[[Values], str]) -> Callable[[Values], bytes]:
    return lambda values: fill(values).encode()


def _keeping(make: Callable[[Values], Request]) -> Callable[[Values], tuple[Request, Values]]:
    return lambda values: (make(values), values)


def _h2_channel(
    client: PlanCall, session: Any, payloads: list[Any], state: LoopState, advance: bool
) -> Channel:
    """A loop's channel of one call (its payloads each a prepared request or how to make one;
    with an ``expect`` that varies, each with the values it was made with)."""
    request = session.start if client.ctx.reuse else client.one_shot
    # without an expect that varies, the client's own on_end (no call through PlanCall's)
    on_end = client.on_end if client.templated is not None else super(PlanCall, client).on_end
    values = client.values
    sent = client.sent
    timed = client.timed_call if client.timeout_s is not None else None
    # fixed messages in turn (a data file): their sizes counted as they go (those made per
    # request count themselves: _h2_maker)
    turns = len(payloads) > 1 and not any(isinstance(p, Fill) for p in payloads)

    def send(req: Request, done: Done) -> None:
        if turns:
            sent[0] += req.size - 5
        if timed is not None:
            timed(session, done, req)
        else:
            request(req, on_end, done)

    if client.templated is not None:

        def keeping(payload: Any, done: Done) -> None:
            req, values[done] = payload
            send(req, done)

        return channel_of(payloads, state, advance, keeping)
    if timed is not None or turns:
        return channel_of(payloads, state, advance, send)
    return channel_of(payloads, state, advance, request, on_end)


def fixed_headers(metadata: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """The metadata that does not vary (sent in every call's prepared headers)."""
    return tuple((k, v) for k, v in metadata if not is_template(v))


def plan_checks(entry: GrpcEntry, fallback: ReplyCheck | None) -> tuple[ReplyCheck | None, Any]:
    """A call's reply check (its schema call's ``expect``, else ``fallback``: the raw
    call's), and its ``expect`` with placeholders (None: none)."""
    call = entry.call
    if call is None:
        return fallback, None
    return call.reply_check(), call.templated_check()


# ---- grpcio ---------------------------------------------------------------------------------------


def grpcio_callers(
    channel: grpc.Channel,
    plan: Plan[GrpcEntry],
    state: LoopState,
    timeout: float | None,
    fallback: ReplyCheck | None,
    counts: list[int],
    status_error: Callable[[grpc.RpcError], BaseException],
) -> Caller:
    """A loop's caller (grpcio's blocking stubs; a :class:`MixCaller` for a mix)."""
    callers = []
    for call in plan.calls:
        entry0 = call.entries[0]
        stub = channel.unary_unary(entry0.path)
        check, templated = plan_checks(entry0, fallback)
        exprs = call_exprs(call)
        bound = templated.bind(exprs) if templated is not None else None
        payloads: list[Any] = []
        for entry in call.entries:
            message = message_fill(entry, exprs)
            meta = metadata_fills(entry, exprs)
            if not entry.exprs() and bound is None:
                fixed = tuple((k, v) for k, v in meta if isinstance(v, str))
                payloads.append((message(()), fixed or None, None))
                continue
            payloads.append(Fill(exprs, _grpcio_payload(message, meta, bound)))
        next_payload = source(payloads, state, not plan.mix)
        callers.append(_grpcio_caller(stub, next_payload, check, timeout, counts, status_error))
    if plan.mix:
        return MixCaller(callers, plan, state)
    return callers[0]


def _grpcio_payload(
    message: Callable[[Values], bytes],
    meta: list[tuple[str, str | Callable[[Values], str]]],
    bound: Callable[[bytes, Values], Any] | None,
) -> Callable[[Values], tuple[bytes, Any, Any]]:
    def make(values: Values) -> tuple[bytes, Any, Any]:
        metadata = tuple((k, v(values) if callable(v) else v) for k, v in meta) or None
        check = (lambda body: bound(body, values)) if bound is not None else None
        return message(values), metadata, check

    return make


def _grpcio_caller(
    stub: Any,
    next_payload: Callable[[], tuple[bytes, Any, Any]],
    check: ReplyCheck | None,
    timeout: float | None,
    counts: list[int],
    status_error: Callable[[grpc.RpcError], BaseException],
) -> Caller:
    def call() -> ServerTime | None:
        request, metadata, varying = next_payload()
        try:
            reply, rpc = stub.with_call(request, timeout=timeout, metadata=metadata)
        except grpc.RpcError as exc:
            raise status_error(exc) from None
        counts[0] += len(request)
        counts[1] += len(reply)
        if varying is not None and (wrong := varying(reply)) is not None:
            raise wrong
        if check is not None and reply != check.last and (wrong := check(reply)) is not None:
            raise wrong
        return trailer_times(rpc.trailing_metadata())

    return call


def entries_of(plan: Plan[GrpcEntry]) -> list[GrpcEntry]:
    return [e for c in plan.calls for e in c.entries]


__all__ = ["GrpcEntry", "PlanCall", "distinct", "grpc_plan", "grpcio_callers", "h2_channels"]
