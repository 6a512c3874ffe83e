"""Where the time goes: a request's latency split into round trip, server compute and overhead.

Before each case of a suite with a ``[breakdown]`` table, rpcmeter measures the round-trip
baseline on the same server, transport and connection shape: ``rtt_requests`` requests per loop of
the ``noop`` workload (a request that does nothing). Then, per request of the case::

    overhead = latency - rtt - server

where ``latency`` is what the client measured, ``server`` the compute time the server reported
for that very request, and ``rtt`` the baseline's mean latency. The runner keeps
``latency - server`` of every request (a third histogram beside latency and server time), so the
overhead's standard deviation is that of the per-request differences, not a guess from the two
separate spreads; ``rtt`` being one number per case, it moves the mean only.

The case document holds ``breakdown``::

    {"rtt_us": {"mean", "stdev"}, "server_us": {"mean", "stdev"} | null,
     "overhead_us": {"mean", "stdev"} | null, "rtt_requests": int}

``server_us`` and ``overhead_us`` are null when the replies carried no server time (a server that
does not report it, e.g. nginx).
"""

from __future__ import annotations

from typing import Any

from rpcmeter.metrics.histogram import Histogram


def mean_stdev_us(h: Histogram) -> dict[str, float]:
    return {"mean": h.mean / 1e3, "stdev": h.stdev / 1e3}


def breakdown(rtt: Histogram, server: Histogram, net: Histogram) -> dict[str, Any]:
    """The case's ``breakdown``: ``rtt`` is the noop baseline's latency histogram, ``server`` the
    server-reported times and ``net`` the per-request ``latency - server`` of the case (ns)."""
    out: dict[str, Any] = {
        "rtt_us": mean_stdev_us(rtt),
        "server_us": None,
        "overhead_us": None,
        "rtt_requests": rtt.count,
    }
    if server.count and net.count:
        out["server_us"] = mean_stdev_us(server)
        out["overhead_us"] = {"mean": (net.mean - rtt.mean) / 1e3, "stdev": net.stdev / 1e3}
    return out
