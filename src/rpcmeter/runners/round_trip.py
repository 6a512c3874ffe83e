"""The round trip of a case with a breakdown (:mod:`rpcmeter.result.breakdown`): ``rtt_requests``
requests of the ``noop`` workload from one loop on one connection, on the case's server and
transport, before and after the case, so that it is the unloaded floor of the transport and
carries no queueing of its own (:meth:`~rpcmeter.runners.spec.LoadSpec.round_trip`)."""

from __future__ import annotations

from collections.abc import Callable

from rpcmeter.metrics.histogram import Histogram
from rpcmeter.runners.recording import LoadOutcome
from rpcmeter.runners.spec import LoadSpec


def floor(outcome: LoadOutcome) -> Histogram:
    """The round trip of no-op requests: their latencies less the times the server reported
    for each (its wait after the request arrived, its wakeup and reading among them, and its
    handling), which the case's queue and compute columns count; their latencies as they are
    when the server reported no times for some of them."""
    net = outcome.net_hist
    return net if net.count and net.count == outcome.hist.count else outcome.hist


class RoundTrip:
    """The round trip of one case (whose load is ``case``): ``requests`` noop requests from one
    loop on one connection, run by ``run`` before and after the case (:meth:`measure`), its
    latencies in :attr:`before` and :attr:`after`; the case's loops per client and ``wait``
    beside them (the breakdown records them)."""

    def __init__(
        self, run: Callable[[LoadSpec], LoadOutcome], case: LoadSpec, requests: int
    ) -> None:
        self.run = run
        self.spec = case.round_trip(requests)
        self.loops = case.ctx.threads
        self.wait = case.ctx.wait
        self.before = Histogram()
        self.after = Histogram()

    def measure(self, when: str) -> str | None:
        """Measure the round trip ``when`` (``before`` or ``after``); a reason when it failed."""
        outcome = self.run(self.spec)
        if outcome.failure or not outcome.hist.count:
            return f"round trip (noop, {when} the case) failed: {outcome.failure or 'no replies'}"
        (self.before if when == "before" else self.after).merge(floor(outcome))
        return None
