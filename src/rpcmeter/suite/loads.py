"""How a case's requests are issued: ``[load]`` (closed loop or open loop at a rate), its
``[[load.stages]]`` and a sweep of rates."""

from __future__ import annotations

from typing import Literal

from pydantic import (
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from rpcmeter.suite.base import (
    MIN_RATE,
    Flag,
    _Model,
)


def round_rate(value: float, digits: int = 6) -> float:
    """A rate to ``digits`` significant digits; whole numbers as integers (``rate=200``)."""
    v = float(f"{value:.{digits}g}")
    return int(v) if v.is_integer() else v


class Sweep(_Model):
    """Offered rates ``from`` .. ``to`` in ``steps`` steps, evenly spaced (``scale = "linear"``)
    or by a constant factor (``"log"``)."""

    start: float = Field(
        alias="from", ge=MIN_RATE, description="The first rate, requests/s.", examples=[1000]
    )
    to: float = Field(ge=MIN_RATE, description="The last rate, requests/s.", examples=[8000])
    steps: int = Field(
        ge=2, le=1000, description="How many rates, from and to included.", examples=[5]
    )
    scale: Literal["linear", "log"] = Field(
        "linear", description="linear: evenly spaced; log: by a constant factor."
    )

    model_config = ConfigDict(extra="forbid", populate_by_name=True, allow_inf_nan=False)

    def rates(self) -> list[float]:
        n = self.steps - 1
        if self.scale == "log":
            values = [self.start * (self.to / self.start) ** (i / n) for i in range(self.steps)]
        else:
            values = [self.start + (self.to - self.start) * i / n for i in range(self.steps)]
        return [round_rate(v) for v in values]


class Stage(_Model):
    """One stage of a case's load (``[[load.stages]]``): ``duration_s`` seconds of either
    ``rate`` requests/s in total (open loop; with ``ramp = true`` the rate rises, or falls,
    linearly over the stage from the previous stage's rate, or from ``start_rate``) or
    ``concurrency`` loops in total (closed loop; loops are started or parked at the stage's
    start). Every stage of a case is measured apart, and the case as a whole."""

    duration_s: float = Field(gt=0, le=1e6, description="Seconds the stage lasts.", examples=[10.0])
    rate: float | None = Field(
        None,
        ge=MIN_RATE,
        le=1e9,
        description="Open loop: requests/s in total over the clients.",
        examples=[5000],
    )
    concurrency: int | None = Field(
        None,
        ge=1,
        le=1_000_000,
        description="Closed loop: loops in total over the clients.",
        examples=[16],
    )
    ramp: Flag = Field(
        False,
        description="Move the rate linearly from the previous stage's rate (or start_rate) to this one.",
    )
    start_rate: float | None = Field(
        None, ge=MIN_RATE, le=1e9, description="Where a ramp starts, requests/s.", examples=[100]
    )
    name: str = Field(
        "", description="A label for the reports; default: the stage's number.", examples=["hold"]
    )

    @model_validator(mode="after")
    def _one_kind(self) -> Stage:
        if self.rate is not None and self.concurrency is not None:
            raise ValueError("give rate (open loop) or concurrency (closed loop), not both")
        if self.rate is None and self.concurrency is None:
            raise ValueError("give rate (open loop) or concurrency (closed loop)")
        if self.concurrency is not None and (self.ramp or self.start_rate is not None):
            raise ValueError("ramp and start_rate are for a stage with a rate")
        if self.start_rate is not None and not self.ramp:
            raise ValueError("start_rate is where a ramp starts: set ramp = true")
        return self


class Load(_Model):
    """How requests are issued. Closed loop: every loop sends its next request when the
    previous one returned; ``requests`` per loop, or for ``duration_s`` seconds.

    Each of ``clients`` processes runs ``concurrency`` loops (default: ``threads``) over
    ``connections`` connections (loops share them round-robin; rpyc: one connection per client).

    Open loop (``mode = "open"``): requests go out at ``rate`` requests/s in total, split evenly
    over the clients, whichever loop is free taking the next slot; ``requests`` per loop or
    ``duration_s`` seconds of schedule. A send lagging more than ``late_ms`` behind its slot is
    late; one lagging more than ``max_lag_ms`` is dropped (never sent). ``rates`` or ``sweep``
    run several rates as the matrix dimension ``rate``
    (:mod:`rpcmeter.runners.open_loop`).

    ``reuse = false`` opens a connection per request instead of keeping ``connections`` open
    (drivers that can: ``Driver.connection_per_request``).

    ``wait = "spin"`` has every client poll for replies without sleeping (an event loop polling
    with a zero timeout, a blocking loop polling its socket) instead of sleeping in the kernel
    until they come (``"block"``, the default): the client's own wakeup leaves the latency, and
    the client's CPU figure includes the polling (a whole core per client process). Drivers that
    can: ``Driver.spins``. ``spin_us`` bounds the polling: after a reply (or a send) a client
    polls for up to that many microseconds with nothing arriving, then sleeps until the next
    event (unbounded when not set; only with ``wait = "spin"``).

    ``stages`` (``[[load.stages]]``, :class:`Stage`) make the load change within a case: stages
    of ``rate`` (open loop, ``concurrency`` then the loops per client that send) or of
    ``concurrency`` (closed loop), one after the other for their ``duration_s``; the case runs
    for their sum."""

    mode: Literal["closed", "open"] = Field(
        "closed",
        description="closed: a loop sends when its last reply came; open: requests go out at rate.",
    )
    clients: int = Field(1, ge=1, le=1024, description="Client processes.")
    threads: int = Field(
        1, ge=1, le=4096, description="Loops per client process (the default of concurrency)."
    )
    connections: int = Field(
        1, ge=1, le=100_000, description="Connections per client process; loops share them."
    )
    concurrency: int | None = Field(
        None,
        ge=1,
        le=1_000_000,
        description="Loops per client process (requests in flight); default: threads.",
        examples=[50],
    )
    requests: int = Field(1000, ge=1, description="Measured requests per loop.")
    duration_s: float | None = Field(
        None, gt=0, description="Seconds of load instead of a request count.", examples=[10.0]
    )
    warmup: int = Field(10, ge=0, description="Requests per loop made first and not measured.")
    timeout_s: float = Field(
        600.0, gt=0, description="Seconds a case's clients may run; then the case fails."
    )
    rate: float | None = Field(
        None,
        ge=MIN_RATE,
        le=1e9,
        description="Open loop: requests/s in total over the clients.",
        examples=[2000],
    )
    rates: list[float] | None = Field(
        None,
        description="Open loop: several rates, one case each (matrix dimension rate).",
        examples=[[1000, 2000, 4000]],
    )
    sweep: Sweep | None = Field(
        None,
        description="Open loop: rates from, to, in steps.",
        examples=[{"from": 1000, "to": 8000, "steps": 4}],
    )
    late_ms: float = Field(
        1.0, ge=0, description="Open loop: a send more than this behind its slot counts as late."
    )
    max_lag_ms: float | None = Field(
        None,
        gt=0,
        description="Open loop: a slot more than this behind is dropped (never sent).",
        examples=[100.0],
    )
    reuse: Flag = Field(
        True,
        description="Keep connections open; false: a new connection (and handshake) per request.",
    )
    wait: Literal["block", "spin"] = Field(
        "block",
        description="How a client waits for replies: sleep in the kernel (block) or poll (spin).",
    )
    spin_us: float | None = Field(
        None,
        ge=0,
        le=60_000_000,
        description='With wait = "spin": poll at most this long, then sleep; unset: no limit.',
        examples=[50.0],
    )
    stages: list[Stage] | None = Field(
        None,
        description="Load that changes within a case ([[load.stages]]), measured stage by stage.",
        examples=[[{"duration_s": 5, "rate": 1000}, {"duration_s": 5, "rate": 5000, "ramp": True}]],
    )

    @field_validator("stages")
    @classmethod
    def _stage_list(cls, stages: list[Stage] | None) -> list[Stage] | None:
        if stages is None:
            return None
        if not stages:
            raise ValueError("at least one stage (or leave stages out)")
        if len(stages) > 1000:
            raise ValueError("at most 1000 stages")
        opened = [s.rate is not None for s in stages]
        for i, this_opens in enumerate(opened):
            if this_opens != opened[0]:
                first, this = ("rate", "concurrency") if opened[0] else ("concurrency", "rate")
                raise ValueError(
                    f"stage {i + 1} gives {this}, stage 1 {first}: the stages of a case are all "
                    "open loop (rate) or all closed loop (concurrency)"
                )
        if stages[0].ramp and stages[0].start_rate is None:
            raise ValueError(
                "stage 1 ramps (ramp = true) from the previous stage's rate, and there is none: "
                "give its start_rate"
            )
        return stages

    @model_validator(mode="after")
    def _staged(self) -> Load:
        if not self.stages:
            return self
        given = [
            k for k in ("rate", "rates", "sweep", "duration_s") if getattr(self, k) is not None
        ]
        if given:
            what = "durations" if given[0] == "duration_s" else "rates"
            raise ValueError(f"{given[0]}: the stages give the {what} (drop one or the other)")
        if self.stages[0].rate is not None:
            self.mode = "open"  # a rate stage is an open loop
        elif self.mode == "open":
            raise ValueError('mode: stages of concurrency are closed loop (drop mode = "open")')
        elif self.concurrency is not None:
            raise ValueError("concurrency: the stages give the concurrency (drop one or the other)")
        return self

    def stage_seconds(self) -> float | None:
        """The case's length when it has stages (their durations added), else None."""
        return sum(s.duration_s for s in self.stages) if self.stages else None

    @model_validator(mode="after")
    def _concurrency(self) -> Load:
        if self.concurrency is not None and self.concurrency < self.connections:
            raise ValueError(
                f"concurrency ({self.concurrency}) must be at least connections "
                f"({self.connections})"
            )
        return self

    @model_validator(mode="after")
    def _open_loop(self) -> Load:
        given = [k for k in ("rate", "rates", "sweep") if getattr(self, k) is not None]
        if self.mode == "closed" and given:
            raise ValueError(f'{given[0]} is an open-loop setting: set load.mode = "open"')
        if self.rates is not None and self.sweep is not None:
            raise ValueError("give either rates or sweep, not both")
        if self.rates is not None and (
            not self.rates or not all(MIN_RATE <= r <= 1e9 for r in self.rates)
        ):
            raise ValueError(f"rates must be a non-empty list of requests/s, {MIN_RATE:g} to 1e9")
        return self

    def rate_list(self) -> list[float] | None:
        """The offered rates of a sweep (``rates`` or ``sweep``), or None."""
        if self.sweep is not None:
            return self.sweep.rates()
        return list(self.rates) if self.rates is not None else None
