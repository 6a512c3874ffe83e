"""The typed result model: what a run measured, as frozen pydantic models.

The result document (:mod:`rpcmeter.result.document` describes its JSON) is read into these models at the
JSON boundary (:meth:`Result.from_json`) and written from them (:meth:`Result.to_json`); in
between, histograms are :class:`~rpcmeter.metrics.histogram.Histogram` objects and every section
has its own type. Documents of every earlier ``schema_version`` are brought to the current one
first (:data:`MIGRATIONS`).

What a document holds is kept exactly: a key that was absent stays absent, a ``null`` stays
``null`` (the dump leaves out only the fields that were never given), so a document read and
written again is the same document. Keys this model does not name (a newer minor addition, a
driver's own figure) are kept too, typed as JSON values. Open-ended parts (a case's ``params``
and ``point``, the environment's extras, the suite's variants) are JSON values, never ``Any``.

This module is the bottom contract: types, validation and schema migrations, importing nothing
of rpcmeter but :mod:`rpcmeter.metrics.histogram`. What is derived from a result (comparisons,
warnings) is computed above it, by :mod:`rpcmeter.analysis.derived`; documents that stored those still
load (what they stored is not read back). What a run measured becomes these parts in one place,
:mod:`rpcmeter.result.record`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Annotated, Any, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    PlainSerializer,
    PlainValidator,
    ValidationError,
)

from rpcmeter.metrics.histogram import Histogram

# 2: ``breakdown`` has queue_us, percentiles, the overhead's interval, a one-loop round trip
# measured before and after the case; a version 1 breakdown is read as it is
SCHEMA_VERSION = 2

Json = dict[str, JsonValue]  # a JSON object, as it crosses into and out of the model


class ModelError(ValueError):
    """A document that does not fit the model: ``where`` (a dotted path) and why."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}" if where else message)
        self.where = where


def _histogram(value: object) -> Histogram:
    if isinstance(value, Histogram):
        return value
    if not isinstance(value, dict):
        raise ValueError(f"a histogram is a table (got {type(value).__name__})")
    return Histogram.from_dict(value)


HistogramField = Annotated[
    Histogram,
    PlainValidator(_histogram),
    PlainSerializer(lambda h: h.to_dict(), return_type=dict[str, JsonValue]),
]


class Part(BaseModel):
    """A section of the document: frozen; keys the model does not name kept as JSON values."""

    model_config = ConfigDict(
        frozen=True, extra="allow", arbitrary_types_allowed=True, populate_by_name=True
    )
    __pydantic_extra__: dict[str, JsonValue]

    def dump(self) -> Json:
        """The JSON object of this part: the fields it was given, in the model's order."""
        return clean(self.model_dump(mode="python", exclude_unset=True, by_alias=True))  # type: ignore[no-any-return]

    def updated(self, other: Part) -> Self:
        """A copy with the fields ``other`` was given (a part of the same kind, or of one whose
        fields this one also has) set to its values."""
        return self.model_copy(update={k: getattr(other, k) for k in other.model_fields_set})

    @classmethod
    def written(cls, **fields: Any) -> Self:
        """The part rpcmeter writes: like ``cls(**fields)``, but a key the model does not name,
        here or in a part given as a value, is an error (a misspelt field), where a document read
        from disk keeps such keys (:meth:`Result.from_json`)."""
        part = cls(**fields)
        unknown = unknown_keys(part, cls.__name__)
        if unknown:
            raise ModelError(unknown[0], "the result model has no such field")
        return part


def unknown_keys(value: object, where: str) -> list[str]:
    """The dotted paths of the keys no model names, in ``value`` and the parts it holds."""
    if isinstance(value, Part):
        found = [f"{where}.{k}" for k in value.model_extra or {}]
        for name in type(value).model_fields:
            found += unknown_keys(getattr(value, name), f"{where}.{name}")
        return found
    if isinstance(value, list | tuple):
        return [k for i, v in enumerate(value) for k in unknown_keys(v, f"{where}[{i}]")]
    if isinstance(value, dict):
        return [k for n, v in value.items() for k in unknown_keys(v, f"{where}.{n}")]
    return []


def clean(value: Any) -> Any:
    """NaN and infinities become null (JSON has no such numbers)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean(v) for v in value]
    return value


# ---- a case's parts ------------------------------------------------------------------------------


class Latency(Part):
    """A latency summary in microseconds (``Histogram.summary_us``)."""

    mean_us: float | None = None
    stdev_us: float | None = None
    min_us: float | None = None
    p50_us: float | None = None
    p90_us: float | None = None
    p95_us: float | None = None
    p99_us: float | None = None
    p999_us: float | None = None
    max_us: float | None = None

    @classmethod
    def of(cls, h: Histogram) -> Latency:
        return cls(**h.summary_us())


class Timing(Latency):
    """A latency summary in microseconds and its histogram."""

    histogram: HistogramField | None = None

    @classmethod
    def of(cls, h: Histogram) -> Self:
        return cls(**h.summary_us(), histogram=h)


class ServerTime(Timing):
    """The server-reported compute time: a latency summary and its histogram."""


class Bytes(Part):
    out_per_request: float | None = None
    in_per_request: float | None = None


class Stats(Part):
    """One part of a breakdown (microseconds)."""

    mean: float | None = None
    stdev: float | None = None
    p50: float | None = None
    p99: float | None = None
    count: int | None = None
    before: float | None = None  # the round trip's median before the case
    after: float | None = None
    ci95: list[float | None] | None = None
    within_noise: bool | None = None


class Breakdown(Part):
    """Latency split into round trip, queue, server compute and overhead (rpcmeter.result.breakdown)."""

    rtt_us: Stats | None = None
    queue_us: Stats | None = None
    server_us: Stats | None = None
    overhead_us: Stats | None = None
    rtt_requests: int | None = None
    rtt_loops: int | None = None
    # what rtt_us is: "noop" (no-op requests; None in older documents) or "network" (TCP
    # handshakes: a remote target's, rpcmeter.metrics.network_rtt)
    rtt_basis: str | None = None
    loops: int | None = None  # the case's concurrent loops per client process
    wait: str | None = None  # how the case's clients (and the round trip's) waited: load.wait


class Cpu(Part):
    """CPU over the measured interval (server figures None: unknown; rpcmeter.metrics.resources)."""

    interval_s: float | None = None
    server_user_s: float | None = None
    server_sys_s: float | None = None
    client_user_s: float | None = None
    client_sys_s: float | None = None
    server_us_per_request: float | None = None
    client_us_per_request: float | None = None
    server_util_pct: float | None = None
    client_util_pct: float | None = None
    server_cpus_given: float | None = None
    client_cpus_given: float | None = None
    server_idle_pct: float | None = None
    server_idle_window_s: float | None = None
    server_cpus_busy_pct: float | None = None
    client_cpus_busy_pct: float | None = None
    # where the server figures came from: its cgroup's CPU accounting, or the sum over its process
    # tree (None: no server figures, or a document from before this field)
    server_source: Literal["cgroup", "processes"] | None = None


class Memory(Part):
    server_peak_rss_bytes: int | None = None
    client_peak_rss_bytes: int | None = None
    # the mean of the server tree's resident set over the samples of the measured interval
    server_mean_rss_bytes: int | None = None


class OpenLoop(Part):
    offered_rps: float | None = None
    achieved_rps: float | None = None
    scheduled: int = 0
    sent: int = 0
    late: int = 0
    dropped: int = 0


class Stage(Part):
    """One stage of a staged case (``[[load.stages]]``), measured apart: when it ran (seconds
    from the case's start), the load it asked for (an open loop's ``rate``, from
    ``start_rate`` when it ramps; a closed loop's ``concurrency``), its requests, errors,
    requests/s over its duration, latency (corrected, for an open loop) and histogram, the
    clients' CPU seconds in it, the server's CPU over it (seconds, microseconds per request of
    the stage, and percent of the CPUs it was given; None: a server rpcmeter does not watch, or
    a stage it could not mark) and ``complete`` (False: the case stopped during it)."""

    index: int
    name: str
    start_s: float
    duration_s: float
    rate: float | None = None
    start_rate: float | None = None
    concurrency: int | None = None
    requests: int = 0
    ok: int = 0
    errors: dict[str, int] = {}
    sent: int | None = None  # open loop: requests sent in the stage
    late: int | None = None  # open loop: of those, sent late
    throughput_rps: float | None = None
    latency: Latency | None = None
    histogram: HistogramField | None = None
    latency_uncorrected: Latency | None = None
    client_cpu_s: float | None = None
    server_cpu_s: float | None = None
    server_us_per_request: float | None = None
    server_util_pct: float | None = None
    complete: bool = True

    def label(self) -> str:
        """Its name, else its number (1-based)."""
        return self.name or str(self.index + 1)

    def load(self, short: bool = False) -> str:
        """The load it asked for, in words: ``5000/s``, ``1000->5000/s`` (requests/s), ``10
        loops``; ``short``: rates of thousands in k (``1k->20k/s``, ``2.5k/s``)."""
        if self.concurrency is not None:
            return f"{self.concurrency} loop{'s' if self.concurrency != 1 else ''}"

        def fmt(value: float | None) -> str:
            if short and value is not None and value >= 1000 and value % 100 == 0:
                return f"{value / 1000:g}k"
            return f"{value:g}"

        rate = f"{fmt(self.rate)}/s"
        if self.start_rate is not None and self.start_rate != self.rate:
            return f"{fmt(self.start_rate)}->{rate}"
        return rate


class Interval(Part):
    """One interval of a case's time series: from ``start_s`` (seconds from the case's start)
    for ``seconds``, in stage ``stage`` (None: no stages), its requests, errors (by kind),
    open-loop sends, the clients' CPU seconds, its latency summary (microseconds) and its
    histogram, coarsened (fewer sub-buckets: a bucket spans about 3 % of its value)."""

    start_s: float
    seconds: float
    stage: int | None = None
    requests: int = 0
    ok: int = 0
    errors: dict[str, int] = {}
    sent: int | None = None
    late: int | None = None
    client_cpu_s: float | None = None
    mean_us: float | None = None
    p50_us: float | None = None
    p90_us: float | None = None
    p99_us: float | None = None
    p999_us: float | None = None
    max_us: float | None = None
    histogram: Json | None = None  # kept encoded (compact): decoded() to read it

    def decoded(self) -> Histogram:
        """Its histogram (empty when it had no replies)."""
        return Histogram.from_dict(self.histogram) if self.histogram else Histogram()

    @property
    def throughput_rps(self) -> float:
        """Replies ok per second of the interval."""
        return self.ok / self.seconds if self.seconds > 0 else 0.0


class Series(Part):
    """A case over time: intervals of ``interval_s`` seconds (each stage starts one of its own,
    so a stage's last may be shorter; adjacent ones merged pairwise beyond a few thousand, so
    a long case's series stays small)."""

    interval_s: float
    intervals: list[Interval] = []


class StreamCpu(Part):
    client: float | None = None
    server: float | None = None


class Stream(Part):
    """A streaming case's per-message figures (rpcmeter.metrics.streams)."""

    streams: int = 0
    messages: int = 0
    messages_out: int = 0
    messages_in: int = 0
    streams_per_s: float | None = None
    messages_per_s: float | None = None
    messages_per_stream: float | None = None
    # streams that ended with another number of replies than the workload's messages said
    # (measured all the same: a stream is read until the server ends it)
    count_mismatch: int = 0
    bytes_out_per_message: float | None = None
    bytes_in_per_message: float | None = None
    first_message: Latency | None = None
    first_message_histogram: HistogramField | None = None
    message: Latency | None = None
    message_histogram: HistogramField | None = None
    cpu_us_per_message: StreamCpu | None = None


class Connections(Part):
    """Connections opened and what they cost (rpcmeter.metrics.connections): per part (TCP
    connect, TLS handshake, resumed handshake, and the request on a connection of its own) its
    times; a part nothing was recorded for is absent."""

    per_request: bool | None = None
    opened: int | None = None
    connect: Timing | None = None
    handshake: Timing | None = None
    handshake_resumed: Timing | None = None
    request: Timing | None = None

    def timing(self, part: str) -> Timing | None:
        """The times of ``part`` (``connect``, ``handshake``, ``handshake_resumed``,
        ``request``); None when the case has none."""
        parts = {
            "connect": self.connect,
            "handshake": self.handshake,
            "handshake_resumed": self.handshake_resumed,
            "request": self.request,
        }
        return parts.get(part)


class CallStats(Part):
    """One call of a mix (``kind = "mix"``): its requests, errors, share of the case's
    requests, requests/s and latency, merged exactly over clients and workers."""

    name: str = ""
    requests: int = 0
    ok: int = 0
    errors: dict[str, int] = {}
    error_samples: dict[str, str] = {}
    share: float | None = None  # of the case's requests
    throughput_rps: float | None = None
    latency: Latency | None = None
    histogram: HistogramField | None = None

    def latency_histogram(self) -> Histogram:
        return self.histogram if self.histogram is not None else Histogram()


class Client(Part):
    """One load process: its requests and its own CPU and memory."""

    client: int | None = None
    worker: str | None = None  # the Dask worker that ran it (cluster runs)
    pid: int | None = None
    requests: int | None = None
    errors: int | None = None
    throughput_rps: float | None = None
    cpu_user_s: float | None = None
    cpu_sys_s: float | None = None
    max_rss_bytes: int | None = None


class Worker(Client):
    """One Dask worker of a cluster run (sums over its clients; ``worker_*`` its own process)."""

    host: str | None = None
    status: str | None = None
    reason: str | None = None
    clients: list[int] | None = None
    ok: int | None = None
    wall_s: float | None = None
    worker_cpu_user_s: float | None = None
    worker_cpu_sys_s: float | None = None
    worker_max_rss_bytes: int | None = None
    latency: Latency | None = None
    histogram: HistogramField | None = None


class Spread(Part):
    workers: int | None = None
    lost: int | None = None
    min_rps: float | None = None
    max_rps: float | None = None
    min_max_ratio: float | None = None


class Cgroup(Part):
    """A cgroup a side of the run was placed in (its CPU quota, its memory limit in bytes; None:
    no such limit)."""

    path: str | None = None
    version: int | None = None
    cpus: float | None = None
    memory_bytes: int | None = None


class Placement(Part):
    """CPUs as applied: a case's, or the run's (with its target kind, quotas and cgroups, and
    each variant's where the variants are placed differently)."""

    target: str | None = None
    server_cpus: list[int] | None = None
    client_cpus: list[int] | None = None
    server_quota_cpus: float | None = None
    client_quota_cpus: float | None = None
    server_memory_bytes: int | None = None  # the server's memory limit, as asked for
    notes: list[str] | None = None
    server_cgroup: Cgroup | None = None
    client_cgroup: Cgroup | None = None
    server_memory_cgroup: Cgroup | None = None  # the memory limit's, where not server_cgroup
    cgroup_notes: list[str] | None = None
    by_variant: dict[str, Placement] | None = None


class Run(Part):
    """One run of a whole command."""

    wall_s: float = 0.0
    user_s: float = 0.0
    sys_s: float = 0.0
    cpu_s: float = 0.0
    max_rss_bytes: int = 0
    exit_code: int | None = None
    processes: int | None = None
    outlived: JsonValue = None


class Command(Part):
    """A whole-command case: the command and the means over its runs."""

    argv: list[str] | None = None
    python: str | None = None
    warmup_runs: int | None = None
    runs: int | None = None
    wall_s: float | None = None
    wall_stdev_s: float | None = None
    user_s: float | None = None
    sys_s: float | None = None
    cpu_s: float | None = None
    cpu_stdev_s: float | None = None
    cores: float | None = None
    max_rss_bytes: int | None = None
    # a command client's (a command run against the suite's server): the requests one run
    # makes, and the successful runs' wall time per request
    requests_per_run: int | None = None
    per_request_us: float | None = None
    # a command client whose own report gave its requests and latencies (``"ghz"``)
    client_report: str | None = None


class TopFrame(Part):
    """A frame of a profile with samples of its own (self time)."""

    frame: str = ""
    self_samples: int = 0
    self_pct: float = 0.0
    source: str | None = None  # the line of source it names, when readable


class CaseProfile(Part):
    """One role's profile of a case (rpcmeter.run.profile): the sampler, its files and the top frames
    by self time; or why there is none (``error``, ``note``)."""

    tool: str | None = None
    pids: list[int] | None = None
    samples: int | None = None
    raw: str | None = None  # collapsed stacks
    svg: str | None = None  # flame graph
    sampler_cpu_s: float | None = None
    top: list[TopFrame] | None = None
    errors: list[str] | None = None  # samplers that failed beside ones that did not
    error: str | None = None
    note: str | None = None


Status = Literal["ok", "failed", "incomplete"]


class Case(Part):
    """One case: a variant under a workload at a matrix point, one repetition."""

    id: int
    variant: str
    workload: str
    kind: str = ""
    point: Json = {}
    params: Json = {}
    repetition: int = 0
    status: Status  # always there: every reader goes by it
    reason: str | None = None
    started_at: str | None = None
    endpoint: str | None = None
    placement: Placement | None = None
    server_managed: bool | None = None
    requests: int = 0
    ok: int = 0
    errors: dict[str, int] = {}
    error_samples: dict[str, str] = {}
    wall_s: float | None = None
    throughput_rps: float | None = None
    latency: Latency | None = None
    histogram: HistogramField | None = None
    latency_uncorrected: Latency | None = None
    histogram_uncorrected: HistogramField | None = None
    open_loop: OpenLoop | None = None
    stages: list[Stage] | None = None  # a staged case: each stage measured apart
    series: Series | None = None  # the case over time
    server_time: ServerTime | None = None
    bytes: Bytes | None = None
    breakdown: Breakdown | None = None
    network_rtt_us: Stats | None = None  # TCP handshakes before and after (metrics.network_rtt)
    counters: dict[str, int] | None = None
    stream: Stream | None = None
    calls: list[CallStats] | None = None  # a mix's calls, each apart (kind "mix")
    connections: Connections | None = None
    clients: list[Client] = []
    workers: list[Worker] | None = None
    spread: Spread | None = None
    cpu: Cpu = Cpu()
    memory: Memory = Memory()
    runs: list[Run] | None = None
    command: Command | None = None
    output_tail: str | None = None
    server_output_tail: str | None = None
    profiles: dict[str, CaseProfile] | None = None  # role -> its profile

    def label(self) -> str:
        """``variant · workload · key=value ...`` (as rpcmeter.plan.cases.Case.label)."""
        point = " ".join(f"{k}={v}" for k, v in self.point.items())
        return f"{self.variant} · {self.workload}" + (f" · {point}" if point else "")

    def latency_histogram(self) -> Histogram:
        """The latency histogram (an empty one when the case recorded none)."""
        return self.histogram if self.histogram is not None else Histogram()

    def error_rate(self) -> float:
        """The fraction of requests that failed (1 for a failed case that made none)."""
        return error_rate(self.errors, self.requests, self.status)

    def mostly_failed(self) -> str | None:
        """Why the figures are not the system's, when more than half of the requests failed."""
        return mostly_failed(self.errors, self.requests)


def error_rate(errors: dict[str, int], requests: int, status: str = "ok") -> float:
    """The fraction of ``requests`` that failed (1 for a failed case that made none)."""
    if not requests:
        return 1.0 if status == "failed" else 0.0
    return float(sum(errors.values())) / requests


def mostly_failed(errors: dict[str, int], requests: int) -> str | None:
    """``"38 of 40 requests failed (http_500: 38)"`` when more than half of ``requests``
    failed: the figures are then not the system's; else None."""
    if not requests or error_rate(errors, requests) <= 0.5:
        return None
    kinds = ", ".join(f"{k}: {n:,}" for k, n in sorted(errors.items(), key=lambda kv: -kv[1]))
    return f"{sum(errors.values()):,} of {requests:,} requests failed ({kinds})"


# ---- the run's parts -----------------------------------------------------------------------------


class Git(Part):
    commit: str | None = None
    branch: str | None = None
    dirty: bool | None = None


class SuiteInfo(Part):
    """The suite as it was run: its file (text and hash), targets, variants, workloads, matrix."""

    name: str = ""
    description: str | None = None
    path: str | None = None
    sha256: str | None = None
    git: Git | None = None
    text: str | None = None
    driver: str | None = None
    drivers: dict[str, str] | None = None
    transport: str | None = None
    baseline: str | None = None
    variants: dict[str, Json] = {}
    workloads: dict[str, Json] = {}
    matrix: dict[str, list[JsonValue]] = {}
    matrix_keys: list[str] = []
    repeat: int = 1
    seed: int | None = None
    # what made the run's {{uuid}} values: drawn at random for each run, so that ids never
    # repeat from run to run (the other random values come from ``seed``)
    uuid_seed: str | None = None
    # ``validate`` is a BaseModel method's name: the field is validate_replies in Python
    validate_replies: bool | None = Field(default=None, alias="validate")
    load: Json = {}


class Virtualization(Part):
    """Hints that the machine is virtual."""

    detect_virt: str | None = None  # systemd-detect-virt's answer
    hypervisor_flag: bool | None = None  # the CPU's hypervisor flag
    product_name: str | None = None  # the DMI product name


class Cluster(Part):
    """The Dask cluster the load came from (rpcmeter.runners.distributed)."""

    spec: str | None = None  # as given: local:N or the scheduler's address
    scheduler: str | None = None
    workers: int | None = None
    hosts: list[str] | None = None
    dask: str | None = None  # dask.distributed's version


class Tls(Part):
    """A variant's TLS as the run used it (rpcmeter.result.parts.tls_of): settings and certificate
    fingerprints, never a key."""

    verify: bool = True
    resume: bool | None = None
    server_name: str | None = None
    alpn: list[str] | None = None
    mutual: bool | None = None  # the client presents a certificate
    ca_file: str | None = None  # the CA the client trusts, when the suite names one
    ca: str | None = None  # "made for the run"
    ca_sha256: str | None = None
    server_cert_sha256: str | None = None
    client_cert_sha256: str | None = None


class Schema(Part):
    """Where a variant's protobuf schema came from (a gRPC call named from it): ``source``
    (``proto``, ``protoset`` or ``reflection``), ``origin`` (the file as the suite names it, or
    the reflection service's version), the SHA-256 of its descriptors in canonical form, its
    files and the method called."""

    source: str | None = None
    origin: str | None = None
    sha256: str | None = None
    files: list[str] | None = None
    call: str | None = None


class VariantEnv(Part):
    """A variant's prepared environment (rpcmeter.host.envs.Env.describe), or why there is none."""

    source: str | None = None
    python: str | None = None
    python_version: str | None = None
    virtualenv: str | None = None
    key: str | None = None
    git_sha: str | None = None
    created: bool | None = None
    prepare_s: float | None = None
    packages: dict[str, str] | None = None
    error: str | None = None


class VariantBuild(Part):
    """A variant's server build (rpcmeter.host.build): its command and directory, its cache
    key and input files, whether an earlier build was reused, this run's time for it and the
    build's own, the tail of its output, or why it failed."""

    command: str | None = None
    cwd: str | None = None
    key: str | None = None
    inputs: int | None = None
    cached: bool | None = None
    seconds: float | None = None
    built_s: float | None = None
    output_tail: str | None = None
    log: str | None = None
    error: str | None = None


class Environment(Part):
    """The machine and software a run measured on (rpcmeter.metrics.environment), the suite's
    host names as resolved, the cluster the load came from, the variants' TLS and prepared
    environments."""

    host: str | None = None
    cpu_model: str | None = None
    cpu_count: int | None = None
    os: str | None = None
    kernel: str | None = None
    python: str | None = None
    rpcmeter: str | None = None
    packages: dict[str, str | None] = {}
    placement: Placement | None = None
    variant_packages: dict[str, dict[str, str | None]] | None = None
    # the order of the document's keys: what follows was once among the extras
    cpus_available: list[int] | None = None
    machine: str | None = None
    python_implementation: str | None = None
    cpu_governor: dict[str, list[int]] | None = None  # governor -> the CPUs using it
    cpuidle_driver: str | None = None
    cpuidle_governor: str | None = None
    load_average: list[float] | None = None
    virtualization: Virtualization | None = None
    resolved_hosts: dict[str, list[str]] | None = None  # host name -> its addresses, in order
    cluster: Cluster | None = None
    tls: dict[str, Tls] | None = None  # variant -> its TLS
    variant_envs: dict[str, VariantEnv] | None = None
    variant_builds: dict[str, VariantBuild] | None = None
    schemas: dict[str, Schema] | None = None  # variant -> its gRPC schema
    rpcmeter_compiled: bool | None = None  # the client's hot path compiled (setup.py)


class Objective(Part):
    stat: str
    bound_us: float


class RateStep(Part):
    rate: float | None = None
    passed: bool | None = None
    reason: str | None = None
    case: int | None = None
    achieved_rps: float | None = None
    p50_us: float | None = None
    p99_us: float | None = None
    p999_us: float | None = None
    late: int | None = None
    dropped: int | None = None


class MaxRate(Part):
    """One rate search's answer (``--find-max-rate``; rpcmeter.run.maxrate)."""

    workload: str
    variant: str
    point: Json = {}
    slo: str | None = None
    objectives: list[Objective] = []
    max_rate_rps: float | None = None
    achieved_rps: float | None = None
    latency_us: dict[str, float | None] | None = None
    lowest_failing_rps: float | None = None
    converged: bool | None = None
    tolerance: float | None = None
    max_steps: int | None = None
    steps: list[RateStep] = []


RunStatus = Literal["running", "complete", "interrupted", "failed"]


class Result(Part):
    """A whole run (its comparisons and warnings: :mod:`rpcmeter.analysis.derived`)."""

    schema_version: int = SCHEMA_VERSION
    rpcmeter_version: str | None = None
    run_id: str = ""
    status: RunStatus = "complete"
    reason: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    suite: SuiteInfo
    environment: Environment = Environment()
    planned_cases: int | None = None
    cases: list[Case] = []
    max_rate: list[MaxRate] | None = None

    def case(self, index: int) -> Case:
        return self.cases[index]

    def to_json(self) -> Json:
        """The JSON document of what the run measured (NaN and infinities as null; the derived
        ``warnings`` and ``comparisons``: :func:`rpcmeter.analysis.derived.document`)."""
        doc = self.dump()
        doc["schema_version"] = self.schema_version
        return doc

    @classmethod
    def from_json(cls, data: object, where: str = "") -> Self:
        """The result of a JSON document of any schema version up to :data:`SCHEMA_VERSION`
        (a :class:`ModelError` naming ``where`` and the first bad part otherwise)."""
        doc = migrate(data, where)
        try:
            return cls.model_validate(doc)
        except ValidationError as exc:
            raise _model_error(exc, where) from None

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes`` (each validated: a field or a JSON value)."""
        return type(self).model_validate({**self.to_json(), **_dumped(changes)})


def _dumped(changes: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in changes.items():
        if isinstance(value, Part):
            out[key] = value.dump()
        elif isinstance(value, list):
            out[key] = [v.dump() if isinstance(v, Part) else v for v in value]
        else:
            out[key] = value
    return out


def _model_error(exc: ValidationError, where: str) -> ModelError:
    first = exc.errors()[0]
    path = ".".join(
        f"[{p}]" if isinstance(p, int) else str(p) for p in first["loc"] if p != "function-plain"
    ).replace(".[", "[")
    at = f"{where}: {path}" if where and path else where or path
    return ModelError(at, str(first["msg"]).removeprefix("Value error, "))


def parse_case(data: object, where: str = "") -> Case:
    """A stored case document as a :class:`Case`."""
    try:
        return Case.model_validate(data)
    except ValidationError as exc:
        raise _model_error(exc, where) from None


# ---- migrations ----------------------------------------------------------------------------------


def _from_1(doc: Json) -> Json:
    """1 -> 2: a version-1 ``breakdown`` (``mean`` and ``stdev`` only, the round trip measured
    with the case's loops) has the same keys, a subset of version 2's: it is read as it is."""
    return {**doc, "schema_version": 2}


#: ``MIGRATIONS[v]`` brings a document of schema ``v`` to ``v + 1``.
MIGRATIONS: dict[int, Callable[[Json], Json]] = {1: _from_1}


def migrate(data: object, where: str = "") -> Json:
    """``data`` brought to :data:`SCHEMA_VERSION` (a ModelError when it is not a result
    document or is newer than this rpcmeter)."""
    if not isinstance(data, dict) or "schema_version" not in data:
        raise ModelError(where, "not an rpcmeter result (no schema_version)")
    version = data["schema_version"]
    if not isinstance(version, int) or isinstance(version, bool):
        raise ModelError(where, "not an rpcmeter result (schema_version not a number)")
    if version > SCHEMA_VERSION:
        raise ModelError(
            where,
            f"schema_version {version} is newer than this rpcmeter understands ({SCHEMA_VERSION})",
        )
    if version < 1:
        raise ModelError(where, f"schema_version {version}: no such version")
    doc: Json = dict(data)
    # derived parts are computed on read: what an older document stored is not read back
    doc.pop("comparisons", None)
    doc.pop("warnings", None)
    for v in range(version, SCHEMA_VERSION):
        doc = MIGRATIONS[v](doc)
    return doc
