"""Loops whose requests vary: what every driver shares when a case's requests are not one
pre-encoded request (templates, data files, mixes; :mod:`rpcmeter.protocols.templates`,
:mod:`rpcmeter.protocols.request_data`).

A driver compiles its requests into a :class:`Plan`: one or more calls (several for a mix), each
with its entries in turn (several for a data file), each entry either a payload made once (the
protocol's own: HTTP/1.1 bytes, a prepared HTTP/2 request) or a :class:`Fill` that makes one from
a request's values. Per closed loop, :class:`LoopState` holds what the loop's requests share (its
request numbers and its generator of random values) and :func:`source` turns a call's entries
into a function giving the loop's next payload, so the driver's channel is ``send(next(),
done)``. A plan without any placeholder, data file or mix is never made: the driver keeps its
one pre-encoded request, at its old cost.

A mix loop sends through a :class:`MixChannel` (or, on threads, a :class:`MixCaller`): it draws
each request's call (:class:`~rpcmeter.protocols.request_data.Draw`) and sends through that
call's channel; its ``mix`` attribute tells the runner which call the request in flight is, so
that each call's latencies are recorded apart (:mod:`rpcmeter.runners.recording`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from rpcmeter.protocols.request_data import DRAW_BLOCK, Draw, Rotation
from rpcmeter.protocols.templates import Counter, Expr, Loop, Values, evaluator

if TYPE_CHECKING:
    from rpcmeter.drivers.base import Caller, Channel, Done, DriverContext

E = TypeVar("E")  # what a plan's entries are (the protocol's compiled request)
P = TypeVar("P")  # what a loop sends (the protocol's payload)

MIX_KEY = "mixes"  # DriverContext.prepared[MIX_KEY]: a driver's compiled mixes, by mix_key
NUMBER_ONLY = (Expr("request_number"),)


@dataclass(frozen=True)
class Call(Generic[E]):
    """One call of a plan: its name, its weight in a mix and its entries, sent in turn."""

    name: str
    weight: float
    entries: tuple[E, ...]


@dataclass(frozen=True)
class Plan(Generic[E]):
    """A case's requests: its calls (one unless ``mix``)."""

    calls: tuple[Call[E], ...]
    mix: bool = False

    def names(self) -> list[str]:
        return [c.name for c in self.calls]


@dataclass(frozen=True)
class Fill(Generic[P]):
    """An entry that varies: ``fill(values)`` makes its payload from a request's values (one
    for each of ``exprs``)."""

    exprs: tuple[Expr, ...]
    fill: Callable[[Values], P]


def mix_key(params: object) -> str:
    """The key of a mix workload's compiled calls in a variant's prepared mapping (its calls
    as canonical JSON)."""
    dump = params.model_dump() if hasattr(params, "model_dump") else params
    return json.dumps(dump, sort_keys=True, default=str)


def loop_of(ctx: DriverContext, index: int) -> Loop:
    """Who loop ``index`` of the context's client is (its numbers and seed)."""
    return Loop(ctx.client_index, index, ctx.clients, ctx.threads, ctx.seed, ctx.uuid_seed)


class LoopState:
    """What the requests of one loop share: who it is, its request numbers (``counter``,
    advanced once per request by whoever sends), its generator of random values and that of
    its UUIDs."""

    __slots__ = ("counter", "loop", "rng", "uuids")

    def __init__(self, loop: Loop) -> None:
        self.loop = loop
        self.counter = Counter(loop)
        self.rng = loop.rng("values")
        self.uuids = loop.uuid_rng()


def source(entries: Sequence[P | Fill[P]], state: LoopState, advance: bool) -> Callable[[], P]:
    """The loop's next payload of a call with ``entries`` (in turn, from the loop's offset);
    with ``advance``, each payload that used the loop's values also advances its request number
    (a loop of one call; a mix advances it itself, once per request)."""
    counter = state.counter
    fills = [e for e in entries if isinstance(e, Fill)]
    if len(entries) == 1 and fills:
        fill, values = (
            fills[0].fill,
            evaluator(fills[0].exprs, state.loop, counter, state.rng, state.uuids),
        )
        if not advance:
            return lambda: fill(values())

        def numbered() -> P:
            payload = fill(values())
            counter.n += counter.step
            return payload

        return numbered
    made = [
        _filled(e.fill, evaluator(e.exprs, state.loop, counter, state.rng, state.uuids))
        if isinstance(e, Fill)
        else _fixed(e)
        for e in entries
    ]
    if len(made) == 1:
        return made[0]
    turn = Rotation(len(made), state.loop).next
    if not advance or not fills:
        return lambda: made[turn()]()

    def rotated() -> P:
        payload = made[turn()]()
        counter.n += counter.step
        return payload

    return rotated


def _filled(fill: Callable[[Values], P], values: Callable[[], Values]) -> Callable[[], P]:
    return lambda: fill(values())


def _fixed(payload: P) -> Callable[[], P]:
    return lambda: payload


def channel_of(
    entries: Sequence[P | Fill[P]],
    state: LoopState,
    advance: bool,
    send: Callable[..., object],
    between: Any = None,
) -> Channel:
    """A loop's channel of one call: each request ``send(payload, done)`` with the call's next
    payload (see :func:`source`), or ``send(payload, between, done)`` when ``between`` is
    given (an HTTP/2 session's ``request(req, on_end, done)``), in the cheapest form for its
    entries: one fixed payload is a ``partial`` (no Python frame of its own), fixed payloads in
    turn an index, one that varies its fill and its values."""
    fills = [e for e in entries if isinstance(e, Fill)]
    if not fills:
        payloads = list(entries)
        if len(payloads) == 1:
            if between is None:
                return partial(send, payloads[0])
            return partial(send, payloads[0], between)
        n = len(payloads)
        turn = Rotation(n, state.loop).i

        def rotating(done: Done) -> None:
            nonlocal turn
            payload = payloads[turn]
            turn = turn + 1 if turn + 1 < n else 0
            if between is None:
                send(payload, done)
            else:
                send(payload, between, done)

        return rotating
    if len(entries) == 1:
        counter = state.counter
        fill, values = (
            fills[0].fill,
            evaluator(fills[0].exprs, state.loop, counter, state.rng, state.uuids),
        )
        if advance and fills[0].exprs == NUMBER_ONLY:  # the usual: the request's number alone
            if between is None:

                def number(done: Done) -> None:
                    n = counter.n
                    send(fill((n,)), done)
                    counter.n = n + counter.step

                return number

            def number_between(done: Done) -> None:
                n = counter.n
                send(fill((n,)), between, done)
                counter.n = n + counter.step

            return number_between
        if not advance:
            if between is None:
                return lambda done: send(fill(values()), done)
            return lambda done: send(fill(values()), between, done)
        if between is None:

            def numbered(done: Done) -> None:
                send(fill(values()), done)
                counter.n += counter.step

            return numbered

        def numbered_between(done: Done) -> None:
            send(fill(values()), between, done)
            counter.n += counter.step

        return numbered_between
    next_payload = source(entries, state, advance)
    if between is None:
        return lambda done: send(next_payload(), done)
    return lambda done: send(next_payload(), between, done)


class MixChannel:
    """A mix loop's channel: each request's call drawn by weight (``mix.current`` is the call
    of the request in flight), sent through that call's channel; ``names`` are the calls'. The
    draw is :class:`~rpcmeter.protocols.request_data.Draw`'s, read here without a call."""

    __slots__ = ("block", "channels", "counter", "current", "draw", "i", "mix", "names")

    def __init__(self, channels: Sequence[Channel], plan: Plan[Any], state: LoopState):
        self.channels = list(channels)
        self.names = plan.names()
        self.draw = Draw([c.weight for c in plan.calls], state.loop)
        self.block, self.i = self.draw.block, 0
        self.current = 0
        self.mix = self  # what the runner reads ``current`` of
        self.counter = state.counter

    def __call__(self, done: Done) -> None:
        i = self.i
        if i >= DRAW_BLOCK:
            self.draw.refill()
            self.block, i = self.draw.block, 0
        self.i = i + 1
        self.current = k = self.block[i]
        self.channels[k](done)
        counter = self.counter
        counter.n += counter.step


class MixCaller:
    """A mix loop's caller (thread loops): as :class:`MixChannel`, for blocking callers."""

    __slots__ = ("callers", "counter", "mix", "names")

    def __init__(self, callers: Sequence[Caller], plan: Plan[Any], state: LoopState):
        self.callers = list(callers)
        self.names = plan.names()
        self.mix = Draw([c.weight for c in plan.calls], state.loop)
        self.counter = state.counter

    def __call__(self) -> object:
        try:
            return self.callers[self.mix.next()]()
        finally:
            counter = self.counter
            counter.n += counter.step
