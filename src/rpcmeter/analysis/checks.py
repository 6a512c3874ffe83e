"""Measurement warnings: pure functions of a result document.

``warnings_for(result)`` runs every rule in :data:`RULES` and returns their warnings, each a
one-line headline (what was seen, which the terminal prints) and its details (where it was worst,
what to do about it, which the reports show): :func:`rpcmeter.text.warning`. A rule is a function ``(result) -> list[str]``; to
add one, write it here and append it to ``RULES``. The result's ``warnings``
(:mod:`rpcmeter.analysis.derived`) hold the sentences; the terminal prints them under the tables.

Rules and their thresholds:

- a case's overhead (:mod:`rpcmeter.result.breakdown`) is negative beyond its 95 % interval;
- the load generator was saturated: all client processes together used more than
  :data:`CLIENT_SATURATION_PCT` % of the CPUs they were given (not for clients that polled
  without sleeping, ``load.wait = "spin"``: they use their CPUs up whatever the load);
- the clients' CPUs were busy with other work: those CPUs were more than
  :data:`CLIENT_SATURATION_PCT` % busy in all while the clients themselves used less, and other
  processes took at least :data:`OTHER_WORK_PCT` % of them (they make the clients wait for CPU
  time; a CPU busy mostly with the clients themselves is not called busy with other work);
- the CPU frequency governor is not ``performance`` (where it is readable);
- server or clients were not pinned to CPUs, or they share a CPU;
- a memory limit for the server (``placement.server_memory``) where the server is at an
  ``address`` (rpcmeter did not start it: the limit limits nothing);
- a target host name (such as ``localhost``) resolves to an IPv6 address first;
- a metric (throughput, mean latency) varies between repetitions with a coefficient of variation
  above :data:`SPREAD_CV`;
- too few requests for the percentiles shown: a percentile ``p`` needs at least
  :data:`MIN_TAIL_SAMPLES` samples above it, i.e. ``MIN_TAIL_SAMPLES / (1 - p/100)`` requests in
  the cell (p99: 1,000; p99.9: 10,000) (:func:`min_requests`);
- the server used more than :data:`IDLE_BURN_PCT` % of a core while idle;
- an HTTP/1.1 case had more loops than ``load.connections``: it pipelined
  (``options.pipeline = true``), or opened a connection per loop (:func:`http1_connections`);
- streams ended with another number of replies than ``messages`` expected (:func:`stream_counts`).

The comparisons' own warnings (verdicts that rest on fewer than 5 repetitions or on repetitions
spread by more than 10 %) and each case's (:func:`rpcmeter.analysis.derived.case_warnings`) join these
in :func:`rpcmeter.analysis.derived.derive`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from rpcmeter.model import Case, Placement, Result
from rpcmeter.result import breakdown as breakdown_mod
from rpcmeter.result.cells import Cell, cells
from rpcmeter.text import warning

CLIENT_SATURATION_PCT = 90.0
OTHER_WORK_PCT = 10.0  # the clients' CPUs' busy share less the clients' own
IDLE_BURN_PCT = 5.0
SPREAD_CV = 0.10
MIN_TAIL_SAMPLES = 10
PERCENTILES_SHOWN = (50.0, 99.0)  # the percentiles the terminal tables print

Rule = Callable[[Result], list[str]]


def min_requests(percentile: float, tail_samples: int = MIN_TAIL_SAMPLES) -> int:
    """Requests needed for ``tail_samples`` samples above ``percentile`` (p99 -> 1,000)."""
    return math.ceil(round(tail_samples / (1.0 - percentile / 100.0), 6))


def _label(variant: str, workload: str, point: dict[str, Any] | tuple[Any, ...]) -> str:
    items = point.items() if isinstance(point, dict) else point
    text = " ".join(f"{k}={v}" for k, v in items)
    return f"{variant} · {workload}" + (f" · {text}" if text else "")


def _case_label(case: Case) -> str:
    return _label(case.variant, case.workload, case.point)


def _cell_label(cell: Cell) -> str:
    return _label(cell.variant, cell.workload, cell.point)


def _ok_cases(result: Result) -> list[Case]:
    return [c for c in result.cases if c.status == "ok"]


def _finite(value: float | None) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None


def _cpu_list(cpus: list[int]) -> str:
    from rpcmeter.host.placement import format_cpus

    return format_cpus(cpus)


def load_setting(result: Result, case: Case, key: str) -> Any:
    """The load setting ``key`` of ``case``: of its matrix point, else of its workload's table,
    else of the suite's load (None when none sets it)."""
    if key in case.point:
        return case.point[key]
    workload = result.suite.workloads.get(case.workload)
    if isinstance(workload, dict) and key in workload:
        return workload[key]
    return result.suite.load.get(key)


def spinning(result: Result, case: Case) -> bool:
    """Whether ``case``'s clients polled without sleeping (``wait = "spin"``)."""
    return bool(load_setting(result, case, "wait") == "spin")


def client_saturation(result: Result) -> list[str]:
    """Two causes, told apart by measured figures: the clients themselves used their CPUs up
    (the load generator is the limit), or the clients' CPUs were busy with other processes
    (the clients waited for CPU time; the machine is the limit)."""
    saturated: list[tuple[float, Case]] = []
    crowded: list[tuple[float, Case]] = []
    loaded = [c for c in _ok_cases(result) if c.requests]
    for c in loaded:
        own = _finite(c.cpu.client_util_pct)
        total = _finite(c.cpu.client_cpus_busy_pct)
        if own is not None and own > CLIENT_SATURATION_PCT:
            if not spinning(result, c):
                saturated.append((own, c))
        elif total is not None and total > CLIENT_SATURATION_PCT:
            other = total - (own or 0.0)
            if other >= OTHER_WORK_PCT:
                crowded.append((other, c))
    out = []
    if saturated:
        _, case = max(saturated, key=lambda x: x[0])
        own = _finite(case.cpu.client_util_pct)
        given = _finite(case.cpu.client_cpus_given)
        of = f"their {given:g} CPU(s)" if given else "their CPUs"
        out.append(
            warning(
                f"the load generator was saturated in {len(saturated)} of {len(loaded)} cases: "
                "they measure the client, not the server",
                f"worst: {_case_label(case)}: the clients used {own:.0f} % of {of}. Give the "
                "clients more CPUs (placement.client_cpus) or use fewer clients and threads.",
            )
        )
    if crowded:
        _, case = max(crowded, key=lambda x: x[0])
        own = _finite(case.cpu.client_util_pct)
        total = _finite(case.cpu.client_cpus_busy_pct)
        clients = f", the clients' own share {own:.0f} %" if own is not None else ""
        out.append(
            warning(
                f"the clients' CPUs were busy with other work in {len(crowded)} of {len(loaded)} "
                "cases: latencies include the wait",
                f"worst: {_case_label(case)}: those CPUs {total:.0f} % busy{clients}. Run on a "
                "quieter machine or give the clients CPUs no other process uses "
                "(placement.client_cpus).",
            )
        )
    return out


def governor(result: Result) -> list[str]:
    governors = result.environment.cpu_governor or {}
    return [
        warning(
            f"CPUs {_cpu_list(cpus)} run the {name!r} frequency governor, not 'performance': "
            "clock changes add noise",
            "Set it with `cpupower frequency-set -g performance`.",
        )
        for name, cpus in governors.items()
        if name != "performance"
    ]


def placement(result: Result) -> list[str]:
    """Server and clients unpinned or sharing CPUs, for each way the variants were placed; a
    server rpcmeter did not start (``target = "remote"``, at an ``address``) is none of its
    business, nor are the clients of a whole command (``target = "command"``: it has none)."""
    if not result.cases:
        return []
    place = result.environment.placement or Placement()
    out: list[str] = []
    for each in (place.by_variant or {"": place}).values():
        target = each.target or place.target
        if target == "command":
            continue
        for line in _placement(result, each, remote=target == "remote"):
            if line not in out:
                out.append(line)
    return out


def _placement(result: Result, place: Placement, remote: bool) -> list[str]:
    env = result.environment
    server, client = place.server_cpus, place.client_cpus
    if remote:
        if client is not None:
            return []
        return [
            warning(
                "the clients ran without CPU pinning: the OS may move them",
                "Set placement.client_cpus.",
            )
        ]
    if server is None or client is None:
        sides = " and ".join(
            side for side, cpus in (("the server", server), ("the clients", client)) if not cpus
        )
        return [
            warning(
                f"{sides} ran without CPU pinning: server and clients compete for CPUs",
                "The OS may move them. Set placement.server_cpus and placement.client_cpus"
                + (" (this machine has a single CPU)" if len(env.cpus_available or []) < 2 else "")
                + ".",
            )
        ]
    shared = sorted(set(server) & set(client))
    if shared:
        return [
            warning(
                f"server and clients share CPU(s) {_cpu_list(shared)}: each side slows the other",
                "Give them separate CPUs (placement.server_cpus, placement.client_cpus).",
            )
        ]
    return []


def remote_memory(result: Result) -> list[str]:
    """A memory limit for the server (``placement.server_memory``) where the server is one at
    an ``address``: rpcmeter did not start it, so the limit recorded limits nothing."""
    place = result.environment.placement
    if place is None or place.server_memory_bytes is None or not result.cases:
        return []
    targets = {v: p.target for v, p in (place.by_variant or {}).items()}
    remote = [v for v, t in targets.items() if t == "remote"]
    if not targets and place.target == "remote":
        which = "the server at an address is"
    elif remote:
        which = f"the servers of variant(s) {', '.join(map(repr, remote))}, at an address, are"
    else:
        return []
    return [
        f"placement.server_memory limits nothing for a server rpcmeter did not start: {which} "
        "not placed in its cgroup; limit the memory where that server runs."
    ]


def ipv6_first(result: Result) -> list[str]:
    resolved = result.environment.resolved_hosts or {}
    return [
        warning(
            f"target host {host!r} resolves to {addrs[0]} (IPv6) first",
            "A server listening on IPv4 only makes every new connection try IPv6 first, which "
            'can stall it by up to a second; use host = "127.0.0.1" (or "::1") instead of a '
            "name.",
        )
        for host, addrs in resolved.items()
        if addrs and ":" in addrs[0]
    ]


def _measured_cells(result: Result) -> list[Cell]:
    return [
        cell
        for by_point in cells(result).values()
        for by_variant in by_point.values()
        for cell in by_variant.values()
        if cell.ok_cases
        and cell.ok_cases[0].kind not in ("idle", "command")
        and cell.requests_per_run is None  # a command client's runs: no latency per request
    ]


def spread(result: Result) -> list[str]:
    wide: list[tuple[float, str, Cell]] = []
    measured = _measured_cells(result)
    for cell in measured:
        for metric, name in (("throughput_rps", "throughput"), ("latency.mean_us", "mean latency")):
            cv = cell.cv(metric)
            if math.isfinite(cv) and cv > SPREAD_CV:
                wide.append((cv, name, cell))
                break
    if not wide:
        return []
    cv, name, worst = max(wide, key=lambda x: x[0])
    return [
        warning(
            f"{len(wide)} of {len(measured)} results vary by more than {SPREAD_CV * 100:.0f} % "
            "between repetitions",
            f"worst: {_cell_label(worst)}, {name} CV {cv * 100:.0f} %. The machine was busy or "
            "the cases too short; use more requests (or load.duration_s), more repetitions and a "
            "quiet machine.",
        )
    ]


def too_few_requests(result: Result) -> list[str]:
    top = max(PERCENTILES_SHOWN)
    need = min_requests(top)
    measured = _measured_cells(result)
    short = [(cell.hist.count, cell) for cell in measured if cell.hist.count < need]
    if not short:
        return []
    count, fewest = min(short, key=lambda x: x[0])
    return [
        warning(
            f"{len(short)} of {len(measured)} results have fewer than {need:,} requests: too few "
            f"for their p{top:g}",
            f"fewest: {_cell_label(fewest)}, {count:,}. A p{top:g} rests on at least "
            f"{MIN_TAIL_SAMPLES} samples above it; use more requests (load.requests) or "
            "repetitions.",
        )
    ]


def idle_burn(result: Result) -> list[str]:
    worst: dict[str, float] = {}
    for case in _ok_cases(result):
        pct = _finite(case.cpu.server_idle_pct)
        if pct is not None and pct > IDLE_BURN_PCT:
            worst[case.variant] = max(pct, worst.get(case.variant, 0.0))
    return [
        warning(
            f"the server of variant {variant!r} used {pct:.0f} % of a core while idle",
            "It busy-polls or runs background work that costs CPU with nobody calling; check how "
            "it waits for input (a blocking receive instead of polling).",
        )
        for variant, pct in worst.items()
    ]


def http1_connections(result: Result) -> list[str]:
    """HTTP/1.1 cases whose loops outnumbered ``load.connections``: pipelined
    (``options.pipeline = true``), or given a connection each (:mod:`rpcmeter.drivers.http`)."""
    out: list[str] = []
    for case in _ok_cases(result):
        counters = case.counters or {}
        loops, conns = counters.get("http1.loops"), counters.get("http1.connections")
        asked = counters.get("http1.connections_asked")
        if loops is None or conns is None or asked is None:
            continue
        if loops > conns:
            out.append(
                f"{_case_label(case)}: HTTP/1.1 pipelined (options.pipeline = true): {loops} "
                f"loops over {conns} connections (all clients); wrk, oha and h2load send one "
                "request at a time per connection"
            )
        elif conns > asked:
            out.append(
                f"{_case_label(case)}: {conns} connections, one per loop, where load.connections "
                f"gives {asked} (all clients): HTTP/1.1 sends one request at a time per "
                f"connection, as wrk and oha do; options.pipeline = true pipelines over {asked}"
            )
    return out


def stream_counts(result: Result) -> list[str]:
    """Streaming cases whose streams ended with another number of replies than the workload's
    ``messages`` expected (measured all the same: :mod:`rpcmeter.drivers.grpc_stream`)."""
    out: list[str] = []
    for case in _ok_cases(result):
        s = case.stream
        if s is None or not s.count_mismatch:
            continue
        mode = case.params.get("mode", "server")
        expected = 1 if mode == "client" else case.params.get("messages")
        replies = s.messages_in / s.streams if s.streams else 0.0
        out.append(
            f"{_case_label(case)}: {s.count_mismatch:,} of {s.streams:,} streams ended with "
            f"another number of replies than messages = {expected} expected ({replies:.3g} per "
            "stream on average); measured all the same (leave messages out to read whatever "
            "the server sends)"
        )
    return out


RULES: list[Rule] = [
    breakdown_mod.warnings_for,
    client_saturation,
    governor,
    placement,
    remote_memory,
    ipv6_first,
    spread,
    too_few_requests,
    idle_burn,
    http1_connections,
    stream_counts,
]


def warnings_for(result: Result) -> list[str]:
    """Every rule's warnings for ``result``, in rule order."""
    out: list[str] = []
    for rule in RULES:
        out.extend(rule(result))
    return out
