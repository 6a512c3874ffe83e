"""The workload set: what one request does, shared by drivers and reference servers.

Each workload kind has a parameter model (validated when a suite is loaded) and, where it does work
on the server, a pure function the reference servers call. Drivers declare which kinds they
support; a suite asking a driver for a kind it cannot do is rejected at load time.

Kinds:

- ``simple``: a trivial server call (rpyc).
- ``callback``: nested callbacks of any ``depth``: depth 1, the server calls a client function;
  depth 2, server -> client -> server; and so on (rpyc).
- ``random_wait``: study 000's seeded pseudo-random waits and nested calls. The client calls the
  server at depth 0; every level (the server at even depths, the client at odd ones) pauses
  (``uniform(0, delay_s)`` with probability ``delay_p``), then, while ``depth < max_depth``, with
  probability ``sub_p`` calls the other side one level deeper and, after that call returns, pauses
  again (:func:`random_wait_level`). Each client thread ``t`` (its index within its client
  process) has two generators: the server's, seeded ``seed + t``, and the client's,
  ``seed + 1000 + t``; the value every call carries (and gets back) is drawn from the caller's
  generator too. Expected sleep and calls per request: :func:`random_wait_expected_s`,
  :func:`random_wait_expected_calls`.
- ``noop``: nothing; the round-trip baseline.
- ``echo`` / ``payload``: the server returns ``reply_bytes`` bytes for a ``request_bytes`` request
  (``echo`` returns the request itself).
- ``sleep``: the server waits ``ms`` milliseconds.
- ``factorial``: the server computes ``n!`` and returns its decimal digits.
- ``idle``: no requests at all; measures what the server costs while nobody calls it.
- ``stream``: one gRPC streaming call (driver ``grpc``) of ``messages`` messages:
  ``mode = "server"`` (one request, ``messages`` replies), ``"client"`` (``messages`` requests,
  one reply) or ``"bidi"`` (one reply per request; ``pattern = "ping-pong"`` sends each request
  when the previous reply arrived, ``"flood"`` sends them all at once). Requests are
  ``request_bytes`` long, replies ``reply_bytes``.
- ``command``: one run of a whole command (driver ``command``); its parameters fill the command
  line's ``{name}`` placeholders.
- ``mix``: a weighted mix of requests (drivers ``http`` and ``grpc``): ``calls`` is a list of
  tables, each a whole request of the driver's (HTTP: ``method``, ``path``, ``headers``,
  ``body``; gRPC: ``call``, ``data``, ``metadata``, ``expect``; either: ``data_file``) with a
  ``name`` and a ``weight``; each loop draws every request's call by weight from a generator
  seeded from the suite's seed (:mod:`rpcmeter.protocols.request_data`), and the result keeps
  each call's figures apart (``cases[].calls``).
"""

from __future__ import annotations

import dataclasses
import math
import random
import sys
import time
from collections.abc import Callable
from typing import Annotated, Any, ClassVar, Literal, Self

from annotated_types import Ge, Le

# Parameter classes are plain frozen dataclasses: reference servers import this module and must
# start fast, so pydantic (which validates them for suites) is imported only when validating.
_MAX_BYTES = 64 * 1024 * 1024


@dataclasses.dataclass(frozen=True)
class WorkloadParams:
    """Base of every workload's parameters."""

    kind: ClassVar[str]
    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}

    def model_dump(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def field_names(cls) -> frozenset[str]:
        return frozenset(f.name for f in dataclasses.fields(cls))

    @classmethod
    def accepts(cls, key: str) -> bool:
        """Whether ``key`` is a parameter of this kind (a matrix key may vary it)."""
        return key in cls.field_names()

    @classmethod
    def model_validate(cls, params: dict[str, Any]) -> Self:
        """Validate ``params`` (raises pydantic's ValidationError)."""
        result: Self = _adapter(cls).validate_python(params)
        return result


_ADAPTERS: dict[type[WorkloadParams], Any] = {}


def _adapter(cls: type[WorkloadParams]) -> Any:
    adapter = _ADAPTERS.get(cls)
    if adapter is None:
        from pydantic import TypeAdapter

        adapter = _ADAPTERS[cls] = TypeAdapter(cls)
    return adapter


@dataclasses.dataclass(frozen=True)
class SimpleParams(WorkloadParams):
    kind: ClassVar[str] = "simple"


@dataclasses.dataclass(frozen=True)
class NoopParams(WorkloadParams):
    kind: ClassVar[str] = "noop"


@dataclasses.dataclass(frozen=True)
class IdleParams(WorkloadParams):
    kind: ClassVar[str] = "idle"


@dataclasses.dataclass(frozen=True)
class CallbackParams(WorkloadParams):
    kind: ClassVar[str] = "callback"
    depth: Annotated[int, Ge(1), Le(64)] = 1  # nested calls: 1, the server calls the client once


@dataclasses.dataclass(frozen=True)
class RandomWaitParams(WorkloadParams):
    kind: ClassVar[str] = "random_wait"
    delay_p: Annotated[float, Ge(0.0), Le(1.0)] = 1.0  # the chance that a level pauses
    delay_s: Annotated[float, Ge(0.0), Le(60.0)] = 0.01  # a pause is uniform(0, delay_s) seconds
    sub_p: Annotated[float, Ge(0.0), Le(1.0)] = 0.5  # the chance of a call one level deeper
    max_depth: Annotated[int, Ge(0), Le(64)] = 2  # the deepest level a call reaches


@dataclasses.dataclass(frozen=True)
class EchoParams(WorkloadParams):
    kind: ClassVar[str] = "echo"
    request_bytes: Annotated[int, Ge(0), Le(_MAX_BYTES)] = 100  # sent, and sent back


@dataclasses.dataclass(frozen=True)
class PayloadParams(WorkloadParams):
    kind: ClassVar[str] = "payload"
    request_bytes: Annotated[int, Ge(0), Le(_MAX_BYTES)] = 100  # the request's size
    reply_bytes: Annotated[int, Ge(0), Le(_MAX_BYTES)] = 100  # the reply's size


@dataclasses.dataclass(frozen=True)
class SleepParams(WorkloadParams):
    kind: ClassVar[str] = "sleep"
    ms: Annotated[float, Ge(0.0), Le(3_600_000.0)] = 1.0  # milliseconds the server waits


@dataclasses.dataclass(frozen=True)
class FactorialParams(WorkloadParams):
    kind: ClassVar[str] = "factorial"
    n: Annotated[int, Ge(0), Le(10_000_000)] = 5  # the server computes n! and replies its digits


StreamMode = Literal["server", "client", "bidi"]
StreamPattern = Literal["ping-pong", "flood"]


@dataclasses.dataclass(frozen=True)
class StreamParams(WorkloadParams):
    kind: ClassVar[str] = "stream"
    mode: StreamMode = "server"  # which side streams: server, client or both (bidi)
    # a stream that ends with another number of replies is measured all the same, and counted
    messages: Annotated[int, Ge(1), Le(10**8)] | None = None  # requests sent, replies expected
    request_bytes: Annotated[int, Ge(0), Le(_MAX_BYTES)] = 100  # a request message's size
    reply_bytes: Annotated[int, Ge(0), Le(_MAX_BYTES)] = 100  # a reply message's size
    pattern: StreamPattern = "ping-pong"  # bidi: ping-pong (one at a time) or flood

    MESSAGES: ClassVar[int] = 10

    def __post_init__(self) -> None:
        if self.pattern != "ping-pong" and self.mode != "bidi":
            raise ValueError(f'pattern {self.pattern!r} is for mode = "bidi" only')

    @property
    def count(self) -> int:
        """``messages``, or its default when not given."""
        return self.MESSAGES if self.messages is None else self.messages

    def requests_per_stream(self) -> int:
        return 1 if self.mode == "server" else self.count

    def replies_per_stream(self) -> int:
        """The replies the built-in server sends (what it is told: rpcmeter-messages)."""
        return 1 if self.mode == "client" else self.count

    def expected_replies(self) -> int | None:
        """The replies a stream is expected to end with (None: none expected, read until the
        server ends the stream): one for client streaming, ``messages`` when given otherwise."""
        return 1 if self.mode == "client" else self.messages


@dataclasses.dataclass(frozen=True)
class CommandParams(WorkloadParams):
    """A whole command (driver ``command``): ``command`` replaces the target's command line, and
    any other parameter (kept in ``values``) fills the ``{name}`` placeholder of that name."""

    kind: ClassVar[str] = "command"
    command: str | list[str] | None = None  # replaces the target's command line
    values: dict[str, Any] = dataclasses.field(default_factory=dict)  # any other key: a {name}

    @classmethod
    def accepts(cls, key: str) -> bool:
        return True

    @classmethod
    def model_validate(cls, params: dict[str, Any]) -> Self:
        rest = dict(params)
        if "values" in rest:  # as stored by model_dump
            rest.update(rest.pop("values"))
        command = rest.pop("command", None)
        result: Self = _adapter(cls).validate_python({"command": command, "values": rest})
        return result

    def model_dump(self) -> dict[str, Any]:
        return {"command": self.command, **self.values}

    def placeholders(self) -> dict[str, Any]:
        return dict(self.values)


@dataclasses.dataclass(frozen=True)
class MixParams(WorkloadParams):
    """A weighted mix of calls (see the module doc): what each call's table holds beyond
    ``name`` and ``weight`` is the driver's to check."""

    kind: ClassVar[str] = "mix"
    calls: tuple[dict[str, Any], ...] = ()  # the calls, each a table with name and weight

    def __post_init__(self) -> None:
        if not self.calls:
            raise ValueError(
                "calls: a mix needs at least one call: calls = [{ name = ..., weight = ..., ... }]"
            )
        seen: set[str] = set()
        for i, call in enumerate(self.calls):
            name = self.name_of(i)
            w = call.get("weight", 1)
            if isinstance(w, bool) or not isinstance(w, int | float) or not w > 0:
                raise ValueError(
                    f"calls[{i}].weight: must be a number above 0 (got {w!r}, call {name!r})"
                )
            if not math.isfinite(w):
                raise ValueError(f"calls[{i}].weight: must be finite (got {w!r}, call {name!r})")
            if not isinstance(call.get("name", ""), str) or not name.strip():
                raise ValueError(f"calls[{i}].name: expected a non-empty string")
            if name in seen:
                raise ValueError(f"calls[{i}].name: {name!r} names two calls")
            seen.add(name)
        if not math.isfinite(sum(self.weights())):
            raise ValueError(
                "calls: the weights add up to more than a float holds: scale them down"
            )

    def model_dump(self) -> dict[str, Any]:
        return {"calls": [dict(c) for c in self.calls]}

    def name_of(self, i: int) -> str:
        """Call ``i``'s name (``call1``, ``call2``, ... when it has none)."""
        return str(self.calls[i].get("name", f"call{i + 1}"))

    def names(self) -> list[str]:
        return [self.name_of(i) for i in range(len(self.calls))]

    def weights(self) -> list[float]:
        return [float(c.get("weight", 1)) for c in self.calls]

    def requests(self) -> list[dict[str, Any]]:
        """Each call's request keys (its table without ``name`` and ``weight``)."""
        return [{k: v for k, v in c.items() if k not in ("name", "weight")} for c in self.calls]


KINDS: dict[str, type[WorkloadParams]] = {
    cls.kind: cls
    for cls in (
        SimpleParams,
        NoopParams,
        IdleParams,
        CallbackParams,
        RandomWaitParams,
        EchoParams,
        PayloadParams,
        SleepParams,
        FactorialParams,
        StreamParams,
        CommandParams,
        MixParams,
    )
}

WorkloadKind = Literal[
    "simple",
    "noop",
    "idle",
    "callback",
    "random_wait",
    "echo",
    "payload",
    "sleep",
    "factorial",
    "stream",
    "command",
    "mix",
]


def parse_params(kind: str, params: dict[str, Any]) -> WorkloadParams:
    """Validate ``params`` for workload ``kind`` (raises pydantic's ValidationError or KeyError)."""
    return KINDS[kind].model_validate(params)


# ---- server-side work, shared by every reference server ---------------------------------------


def lift_int_digit_limit() -> None:
    """Python 3.11+ refuses int -> str above 4,300 digits by default; factorials need more."""
    if hasattr(sys, "set_int_max_str_digits"):
        sys.set_int_max_str_digits(0)


def factorial_digits(n: int) -> bytes:
    """Decimal digits of ``n!`` (the factorial workload's reply). Two steps on two lines, so
    that a profile tells the factorial from its conversion to decimal."""
    value = math.factorial(n)
    return str(value).encode("ascii")


def payload_bytes(size: int) -> bytes:
    """A deterministic reply body of ``size`` bytes."""
    pattern = b"rpcmeter-payload."
    return (pattern * (size // len(pattern) + 1))[:size]


class RandomWaitMismatch(Exception):
    """A nested ``random_wait`` call returned another value than the one it carried."""


def random_wait_pause(
    rng: random.Random, p: RandomWaitParams, sleep: Callable[[float], None] = time.sleep
) -> None:
    """One pause of a ``random_wait`` level: ``uniform(0, delay_s)`` with probability ``delay_p``."""
    if rng.random() < p.delay_p:
        sleep(rng.uniform(0.0, p.delay_s))


def random_wait_level(
    rng: random.Random,
    p: RandomWaitParams,
    depth: int,
    call: Callable[[float, int], Any],
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """One level of study 000's random wait, on either side: pause; then, below ``max_depth`` and
    with probability ``sub_p``, call the other side (``call(value, depth + 1)``, the value drawn
    from ``rng`` and checked when it comes back) and pause again after it returns.

    Every draw comes from ``rng`` in the study's order, so a seeded generator replays the study's
    sequence exactly.
    """
    random_wait_pause(rng, p, sleep)
    if depth < p.max_depth and rng.random() < p.sub_p:
        value = rng.random()
        got = call(value, depth + 1)
        if got != value:
            raise RandomWaitMismatch(f"sent {value!r} at depth {depth + 1}, got {got!r}")
        random_wait_pause(rng, p, sleep)


def random_wait_seeds(seed: int, thread: int) -> tuple[int, int]:
    """Seeds of the server's and the client's generators for client thread ``thread`` (its index
    within its client process), as study 000 seeds them."""
    return seed + thread, seed + 1000 + thread


def random_wait_replay(
    p: RandomWaitParams, seed: int, thread: int, requests: int
) -> tuple[float, int]:
    """Replay ``requests`` calls of one client thread without a transport or real sleeps: the
    seconds the seeded sequence sleeps in all, and the number of calls (requests and nested calls)
    it makes. Both sides run :func:`random_wait_level`, exactly as the rpyc driver and server do."""
    server_seed, client_seed = random_wait_seeds(seed, thread)
    rngs = (random.Random(server_seed), random.Random(client_seed))
    slept = 0.0
    calls = 0

    def sleep(s: float) -> None:
        nonlocal slept
        slept += s

    def call(value: float, depth: int) -> float:
        nonlocal calls
        calls += 1
        random_wait_level(rngs[depth % 2], p, depth, call, sleep)
        return value

    client = rngs[1]
    for _ in range(requests):
        call(client.random(), 0)
    return slept, calls


def random_wait_expected_s(p: RandomWaitParams) -> float:
    """Expected seconds one ``random_wait`` request sleeps (all levels, both sides), ignoring
    transport costs.

    With ``w = delay_p * delay_s / 2`` (one pause) and ``S(d)`` the expected sleep from level ``d``
    inwards: ``S(max_depth) = w`` and ``S(d) = w + sub_p * (S(d + 1) + w)`` below it. The study's
    defaults (``delay_s`` 10 ms, ``sub_p`` 0.5, ``max_depth`` 2): 5, 10 and 12.5 ms.
    """
    pause = p.delay_p * p.delay_s / 2.0
    expected = pause
    for _ in range(p.max_depth):
        expected = pause + p.sub_p * (expected + pause)
    return expected


def random_wait_expected_calls(p: RandomWaitParams) -> float:
    """Expected calls (round trips) per ``random_wait`` request, the request itself included:
    ``C(max_depth) = 1`` and ``C(d) = 1 + sub_p * C(d + 1)``; 1.75 with the study's defaults."""
    expected = 1.0
    for _ in range(p.max_depth):
        expected = 1.0 + p.sub_p * expected
    return expected
