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
from typing import Any

from rpcmeter.drivers.base import DriverContext
from rpcmeter.endpoints import Endpoint
from rpcmeter.plan import Case
from rpcmeter.suite_model import Load, Suite
from rpcmeter.tls import ClientTls
from rpcmeter.workloads import NoopParams

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
        if load.mode != "open" or load.rate is None:
            return None
        return cls(load.rate, late_ms=load.late_ms, max_lag_ms=load.max_lag_ms)

    def for_client(self, index: int, clients: int) -> Pacing:
        """Client ``index``'s share: ``rate / clients``, its slots offset by ``index / clients``."""
        return replace(self, rate_rps=self.rate_rps / clients, phase=index / clients)


@dataclass(frozen=True)
class LoadSpec:
    """One case's load: which driver, how it connects (``ctx``: its ``threads`` loops per client
    over ``connections``), how many client processes, how much (``requests`` per loop, or
    ``duration_s``), untimed ``warmup`` calls per loop, the case's time limit, the CPUs the
    clients are pinned to, and ``pacing`` for an open loop (None: closed loop)."""

    driver: str
    ctx: DriverContext
    clients: int = 1
    requests: int | None = None
    duration_s: float | None = None
    warmup: int = 0
    timeout_s: float = 60.0
    client_cpus: list[int] | None = None
    pacing: Pacing | None = None

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
    ) -> LoadSpec:
        """The load of ``case`` against the server at ``endpoint`` (over ``tls``); its clients
        get ``prepared`` (what the driver prepared for the variant; by default what it did when
        the suite was loaded) and ``client_env`` (the driver's
        :attr:`~rpcmeter.drivers.base.Driver.client_env`) under the variant's environment."""
        variant, target, load = suite.variants[case.variant], suite.target, case.load
        return cls(
            driver=suite.driver_of(case.variant),
            ctx=DriverContext(
                endpoint=endpoint,
                workload=case.params,
                options={**target.options, **variant.options, "seed": suite.seed},
                validate=suite.validate_replies,
                seed=suite.seed,
                clients=load.clients,
                threads=load.concurrency or load.threads,
                connections=load.connections,
                reuse=load.reuse,
                wait=load.wait,
                spin_us=load.spin_us,
                env={**(client_env or {}), **suite.env_of(case.variant)},
                tls=tls,
                prepared=suite.prepared.get(case.variant, {}) if prepared is None else prepared,
            ),
            clients=load.clients,
            requests=None if load.duration_s is not None else load.requests,
            duration_s=load.duration_s,
            warmup=load.warmup,
            timeout_s=load.timeout_s,
            client_cpus=client_cpus,
            pacing=Pacing.of(load),
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
    right before the gate opens and ``on_end()`` once the last client has reported (resource
    sampling marks): the measured interval runs from ``on_go`` to ``on_end``."""

    on_progress: ProgressFn | None = None
    server_problem: AliveFn | None = None
    on_start: Callable[[list[int]], None] | None = None
    on_go: Callable[[], None] | None = None
    on_end: Callable[[], None] | None = None
