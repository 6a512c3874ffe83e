"""Where the time goes: a request's latency split into round trip, queue, server compute and
overhead.

For a suite with a ``[breakdown]`` table, rpcmeter measures the *round trip* of every case on
the same server and transport, before and after the case (:mod:`rpcmeter.runners.round_trip`): ``rtt_requests`` requests of the
``noop`` workload (a request that does nothing) from one loop on one connection, so that it is the
unloaded floor of the transport and carries no queueing of its own. Then, per request of the
case::

    latency = round trip + queue + server compute + overhead

where ``latency`` is what the client measured, ``queue`` and ``server compute`` what the server
reported for that very request (:mod:`rpcmeter.protocols.timing`: how long it waited after it had
fully arrived, and how long it was handled), and ``round trip`` the median of the round-trip
requests before and after (the floor: a busy machine's stalls move a mean of a few hundred
requests far more than the case's), each less the times the server reported for it: a no-op
request waits too after it arrives (the server wakes up and reads it), and that wait is counted
in the case's queue, so it must not be counted in the round trip as well
(:func:`rpcmeter.runners.round_trip.floor`). The runner keeps ``latency - compute - queue`` of every
request, so the overhead's spread and percentiles are those of the per-request differences (less
the one round-trip median), not a guess from separate spreads. In means:
``latency = round trip p50 + queue + compute + overhead``. A server that reports no queue time leaves
``queue_us`` null (unknown, not zero) and the overhead then includes any queueing.

For a remote target (a server rpcmeter did not start) the round trip is the network's instead,
from TCP handshakes before and after the case (:mod:`rpcmeter.metrics.network_rtt`; ``basis``
``"network"``): ``latency = network round trip + queue + server compute + overhead``, and no
no-op requests are sent.

The overhead's mean comes with a 95 % confidence interval: 1.96 standard errors of the case's
mean (requests taken as independent), plus half a distribution-free 95 % interval of the round
trip's median, plus half the difference between the round trip's median before and after the
case (a drift the interval cannot rule out). When the
interval includes 0 the overhead is within the noise, and the report says so rather than print a
signed figure; a negative overhead beyond the noise gives a warning (:func:`warnings_for`).

A negative overhead is not always noise. The round trip's no-ops go one at a time, so every one
of their replies wakes a client that sleeps waiting for it (on a virtual machine, a third to a
half of a no-op's round trip: the docs' "Where the time goes" page); the replies of a case whose
clients run several loops often reach a client awake with the others' replies, and do not pay
that wakeup. The server's reported times hold no work outside the request (its queue starts at
the kernel's receive time of the request's last bytes, its compute brackets the handling), so the
warning names the client's wakeup for such a case (``loops`` > 1, ``wait = "block"``), and the
server's timer only for a case that ran as the round trip did.

The case document holds ``breakdown`` (microseconds; schema version 2)::

    {"rtt_us": {"mean", "stdev", "p50", "p99", "count", "before", "after" (medians)},
     "queue_us": {"mean", "stdev", "p50", "p99", "count"} | null,
     "server_us": {"mean", "stdev", "p50", "p99", "count"} | null,
     "overhead_us": {"mean", "stdev", "p50", "p99", "count", "ci95": [low, high],
                     "within_noise": bool} | null,
     "rtt_requests": int, "rtt_loops": 1, "rtt_basis": "noop" | "network",
     "loops": int, "wait": "block" | "spin"}  (the case's loops per client process, load.wait)

(``rtt_requests`` and ``rtt_loops`` are 0 with a network round trip.)

``server_us`` and ``overhead_us`` are null when the replies carried no server time (a server that
does not report it, e.g. nginx). Documents of schema version 1 have ``rtt_us``, ``server_us`` and
``overhead_us`` with ``mean`` and ``stdev`` only (a round trip measured with the case's loops).
"""

from __future__ import annotations

import math

from rpcmeter.metrics.histogram import Histogram
from rpcmeter.model import Breakdown, Result, Stats
from rpcmeter.text import warning

Z95 = 1.959964


def stats_us(h: Histogram, shift_ns: float = 0.0) -> Stats | None:
    """Mean, standard deviation, p50 and p99 of ``h`` less ``shift_ns``, in microseconds."""
    if not h.count:
        return None
    p50, p99 = h.percentiles([50, 99])
    return Stats(
        mean=(h.mean - shift_ns) / 1e3,
        stdev=h.stdev / 1e3,
        p50=(p50 - shift_ns) / 1e3,
        p99=(p99 - shift_ns) / 1e3,
        count=h.count,
    )


def _se2(h: Histogram) -> float:
    """Squared standard error of ``h``'s mean (ns^2)."""
    sd = h.stdev
    return sd * sd / h.count if h.count > 1 and math.isfinite(sd) else 0.0


def median_half_width(h: Histogram) -> float:
    """Half the width of a distribution-free 95 % interval of ``h``'s median (ns): the values at
    ranks n/2 -+ 1.96 sqrt(n)/2, read from the histogram."""
    if h.count < 2:
        return math.nan if not h.count else 0.0
    spread = 100 * Z95 / (2 * math.sqrt(h.count))
    low, high = h.percentiles([max(0.0, 50 - spread), min(100.0, 50 + spread)])
    return (high - low) / 2


def around(before: Histogram, after: Histogram) -> Stats:
    """Round trips taken before and after a case: their stats (us), with the medians before
    and after."""
    rtt = Histogram.merged([before, after])
    stats = stats_us(rtt) or Stats(mean=math.nan, stdev=math.nan, p50=math.nan, count=0)
    return stats.model_copy(
        update={
            "before": before.percentile(50) / 1e3 if before.count else math.nan,
            "after": after.percentile(50) / 1e3 if after.count else math.nan,
        }
    )


def breakdown(
    rtt_before: Histogram,
    rtt_after: Histogram,
    server: Histogram,
    net: Histogram,
    queue: Histogram,
    basis: str = "noop",
    loops: int | None = None,
    wait: str | None = None,
) -> Breakdown:
    """The case's ``breakdown``: the round trip's latencies before and after the case (no-op
    requests, or for a remote target TCP handshakes: ``basis`` ``"network"``), and the case's
    server-reported compute times, ``latency - compute - queue`` per request (``net``) and
    queue times (all ns); ``loops`` per client process and ``wait`` (``load.wait``) as the
    case ran."""
    rtt = Histogram.merged([rtt_before, rtt_after])
    rtt_stats = around(rtt_before, rtt_after)
    before, after = _or_nan(rtt_stats.before), _or_nan(rtt_stats.after)
    server_us = overhead_us = None
    if server.count and net.count and rtt.count:
        overhead = stats_us(net, rtt.percentile(50))
        assert overhead is not None and overhead.mean is not None
        drift = abs(before - after) * 1e3 if rtt_before.count and rtt_after.count else 0.0
        half = Z95 * math.sqrt(_se2(net)) + median_half_width(rtt) + drift / 2
        low, high = (overhead.mean - half / 1e3, overhead.mean + half / 1e3)
        overhead_us = overhead.model_copy(
            update={"ci95": [low, high], "within_noise": low <= 0.0 <= high}
        )
        server_us = stats_us(server)
    return Breakdown(
        rtt_us=rtt_stats,
        queue_us=stats_us(queue) if server.count else None,
        server_us=server_us,
        overhead_us=overhead_us,
        rtt_requests=rtt.count if basis == "noop" else 0,
        rtt_loops=1 if basis == "noop" else 0,
        rtt_basis=basis,
        loops=loops,
        wait=wait,
    )


def overhead_cell(b: Breakdown | None) -> tuple[str, float, float] | None:
    """How to show a case's overhead: (``"noise"``, mean, half-width) when its interval includes
    0, (``"ci"``, mean, half-width) when it does not, (``"sd"``, mean, sd) for a version-1
    document (no interval); None when unknown."""
    o = b.overhead_us if b is not None else None
    if o is None or o.mean is None:
        return None
    ci = o.ci95
    if ci is None:
        return ("sd", o.mean, _or_nan(o.stdev))
    half = (_or_nan(ci[1]) - _or_nan(ci[0])) / 2
    return ("noise" if o.within_noise else "ci", o.mean, half)


def _or_nan(value: float | None) -> float:
    return math.nan if value is None else value


def warnings_for(result: Result) -> list[str]:
    """A warning for every case whose overhead is negative beyond the noise, naming the likely
    cause."""
    out: list[str] = []
    for case in result.cases:
        b = case.breakdown
        o = b.overhead_us if b is not None else None
        if case.status != "ok" or o is None or o.ci95 is None or _or_nan(o.ci95[1]) >= 0:
            continue
        assert b is not None
        rtt = b.rtt_us
        label = f"{case.workload}/{case.variant}"
        if case.point:
            label += " " + ",".join(f"{k}={v}" for k, v in case.point.items())
        before = _or_nan(rtt.before if rtt is not None else None)
        after = _or_nan(rtt.after if rtt is not None else None)
        if (
            math.isfinite(before)
            and math.isfinite(after)
            and abs(before - after) > 0.25 * min(before, after)
        ):
            cause = (
                f"the round trip moved from {before:,.1f} us before the case to {after:,.1f} us "
                "after it: the machine's load or CPU frequency changed during the case"
            )
        elif (b.loops or 1) > 1 and b.wait != "spin":
            cause = (
                "the round trip, one request at a time, counts a wakeup of the idle client for "
                f"every reply, which the {b.loops} loops of each client of this case often did "
                "not need (their client was awake with other replies): the client's wakeup, not "
                'the server\'s timer; load.wait = "spin" takes it out of both'
            )
        else:
            cause = (
                "the server's reported times exceed what the client saw: its timer likely "
                "covers more than its handling of the request (reading or writing it), or its "
                "clock is not the one it claims"
            )
        out.append(
            warning(
                f"{label}: overhead {_or_nan(o.mean):,.1f} us is negative beyond the noise",
                f"95 % interval {_or_nan(o.ci95[0]):,.1f} to {_or_nan(o.ci95[1]):,.1f} us; "
                f"likely cause: {cause}",
            )
        )
    return out
