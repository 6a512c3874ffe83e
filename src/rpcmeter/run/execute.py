"""Run a suite: for each case, start its server, drive the load, stop the server, record the case.

The result document is rewritten after every case (``RunOptions.output``), so a crash or Ctrl-C
loses at most the case in flight; the run's events (:mod:`rpcmeter.run.events`) go to
``RunOptions.events``. A case whose server fails to start, dies or hangs is recorded as
failed with the reason and the tail of the server's output; the other cases still run.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from rpcmeter import model
from rpcmeter.errors import EnvError, RpcmeterError, ServerError
from rpcmeter.host import interrupts as interrupts
from rpcmeter.host import placement as placement_mod
from rpcmeter.host.build import server_cwd
from rpcmeter.host.envs import Env, in_env
from rpcmeter.metrics import resources
from rpcmeter.metrics.network_rtt import NetworkRtt, measurable
from rpcmeter.net.endpoints import Endpoint, remote_endpoint
from rpcmeter.net.tls import ClientTls, RunCertificates, ServerTls, for_case
from rpcmeter.plan.cases import Case, VariantPlan
from rpcmeter.plan.run import Prepared, plan_run, prepare
from rpcmeter.result import record as record
from rpcmeter.result.document import now_iso
from rpcmeter.result.outcome import CommandLine, Ending, RoundTrips, new_outcome
from rpcmeter.result.record import RunRecord, case_result, stage_mark
from rpcmeter.run.events import IntervalFigures, JsonWriter, RunEvents, RunListener
from rpcmeter.run.profile import CaseProfiler, profile_dir
from rpcmeter.runners import command as command_runner
from rpcmeter.runners.client_reports import PARSERS
from rpcmeter.runners.closed_loop import preload_drivers, run_closed_loop, start_forkserver
from rpcmeter.runners.command import command_line, run_command
from rpcmeter.runners.distributed import LoadCluster, open_cluster, parse_cluster, run_distributed
from rpcmeter.runners.recording import LoadInterrupted, LoadOutcome
from rpcmeter.runners.round_trip import RoundTrip
from rpcmeter.runners.spec import LoadHooks, LoadSpec
from rpcmeter.runners.stages import LoadStage
from rpcmeter.runners.windows import WindowEvent
from rpcmeter.servers.process import (
    ServerProcess,
    expand_command,
    new_endpoint,
    probe,
    stop_all,
)
from rpcmeter.suite.model import ServerSpec, Suite


@dataclass
class RunOptions:
    """How to run: where the result document goes (rewritten after every case), who listens to
    the run's events (rpcmeter.run.events), the cluster the load comes from and where a
    ``[profile]`` suite's profiles go."""

    output: Path | None = None
    events: RunEvents = field(default_factory=RunEvents)
    cluster: str | None = None  # load from a Dask cluster: "local:N" or "tcp://HOST:PORT"
    profile_dir: Path | None = None  # where a [profile] suite's profiles go (set by run_suite)


class CaseSource(Protocol):
    """The cases a run runs, one at a time. ``next`` is handed the result of the case it
    proposed last (None at first) and returns the next case, or None when there is none.
    ``planned`` is its case budget (the progress line's total), ``matrix_keys`` the matrix keys
    its cases add (the rate search's ``rate``), and ``found()`` hands over, once, the entries
    of the result's ``max_rate`` it has found since it was last asked. The run records them."""

    planned: int
    matrix_keys: tuple[str, ...]

    def next(self, last: model.Case | None) -> Case | None: ...

    def found(self) -> list[model.MaxRate]: ...


class PlannedCases:
    """The plan's cases, in order, whatever their results: a run's default source."""

    matrix_keys: tuple[str, ...] = ()

    def __init__(self, cases: Sequence[Case]) -> None:
        self.cases = iter(cases)
        self.planned = len(cases)

    def next(self, last: model.Case | None) -> Case | None:
        return next(self.cases, None)

    def found(self) -> list[model.MaxRate]:
        return []


def run_suite(
    suite: Suite,
    options: RunOptions | None = None,
    source: CaseSource | None = None,
) -> model.Result:
    """Run every case of ``suite`` and return its result (its comparisons and warnings derived
    from the cases): plan the run (:func:`rpcmeter.plan.run.plan_run`), write the result's
    header once from the plan, prepare each variant (:func:`rpcmeter.plan.run.prepare`) and
    what its clients are handed, then run the cases, recording each.

    The cases come from ``source``, handed each result (the rate search chooses each rate
    from the results before it); by default they are the plan's (:class:`PlannedCases`)."""
    options = options or RunOptions()
    # the load from a cluster's workers elsewhere: local client CPUs do not apply
    remote = bool(options.cluster and not isinstance(parse_cluster(options.cluster), int))
    plan = plan_run(suite, remote_clients=remote)
    try:
        # the header, once: the suite, the machine, the placement as applied, TLS, the budget
        source = source if source is not None else PlannedCases(plan.cases)
        total = source.planned
        run = RunRecord(record.new_result(plan, total))
        preload_drivers(dict.fromkeys(p.driver for p in plan.plans.values()))
        if not options.cluster and any(suite.driver_of(v) != "command" for v in suite.variants):
            start_forkserver()  # it imports the client code while the run prepares
    except BaseException:
        plan.close()
        raise
    if suite.profile is not None and options.profile_dir is None:
        options = replace(options, profile_dir=profile_dir(options.output, run.header.run_id))

    # the JSON file first: a run it cannot record is failed before the others record it
    events = RunEvents(*([JsonWriter(options.output)] if options.output else []), options.events)

    def note(variant: str, message: str) -> None:
        events.note(f"{variant}: {message}")

    cluster: LoadCluster | None = None
    unrecorded: RpcmeterError | None = None
    try:
        # from here on the document and the store hold the run, however it ends
        events.run_started(run.result)
        prepared = Prepared()
        try:  # what was prepared is recorded at once, however the preparation ends
            if options.cluster:
                cluster = open_cluster(options.cluster)
                prepared.cluster = cluster.describe()
            bench = Bench(
                suite,
                options,
                plan.plans,
                plan.quotas,
                cluster,
                total,
                plan.certs,
                events,
                prepared,
                uuid_seed=run.header.suite.uuid_seed,
            )
            # the environments, the servers' builds, what the clients are handed; its servers
            # asked (gRPC reflection) as the bench starts them
            prepare(plan, prepared, note, bench.ask)
        finally:
            with interrupts.deferred():
                run.prepared(prepared)

        def run_one(case: Case) -> model.Case:
            events.case_started(case, total)
            try:
                recorded = bench.run_case(case)
            except CaseInterrupted as exc:  # kept as it is, and the run ends
                with interrupts.deferred():
                    run.add_case(exc.case)
                    events.case_finished(run.result, exc.case)
                raise
            with interrupts.deferred():  # recorded, and told to every listener, or neither
                run.add_case(recorded)
                events.case_finished(run.result, recorded)
            return recorded

        for key in source.matrix_keys:
            run.matrix_key(key)
        last: model.Case | None = None
        while True:  # the source is handed each result and says what comes next
            case = source.next(last)
            for entry in source.found():
                run.max_rate(entry)
            if case is None:
                break
            last = run_one(case)
        run.set(status="complete")
    except KeyboardInterrupt:
        run.set(status="interrupted")
        raise
    except Exception as exc:  # the run ends by an error: the document and the store say so
        reason = str(exc) if isinstance(exc, RpcmeterError) else f"{exc!r}"
        run.set(status="failed", reason=reason)
        raise
    finally:
        # stopping all it started, and recording how it ended, is not cut short by a signal
        with interrupts.deferred():
            if interrupts.stopping() and run.result.status in ("running", "failed"):
                # interrupted, even where a library wrapped the KeyboardInterrupt in an error
                run.set(status="interrupted", reason=None)
            try:
                stop_all()
            finally:
                if cluster is not None:
                    cluster.close()
                plan.close()
                run.set(finished_at=now_iso())
                # every listener has the result before an error of one is raised
                final, unrecorded = events.finish(run.result)
    if unrecorded is not None:
        raise unrecorded
    return final


def suite_calls(suite: Suite, events: RunListener | None = None) -> dict[str, Mapping[str, Any]]:
    """What each variant's clients would be handed (:func:`rpcmeter.plan.run.prepare`) without
    running a case (``rpcmeter describe``): a server is started only to be asked (gRPC
    reflection), with rpcmeter's own Python (no variant environment is prepared, no server
    built) and no CPU quota."""
    plan = plan_run(suite, cgroups=False)
    listener = events or RunListener()
    prepared = Prepared()
    bench = Bench(
        suite, RunOptions(), plan.plans, certs=plan.certs, events=listener, prepared=prepared
    )

    def note(variant: str, message: str) -> None:
        listener.note(f"{variant}: {message}")

    try:
        prepare(plan, prepared, note, bench.ask, environments=False)
    finally:
        stop_all()
        plan.close()
    return prepared.calls


def server_command(
    suite: Suite,
    case: Case,
    plan: VariantPlan,
    spec: ServerSpec,
    endpoint: Endpoint,
    certs: RunCertificates | None = None,
    tls: ServerTls | None = None,
    env: Env | None = None,
) -> list[str]:
    """The server's command line; with the variant's environment ``env``, run by its
    interpreter (``{python}`` in a server command; ``{suite_dir}``: the suite file's
    directory). A command gets the run's certificates as ``{ca_file}``, ``{cert_file}``,
    ``{key_file}``; a built-in server (its driver's: ``plan.server_driver``) gets ``tls`` as its
    ``tls`` option."""
    import sys

    if spec.command is not None:
        suite_dir = Path(suite.path).resolve().parent if suite.path else Path.cwd()
        extra = {"python": env.python if env else sys.executable, "suite_dir": str(suite_dir)}
        return expand_command(
            spec.command, endpoint, {**extra, **(certs.placeholders() if certs else {})}
        )
    variant = suite.variants[case.variant]
    opts = {
        **suite.target.options,
        **variant.options,
        "seed": suite.seed,
        "workload": {"kind": case.kind, **case.params.model_dump()},
        **({"tls": tls.option()} if tls else {}),
    }
    command = plan.server_driver.server_command(endpoint, opts)
    return in_env(command, env) if env is not None else command


@dataclass(frozen=True)
class Bench:
    """What every case of one run shares: the suite and the run's options, each variant's plan
    (its driver, target kind, CPUs and TLS: :class:`rpcmeter.plan.cases.VariantPlan`), the
    run's CPU quotas, the cluster the load comes from (None: local client processes), the
    number of cases planned, the run's certificates, where its progress goes, and what was
    prepared for its variants before the first case (their environments, their servers' builds,
    what their clients are handed: :class:`rpcmeter.plan.run.Prepared`)."""

    suite: Suite
    options: RunOptions
    plans: Mapping[str, VariantPlan]
    quotas: placement_mod.CpuQuotas = field(default_factory=placement_mod.CpuQuotas)
    cluster: LoadCluster | None = None
    total: int = 1
    certs: RunCertificates | None = None  # made for the run when a variant uses TLS
    events: RunListener = field(default_factory=RunListener)  # the run's progress goes here
    prepared: Prepared = field(default_factory=Prepared)  # rpcmeter.plan.run.prepare fills it
    uuid_seed: str | None = None  # the run's, for {{uuid}} (recorded in the result's suite)

    def run_case(self, case: Case) -> model.Case:
        """Run ``case`` with the runner of its variant's target kind (:data:`RUNNERS`)."""
        return RUNNERS[self.plans[case.variant].target](self, case).run()

    def ask(self, case: Case) -> dict[str, Any]:
        """What ``case``'s variant's driver asks its server before the cases
        (:meth:`ServerCase.ask`)."""
        return ServerCase(self, case).ask()

    def progress(self, case: Case) -> Callable[[int, float], None]:
        """``progress(done, seconds)`` for ``case``: the run's progress event."""
        return lambda done, seconds: self.events.progress(case, self.total, done, seconds)

    def intervals(self, case: Case, stages: Sequence[LoadStage]) -> Callable[[WindowEvent], None]:
        """``on_window(event)`` for ``case`` (its ``stages``): the run's interval event, for
        each interval as it settles (and each late piece of one)."""

        def on_window(event: WindowEvent) -> None:
            tally, stage = event.tally, ""
            if event.stage is not None and event.stage < len(stages):
                s = stages[event.stage]
                n, of = event.stage + 1, len(stages)
                stage = f"stage {s.name} ({n} of {of})" if s.name else f"stage {n} of {of}"
            hist = tally.hist
            figures = IntervalFigures(
                index=event.index,
                start_s=event.start_s,
                seconds=event.seconds,
                stage=stage,
                ok=tally.ok,
                errors=tally.requests - tally.ok,
                p50_us=hist.percentile(50) / 1e3 if hist.count else math.nan,
                p99_us=hist.percentile(99) / 1e3 if hist.count else math.nan,
                hist=hist if hist.count else None,
                late=event.late,
                stage_index=event.stage,
            )
            self.events.interval(case, self.total, figures)

        return on_window


class CaseFailed(Exception):
    """A step found the case cannot go on: ``reason`` (and the server's last output)."""

    def __init__(self, reason: str, output_tail: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.output_tail = output_tail


class CaseInterrupted(KeyboardInterrupt):
    """Ctrl-C during a case's load: ``case`` is what it measured by then (incomplete)."""

    def __init__(self, case: model.Case) -> None:
        super().__init__()
        self.case = case


class TargetRunner:
    """Runs one case of a target kind, step by step (:meth:`steps`), filling its
    :attr:`outcome` (:class:`~rpcmeter.result.outcome.CaseOutcome`) with what it measured; a step
    that cannot go on raises :class:`CaseFailed` and the case ends as failed with its reason.
    :func:`rpcmeter.result.record.case_result` then makes the case's result from the outcome."""

    def __init__(self, bench: Bench, case: Case) -> None:
        self.bench = bench
        self.suite = bench.suite
        self.case = case
        self.plan = plan = bench.plans[case.variant]
        self.cpus = plan.cpus
        # a variant placed on its own CPUs is given no quotas
        self.quotas = placement_mod.CpuQuotas() if plan.own_cpus else bench.quotas
        self.outcome = new_outcome(case, plan.applied, self.cpus, self.quotas)

    def run(self) -> model.Case:
        try:
            self.steps(self.prepare_environment())
        except CaseFailed as exc:
            self.fail(exc.reason, exc.output_tail)
        return case_result(self.outcome)

    def note_placement(self, note: str | None) -> None:
        """A line about how the case was placed (a cgroup that could not be joined)."""
        if note:
            self.outcome = replace(self.outcome, notes=(*self.outcome.notes, note))

    def fail(self, reason: str, server_output_tail: str = "") -> None:
        self.outcome = replace(self.outcome, ending=Ending("failed", reason, server_output_tail))

    def command_of(self, line: command_runner.CommandLine) -> CommandLine:
        """What the outcome keeps of a command line this case runs."""
        return CommandLine(tuple(line.argv), line.python, self.suite.runs.warmup, line.params)

    def steps(self, env: Env | None) -> None:
        raise NotImplementedError

    def prepare_environment(self) -> Env | None:
        """The variant's prepared environment (rpcmeter.host.envs), if it has one."""
        prepared = self.bench.prepared.envs.get(self.case.variant)
        if isinstance(prepared, EnvError):
            raise CaseFailed(f"environment: {prepared}")
        return prepared


class CommandCase(TargetRunner):
    """A whole-command case: the command line is the system under test
    (:mod:`rpcmeter.runners.command`)."""

    def steps(self, env: Env | None) -> None:
        suite, server_cpus = self.suite, self.plan.applied.server
        line = command_line(suite, self.case, env, cpus=server_cpus)
        # a whole command runs on the server CPUs (or unpinned), with no server to reach
        self.outcome = replace(
            self.outcome,
            command=self.command_of(line),
            placement=model.Placement(server_cpus=list(server_cpus) if server_cpus else None),
        )
        outcome = run_command(
            line,
            suite.runs,
            server_cpus,
            self.bench.progress(self.case),
            cgroup=self.quotas.server,  # a count: the server's quota holds the whole tree
        )
        self.note_placement(outcome.placement_note)
        self.outcome = replace(self.outcome, measured="command", runs=outcome)


class ServerCase(TargetRunner):
    """A case against a server: one rpcmeter starts (and watches), or a remote target's."""

    def __init__(self, bench: Bench, case: Case) -> None:
        super().__init__(bench, case)
        self.server: ServerProcess | None = None  # None: a remote server rpcmeter does not start
        self.oom_kills: int | None = None  # OOM kills at the server's memory limit, at its start
        self.monitor: resources.TreeMonitor | None = None  # watches the server rpcmeter started
        # TLS: the client's (rpcmeter.net.tls), and the built-in server's ``tls`` option
        settings = self.plan.tls
        self.tls_client: ClientTls | None = None
        self.tls_server: ServerTls | None = None
        if settings is not None:
            managed = self.plan.address is None
            self.tls_client, self.tls_server = for_case(settings, bench.certs, managed)

    def steps(self, env: Env | None) -> None:
        endpoint = self.endpoint()
        try:
            self.start_server(endpoint, env)
            if self.case.kind == "idle":  # no load: the whole case is the quiet window
                self.record_idle()
                return
            self.measure(endpoint, env, self.idle_window())
        finally:
            self.stop()

    def measure(self, endpoint: Endpoint, env: Env | None, idle: resources.CpuTimes | None) -> None:
        """The case's load against the server at ``endpoint``, recorded with its resources."""
        load = LoadSpec.of_case(
            self.suite,
            self.case,
            endpoint,
            self.cpus.client,
            self.tls_client,
            self.bench.prepared.calls.get(self.case.variant),
            self.plan.driver.client_env,
            self.bench.uuid_seed,
        )
        network = self.network_rtt(endpoint)
        rtt = self.round_trip(load) if self.server is not None else None
        try:
            outcome = self.drive_load(load)
        except LoadInterrupted as exc:  # Ctrl-C: a staged case keeps its finished stages
            series = exc.outcome.series
            if not load.stages or series is None or not series.finished:
                raise KeyboardInterrupt from None  # nothing whole: the case is lost
            self.outcome = replace(
                self.outcome,
                measured="interrupted",
                load=exc.outcome,
                stages=tuple(load.stages),
                server=self.readings(),
            )
            raise CaseInterrupted(case_result(self.outcome)) from None
        self.outcome = replace(
            self.outcome,
            measured="load",
            load=outcome,
            stages=tuple(load.stages),
            server=self.readings(),
            idle=idle,
            remote_load=self.bench.cluster is not None and self.bench.cluster.local is None,
        )
        self.finish(outcome, rtt, network)

    def readings(self) -> resources.TreeReadings | None:
        """The resource monitor's readings of the server now, as values (None: none watched)."""
        monitor = self.monitor
        return monitor.readings(self.cpus.server, self.cpus.client) if monitor else None

    def ask(self) -> dict[str, Any]:
        """What the variant's driver asks its server before the cases
        (:meth:`~rpcmeter.drivers.base.TargetSpec.ask_server`): the server started as this case
        would start it (a remote one probed), asked, and stopped."""
        try:
            env = self.prepare_environment()
            endpoint = self.endpoint()
            try:
                self.start_server(endpoint, env)
                return self.plan.driver.ask_server(
                    self.suite, self.case.variant, endpoint, self.tls_client
                )
            finally:
                self.stop()
        except CaseFailed as exc:
            raise ServerError(
                f"variant {self.case.variant!r}: its server, asked before the cases: {exc.reason}",
                exc.output_tail,
            ) from None

    def endpoint(self) -> Endpoint:
        """Where the server listens: the variant's remote address, or a fresh port or socket."""
        variant, target = self.suite.variants[self.case.variant], self.suite.target
        transport = variant.transport or target.transport
        address = self.plan.address
        endpoint = (
            remote_endpoint(address, transport)
            if address is not None
            else new_endpoint(transport, variant.host or target.host)
        )
        self.outcome = replace(self.outcome, endpoint=endpoint.describe())
        return endpoint

    def start_server(self, endpoint: Endpoint, env: Env | None) -> None:
        """Start the case's server and watch its process tree from its start (CPU, memory); a
        remote server is only probed (its resources are unknown)."""
        suite, case = self.suite, self.case
        address = self.plan.address
        self.outcome = replace(self.outcome, server_managed=address is None)
        if address is not None:
            if not probe(endpoint, timeout=5.0):
                raise CaseFailed(f"no server answers at {endpoint.describe()} ({address})")
            return
        spec = suite.server_of(case.variant)
        build = self.bench.prepared.builds.get(case.variant)
        if build is not None and build.error is not None:
            raise CaseFailed(f"build failed: {build.error}", build.output_tail)
        self.server = ServerProcess(
            server_command(
                suite, case, self.plan, spec, endpoint, self.bench.certs, self.tls_server, env
            ),
            endpoint,
            env={**(env.activation() if env else {}), **suite.env_of(case.variant)},
            cwd=server_cwd(suite, spec),
            cpus=self.cpus.server,
            ready_timeout_s=spec.ready_timeout_s,
            stop_timeout_s=spec.stop_timeout_s,
            ready_probe=False,
            quota=self.quotas.server,
            memory=self.quotas.server_memory,
        )
        self.monitor = resources.TreeMonitor(
            self.server.tree, suite.resources.sample_interval_s, self.server.cpu_times
        )
        self.oom_kills = self.quotas.oom_kills()
        try:
            self.server.start()
            self.note_placement(self.server.cgroup_note)
            self.server.wait_ready()
        except ServerError as exc:
            oom = self.oom_reason()
            reason = f"{oom} before it was ready" if oom else str(exc)
            raise CaseFailed(reason, exc.output_tail) from None
        self.monitor.start()

    def oom_reason(self) -> str | None:
        """Why the case fails when the OOM killer killed any of the server's processes since it
        started (at its memory limit, ``placement.server_memory``); None when it did not."""
        quotas = self.quotas
        before, now = self.oom_kills, quotas.oom_kills()
        if before is None or now is None or now <= before or quotas.memory_limit is None:
            return None
        n = now - before
        return (
            f"server killed by the OOM killer ({n} process{'es' if n > 1 else ''}) at its "
            f"memory limit of {placement_mod.format_memory(quotas.memory_limit)} "
            "(placement.server_memory)"
        )

    def record_idle(self) -> None:
        """An ``idle`` case: the server's CPU over the case's window is its idle cost."""
        window = self.case.load.duration_s or self.suite.resources.idle_s or 1.0
        idle = self.monitor.idle(window) if self.monitor is not None else None
        self.outcome = replace(self.outcome, measured="idle", idle=idle, server=self.readings())

    def idle_window(self) -> resources.CpuTimes | None:
        """The server's CPU over a quiet window before the load (``resources.idle_s``)."""
        idle_s = self.suite.resources.idle_s
        return self.monitor.idle(idle_s) if self.monitor is not None and idle_s > 0 else None

    def server_problem(self) -> str | None:
        code = None if self.server is None else self.server.exit_code()
        if code is None:
            return None
        oom = self.oom_reason()
        return (
            f"{oom} during the case" if oom else f"server exited with status {code} during the case"
        )

    def run_load(self, load: LoadSpec, hooks: LoadHooks) -> LoadOutcome:
        cluster = self.bench.cluster
        return (
            run_closed_loop(load, hooks)
            if cluster is None
            else run_distributed(cluster, load, hooks)
        )

    def network_rtt(self, endpoint: Endpoint) -> NetworkRtt | None:
        """With ``breakdown`` or a remote target: the network's round trip to the server (TCP
        handshakes, :mod:`rpcmeter.metrics.network_rtt`), measured now and again after the
        case; None for a Unix socket (or when no handshake could be made: a note says why)."""
        if not measurable(endpoint) or (self.suite.breakdown is None and self.server is not None):
            return None
        network = NetworkRtt(endpoint)
        problem = network.measure("before")
        if problem:
            self.note_placement(problem)
            return None
        return network

    def round_trip(self, load: LoadSpec) -> RoundTrip | None:
        """With ``breakdown``: the round trip (noop requests, one loop) on the same server,
        measured now and again after the case (:mod:`rpcmeter.runners.round_trip`). A remote target's
        breakdown takes the network's round trip instead (:meth:`network_rtt`)."""
        if self.suite.breakdown is None:
            return None
        rtt = RoundTrip(
            lambda spec: self.run_load(spec, LoadHooks(server_problem=self.server_problem)),
            load,
            self.suite.breakdown.rtt_requests,
        )
        problem = rtt.measure("before")
        if problem:
            raise CaseFailed(problem)
        return rtt

    def drive_load(self, load: LoadSpec) -> LoadOutcome:
        """The case's load, with progress, the server watched, the clients placed in their
        cgroup and the measured interval marked for the resource monitor."""
        case, options, monitor = self.case, self.bench.options, self.monitor
        server_pid = self.server.pid if self.server is not None else None
        profiler = CaseProfiler.for_case(
            self.suite.profile, options.profile_dir, case.index, server_pid
        )

        def placed(pids: list[int]) -> None:
            self.note_placement(placement_mod.join_cgroup(self.quotas.client, pids))
            profiler.clients(pids)

        def go() -> None:  # the measured interval runs from go to end
            if monitor is not None:
                monitor.mark("go")
            profiler.start()

        def end() -> None:
            if monitor is not None:
                monitor.mark("end")
            profiler.halt()

        def stage(index: int) -> None:  # the server's CPU at each stage's start
            assert monitor is not None
            monitor.mark(stage_mark(index))

        outcome = self.run_load(
            load,
            LoadHooks(
                on_progress=self.bench.progress(case),
                on_window=self.bench.intervals(case, load.stages),
                server_problem=self.server_problem,
                on_start=placed,
                on_go=go,
                on_end=end,
                on_stage=stage if monitor is not None and load.stages else None,
            ),
        )
        if profiles := profiler.stop():
            self.outcome = replace(self.outcome, profiles=profiles)
        return outcome

    def stop(self) -> None:
        if self.monitor is not None:
            self.monitor.stop()
        if self.server is not None:
            self.server.close()

    def finish(
        self, outcome: LoadOutcome, rtt: RoundTrip | None, network: NetworkRtt | None = None
    ) -> None:
        """The network's round trip, the breakdown, and why the case failed or is incomplete.
        A remote target's breakdown takes the network's round trip as its round trip: latency =
        network round trip + queue + server compute + overhead."""
        server = self.server
        if network is not None and not outcome.failure:
            network.measure("after")  # a failure leaves the handshakes taken before only
            handshakes = RoundTrips(network.before, network.after, basis="network")
            self.outcome = replace(self.outcome, network_rtt=handshakes)
            if self.suite.breakdown is not None and server is None:
                self.outcome = replace(self.outcome, breakdown=handshakes)
        if rtt is not None and not outcome.failure:
            rtt.measure("after")  # a failure here leaves the round trip measured before only
            trips = RoundTrips(rtt.before, rtt.after, loops=rtt.loops, wait=rtt.wait)
            self.outcome = replace(self.outcome, breakdown=trips)
        if outcome.failure:
            tail = server.output_tail() if server is not None and not server.alive() else ""
            self.fail(outcome.failure, tail)
        elif oom := self.oom_reason():  # a process of the server's, not the server itself
            self.fail(oom, server.output_tail() if server is not None else "")
        elif reason := model.mostly_failed(outcome.errors, outcome.requests):
            self.fail(reason)
        elif outcome.incomplete:
            self.outcome = replace(self.outcome, ending=Ending("incomplete", outcome.incomplete))


class CommandClientCase(ServerCase):
    """A command client's case: its server started as any server case's (or the one at its
    ``address`` probed), and in place of rpcmeter's load its command's runs against that server,
    placed as rpcmeter's clients are (the client CPUs, and the clients' cgroup with a client CPU
    quota), counted in requests (:func:`rpcmeter.result.record.case_result`)."""

    def measure(self, endpoint: Endpoint, env: Env | None, idle: resources.CpuTimes | None) -> None:
        suite, case, monitor = self.suite, self.case, self.monitor
        variant = suite.variants[case.variant]
        per_run, report = variant.requests_per_run, variant.client_report
        progress = self.bench.progress(case)

        def mark(name: str) -> None:
            if monitor is not None:
                monitor.mark(name)

        scheme = self.plan.server_driver.url_scheme
        line = command_line(
            suite, case, env, endpoint, self.tls_client, scheme, cpus=self.cpus.client
        )
        self.outcome = replace(self.outcome, command=self.command_of(line))
        outcome = run_command(
            line,
            suite.runs,
            self.cpus.client,
            on_run=lambda runs, seconds: progress(runs * (per_run or 1), seconds),  # requests
            on_go=lambda: mark("go"),
            cgroup=self.quotas.client,
            report=PARSERS[report] if report is not None else None,
        )
        mark("end")
        self.note_placement(outcome.placement_note)
        self.outcome = replace(
            self.outcome,
            measured="client",
            runs=outcome,
            requests_per_run=per_run,
            client_report=report,
            server=self.readings(),
            idle=idle,
        )
        server = self.server
        oom = self.oom_reason()
        if oom is not None:
            self.fail(oom, server.output_tail() if server is not None else "")
        elif outcome.failure and server is not None and not server.alive():
            self.fail(outcome.failure, server.output_tail())


#: The case runner of each target kind (:class:`rpcmeter.plan.targets.VariantTarget`).
RUNNERS: dict[str, type[TargetRunner]] = {
    "server": ServerCase,
    "remote": ServerCase,
    "client": CommandClientCase,
    "command": CommandCase,
}
