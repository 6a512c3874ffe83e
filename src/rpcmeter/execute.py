"""Run a suite: for each case, start its server, drive the load, stop the server, record the case.

The result document is rewritten after every case (``RunOptions.output``), so a crash or Ctrl-C
loses at most the case in flight. A case whose server fails to start, dies or hangs is recorded as
failed with the reason and the tail of the server's output; the other cases still run.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rpcmeter import analysis
from rpcmeter import placement as placement_mod
from rpcmeter.breakdown import RoundTrip
from rpcmeter.checks import warnings_for
from rpcmeter.drivers import driver_class
from rpcmeter.endpoints import Endpoint, remote_endpoint
from rpcmeter.envs import Env, in_env, prepare_variants
from rpcmeter.errors import EnvError, RpcmeterError, ServerError
from rpcmeter.metrics import environment, resources, streams
from rpcmeter.plan import Case, expand
from rpcmeter.profile import CaseProfiler, profile_dir
from rpcmeter.rates import keeps_up
from rpcmeter.result import SCHEMA_VERSION, CaseDoc, Result, now_iso, write_json
from rpcmeter.runners.closed_loop import preload_drivers, run_closed_loop
from rpcmeter.runners.distributed import (
    LoadCluster,
    load_spread,
    open_cluster,
    run_distributed,
)
from rpcmeter.runners.recording import LoadOutcome
from rpcmeter.runners.spec import LoadHooks, LoadSpec
from rpcmeter.servers.process import (
    ServerProcess,
    expand_command,
    new_endpoint,
    probe,
    stop_all,
)
from rpcmeter.suite import ServerSpec, Suite
from rpcmeter.tls import ClientTls, RunCertificates, describe, for_case

ProgressCallback = Callable[[Case, int, int, float], None]  # case, total cases, requests, seconds
CaseCallback = Callable[[Result, CaseDoc], None]
ResultCallback = Callable[[Result], None]


@dataclass
class RunOptions:
    output: Path | None = None
    on_progress: ProgressCallback | None = None
    on_case_start: Callable[[Case, int], None] | None = None
    on_case_done: list[CaseCallback] = field(default_factory=list)
    cluster: str | None = None  # load from a Dask cluster: "local:N" or "tcp://HOST:PORT"
    on_note: Callable[[str], None] | None = None  # environment preparation, one line each
    on_start: list[ResultCallback] = field(default_factory=list)  # result created, no case yet
    on_finish: list[ResultCallback] = field(default_factory=list)  # final, also when interrupted
    profile_dir: Path | None = None  # where a [profile] suite's profiles go (set by run_suite)


def target_kind(suite: Suite, variant: str) -> str:
    """``command`` (a whole command), ``remote`` (a server rpcmeter does not start) or ``server``."""
    if suite.driver_of(variant) == "command":
        return "command"
    return "remote" if suite.address_of(variant) is not None else "server"


def variant_cpus(suite: Suite, variant: str, cpus: placement_mod.Cpus) -> placement_mod.Cpus:
    """``cpus`` (the suite's placement), or the variant's own ``placement``."""
    own = suite.variants[variant].placement
    if own is None:
        return cpus
    resolved = placement_mod.resolve(own, where=f"{suite.path or '<suite>'}: variants.{variant}")
    return placement_mod.Cpus(resolved.server, resolved.client)


def applied_cpus(suite: Suite, variant: str, cpus: placement_mod.Cpus) -> placement_mod.Cpus:
    """The placement the cases of ``variant`` really get (:func:`rpcmeter.placement.applied`)."""
    own = suite.variants[variant].placement
    explicit = (own or suite.placement).server_cpus != "auto"
    return placement_mod.applied(
        variant_cpus(suite, variant, cpus), target_kind(suite, variant), explicit
    )


def placement_doc(
    suite: Suite, cpus: placement_mod.Cpus, quotas: placement_mod.CpuQuotas | None
) -> dict[str, Any]:
    """The run's placement as applied: the first variant's, and ``by_variant`` (each variant's,
    with its ``target`` kind) when the variants' target kinds place them differently."""
    by_variant = {
        v: {"target": target_kind(suite, v), **applied_cpus(suite, v, cpus).as_dict()}
        for v in suite.variants
    }
    first = next(iter(by_variant.values()))
    doc = {**first, **(quotas.as_dict() if quotas else {})}
    if any(p != first for p in by_variant.values()):
        doc["by_variant"] = by_variant
    return doc


def new_result(
    suite: Suite,
    cpus: placement_mod.Cpus,
    packages: tuple[str, ...],
    quotas: placement_mod.CpuQuotas | None = None,
) -> Result:
    from rpcmeter import __version__

    env = environment.capture(packages, __version__)
    env["placement"] = placement_doc(suite, cpus, quotas)
    drivers = {name: driver_class(suite.driver_of(name)).packages for name in suite.variants}
    env.update(environment.capture_suite(suite, drivers))
    return {
        "schema_version": SCHEMA_VERSION,
        "rpcmeter_version": __version__,
        "run_id": uuid.uuid4().hex[:12],
        "status": "running",
        "started_at": now_iso(),
        "finished_at": None,
        "suite": describe_suite(suite),
        "environment": env,
        "cases": [],
        "warnings": [],
    }


def describe_suite(suite: Suite) -> dict[str, Any]:
    return {
        "name": suite.name,
        "description": suite.description,
        "path": suite.path,
        "sha256": suite.source_hash,
        "git": environment.git_revision(Path(suite.path).parent) if suite.path else None,
        "text": suite.source_text,
        "driver": suite.target.driver,
        "drivers": {name: suite.driver_of(name) for name in suite.variants},
        "transport": suite.target.transport,
        "baseline": suite.baseline_variant,
        "variants": {
            name: v.model_dump(exclude_defaults=True) for name, v in suite.variants.items()
        },
        "workloads": {
            name: {"kind": w.kind, **suite.workload_params(name).model_dump()}
            for name, w in suite.workloads.items()
        },
        "matrix": suite.matrix,
        "matrix_keys": list(suite.matrix),
        "repeat": suite.repeat,
        "seed": suite.seed,
        "validate": suite.validate_replies,
        "load": suite.load.model_dump(),
    }


CaseRunner = Callable[[Case], CaseDoc]  # runs one case and records it in the result
Driving = Callable[[Result, CaseRunner], None]


def run_suite(
    suite: Suite,
    options: RunOptions | None = None,
    drive: Driving | None = None,
    planned: int | None = None,
) -> Result:
    """Run every case of ``suite`` and return the result document.

    ``drive(result, run_case)``, when given, chooses the cases instead (the rate search runs
    cases whose rates depend on earlier results); ``planned`` is then its case budget."""
    options = options or RunOptions()
    drivers = list(dict.fromkeys(suite.driver_of(v) for v in suite.variants))
    preload_drivers(drivers)
    packages = tuple(dict.fromkeys(p for d in drivers for p in driver_class(d).packages))
    cpus = placement_mod.resolve(suite.placement, where=suite.path)
    quotas = placement_mod.apply_quotas(cpus, suite.resources.cgroup)
    result = new_result(suite, cpus, packages, quotas)
    if suite.profile is not None and options.profile_dir is None:
        options = replace(options, profile_dir=profile_dir(options.output, result["run_id"]))
    cases = expand(suite) if drive is None else []
    total = len(cases) if drive is None else (planned or 0)
    result["planned_cases"] = total
    cluster = open_cluster(options.cluster) if options.cluster else None
    if cluster is not None:
        result["environment"]["cluster"] = cluster.describe()
        if cluster.local is None:  # the workers are elsewhere: local client CPUs do not apply
            cpus = placement_mod.Cpus(cpus.server, None)
            result["environment"]["placement"] = placement_doc(suite, cpus, quotas)

    environments: dict[str, Env | EnvError] = {}
    certs = run_certificates(suite, result)
    bench = Bench(suite, options, cpus, quotas, cluster, environments, total, certs)

    def run_one(case: Case) -> CaseDoc:
        if options.on_case_start:
            options.on_case_start(case, total)
        doc = bench.run_case(case)
        result["cases"].append(doc)
        result["warnings"].extend(case_warnings(case, doc))
        if options.output:
            write_json(result, options.output)
        for hook in options.on_case_done:
            hook(result, doc)
        return doc

    for start_hook in options.on_start:
        start_hook(result)

    try:
        environments.update(prepare_environments(suite, result, options))
        if drive is None:
            for case in cases:
                run_one(case)
        else:
            drive(result, run_one)
        result["status"] = "complete"
    except KeyboardInterrupt:
        result["status"] = "interrupted"
        raise
    except Exception as exc:  # the run ends by an error: the document and the store say so
        result["status"] = "failed"
        result["reason"] = str(exc) if isinstance(exc, RpcmeterError) else f"{exc!r}"
        raise
    finally:
        stop_all()
        if certs is not None:
            certs.close()
        if cluster is not None:
            cluster.close()
        quotas.close()
        result["finished_at"] = now_iso()
        result["comparisons"] = analysis.compare_variants(result)
        result["warnings"] = list(dict.fromkeys([*result["warnings"], *warnings_for(result)]))
        unwritten = None
        if options.output:
            try:
                write_json(result, options.output)
            except RpcmeterError as exc:  # raised below, once the store has the result
                unwritten = exc
                if result["status"] == "complete":
                    result["status"], result["reason"] = "failed", str(exc)
        for finish_hook in options.on_finish:
            finish_hook(result)
    if unwritten is not None:
        raise unwritten
    return result


def run_certificates(suite: Suite, result: Result) -> RunCertificates | None:
    """With TLS to a server rpcmeter starts, a CA and server certificate made for the run;
    the result's ``environment.tls`` records each TLS variant's settings and fingerprints."""
    tls = {v: suite.tls_of(v) for v in suite.variants}
    managed = {v: suite.address_of(v) is None for v in suite.variants}
    certs = RunCertificates() if any(tls[v] and managed[v] for v in tls) else None
    described = {v: describe(t, certs, managed[v]) for v, t in tls.items() if t is not None}
    if described:
        result["environment"]["tls"] = described
    return certs


def prepare_environments(
    suite: Suite, result: Result, options: RunOptions
) -> dict[str, Env | EnvError]:
    """Make (or reuse) the variants' environments before any case runs (rpcmeter.envs)."""

    def note(variant: str, message: str) -> None:
        if options.on_note:
            options.on_note(f"{variant}: {message}")

    environments = prepare_variants(suite, note)
    if environments:
        result["environment"]["variant_envs"] = {
            name: {"error": str(env)} if isinstance(env, EnvError) else env.describe()
            for name, env in environments.items()
        }
        for name, env in environments.items():  # versions as installed in the variant's own env
            if isinstance(env, Env):
                result["environment"].setdefault("variant_packages", {})[name] = dict(env.packages)
    return environments


def server_command(
    suite: Suite,
    case: Case,
    spec: ServerSpec,
    endpoint: Endpoint,
    env: Env | None = None,
    certs: RunCertificates | None = None,
    tls: dict[str, Any] | None = None,
) -> list[str]:
    """The server's command line; with a variant environment, run by its interpreter
    (``{python}`` in a server command; ``{suite_dir}``: the suite file's directory). A command
    gets the run's certificates as ``{ca_file}``, ``{cert_file}``, ``{key_file}``; a built-in
    server gets ``tls`` as its ``tls`` option."""
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
        **({"tls": tls} if tls else {}),
    }
    command = driver_class(suite.driver_of(case.variant)).server_command(endpoint, opts)
    return in_env(command, env) if env is not None else command


@dataclass(frozen=True)
class Bench:
    """What every case of one run shares: the suite and the run's options, the CPUs the server and
    the clients were given (and their quotas), the cluster the load comes from (None: local
    client processes), the variants' prepared environments and the number of cases planned."""

    suite: Suite
    options: RunOptions
    cpus: placement_mod.Cpus
    quotas: placement_mod.CpuQuotas = field(default_factory=placement_mod.CpuQuotas)
    cluster: LoadCluster | None = None
    environments: Mapping[str, Env | EnvError] = field(default_factory=dict)
    total: int = 1
    certs: RunCertificates | None = None  # made for the run when a variant uses TLS

    def run_case(self, case: Case) -> CaseDoc:
        bench = self
        if self.suite.variants[case.variant].placement is not None:  # its own CPUs, no quotas
            cpus = variant_cpus(self.suite, case.variant, self.cpus)
            bench = replace(self, cpus=cpus, quotas=placement_mod.CpuQuotas())
        return CaseRun(bench, case).run()


class CaseFailed(Exception):
    """A step found the case cannot go on: ``reason`` (and the server's last output)."""

    def __init__(self, reason: str, output_tail: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.output_tail = output_tail


class CaseRun:
    """One case of a run, step by step (:meth:`run`). The case document is filled as the steps
    go; a step that cannot go on raises :class:`CaseFailed` and the case is recorded as failed
    with its reason. A command target goes to :mod:`rpcmeter.runners.command`."""

    def __init__(self, bench: Bench, case: Case) -> None:
        self.bench = bench
        self.suite = bench.suite
        self.case = case
        self.doc = case_skeleton(case, None, applied_cpus(self.suite, case.variant, bench.cpus))
        self.server: ServerProcess | None = None  # None: a remote server rpcmeter does not start
        self.monitor: resources.TreeMonitor | None = None  # watches the server rpcmeter started
        # TLS: the client's (rpcmeter.tls), and the built-in server's ``tls`` option
        settings = self.suite.tls_of(case.variant)
        managed = self.suite.address_of(case.variant) is None
        self.tls_client: ClientTls | None = None
        self.tls_server: dict[str, Any] | None = None
        if settings is not None:
            self.tls_client, self.tls_server = for_case(settings, bench.certs, managed)

    def run(self) -> CaseDoc:
        try:
            env = self.prepare_environment()
            if self.suite.driver_of(self.case.variant) == "command":
                return run_command(self.bench, self.case, env)
            endpoint = self.endpoint()
            try:
                self.start_server(endpoint, env)
                if self.case.kind == "idle":  # no load: the whole case is the quiet window
                    self.record_idle()
                    return self.doc
                idle = self.idle_window()
                load = LoadSpec.of_case(
                    self.suite, self.case, endpoint, self.bench.cpus.client, self.tls_client
                )
                rtt = self.round_trip(load)
                outcome = self.drive_load(load)
                self.collect_resources(outcome, idle)
                self.record(outcome, rtt)
            finally:
                self.stop()
        except CaseFailed as exc:
            fail(self.doc, exc.reason, exc.output_tail)
        return self.doc

    def prepare_environment(self) -> Env | None:
        """The variant's prepared environment (rpcmeter.envs), if it has one."""
        prepared = self.bench.environments.get(self.case.variant)
        if isinstance(prepared, EnvError):
            raise CaseFailed(f"environment: {prepared}")
        return prepared

    def endpoint(self) -> Endpoint:
        """Where the server listens: the variant's remote address, or a fresh port or socket."""
        variant, target = self.suite.variants[self.case.variant], self.suite.target
        transport = variant.transport or target.transport
        address = self.suite.address_of(self.case.variant)
        endpoint = (
            remote_endpoint(address, transport)
            if address is not None
            else new_endpoint(transport, variant.host or target.host)
        )
        self.doc["endpoint"] = endpoint.describe()
        return endpoint

    def start_server(self, endpoint: Endpoint, env: Env | None) -> None:
        """Start the case's server and watch its process tree from its start (CPU, memory); a
        remote server is only probed (its resources are unknown)."""
        suite, case = self.suite, self.case
        address = suite.address_of(case.variant)
        self.doc["server_managed"] = address is None
        if address is not None:
            if not probe(endpoint, timeout=5.0):
                raise CaseFailed(f"no server answers at {endpoint.describe()} ({address})")
            return
        spec = suite.server_of(case.variant)
        self.server = ServerProcess(
            server_command(suite, case, spec, endpoint, env, self.bench.certs, self.tls_server),
            endpoint,
            env={**(env.activation() if env else {}), **suite.env_of(case.variant)},
            cwd=spec.cwd,
            cpus=self.bench.cpus.server,
            ready_timeout_s=spec.ready_timeout_s,
            stop_timeout_s=spec.stop_timeout_s,
            ready_probe=False,
            quota=self.bench.quotas.server,
        )
        self.monitor = resources.TreeMonitor(self.server.tree, suite.resources.sample_interval_s)
        try:
            self.server.start()
            note_placement(self.doc, self.server.cgroup_note)
            self.server.wait_ready()
        except ServerError as exc:
            raise CaseFailed(str(exc), exc.output_tail) from None
        self.monitor.start()

    def record_idle(self) -> None:
        """An ``idle`` case: the server's CPU over the case's window is its idle cost."""
        window = self.case.load.duration_s or self.suite.resources.idle_s or 1.0
        record_idle_case(self.doc, window, self.monitor, self.bench.cpus, self.bench.quotas)

    def idle_window(self) -> resources.CpuTimes | None:
        """The server's CPU over a quiet window before the load (``resources.idle_s``)."""
        idle_s = self.suite.resources.idle_s
        return self.monitor.idle(idle_s) if self.monitor is not None and idle_s > 0 else None

    def server_problem(self) -> str | None:
        code = None if self.server is None else self.server.exit_code()
        return None if code is None else f"server exited with status {code} during the case"

    def run_load(self, load: LoadSpec, hooks: LoadHooks) -> LoadOutcome:
        cluster = self.bench.cluster
        return (
            run_closed_loop(load, hooks)
            if cluster is None
            else run_distributed(cluster, load, hooks)
        )

    def round_trip(self, load: LoadSpec) -> RoundTrip | None:
        """With ``breakdown``: the round trip (noop requests, one loop) on the same server,
        measured now and again after the case (:mod:`rpcmeter.breakdown`)."""
        if self.suite.breakdown is None:
            return None
        rtt = RoundTrip(
            lambda spec: self.run_load(spec, LoadHooks(server_problem=self.server_problem)),
            load.round_trip(self.suite.breakdown.rtt_requests),
        )
        problem = rtt.measure("before")
        if problem:
            raise CaseFailed(problem)
        return rtt

    def drive_load(self, load: LoadSpec) -> LoadOutcome:
        """The case's load, with progress, the server watched, the clients placed in their
        cgroup and the measured interval marked for the resource monitor."""
        case, options, monitor = self.case, self.bench.options, self.monitor

        def progress(done: int, seconds: float) -> None:
            if options.on_progress:
                options.on_progress(case, self.bench.total, done, seconds)

        server_pid = self.server.pid if self.server is not None else None
        profiler = CaseProfiler.for_case(
            self.suite.profile, options.profile_dir, case.index, server_pid
        )

        def placed(pids: list[int]) -> None:
            note_placement(self.doc, placement_mod.join_cgroup(self.bench.quotas.client, pids))
            profiler.clients(pids)

        def go() -> None:  # the measured interval runs from go to end
            if monitor is not None:
                monitor.mark("go")
            profiler.start()

        def end() -> None:
            if monitor is not None:
                monitor.mark("end")
            profiler.halt()

        outcome = self.run_load(
            load,
            LoadHooks(
                on_progress=progress,
                server_problem=self.server_problem,
                on_start=placed,
                on_go=go,
                on_end=end,
            ),
        )
        if profiles := profiler.stop():
            self.doc["profiles"] = profiles
        return outcome

    def collect_resources(self, outcome: LoadOutcome, idle: resources.CpuTimes | None) -> None:
        fill(self.doc, outcome)
        record_resources(
            self.doc,
            outcome,
            self.monitor,
            idle,
            self.bench.cpus,
            self.bench.quotas,
            self.bench.cluster,
        )

    def stop(self) -> None:
        if self.monitor is not None:
            self.monitor.stop()
        if self.server is not None:
            self.server.close()

    def record(self, outcome: LoadOutcome, rtt: RoundTrip | None) -> None:
        """The breakdown, and why the case failed or is incomplete."""
        doc, server = self.doc, self.server
        if rtt is not None and not outcome.failure:
            rtt.measure("after")  # a failure here leaves the round trip measured before only
            doc["breakdown"] = rtt.breakdown(outcome)
        if outcome.failure:
            tail = server.output_tail() if server is not None and not server.alive() else ""
            fail(doc, outcome.failure, tail)
        elif mostly_failed(doc):
            fail(doc, errors_reason(doc))
        elif outcome.incomplete:
            doc["status"] = "incomplete"
            doc["reason"] = outcome.incomplete


def note_placement(doc: CaseDoc, note: str | None) -> None:
    if note:
        doc["placement"].setdefault("notes", []).append(note)


def _given(cpus: placement_mod.Cpus, quotas: placement_mod.CpuQuotas) -> tuple[float, float]:
    """CPUs the server and the clients were given (quota where applied, else affinity)."""
    return (
        placement_mod.cpus_given(cpus.server, quotas.server.cpus if quotas.server else None),
        placement_mod.cpus_given(cpus.client, quotas.client.cpus if quotas.client else None),
    )


def record_resources(
    doc: CaseDoc,
    outcome: LoadOutcome,
    monitor: resources.TreeMonitor | None,
    idle: resources.CpuTimes | None,
    cpus: placement_mod.Cpus,
    quotas: placement_mod.CpuQuotas,
    cluster: LoadCluster | None = None,
) -> None:
    """The case's ``cpu`` and ``memory``: server tree and load processes over the measured
    interval (``monitor`` None: a server rpcmeter does not watch, its figures unknown)."""
    server = monitor.between("go", "end") if monitor is not None else None
    server_cpus, client_cpus = _given(cpus, quotas)
    remote_load = cluster is not None and cluster.local is None
    doc["cpu"], doc["memory"] = resources.case_figures(
        requests=outcome.requests,
        server=server,
        server_peak_rss=monitor.peak_rss_bytes() if monitor is not None else None,
        server_idle=idle,
        server_cpus=server_cpus,
        clients=outcome.workers or outcome.clients,  # on a cluster: per worker, lost ones too
        client_cpus=None if remote_load else client_cpus,
        interval_s=server.at if server else outcome.wall_s,
    )
    if monitor is not None:
        doc["cpu"]["server_cpus_busy_pct"] = monitor.busy_between("go", "end", cpus.server)
    if monitor is not None and not remote_load:
        doc["cpu"]["client_cpus_busy_pct"] = monitor.busy_between("go", "end", cpus.client)
    streams.add_cpu(doc)


def record_idle_case(
    doc: CaseDoc,
    window_s: float,
    monitor: resources.TreeMonitor | None,
    cpus: placement_mod.Cpus,
    quotas: placement_mod.CpuQuotas,
) -> None:
    """An ``idle`` case: no requests; the server's CPU over the window is its idle cost."""
    idle = monitor.idle(window_s) if monitor is not None else None
    doc["wall_s"] = idle.at if idle is not None else 0.0
    doc["cpu"], doc["memory"] = resources.case_figures(
        requests=0,
        server=idle,
        server_peak_rss=monitor.peak_rss_bytes() if monitor is not None else None,
        server_idle=idle,
        server_cpus=_given(cpus, quotas)[0],
        clients=None,
        client_cpus=None,
        interval_s=idle.at if idle is not None else 0.0,
    )


def error_rate(doc: CaseDoc) -> float:
    """The fraction of a case's requests that failed (1 for a failed case that made none)."""
    requests = doc.get("requests") or 0
    if not requests:
        return 1.0 if doc["status"] == "failed" else 0.0
    return float(sum(doc.get("errors", {}).values())) / requests


def mostly_failed(doc: CaseDoc) -> bool:
    """True when more than half of a case's requests failed: its figures are not the system's."""
    return bool(doc.get("requests")) and error_rate(doc) > 0.5


def errors_reason(doc: CaseDoc) -> str:
    """``"38 of 40 requests failed (http_500: 38)"``."""
    errors = doc.get("errors", {})
    kinds = ", ".join(f"{k}: {n:,}" for k, n in sorted(errors.items(), key=lambda kv: -kv[1]))
    return f"{sum(errors.values()):,} of {doc['requests']:,} requests failed ({kinds})"


def case_warnings(case: Case, doc: CaseDoc) -> list[str]:
    """Warnings about a finished case (most of its requests failed; an open loop that did not
    reach its rate)."""
    if doc["status"] == "failed" and doc.get("requests") and mostly_failed(doc):
        return [f"{case.label()}: {errors_reason(doc)}"]
    ol = doc.get("open_loop")
    if not ol or doc["status"] != "ok":
        return []
    if keeps_up(ol["offered_rps"], ol["achieved_rps"], ol["dropped"], ol["scheduled"]):
        return []
    return [
        f"{case.label()}: target rate not reached: {ol['achieved_rps']:,.0f} of "
        f"{ol['offered_rps']:,.0f} req/s offered "
        f"({ol['achieved_rps'] / ol['offered_rps']:.1%}); {ol['late']:,} late, "
        f"{ol['dropped']:,} dropped"
    ]


def run_command(bench: Bench, case: Case, env: Env | None) -> CaseDoc:
    """A whole-command case (driver ``command``): rpcmeter.runners.command."""
    from rpcmeter.runners.command import run_command_case

    def progress(done: int, seconds: float) -> None:
        if bench.options.on_progress:
            bench.options.on_progress(case, bench.total, done, seconds)

    return run_command_case(
        bench.suite,
        case,
        case_skeleton(case, None, bench.cpus),
        applied_cpus(bench.suite, case.variant, bench.cpus).server,
        env,
        progress,
    )


def case_skeleton(case: Case, endpoint: Endpoint | None, cpus: placement_mod.Cpus) -> CaseDoc:
    return {
        "id": case.index,
        "variant": case.variant,
        "workload": case.workload,
        "kind": case.kind,
        "point": case.point_dict,
        "params": case.params_dict(),
        "repetition": case.repetition,
        "status": "ok",
        "reason": None,
        "started_at": now_iso(),
        "endpoint": endpoint.describe() if endpoint else None,
        "placement": cpus.as_dict(),
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
        "cpu": {},
        "memory": {},
    }


def fail(doc: CaseDoc, reason: str, output_tail: str = "") -> CaseDoc:
    doc["status"] = "failed"
    doc["reason"] = reason
    if output_tail:
        doc["server_output_tail"] = output_tail
    return doc


def fill(doc: CaseDoc, outcome: LoadOutcome) -> None:
    """Copy a load outcome into the case document."""
    doc["requests"] = outcome.requests
    doc["ok"] = outcome.ok
    doc["errors"] = dict(sorted(outcome.errors.items()))
    doc["error_samples"] = outcome.first_error
    doc["wall_s"] = outcome.wall_s
    doc["throughput_rps"] = outcome.ok / outcome.wall_s if outcome.wall_s > 0 else 0.0
    if outcome.hist.count:
        doc["latency"] = outcome.hist.summary_us()
        doc["histogram"] = outcome.hist.to_dict()
    if outcome.schedule is not None:
        fill_open_loop(doc, outcome)
    if outcome.server_hist.count:
        doc["server_time"] = {
            **outcome.server_hist.summary_us(),
            "histogram": outcome.server_hist.to_dict(),
        }
    if outcome.counters and outcome.requests:
        out_b, in_b = outcome.counters.get("bytes_out"), outcome.counters.get("bytes_in")
        doc["bytes"] = {
            "out_per_request": out_b / outcome.requests if out_b is not None else math.nan,
            "in_per_request": in_b / outcome.requests if in_b is not None else math.nan,
        }
    counters, stream = streams.split(outcome.counters)
    if stream:
        doc["stream"] = streams.section(stream, outcome.ok, outcome.wall_s)
    if counters:
        doc["counters"] = counters
    if outcome.connections is not None and outcome.connections.connections:
        doc["connections"] = outcome.connections.document()
    doc["clients"] = outcome.clients
    # on a cluster, per-worker figures too; CPU totals come from them, so that a lost worker
    # makes the total unknown rather than short
    if outcome.workers:
        doc["workers"] = outcome.workers
        doc["spread"] = load_spread(outcome.workers)
    # client figures only here; CaseRun.collect_resources adds the server's (see record_resources)
    doc["cpu"], doc["memory"] = resources.case_figures(
        requests=outcome.requests,
        server=None,
        server_peak_rss=None,
        server_idle=None,
        server_cpus=0.0,
        clients=outcome.workers or outcome.clients,
        client_cpus=None,
        interval_s=outcome.wall_s,
    )


def fill_open_loop(doc: CaseDoc, outcome: LoadOutcome) -> None:
    """Open loop: ``latency``/``histogram`` are corrected (from the intended send time); the
    uncorrected ones and the schedule's totals are added beside them."""
    assert outcome.schedule is not None
    s = outcome.schedule
    doc["latency_uncorrected"] = outcome.uhist.summary_us() if outcome.uhist.count else None
    doc["histogram_uncorrected"] = outcome.uhist.to_dict() if outcome.uhist.count else None
    # requests/s on the schedule's time base, as achieved_rps (first slot to last send): the
    # replies still in flight when sending ended arrive later, and that wait is latency (in the
    # percentiles), not time without requests; equal to achieved_rps when every sent request
    # came back ok
    sent = int(s["sent"])
    doc["throughput_rps"] = s["achieved_rps"] * outcome.ok / sent if sent else 0.0
    doc["open_loop"] = {
        "offered_rps": s["offered_rps"],
        "achieved_rps": s["achieved_rps"],
        "scheduled": int(s["scheduled"]),
        "sent": int(s["sent"]),
        "late": int(s["late"]),
        "dropped": int(s["dropped"]),
    }
