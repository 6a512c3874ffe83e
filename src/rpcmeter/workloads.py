"""The workload set: what one request does, shared by drivers and reference servers.

Each workload kind has a parameter model (validated when a suite is loaded) and, where it does work
on the server, a pure function the reference servers call. Drivers declare which kinds they
support; a suite asking a driver for a kind it cannot do is rejected at load time.

Kinds:

- ``simple``: a trivial server call (rpyc).
- ``callback``: nested callbacks of any ``depth``: depth 1, the server calls a client function;
  depth 2, server -> client -> server; and so on (rpyc).
- ``random_wait``: seeded pseudo-random waits and callbacks. At every level (the server at even
  depths, the client at odd ones) the callee waits ``uniform(0, delay_s)`` with probability
  ``delay_p``, then, while ``depth < max_depth``, calls the other side with probability ``sub_p``.
  The server's generator for client thread ``t`` is seeded ``seed + t``, the client's
  ``seed + 1000 + t`` (study 000). Expected latency: :func:`random_wait_expected_s`.
- ``noop``: nothing; the round-trip baseline.
- ``echo`` / ``payload``: the server returns ``reply_bytes`` bytes for a ``request_bytes`` request
  (``echo`` returns the request itself).
- ``sleep``: the server waits ``ms`` milliseconds.
- ``factorial``: the server computes ``n!`` and returns its decimal digits.
- ``idle``: no requests at all; measures what the server costs while nobody calls it.
- ``command``: one run of a whole command (driver ``command``); its parameters fill the command
  line's ``{name}`` placeholders.
"""

from __future__ import annotations

import dataclasses
import math
import sys
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
    depth: Annotated[int, Ge(1), Le(64)] = 1


@dataclasses.dataclass(frozen=True)
class RandomWaitParams(WorkloadParams):
    kind: ClassVar[str] = "random_wait"
    delay_p: Annotated[float, Ge(0.0), Le(1.0)] = 1.0
    delay_s: Annotated[float, Ge(0.0), Le(60.0)] = 0.01
    sub_p: Annotated[float, Ge(0.0), Le(1.0)] = 0.5
    max_depth: Annotated[int, Ge(0), Le(64)] = 2


@dataclasses.dataclass(frozen=True)
class EchoParams(WorkloadParams):
    kind: ClassVar[str] = "echo"
    request_bytes: Annotated[int, Ge(0), Le(_MAX_BYTES)] = 100


@dataclasses.dataclass(frozen=True)
class PayloadParams(WorkloadParams):
    kind: ClassVar[str] = "payload"
    request_bytes: Annotated[int, Ge(0), Le(_MAX_BYTES)] = 100
    reply_bytes: Annotated[int, Ge(0), Le(_MAX_BYTES)] = 100


@dataclasses.dataclass(frozen=True)
class SleepParams(WorkloadParams):
    kind: ClassVar[str] = "sleep"
    ms: Annotated[float, Ge(0.0), Le(3_600_000.0)] = 1.0


@dataclasses.dataclass(frozen=True)
class FactorialParams(WorkloadParams):
    kind: ClassVar[str] = "factorial"
    n: Annotated[int, Ge(0), Le(10_000_000)] = 5


@dataclasses.dataclass(frozen=True)
class CommandParams(WorkloadParams):
    """A whole command (driver ``command``): ``command`` replaces the target's command line, and
    any other parameter (kept in ``values``) fills the ``{name}`` placeholder of that name."""

    kind: ClassVar[str] = "command"
    command: str | list[str] | None = None
    values: dict[str, Any] = dataclasses.field(default_factory=dict)

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
        CommandParams,
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
    "command",
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


def random_wait_expected_s(p: RandomWaitParams) -> float:
    """Expected latency of one ``random_wait`` call, ignoring transport costs."""
    # Built from the innermost level (depth max_depth: waits, never recurses) outwards: each level
    # adds its own expected wait and, with probability sub_p, the expected cost of the level below.
    expected = 0.0
    for _ in range(p.max_depth + 1):
        expected = p.delay_p * p.delay_s / 2.0 + p.sub_p * expected
    return expected
