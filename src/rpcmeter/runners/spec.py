"""What a case asks of its load, in one value: :class:`LoadSpec`.

The suite and a case produce it (:meth:`LoadSpec.of_case`); every request runner takes it: the
local runner (:func:`~rpcmeter.runners.closed_loop.run_closed_loop`), the cluster runner
(:func:`~rpcmeter.runners.distributed.run_distributed`), and inside a client process the thread
loops, the event loop and the open-loop pacers (:meth:`LoadSpec.for_client` gives one client's
share). It is frozen and picklable: a client process, local or on a cluster worker, receives it
as it is. What the parent does while the load runs (progress, watching the server, resource
sampling marks) is not part of it: :class:`LoadHooks`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from rpcmeter.drivers.base import DriverContext
from rpcmeter.net.endpoints import Endpoint
from rpcmeter.net.tls import ClientTls
from rpcmeter.plan.cases import Case
from rpcmeter.runners.stages import LoadStage, WindowClock, active_spans, clock_of, loops_in
from rpcmeter.suite.model import Load, Suite
from rpcmeter.suite.workloads import NoopParams

if TYPE_CHECKING:
    from rpcmeter.runners.windows import WindowEvent

# a time no case reaches (ns): later than any clock reading, and the largest int the compiled
# build holds unboxed (2**62 - 1), so that a closed loop's test of each reply's time against it
# is one machine compare (2**62 took an object compare, about 400 instructions a request)
NO_END = (1 << 62) - 1
ProgressFn = Callable[[int, float], None]  # requests done, seconds since the gate opened
AliveFn = Callable[[], str | None]  # why the server is gone (None: it is not)


@dataclass(frozen=True)
class Pacing:
    """Open-loop settings of one run (``rate_rps`` total) or of one client (its share)."""

    rate_rps: float
    late_ms: float = 1.0
    max_lag_ms: float | None = None
    phase: float = 0.0  # offset of this client's slots, in slot intervals

    @classmethod
    def of(cls, load: Load) -> Pacing | None:
        """The open-loop pacing of a suite's load (None for a closed loop)."""
        stages = stages_of(load)
        if stages and stages[0].rate is not None:  # the mean rate of the stages
            rate = sum(s.offered for s in stages) / sum(s.duration_s for s in stages)
            return cls(rate, late_ms=load.late_ms, max_lag_ms=load.max_lag_ms)
        if load.mode != "open" or load.rate is None:
            return None
        return cls(load.rate, late_ms=load.late_ms, max_lag_ms=load.max_lag_ms)

    def for_client(self, index: int, clients: int) -> Pacing:
        """Client ``index``'s share: ``rate / clients``, its slots offset by ``index / clients``."""
        return replace(self, rate_rps=self.rate_rps / clients, phase=index / clients)


def stages_of(load: Load) -> tuple[LoadStage, ...]:
    """A suite's ``load.stages`` as the runners take them: a ramp's start rate filled in (the
    previous stage's rate, unless the stage gives its own)."""
    out: list[LoadStage] = []
    previous: float | None = None
    for stage in load.stages or ():
        start = None
        if stage.ramp:
            start = stage.start_rate if stage.start_rate is not None else previous
        out.append(LoadStage(stage.duration_s, stage.rate, start, stage.concurrency, stage.name))
        previous = stage.rate
    return tuple(out)


@dataclass(frozen=True)
class LoadSpec:
    """One case's load: which driver, how it connects (``ctx``: its ``threads`` loops per client
    over ``connections``), how many client processes, how much (``requests`` per loop, or
    ``duration_s``), untimed ``warmup`` calls per loop, the case's time limit, the CPUs the
    clients are pinned to, and ``pacing`` for an open loop (None: closed loop).

    ``stages`` make the load change within the case (:mod:`rpcmeter.runners.stages`; the case
    then lasts their durations); ``interval_s`` is the length of the intervals of the case's time
    series (``math.inf``: one interval, the whole case)."""

    driver: str
    ctx: DriverContext
    clients: int = 1
    requests: int | None = None
    duration_s: float | None = None
    warmup: int = 0
    timeout_s: float = 60.0
    client_cpus: list[int] | None = None
    pacing: Pacing | None = None
    stages: tuple[LoadStage, ...] = ()
    interval_s: float = 1.0

    def clock(self) -> WindowClock:
        """Where the case's intervals (and stages) start and end."""
        return clock_of(self.interval_s, self.stages)

    def spans(self, base_ns: int, loop: int) -> list[tuple[int, int]]:
        """When closed loop ``loop`` of this client runs, on its clock (the case's start there
        is ``base_ns``): the spans of its stages (a closed-loop staged case: parked between
        them; none when no stage runs it), else from the case's start for ``duration_s`` (or
        until its requests are done)."""
        if self.closed_stages:
            spans = active_spans(self.stages, self.clients, self.ctx.client_index, loop)
            return [(base_ns + a, base_ns + b) for a, b in spans]
        end = NO_END if self.duration_s is None else base_ns + int(self.duration_s * 1e9)
        return [(base_ns, end)]

    @property
    def closed_stages(self) -> bool:
        """The stages change the number of closed loops (not the rate)."""
        return bool(self.stages) and self.stages[0].concurrency is not None

    def loops(self, stage: int) -> int:
        """The loops this client runs in stage ``stage`` (its share of a closed-loop stage's
        concurrency; every loop for an open-loop stage)."""
        concurrency = self.stages[stage].concurrency
        if concurrency is None:
            return self.ctx.threads
        return loops_in(concurrency, self.clients, self.ctx.client_index)

    @classmethod
    def of_case(
        cls,
        suite: Suite,
        case: Case,
        endpoint: Endpoint,
        client_cpus: list[int] | None,
        tls: ClientTls | None = None,
        prepared: Mapping[str, Any] | None = None,
        client_env: Mapping[str, str] | None = None,
        uuid_seed: str | None = None,
    ) -> LoadSpec:
        """The load of ``case`` against the server at ``endpoint`` (over ``tls``); its clients
        get ``prepared`` (what the driver prepared for the variant; by default what it did when
        the suite was loaded) and ``client_env`` (the driver's
        :attr:`~rpcmeter.drivers.base.Driver.client_env`) under the variant's environment, and
        the run's ``uuid_seed`` (``{{uuid}}``'s generator)."""
        variant, target, load = suite.variants[case.variant], suite.target, case.load
        stages = stages_of(load)
        threads = load.concurrency or load.threads
        if stages and stages[0].concurrency is not None:  # enough loops for the largest stage
            threads = max(-(-(s.concurrency or 0) // load.clients) for s in stages)
        return cls(
            driver=suite.driver_of(case.variant),
            ctx=DriverContext(
                endpoint=endpoint,
                workload=case.params,
                options={**target.options, **variant.options, "seed": suite.seed},
                validate=suite.validate_replies,
                seed=suite.seed,
                uuid_seed=uuid_seed,
                clients=load.clients,
                threads=threads,
                connections=load.connections,
                reuse=load.reuse,
                wait=load.wait,
                spin_us=load.spin_us,
                env={**(client_env or {}), **suite.env_of(case.variant)},
                tls=tls,
                prepared=suite.prepared.get(case.variant, {}) if prepared is None else prepared,
            ),
            clients=load.clients,
            requests=None if load.duration_s is not None or stages else load.requests,
            duration_s=load.stage_seconds() or load.duration_s,
            warmup=load.warmup,
            timeout_s=load.timeout_s,
            client_cpus=client_cpus,
            pacing=Pacing.of(load),
            stages=stages,
            interval_s=suite.timeseries.interval_s,
        )

    def round_trip(self, requests: int) -> LoadSpec:
        """One client, one loop on one connection sending ``requests`` no-op requests, closed
        loop, unvalidated: the round trip of the breakdown (the transport's unloaded floor)."""
        return replace(
            self,
            ctx=replace(
                self.ctx,
                workload=NoopParams(),
                validate=False,
                clients=1,
                threads=1,
                connections=1,
            ),
            clients=1,
            requests=requests,
            duration_s=None,
            pacing=None,
            stages=(),
        )

    def for_client(self, index: int) -> LoadSpec:
        """Client ``index``'s part: its index in the context (and the number of clients: request
        numbers are distinct across them), its share of the rate."""
        return replace(
            self,
            ctx=replace(
                self.ctx,
                client_index=index,
                clients=self.clients,
                options=dict(self.ctx.options),
                env=dict(self.ctx.env),
            ),
            pacing=self.pacing.for_client(index, self.clients) if self.pacing else None,
        )


@dataclass(frozen=True)
class LoadHooks:
    """What the parent does while a load runs. ``server_problem()`` returns a reason when the
    server is gone; ``on_start(pids)`` is called once the client processes exist, ``on_go()``
    right before the gate opens (the case starts a moment later) and ``on_end()`` once the
    last client has reported (resource sampling marks): the measured interval runs from
    ``on_go`` to ``on_end``. ``on_stage(i)`` is called at the start of stage ``i`` (from a
    thread of its own), ``on_window(event)`` with each interval of the case's time series as it
    settles (:class:`~rpcmeter.runners.windows.WindowEvent`)."""

    on_progress: ProgressFn | None = None
    server_problem: AliveFn | None = None
    on_start: Callable[[list[int]], None] | None = None
    on_go: Callable[[], None] | None = None
    on_end: Callable[[], None] | None = None
    on_stage: Callable[[int], None] | None = None
    on_window: Callable[[WindowEvent], None] | None = None
