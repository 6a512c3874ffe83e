"""The one writer of results: a case's (:func:`case_result`) and a run's (:class:`RunRecord`,
started from :func:`new_result`: the suite as run and the environment), and every conversion of
what was measured into parts of the result model (:mod:`rpcmeter.model`): placements, TLS,
connection costs, streaming figures, CPU and memory.

A case runner (:mod:`rpcmeter.run.execute`: a server or remote target; a whole command) fills
the case's :class:`~rpcmeter.result.outcome.CaseOutcome` as the case goes;
:func:`case_result`, a pure function, then turns it into the case's typed result
(:class:`rpcmeter.model.Case`), which nothing edits afterwards. Histograms go in as the objects
the load recorded; they become JSON only when the document is written.
"""

from __future__ import annotations

import math
import statistics
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from rpcmeter import model
from rpcmeter.errors import EnvError
from rpcmeter.metrics import environment, streams
from rpcmeter.metrics.histogram import Histogram
from rpcmeter.metrics.resources import (
    per_request_us,
    util_pct,
)
from rpcmeter.result.breakdown import around
from rpcmeter.result.breakdown import breakdown as breakdown_of
from rpcmeter.result.document import now_iso
from rpcmeter.result.parts import (
    case_figures,
    connections_of,
    given,
    placement_doc,
    stream_section,
    stream_with_cpu,
    tls_of,
)

if TYPE_CHECKING:
    from rpcmeter.plan.run import Prepared, RunPlan
    from rpcmeter.result.outcome import CaseOutcome
    from rpcmeter.runners.command import Outcome
    from rpcmeter.runners.recording import Interval, LoadOutcome, Series
    from rpcmeter.runners.stages import LoadStage
    from rpcmeter.runners.tree import TreeUsage
    from rpcmeter.suite.model import Suite


class CaseFields(TypedDict, total=False):
    """A case's fields as :func:`case_result` fills them: :class:`rpcmeter.model.Case`'s, typed,
    so a misspelt key or a value of the wrong type is a type error where it is written."""

    id: int
    variant: str
    workload: str
    kind: str
    point: model.Json
    params: model.Json
    repetition: int
    status: model.Status
    reason: str | None
    started_at: str | None
    endpoint: str | None
    placement: model.Placement
    server_managed: bool
    requests: int
    ok: int
    errors: dict[str, int]
    error_samples: dict[str, str]
    wall_s: float
    throughput_rps: float
    latency: model.Latency | None
    histogram: Histogram | None
    latency_uncorrected: model.Latency | None
    histogram_uncorrected: Histogram | None
    open_loop: model.OpenLoop
    stages: list[model.Stage]
    series: model.Series
    server_time: model.ServerTime | None
    bytes: model.Bytes | None
    breakdown: model.Breakdown
    network_rtt_us: model.Stats
    counters: dict[str, int]
    stream: model.Stream
    calls: list[model.CallStats]
    connections: model.Connections
    clients: list[model.Client]
    workers: list[model.Worker]
    spread: model.Spread
    cpu: model.Cpu
    memory: model.Memory
    runs: list[model.Run]
    command: model.Command
    output_tail: str
    server_output_tail: str
    profiles: dict[str, model.CaseProfile]


def case_result(outcome: CaseOutcome) -> model.Case:
    """The case's result (:class:`rpcmeter.model.Case`) from what it measured: no I/O, no live
    object read. A case is ``ok`` until what it measured, or the runner's ending, says otherwise."""
    o = outcome
    d = _Draft(o)
    d.fields["endpoint"] = o.endpoint
    if o.server_managed is not None:
        d.fields["server_managed"] = o.server_managed
    if o.profiles:
        d.fields["profiles"] = dict(o.profiles)
    if o.command is not None:
        line = o.command
        d.command(list(line.argv), line.python, line.warmup_runs, line.params)
    if o.measured == "load":
        assert o.load is not None
        d.load(o.load, o.stages)
        d.resources(o.load)
        d.stage_cpu()
    elif o.measured == "interrupted":
        assert o.load is not None
        d.interrupted(o.load, o.stages)
        d.stage_cpu()
    elif o.measured == "idle":
        d.idle()
    elif o.measured == "command":
        assert o.runs is not None
        d.runs(o.runs)
    elif o.measured == "client":
        assert o.runs is not None
        d.client_runs(o.runs, o.requests_per_run, o.client_report)
    if o.network_rtt is not None:
        d.network_rtt(o.network_rtt.before, o.network_rtt.after)
    if (b := o.breakdown) is not None and o.load is not None:
        d.breakdown(b.before, b.after, o.load, basis=b.basis, loops=b.loops, wait=b.wait)
    if (end := o.ending) is not None:
        if end.status == "failed":
            d.fail(end.reason, end.server_output_tail)
        else:
            d.incomplete(end.reason)
    return d.build()


class _Draft:
    """A case's fields as :func:`case_result` fills them from its outcome, step by step."""

    def __init__(self, outcome: CaseOutcome) -> None:
        self.outcome = outcome
        case = outcome.case
        self.fields: CaseFields = {
            "id": case.index,
            "variant": case.variant,
            "workload": case.workload,
            "kind": case.kind,
            "point": case.point_dict,
            "params": case.params_dict(),
            "repetition": case.repetition,
            "status": "ok",
            "reason": None,
            "started_at": outcome.started_at,
            "endpoint": None,
            "placement": outcome.placement,
            "requests": 0,
            "ok": 0,
            "errors": {},
            "error_samples": {},
            "wall_s": 0.0,
            "throughput_rps": 0.0,
            "latency": None,
            "histogram": None,
            "server_time": None,
            "bytes": None,
            "clients": [],
            "cpu": model.Cpu(),
            "memory": model.Memory(),
        }
        self.notes = list(outcome.notes)

    # ---- what it measured -----------------------------------------------------------------------

    def load(self, outcome: LoadOutcome, stages: Sequence[LoadStage] = ()) -> None:
        """A load's requests, errors, latencies, server times, bytes, streams, connections, its
        clients and workers, its time series and its ``stages`` measured apart."""
        f = self.fields
        f["requests"] = outcome.requests
        f["ok"] = outcome.ok
        f["errors"] = dict(sorted(outcome.errors.items()))
        f["error_samples"] = outcome.first_error
        f["wall_s"] = outcome.wall_s
        f["throughput_rps"] = outcome.ok / outcome.wall_s if outcome.wall_s > 0 else 0.0
        if outcome.hist.count:
            f["latency"] = model.Latency.of(outcome.hist)
            f["histogram"] = outcome.hist
        if outcome.schedule is not None:
            self._open_loop(outcome)
        if outcome.calls:
            f["calls"] = calls_of(outcome, f["throughput_rps"])
        if outcome.server_hist.count:
            f["server_time"] = model.ServerTime.of(outcome.server_hist)
        if outcome.counters and outcome.requests:
            out_b, in_b = outcome.counters.get("bytes_out"), outcome.counters.get("bytes_in")
            f["bytes"] = model.Bytes(
                out_per_request=out_b / outcome.requests if out_b is not None else math.nan,
                in_per_request=in_b / outcome.requests if in_b is not None else math.nan,
            )
        counters, stream = streams.split(outcome.counters)
        if stream:
            f["stream"] = stream_section(stream, outcome.ok, outcome.wall_s)
        if counters:
            f["counters"] = counters
        if outcome.connections is not None and outcome.connections.connections:
            f["connections"] = connections_of(outcome.connections)
        f["clients"] = outcome.clients
        if outcome.series is not None:
            self.series(outcome.series, stages)
        # on a cluster, per-worker figures too; CPU totals come from them (resources), so that
        # a lost worker makes the total unknown rather than short
        if outcome.workers:
            f["workers"] = list(outcome.workers)
            f["spread"] = load_spread(outcome.workers)

    def series(self, series: Series, stages: Sequence[LoadStage]) -> None:
        """The case over time (its settled intervals) and each of its ``stages`` that ran: its
        figures over its windows (full precision), complete when all of them settled."""
        f = self.fields
        clock = series.clock
        interval_s = clock.interval_ns / 1e9 if clock.interval_ns < 1 << 61 else 0.0
        f["series"] = model.Series(
            interval_s=interval_s, intervals=[interval_of(i) for i in series.intervals]
        )
        if not stages:
            return
        out: list[model.Stage] = []
        finished = set(series.finished)
        for index, stage in enumerate(stages):
            tally = series.stages.get(index)
            if tally is None or not tally.settled:
                continue  # the case stopped before it
            w, (start_rate, rate) = tally.tally, stage.rates
            is_open = stage.rate is not None
            out.append(
                model.Stage(
                    index=index,
                    name=stage.name,
                    start_s=clock.stage_starts[index] / 1e9,
                    duration_s=stage.duration_s,
                    rate=rate if is_open else None,
                    start_rate=start_rate if stage.start_rate is not None else None,
                    concurrency=stage.concurrency,
                    requests=w.requests,
                    ok=w.ok,
                    errors=dict(sorted(w.errors.items())),
                    sent=w.sent if is_open else None,
                    late=w.late if is_open else None,
                    throughput_rps=w.ok / stage.duration_s,
                    latency=model.Latency.of(w.hist) if w.hist.count else None,
                    histogram=w.hist if w.hist.count else None,
                    latency_uncorrected=(
                        model.Latency.of(w.uhist) if is_open and w.uhist.count else None
                    ),
                    client_cpu_s=tally.cpu_user_s + tally.cpu_sys_s,
                    complete=index in finished,
                )
            )
        f["stages"] = out

    def stage_cpu(self) -> None:
        """Each recorded stage's server CPU: the server tree's between the marks at its start
        and the next stage's (:func:`stage_mark`; the last stage's up to ``end``, as it takes the
        replies still in flight when the case ends), per request of the stage and as a percent of
        the CPUs the server was given over the span marked. Unknown (None) without a watched
        server, or where a mark is missing (the case stopped)."""
        stages, monitor = self.fields.get("stages"), self.outcome.server
        if not stages or monitor is None:
            return
        server_cpus = given(self.outcome.cpus, self.outcome.quotas)[0]
        out: list[model.Stage] = []
        for s in stages:
            until = stage_mark(s.index + 1)  # the case's last stage has none: its end
            until = until if until in monitor.marks or s is not stages[-1] else "end"
            cpu = monitor.between(stage_mark(s.index), until) if s.complete else None
            if cpu is None:
                out.append(s)
                continue
            out.append(
                s.model_copy(
                    update={
                        "server_cpu_s": cpu.total_s,
                        "server_us_per_request": per_request_us(cpu.total_s, s.requests),
                        "server_util_pct": util_pct(cpu.total_s, cpu.at, server_cpus),
                    }
                )
            )
        self.fields["stages"] = out

    def interrupted(self, outcome: LoadOutcome, stages: Sequence[LoadStage]) -> None:
        """Ctrl-C during the load: only the intervals settled by then, and the stages they
        make (the finished ones complete); the case is incomplete."""
        series = outcome.series
        if series is not None:
            self.series(series, stages)
            w, f = series.total.tally, self.fields
            f["requests"], f["ok"], f["errors"] = w.requests, w.ok, dict(sorted(w.errors.items()))
            if w.hist.count:
                f["latency"] = model.Latency.of(w.hist)
                f["histogram"] = w.hist
        done = [s for s in self.fields.get("stages") or () if s.complete]
        kept = f"; stages {', '.join(s.label() for s in done)} measured whole" if done else ""
        self.incomplete(f"interrupted (Ctrl-C) during the load{kept}")

    def _open_loop(self, outcome: LoadOutcome) -> None:
        """Open loop: ``latency``/``histogram`` are corrected (from the intended send time); the
        uncorrected ones and the schedule's totals go beside them."""
        assert outcome.schedule is not None
        s, f = outcome.schedule, self.fields
        f["latency_uncorrected"] = model.Latency.of(outcome.uhist) if outcome.uhist.count else None
        f["histogram_uncorrected"] = outcome.uhist if outcome.uhist.count else None
        # requests/s on the schedule's time base, as achieved_rps (first slot to last send):
        # the replies still in flight when sending ended arrive later, and that wait is latency
        # (in the percentiles), not time without requests; equal to achieved_rps when every
        # sent request came back ok
        sent = int(s["sent"])
        f["throughput_rps"] = s["achieved_rps"] * outcome.ok / sent if sent else 0.0
        f["open_loop"] = model.OpenLoop(
            offered_rps=s["offered_rps"],
            achieved_rps=s["achieved_rps"],
            scheduled=int(s["scheduled"]),
            sent=sent,
            late=int(s["late"]),
            dropped=int(s["dropped"]),
        )

    def resources(self, outcome: LoadOutcome) -> None:
        """``cpu`` and ``memory``: the server tree (no readings: a server rpcmeter does not
        watch, its figures unknown) and the load processes over the measured interval
        (``remote_load``: the clients ran on other machines, their CPUs unknown here)."""
        self._resources(
            outcome.requests,
            load_processes(outcome),
            outcome.wall_s,
            self.outcome.remote_load,
        )

    def _resources(
        self, requests: int, clients: list[model.Client], wall_s: float, remote_load: bool = False
    ) -> None:
        """``cpu`` and ``memory`` of ``requests``: the server tree over the interval the monitor
        marked (``go`` to ``end``), ``clients`` (their own CPU and memory) over theirs."""
        monitor, idle = self.outcome.server, self.outcome.idle
        server = monitor.between("go", "end") if monitor is not None else None
        server_cpus, client_cpus = given(self.outcome.cpus, self.outcome.quotas)
        cpu, memory = case_figures(
            requests=requests,
            server=server,
            server_peak_rss=monitor.peak_rss_bytes if monitor is not None else None,
            server_idle=idle,
            server_mean_rss=monitor.mean_rss_bytes if monitor is not None else None,
            server_cpus=server_cpus,
            clients=clients,
            client_cpus=None if remote_load else client_cpus,
            interval_s=server.at if server else wall_s,
        )
        busy: dict[str, float | None] = {}
        if monitor is not None:
            busy["server_cpus_busy_pct"] = monitor.server_cpus_busy_pct
        if monitor is not None and not remote_load:
            busy["client_cpus_busy_pct"] = monitor.client_cpus_busy_pct
        self.fields["cpu"], self.fields["memory"] = cpu.model_copy(update=busy), memory

    def idle(self) -> None:
        """An ``idle`` case: no requests; the server's CPU over the window is its idle cost."""
        o = self.outcome
        idle, monitor = o.idle, o.server
        self.fields["wall_s"] = idle.at if idle is not None else 0.0
        cpu, memory = case_figures(
            requests=0,
            server=idle,
            server_peak_rss=monitor.peak_rss_bytes if monitor is not None else None,
            server_idle=idle,
            server_cpus=given(o.cpus, o.quotas)[0],
            clients=None,
            client_cpus=None,
            interval_s=idle.at if idle is not None else 0.0,
        )
        self.fields["cpu"], self.fields["memory"] = cpu, memory

    def breakdown(
        self,
        before: Histogram,
        after: Histogram,
        outcome: LoadOutcome,
        basis: str = "noop",
        loops: int | None = None,
        wait: str | None = None,
    ) -> None:
        """The case's ``breakdown`` (rpcmeter.result.breakdown): its round trip before and after (no-op
        requests, rpcmeter.runners.round_trip; or TCP handshakes, ``basis`` ``"network"``), its
        load's server-reported times, and its ``loops`` per client and ``wait`` as it ran."""
        self.fields["breakdown"] = breakdown_of(
            before,
            after,
            outcome.server_hist,
            outcome.net_hist,
            outcome.queue_hist,
            basis=basis,
            loops=loops,
            wait=wait,
        )

    def network_rtt(self, before: Histogram, after: Histogram) -> None:
        """The network's round trip: TCP handshakes before and after the case
        (rpcmeter.metrics.network_rtt)."""
        self.fields["network_rtt_us"] = around(before, after)

    def command(self, argv: list[str], python: str, warmup_runs: int, params: model.Json) -> None:
        """A command's case (a whole command's or a command client's): what runs (before
        :meth:`runs` or :meth:`client_runs`)."""
        self.fields["params"] = params
        self.fields["command"] = model.Command(argv=argv, warmup_runs=warmup_runs, python=python)

    def runs(self, outcome: Outcome) -> None:
        """A whole command's measured runs: runs count as requests, their wall times as
        latency; the command's CPU and memory are the server side (rpcmeter.runners.command)."""
        ok = self._runs(outcome)
        runs = self.fields["runs"]
        f = self.fields
        f["requests"] = len(runs)
        f["ok"] = len(ok)
        f["errors"] = {"exit_status": len(runs) - len(ok)} if len(ok) < len(runs) else {}
        f["throughput_rps"] = len(runs) / outcome.elapsed_s if outcome.elapsed_s > 0 else 0.0
        hist = Histogram()
        hist.record_array([round(r.wall_s * 1e9) for r in ok])
        if hist.count:
            f["latency"] = model.Latency.of(hist)
            f["histogram"] = hist
        summary: model.Command = f["command"]
        f["cpu"] = model.Cpu(
            server_user_s=sum(r.user_s for r in ok),
            server_sys_s=sum(r.sys_s for r in ok),
            server_us_per_request=(summary.cpu_s or 0.0) * 1e6 if ok else math.nan,
        )
        f["memory"] = model.Memory(server_peak_rss_bytes=summary.max_rss_bytes)

    def client_runs(
        self,
        outcome: Outcome,
        requests_per_run: int | None,
        report: str | None = None,
    ) -> None:
        """A command client's measured runs (rpcmeter.suite.model.Suite.command_client), counted
        in requests: ``requests``/``ok`` are runs times ``requests_per_run`` (a failed run's
        requests count as failed), ``throughput_rps`` the successful requests over the
        successful runs' wall time (the command's start included), ``command.per_request_us``
        that wall time per request. The command is the one client process (its CPU over its
        successful runs); the server's CPU is the monitor's over the measured runs. No latency
        and no histogram: a run's wall time is no request's latency.

        With ``report`` (the kind of report its runs printed, read into ``outcome.reports``:
        rpcmeter.runners.client_reports), the requests, statuses, requests/s and latencies are
        the command's own, as it reported them (``command.client_report``)."""
        ok = self._runs(outcome)
        wall = sum(r.wall_s for r in ok)
        failed = len(outcome.runs) - len(ok)
        f = self.fields
        if report is not None:
            self._client_report(report, outcome)
        else:
            assert requests_per_run is not None, "checked when the suite was loaded"
            f["requests"] = len(outcome.runs) * requests_per_run
            f["ok"] = len(ok) * requests_per_run
            f["errors"] = {"exit_status": failed * requests_per_run} if failed else {}
            f["throughput_rps"] = f["ok"] / wall if wall > 0 else 0.0
            f["command"] = f["command"].updated(
                model.Command(
                    requests_per_run=requests_per_run,
                    per_request_us=wall / f["ok"] * 1e6 if f["ok"] else math.nan,
                )
            )
        command = model.Client(  # the one client process
            cpu_user_s=sum(r.user_s for r in ok),
            cpu_sys_s=sum(r.sys_s for r in ok),
            max_rss_bytes=max((r.max_rss_bytes for r in ok), default=0),
        )
        self._resources(f["ok"], [command], outcome.elapsed_s)

    def _client_report(self, kind: str, outcome: Outcome) -> None:
        """A command client's requests as its runs' reports gave them (combined)."""
        from rpcmeter.runners.client_reports import combined

        report = combined(outcome.reports)
        f = self.fields
        f["requests"], f["ok"], f["errors"] = report.requests, report.ok, dict(report.errors)
        if report.error_sample:
            f["error_samples"] = {next(iter(report.errors), "error"): report.error_sample}
        f["throughput_rps"] = report.ok / report.elapsed_s if report.elapsed_s > 0 else 0.0
        if report.hist.count:
            f["latency"] = model.Latency.of(report.hist)
            f["histogram"] = report.hist
        f["command"] = f["command"].updated(model.Command(client_report=kind))
        if (reason := model.mostly_failed(report.errors, report.requests)) and not outcome.failure:
            self.fail(reason)  # as for rpcmeter's own clients: the figures are not the system's

    def _runs(self, outcome: Outcome) -> list[model.Run]:
        """A command's runs, their means (``command``), and why it stopped if it did; the
        successful runs."""
        runs = [command_run(usage) for usage in outcome.runs]
        ok = [r for r in runs if r.exit_code == 0]
        f = self.fields
        f["wall_s"] = outcome.elapsed_s
        f["runs"] = runs
        f["command"] = f.get("command", model.Command()).updated(command_summary(ok))
        if outcome.failure:
            self.fail(outcome.failure)
            if outcome.output_tail:
                f["output_tail"] = outcome.output_tail
        return ok

    # ---- how it ended ---------------------------------------------------------------------------

    def fail(self, reason: str, server_output_tail: str = "") -> None:
        self.fields["status"] = "failed"
        self.fields["reason"] = reason
        if server_output_tail:
            self.fields["server_output_tail"] = server_output_tail

    def incomplete(self, reason: str) -> None:
        """Some clients' figures are missing (a lost worker)."""
        self.fields["status"] = "incomplete"
        self.fields["reason"] = reason

    def build(self) -> model.Case:
        """The case's result (the stream section's CPU per message from the case's CPU)."""
        f = self.fields.copy()
        if self.notes:
            f["placement"] = f["placement"].model_copy(update={"notes": list(self.notes)})
        if f.get("stream") is not None:
            f["stream"] = stream_with_cpu(f["stream"], f["cpu"])
        return model.Case.written(**f)


def interval_of(i: Interval) -> model.Interval:
    """An interval of a case's time series as the result keeps it."""
    opened = i.sent > 0 or i.late > 0
    return model.Interval(
        start_s=i.start_ns / 1e9,
        seconds=(i.end_ns - i.start_ns) / 1e9,
        stage=i.stage,
        requests=i.requests,
        ok=i.ok,
        errors=dict(sorted(i.errors.items())),
        sent=i.sent if opened else None,
        late=i.late if opened else None,
        client_cpu_s=i.cpu_s,
        **{k: v for k, v in i.summary.items() if math.isfinite(v)},
        histogram=i.histogram,
    )


def calls_of(outcome: LoadOutcome, throughput_rps: float) -> list[model.CallStats]:
    """Each call of a mix apart: its requests/s are its part of the case's (by replies ok)."""
    out = []
    for call in outcome.calls:
        out.append(
            model.CallStats(
                name=call.name,
                requests=call.requests,
                ok=call.ok,
                errors=dict(sorted(call.errors.items())),
                error_samples=call.first_error,
                share=call.requests / outcome.requests if outcome.requests else None,
                throughput_rps=throughput_rps * call.ok / outcome.ok if outcome.ok else 0.0,
                latency=model.Latency.of(call.hist) if call.hist.count else None,
                histogram=call.hist if call.hist.count else None,
            )
        )
    return out


def load_spread(workers: list[model.Worker]) -> model.Spread:
    """Whether the load was spread evenly: per-worker throughput, lowest over highest (None with
    fewer than two workers carrying load)."""
    rates = [w.throughput_rps or 0.0 for w in workers if w.status == "ok"]
    lo, hi = (min(rates), max(rates)) if rates else (0.0, 0.0)
    return model.Spread(
        workers=len(workers),
        lost=sum(1 for w in workers if w.status != "ok"),
        min_rps=lo,
        max_rps=hi,
        min_max_ratio=lo / hi if hi > 0 and len(rates) > 1 else None,
    )


def command_run(usage: TreeUsage) -> model.Run:
    """A command's measured run as the case records it (``outlived`` only when processes
    outlived it)."""
    run = model.Run(
        wall_s=usage.wall_s,
        user_s=usage.user_s,
        sys_s=usage.sys_s,
        cpu_s=usage.user_s + usage.sys_s,
        max_rss_bytes=usage.max_rss_bytes,
        exit_code=usage.exit_code,
        processes=usage.processes,
    )
    return run.model_copy(update={"outlived": usage.outlived}) if usage.outlived else run


def _mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else float("nan")


def _stdev(values: list[float]) -> float:
    return statistics.stdev(values) if len(values) > 1 else float("nan")


def command_summary(runs: list[model.Run]) -> model.Command:
    """Means over runs: the figures of a case's ``command`` block."""
    wall = [r.wall_s for r in runs]
    cpu = [r.user_s + r.sys_s for r in runs]
    mean_wall, mean_cpu = _mean(wall), _mean(cpu)
    return model.Command(
        runs=len(runs),
        wall_s=mean_wall,
        wall_stdev_s=_stdev(wall),
        user_s=_mean([r.user_s for r in runs]),
        sys_s=_mean([r.sys_s for r in runs]),
        cpu_s=mean_cpu,
        cpu_stdev_s=_stdev(cpu),
        cores=mean_cpu / mean_wall if runs and mean_wall > 0 else float("nan"),
        max_rss_bytes=max((r.max_rss_bytes for r in runs), default=0),
    )


def load_processes(outcome: LoadOutcome) -> list[model.Client]:
    """The load processes whose CPU and memory a case counts: on a cluster per worker (lost ones
    too, their figures unknown), else per client."""
    if outcome.workers:
        return [*outcome.workers]
    return outcome.clients


def stage_mark(index: int) -> str:
    """The resource monitor's mark at the start of stage ``index`` (0-based) of a case."""
    return f"stage {index}"


def _git(suite_path: str | None) -> model.Git | None:
    """The revision of the suite file's directory (None outside git)."""
    found = environment.git_revision(Path(suite_path).parent) if suite_path else None
    return model.Git.model_validate(found) if found is not None else None


def describe_suite(suite: Suite) -> model.SuiteInfo:
    """The suite as it was run: its file (text, hash, revision), targets, variants, workloads,
    matrix and load."""
    return model.SuiteInfo(
        name=suite.name,
        description=suite.description,
        path=suite.path,
        sha256=suite.source_hash,
        git=_git(suite.path),
        text=suite.source_text,
        driver=suite.target.driver,
        drivers={name: suite.driver_of(name) for name in suite.variants},
        transport=suite.target.transport,
        baseline=suite.baseline_variant,
        variants={
            name: v.model_dump(mode="json", exclude_defaults=True)
            for name, v in suite.variants.items()
        },
        workloads={
            name: {"kind": w.kind, **suite.workload_params(name).model_dump()}
            for name, w in suite.workloads.items()
        },
        matrix=suite.matrix,
        matrix_keys=list(suite.matrix),
        repeat=suite.repeat,
        seed=suite.seed,
        validate_replies=suite.validate_replies,
        load=suite.load.model_dump(),
    )


def new_result(plan: RunPlan, planned_cases: int) -> model.Result:
    """A run's result before its first case, written once from its plan: the suite and the
    environment (the machine, the packages the drivers use, the placement as applied
    (:func:`placement_doc`), each TLS variant's settings and fingerprints (:func:`tls_of`, with
    the run's certificates)) and the cases planned."""
    from rpcmeter.version import __version__

    suite, plans, certs = plan.suite, plan.plans, plan.certs
    placement = placement_doc(plans, plan.quotas)
    tls = {
        v: tls_of(p.tls, certs, p.address is None) for v, p in plans.items() if p.tls is not None
    }
    packages = tuple(dict.fromkeys(p for d in plans.values() for p in d.driver.packages))
    drivers = {v: plan.driver.packages for v, plan in plans.items()}
    described = describe_suite(suite).model_copy(update={"uuid_seed": uuid.uuid4().hex})
    env = model.Environment.model_validate(
        {
            **environment.capture(packages, __version__),  # the machine
            "placement": placement,
            **environment.capture_suite(suite, drivers),  # what the suite depends on
            **({"tls": tls} if tls else {}),
        }
    )
    return model.Result.written(
        schema_version=model.SCHEMA_VERSION,
        rpcmeter_version=__version__,
        run_id=uuid.uuid4().hex[:12],
        status="running",
        started_at=now_iso(),
        finished_at=None,
        suite=described,
        environment=env,
        planned_cases=planned_cases,
    )


class RunRecord:
    """A run's result as it grows: its header, its cases in order, what the run adds to its
    environment and how it ended. :attr:`result` is the frozen :class:`rpcmeter.model.Result`
    so far (a new one after every change; the cases are the same objects)."""

    def __init__(self, header: model.Result) -> None:
        self.header = header
        self.changes: dict[str, Any] = {}
        self.cases: list[model.Case] = []
        self._result: model.Result | None = None

    @property
    def result(self) -> model.Result:
        if self._result is None:
            self._result = self.header.model_copy(
                update={**self.changes, "cases": list(self.cases)}
            )
        return self._result

    def set(self, **fields: Any) -> None:
        """Header fields: ``status``, ``reason``, ``finished_at``, ``planned_cases``."""
        for name in fields:
            if name not in model.Result.model_fields:
                raise model.ModelError(f"Result.{name}", "the result model has no such field")
        self.changes.update(fields)
        self._result = None

    def environment(self, parts: model.Environment) -> None:
        """Add (or replace) parts of the environment: those ``parts`` was given (the cluster,
        the placement, TLS, the variants' environments and packages)."""
        self.set(environment=self.result.environment.updated(parts))

    def prepared(self, prep: Prepared) -> None:
        """What the run prepared before its first case, added to the environment at once: the
        cluster the load comes from, the variants' environments (rpcmeter.host.envs, or why each has none)
        with the versions of the packages installed there, their server builds
        (rpcmeter.host.build) and what their drivers describe of the calls (``schemas``)."""
        parts: dict[str, Any] = {}
        if prep.cluster is not None:
            parts["cluster"] = model.Cluster.model_validate(prep.cluster)
        environments = prep.envs
        if environments:
            packages = dict(self.result.environment.variant_packages or {})
            packages.update(
                {
                    name: dict(env.packages)
                    for name, env in environments.items()
                    if not isinstance(env, EnvError)
                }
            )
            parts["variant_envs"] = {
                name: model.VariantEnv(error=str(env))
                if isinstance(env, EnvError)
                else model.VariantEnv.model_validate(env.describe())
                for name, env in environments.items()
            }
            if packages:
                parts["variant_packages"] = packages
        if prep.builds:
            parts["variant_builds"] = {
                v: model.VariantBuild.model_validate(b.describe()) for v, b in prep.builds.items()
            }
        if prep.schemas:
            parts["schemas"] = {v: model.Schema.model_validate(d) for v, d in prep.schemas.items()}
        if parts:
            self.environment(model.Environment(**parts))

    def matrix_key(self, key: str) -> None:
        """A matrix key the run adds (the rate of a rate search)."""
        suite = self.result.suite
        self.set(suite=suite.model_copy(update={"matrix_keys": [*suite.matrix_keys, key]}))

    def max_rate(self, entry: model.MaxRate) -> None:
        self.set(max_rate=[*(self.result.max_rate or []), entry])

    def add_case(self, case: model.Case) -> None:
        self.cases.append(case)
        self._result = None
