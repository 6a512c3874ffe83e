"""The suite model: what a suite file says, validated field by field (pydantic).

A suite is the unit a user writes: a target (driver, transport, how its server starts), variants
(what is compared), workloads (what one request does), load (how requests are issued), a matrix of
parameters, repetitions and placement. Reading a file, ``--set`` overrides and the checks that need
the drivers live one layer up, in :mod:`rpcmeter.plan.load`; this module imports nothing of rpcmeter but
the workloads, so drivers and servers can name a :class:`Suite`.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    ConfigDict,
    Field,
    PrivateAttr,
    field_validator,
    model_validator,
    with_config,
)
from typing_extensions import TypedDict

from rpcmeter.net.tls import TlsSettings, parse_tls
from rpcmeter.suite.base import MIN_RATE as MIN_RATE
from rpcmeter.suite.base import Amount as Amount
from rpcmeter.suite.base import CommandLine as CommandLine
from rpcmeter.suite.base import Count as Count
from rpcmeter.suite.base import Flag as Flag
from rpcmeter.suite.base import Host as Host
from rpcmeter.suite.base import Positive as Positive
from rpcmeter.suite.base import Timeout as Timeout
from rpcmeter.suite.base import _Model as _Model
from rpcmeter.suite.loads import Load as Load
from rpcmeter.suite.loads import Stage as Stage
from rpcmeter.suite.loads import Sweep as Sweep
from rpcmeter.suite.loads import round_rate as round_rate
from rpcmeter.suite.workloads import KINDS, WorkloadParams, parse_params


@with_config(ConfigDict(extra="allow", allow_inf_nan=False))
class Options(TypedDict, total=False):
    """A target's or variant's ``options``: each driver reads its own (``Driver.option_keys``
    names them); those with the same name in several drivers or built-in servers mean the same
    and are typed here once, so a wrong value is a suite error at load, naming the key."""

    call_timeout_s: Timeout  # grpc, zmq: the deadline of a call
    connect_timeout_s: Timeout  # grpc: how long a connection may take
    max_message_bytes: Positive  # grpc, zmq: the largest message accepted
    server_workers: Positive  # grpc, zmq servers
    queue_time: Flag  # built-in servers: report the queue time
    nodelay: Flag  # rpyc
    server_time: Flag  # rpyc
    bind_threads: Flag  # rpyc
    background: Count  # rpyc server
    corrupt_every: Count  # built-in servers: corrupt every Nth reply (0: none)
    stall_ms: Amount  # built-in servers (rpcmeter.servers.common.Stall)
    stall_after_s: Amount
    stall_every_s: Annotated[float, Field(gt=0, strict=True)]
    spin_us: Amount  # rpyc server
    sleep_us: Amount  # zmq client (recv = "poll")
    kv_capacity: Positive  # http server: keys its key/value store holds
    kv_miss_us: Amount  # http server: CPU a miss of its key/value store costs


class ServerSpec(_Model):
    """How a server starts. Without ``command``, the driver's built-in reference server runs.

    ``command`` takes the placeholders ``{host}``, ``{port}`` and ``{socket}``; rpcmeter picks a
    free port or a fresh socket path for every server, so two runs never collide. ``cwd`` is
    taken from the suite file's directory.

    ``build``: a command line run in ``cwd`` before the variant's first case (once per run for
    every variant that names the same build), skipped when an earlier build of the same command
    saw the same ``build_inputs`` (glob patterns, from ``cwd``; ``**`` crosses directories): see
    :mod:`rpcmeter.host.build`.
    """

    command: CommandLine = Field(
        None,
        description="The server's command line, with {host}, {port} and {socket} filled in; unset: the driver's built-in server.",
        examples=["./my-server --port {port}"],
    )
    cwd: str | None = Field(
        None,
        description="The directory the server (and its build) runs in, from the suite file's directory.",
        examples=["server"],
    )
    env: dict[str, str] = Field(
        default_factory=dict,
        description="Environment variables for the server, beside rpcmeter's own.",
        examples=[{"GOMAXPROCS": "1"}],
    )
    ready_timeout_s: float = Field(
        20.0, gt=0, description="Seconds the server has to accept connections after it starts."
    )
    stop_timeout_s: float = Field(
        5.0, gt=0, description="Seconds the server has to exit after SIGTERM; then it is killed."
    )
    build: CommandLine = Field(
        None,
        description="A command run in cwd before the variant's first case, once per run; skipped when build_inputs are unchanged.",
        examples=["cargo build --release"],
    )
    build_inputs: list[str] = Field(
        default_factory=list,
        description="Glob patterns from cwd (** crosses directories): the files whose hash decides whether build runs again.",
        examples=[["src/**/*.rs", "Cargo.toml"]],
    )
    build_timeout_s: float = Field(
        1800.0, gt=0, description="Seconds the build has to finish; then it is stopped."
    )

    @model_validator(mode="after")
    def _build_inputs(self) -> ServerSpec:
        if self.build_inputs and self.build is None:
            raise ValueError("build_inputs: only with build (the command that uses them)")
        if any(not p.strip() for p in self.build_inputs):
            raise ValueError("build_inputs: an empty pattern")
        return self


class Target(_Model):
    """The system under test. With ``address`` (``"host:port"`` or a Unix socket path), the server
    is remote: rpcmeter starts none and reports its resource figures as unknown."""

    driver: str = Field(
        "rpyc",
        description="The driver that makes the requests: http, grpc, zmq, raw, rpyc or command (or a module of your own).",
        examples=["http"],
    )
    transport: str = Field(
        "tcp",
        description="How to reach the server: tcp or unix (a Unix socket).",
        examples=["unix"],
    )
    host: Host = Field(
        "127.0.0.1", description="The address a started server listens on and clients connect to."
    )
    address: str | None = Field(
        None,
        description='A remote server ("host:port" or a socket path): rpcmeter starts no server.',
        examples=["10.0.0.5:8080"],
    )
    server: ServerSpec = Field(
        default_factory=lambda: ServerSpec(), description="How the server starts (and builds)."
    )
    options: Options = Field(
        default_factory=lambda: Options(),
        description="Options of the driver and its built-in server: see Driver options below.",
        examples=[{"path": "/ping"}],
    )
    # driver "command": the command line measured as a whole (``{param}`` placeholders), its
    # working directory (relative to the suite file) and extra environment variables
    command: CommandLine = Field(
        None,
        description="Driver command: the command line measured as a whole, with {name} placeholders.",
        examples=["python -m mypkg --items {items}"],
    )
    cwd: str | None = Field(
        None,
        description="Driver command: the directory the command runs in, from the suite file's directory.",
        examples=["work"],
    )
    env: dict[str, str] = Field(
        default_factory=dict,
        description="Driver command: environment variables for the command.",
        examples=[{"OMP_NUM_THREADS": "1"}],
    )
    shell: bool = Field(
        False,
        description="Driver command: run every command line (the hooks' too) with /bin/sh, as hyperfine does.",
        examples=[True],
    )
    setup: CommandLine = Field(
        None,
        description="Driver command: a command run once before a case's runs, not measured.",
        examples=["make clean"],
    )
    prepare: CommandLine = Field(
        None,
        description="Driver command: a command run before each run (warmup runs too), not measured.",
        examples=["sync"],
    )
    cleanup: CommandLine = Field(
        None,
        description="Driver command: a command run once after a case's runs, not measured.",
        examples=["rm -f out.gz"],
    )
    # TLS (rpcmeter.net.tls): true or a table; verification on unless ``verify = false``
    tls: TlsSettings | None = Field(
        None,
        description="TLS: true (every key at its default) or a table; unset: cleartext.",
        examples=[True],
    )

    @field_validator("tls", mode="before")
    @classmethod
    def _tls(cls, v: Any) -> TlsSettings | None:
        return parse_tls(v)


class GitSource(_Model):
    """A project at a git revision: ``repo`` is a path (relative to the suite file) or a URL;
    ``subdir`` the project's directory inside the repository when it is not the top."""

    repo: str = Field(
        description="A path (from the suite file) or URL of a git repository.",
        examples=["https://github.com/bytewax/bytewax"],
    )
    rev: str = Field(
        "HEAD", description="The revision to build: a branch, tag or commit.", examples=["v0.16.0"]
    )
    subdir: str | None = Field(
        None,
        description="The project's directory inside the repository, when it is not the top.",
        examples=["python"],
    )


class Runs(_Model):
    """How often a command target runs per case: ``warmup`` runs first (not measured), then at
    least ``min_runs`` runs and at least ``min_time_s`` seconds of their own time (hyperfine's
    defaults), at most ``max_runs``; or exactly ``count`` runs. ``timeout_s`` bounds one run;
    descendants still alive ``linger_s`` after the command exited are killed."""

    warmup: int = Field(1, ge=0, le=10_000, description="Runs made first and not measured.")
    min_runs: int = Field(
        10, ge=1, le=1_000_000, description="At least this many measured runs per case."
    )
    min_time_s: float = Field(
        3.0,
        ge=0,
        description="Keep running until the runs' own wall time adds up to this many seconds "
        "(and min_runs, and as many runs as hyperfine makes: this over the first run's time).",
    )
    max_runs: int | None = Field(
        None, ge=1, description="At most this many measured runs per case.", examples=[50]
    )
    count: int | None = Field(
        None,
        ge=1,
        le=1_000_000,
        description="Exactly this many measured runs (min_runs, min_time_s and max_runs ignored).",
        examples=[5],
    )
    timeout_s: float = Field(
        600.0, gt=0, description="Seconds one run may take; then it is stopped and fails."
    )
    linger_s: float = Field(
        10.0, ge=0, description="Seconds descendants may outlive the command; then they are killed."
    )


class Variant(_Model):
    """Overrides of the target for one compared variant (any may be left out)."""

    driver: str | None = Field(
        None, description="This variant's driver, instead of the target's.", examples=["command"]
    )
    options: Options = Field(
        default_factory=lambda: Options(),
        description="Driver options, over the target's.",
        examples=[{"bind_threads": True}],
    )
    env: dict[str, str] = Field(
        default_factory=dict,
        description="Environment variables for this variant's server and clients.",
        examples=[{"GODEBUG": "madvdontneed=1"}],
    )
    transport: str | None = Field(
        None, description="This variant's transport, instead of the target's.", examples=["unix"]
    )
    host: Host | None = Field(
        None, description="This variant's host, instead of the target's.", examples=["::1"]
    )
    address: str | None = Field(
        None,
        description="A remote server for this variant: rpcmeter starts none.",
        examples=["10.0.0.6:8080"],
    )
    server: ServerSpec | None = Field(
        None,
        description="How this variant's server starts, instead of the target's.",
        examples=[{"command": "./other-server --port {port}"}],
    )
    description: str = Field(
        "", description="A line for the reports.", examples=["with thread binding"]
    )
    # environment (rpcmeter.host.envs): an existing interpreter, and/or an isolated virtualenv with
    # these requirements and/or a project at a git revision installed; the command of a
    # command target (else the target's)
    python: str | None = Field(
        None,
        description="The interpreter for this variant's server or command ({python}).",
        examples=["python3.10"],
    )
    install: list[str] = Field(
        default_factory=list,
        description="Requirements installed into a virtualenv of the variant's own (cached).",
        examples=[["grpcio==1.60.0"]],
    )
    git: GitSource | None = Field(
        None,
        description="A project at a git revision, built and installed into the variant's virtualenv.",
        examples=[{"repo": ".", "rev": "main"}],
    )
    # what makes the virtualenv and installs into it: uv where it is found ("auto"), or always
    # venv and pip ("pip": for projects whose metadata uv refuses, such as a pyproject.toml
    # whose [project] leaves its version to an old build backend without saying so)
    installer: Literal["auto", "pip"] = Field(
        "auto",
        description="What makes the virtualenv: uv where found (auto), or always venv and pip.",
    )
    command: CommandLine = Field(
        None,
        description="The command line of a command variant, instead of the target's.",
        examples=["ghz --insecure {host}:{port}"],
    )
    # a command variant in a suite whose target is a server (Suite.command_client): how many
    # requests one run of its command makes, so that its figures are per request like the others'
    requests_per_run: int | None = Field(
        None,
        ge=1,
        le=1_000_000_000,
        description="A command client: the requests one run makes, so figures are per request.",
        examples=[1000],
    )
    # a command client that prints a report of its own (``"ghz"``: ghz's JSON, ``-O json``): its
    # requests, statuses and latencies are read from it (rpcmeter.runners.client_reports)
    client_report: Literal["ghz"] | None = Field(
        None,
        description="A command client's own report to read: ghz (its JSON, -O json).",
        examples=["ghz"],
    )
    tls: TlsSettings | Literal[False] | None = Field(
        None,
        description="TLS for this variant: true, a table, or false for cleartext.",
        examples=[False],
    )

    @field_validator("tls", mode="before")
    @classmethod
    def _tls(cls, v: Any) -> TlsSettings | Literal[False] | None:
        return False if v is False else parse_tls(v)

    # CPUs of this variant's server and clients instead of the suite's [placement] (pinning
    # only: a count takes that many CPUs but sets no cgroup quota)
    placement: Placement | None = Field(
        None,
        description="CPUs of this variant's server and clients (pinning only, no quota).",
        examples=[{"server_cpus": [2, 3]}],
    )


class Workload(_Model):
    """One named workload: a kind and its parameters, plus optional load settings of its own
    (any key of ``[load]``: ``requests``, ``threads``, ``clients``, ...)."""

    model_config = ConfigDict(extra="allow")
    kind: str = Field(
        "",
        description="The workload kind (see Workload kinds); default: the workload's name.",
        examples=["echo"],
    )
    requests: int | None = Field(
        None, ge=1, description="Requests per loop for this workload.", examples=[500]
    )
    duration_s: float | None = Field(
        None, gt=0, description="Seconds of load for this workload.", examples=[5.0]
    )
    warmup: int | None = Field(
        None, ge=0, description="Warmup requests per loop for this workload.", examples=[20]
    )

    def _is_load_key(self, key: str) -> bool:
        """A load setting, unless the kind has a parameter of that name (``stream``'s ``mode``)."""
        kind = KINDS.get(self.kind)
        return key in Load.model_fields and (kind is None or key not in kind.field_names())

    def params(self) -> dict[str, Any]:
        """The workload kind's parameters."""
        return {k: v for k, v in (self.model_extra or {}).items() if not self._is_load_key(k)}

    def load_overrides(self) -> dict[str, Any]:
        """Load settings this workload replaces; its own count replaces a suite duration."""
        out = {k: v for k, v in (self.model_extra or {}).items() if self._is_load_key(k)}
        if self.warmup is not None:
            out["warmup"] = self.warmup
        if self.requests is not None:
            out.update(requests=self.requests, duration_s=self.duration_s)
        elif self.duration_s is not None:
            out["duration_s"] = self.duration_s
        return out


_MEMORY_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_MEMORY = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:I?B)?\s*", re.IGNORECASE)
MIN_MEMORY = 1 << 20  # a limit below 1 MiB would stop any server from starting


def parse_memory(value: Any) -> int:
    """Bytes from a memory size: a whole number of bytes, or a number with a binary unit
    (``"512M"``, ``"512m"``, ``"1.5G"``, ``"512MiB"``); at least 1 MiB."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError('expected bytes or a size such as "512M"')
    if isinstance(value, int):
        size = value
    else:
        m = _MEMORY.fullmatch(value)
        if m is None:
            raise ValueError('expected a size such as "512M", "1G" or "512MiB"')
        size = int(float(m.group(1)) * _MEMORY_UNITS[m.group(2).upper()])
    if size < MIN_MEMORY:
        raise ValueError("a memory limit must be at least 1M")
    return size


class Placement(_Model):
    """CPUs for server and clients: a count or an explicit list; ``"auto"`` keeps them apart when
    the machine has two or more CPUs; ``"none"`` leaves placement to the OS.

    A count (``1``, or a fraction such as ``0.5``) pins to that many CPUs (rounded up) and, where
    the machine allows it, also sets a cgroup CPU quota of exactly that many CPUs.
    ``server_memory`` limits the server's memory through its cgroup (``memory.max``, v1
    ``memory.limit_in_bytes``), where the machine allows it."""

    server_cpus: int | float | list[int] | Literal["auto", "none"] = Field(
        "auto",
        description="The server's CPUs: a count (a quota too), a list, auto (apart from the clients) or none.",
        examples=[2],
    )
    client_cpus: int | float | list[int] | Literal["auto", "none"] = Field(
        "auto",
        description="The clients' CPUs: a count (a quota too), a list, auto or none.",
        examples=[[3]],
    )
    # the server's memory limit in bytes (given as bytes or "512M", "1G", "512MiB": binary
    # multiples, as docker --memory and cgroup files read them), set through its cgroup
    server_memory: int | None = Field(
        None,
        description='The server\'s memory limit (cgroup): bytes, or a size such as "512M" or "1G".',
        examples=["512M"],
    )

    @field_validator("server_memory", mode="before")
    @classmethod
    def _memory(cls, v: Any) -> int | None:
        return None if v is None else parse_memory(v)

    @field_validator("server_cpus", "client_cpus")
    @classmethod
    def _positive(cls, v: Any) -> Any:
        if isinstance(v, int | float) and v <= 0:
            raise ValueError("a CPU count must be greater than 0")
        if isinstance(v, list) and (not v or any(c < 0 for c in v)):
            raise ValueError("a CPU list must name CPUs 0, 1, ...")
        return v


DEFAULT_IDLE_S = 0.25  # resources.idle_s when a suite does not set it


Variant.model_rebuild()


class Resources(_Model):
    """CPU and memory measurement.

    ``idle_s``: the quiet window after the server is ready and before load starts over which its
    idle CPU is measured (0 skips it). ``sample_interval_s``: how often the server's process tree
    is sampled (peak memory, processes that come and go). ``cgroup``: apply CPU counts of
    ``placement`` as a cgroup CPU quota where the machine allows it."""

    idle_s: float = Field(
        default_factory=lambda: DEFAULT_IDLE_S,
        ge=0,
        le=3600,
        description="Seconds the server's idle CPU is measured before the load (0: skip); default 1.",
        examples=[0.5],
    )
    sample_interval_s: float = Field(
        0.25, gt=0, le=60, description="How often the server's process tree is sampled (memory)."
    )
    cgroup: Flag = Field(
        True, description="Turn CPU counts of placement into a cgroup CPU quota, where allowed."
    )


class TimeSeries(_Model):
    """The figures of every case over time: ``interval_s`` seconds per interval (each stage
    starts an interval of its own)."""

    interval_s: float = Field(
        1.0, ge=0.01, le=3600, description="Seconds per interval of the figures over time."
    )


class Breakdown(_Model):
    """Where the time goes (:mod:`rpcmeter.result.breakdown`): before and after each case,
    ``rtt_requests`` ``noop`` requests from one loop on one connection measure the round trip."""

    rtt_requests: int = Field(
        200,
        ge=1,
        description="No-op requests before and after each case that measure the round trip.",
    )


class Profile(_Model):
    """Profiles per case (:mod:`rpcmeter.run.profile`): the server process and/or rpcmeter's client
    processes sampled ``rate`` times a second over the measured interval."""

    server: Flag = Field(False, description="Sample the server process over each case.")
    client: Flag = Field(False, description="Sample rpcmeter's client processes over each case.")
    rate: int = Field(100, ge=1, le=1000, description="Samples a second.")


class Gate(_Model):
    """The suite's own criterion (``[gate]``), judged after every run against the baseline variant
    (:func:`rpcmeter.reporters.gate.check`): in the cases ``where`` selects (matrix values, and
    ``workload``) of the ``variants`` named (default: every one but the baseline), each metric in
    ``better`` must be significantly better than the baseline's, and none in ``not_worse``
    significantly worse (metric names as ``--metric`` takes them)."""

    variants: list[str] = Field(
        default_factory=list,
        description="The variants judged; default: every one but the baseline.",
        examples=[["fix"]],
    )
    where: dict[str, Any] = Field(
        default_factory=dict,
        description="Which cases count: matrix values, and workload.",
        examples=[{"workload": "slow"}],
    )
    better: list[str] = Field(
        default_factory=list,
        description="Metrics that must be significantly better than the baseline's.",
        examples=[["sys_cpu"]],
    )
    not_worse: list[str] = Field(
        default_factory=list,
        description="Metrics that must not be significantly worse than the baseline's.",
        examples=[["mean"]],
    )


class Suite(_Model):
    name: str = Field(
        "suite", description="The suite's name in reports and history.", examples=["api"]
    )
    description: str = Field(
        "", description="A line for the reports.", examples=["thread binding on and off"]
    )
    target: Target = Field(
        default_factory=lambda: Target(),
        description="The system under test: driver, server, options.",
    )
    variants: dict[str, Variant] = Field(
        default_factory=lambda: {"default": Variant()},
        description="What is compared: each variant overrides parts of the target; default: one.",
        examples=[{"bind": {"options": {"bind_threads": True}}}],
    )
    baseline: str | None = Field(
        None,
        description="The variant the others are compared with; default: the first.",
        examples=["default"],
    )
    workloads: dict[str, Workload] = Field(
        default_factory=dict,
        description="What one request does, by name: a kind and its parameters.",
        examples=[{"echo": {"request_bytes": 1000}}],
    )
    load: Load = Field(
        default_factory=lambda: Load(),
        description="How requests are issued: clients, loops, counts, rate.",
    )
    matrix: dict[str, list[Any]] = Field(
        default_factory=dict,
        description="Values to vary: every combination is a case (load keys, workload parameters).",
        examples=[{"clients": [1, 4], "request_bytes": [100, 10000]}],
    )
    repeat: int = Field(
        1,
        ge=1,
        le=1000,
        description="Repetitions of every case, interleaved; unset: 5 with two or more variants, else 1.",
        examples=[10],
    )
    seed: int = Field(0, description="Seeds every random draw (request mixes, random waits).")
    validate_replies: Flag = Field(
        False,
        alias="validate",
        description="Check every reply's content; a wrong one counts as an error.",
    )
    placement: Placement = Field(
        default_factory=lambda: Placement(),
        description="CPUs and memory for the server and the clients.",
    )
    runs: Runs = Field(
        default_factory=lambda: Runs(), description="How often a whole command runs per case."
    )
    resources: Resources = Field(
        default_factory=lambda: Resources(), description="How CPU and memory are measured."
    )
    quick: dict[str, Any] = Field(
        default_factory=dict,
        description="Dotted keys set under --quick, over its own small counts.",
        examples=[{"load.duration_s": 1}],
    )
    gate: Gate | None = Field(
        None,
        description="The suite's own pass/fail criterion, judged after every run.",
        examples=[{"better": ["sys_cpu"], "not_worse": ["mean"]}],
    )
    breakdown: Breakdown | None = Field(
        None,
        description="Where the time goes: measure the round trip around every case.",
        examples=[{"rtt_requests": 200}],
    )
    profile: Profile | None = Field(
        None, description="Profiles of the server and/or the clients.", examples=[{"server": True}]
    )
    timeseries: TimeSeries = Field(
        default_factory=lambda: TimeSeries(), description="The figures of every case over time."
    )

    model_config = ConfigDict(extra="forbid", populate_by_name=True, allow_inf_nan=False)

    # filled by load_suite, not by the file
    path: str | None = Field(None, exclude=True)
    source_hash: str = Field("", exclude=True)
    source_text: str = Field("", exclude=True)
    # what the drivers derived from the suite when it was loaded, per variant (a compiled gRPC
    # call): handed to the variant's clients as DriverContext.prepared
    _prepared: dict[str, dict[str, Any]] = PrivateAttr(default_factory=dict)

    @property
    def prepared(self) -> dict[str, dict[str, Any]]:
        return self._prepared

    @field_validator("variants")
    @classmethod
    def _some_variants(cls, v: dict[str, Variant]) -> dict[str, Variant]:
        if not v:
            raise ValueError("at least one variant is needed")
        return v

    @field_validator("matrix")
    @classmethod
    def _matrix_lists(cls, v: dict[str, list[Any]]) -> dict[str, list[Any]]:
        for key, values in v.items():
            if not values:
                raise ValueError(f"matrix.{key} is empty")
        return v

    def address_of(self, variant: str) -> str | None:
        """The remote server address a variant measures (its own, or the target's), if any."""
        return self.variants[variant].address or self.target.address

    def tls_of(self, variant: str) -> TlsSettings | None:
        """A variant's TLS settings (its own, else the target's; None: cleartext)."""
        own = self.variants[variant].tls
        if own is False:
            return None
        return own if own is not None else self.target.tls

    def driver_of(self, variant: str) -> str:
        """The driver a variant uses (its own, or the target's)."""
        return self.variants[variant].driver or self.target.driver

    def command_client(self, variant: str) -> bool:
        """A ``command`` variant of a suite whose target driver has servers: rpcmeter starts the
        server for it as for the target's own variants, and its command is the client (a whole
        command run against that server, ``{host}``, ``{port}``, ``{socket}`` filled in)."""
        return self.driver_of(variant) == "command" and self.target.driver != "command"

    def server_driver_of(self, variant: str) -> str:
        """The driver whose server a variant's cases start: its own, or for a command client the
        target's."""
        return self.target.driver if self.command_client(variant) else self.driver_of(variant)

    def options_of(self, variant: str) -> dict[str, Any]:
        """A variant's options: the target's, its own over them."""
        return {**self.target.options, **self.variants[variant].options}

    def server_of(self, variant: str) -> ServerSpec:
        return self.variants[variant].server or self.target.server

    def env_of(self, variant: str) -> dict[str, str]:
        """The variant's environment variables, for its server and its clients alike."""
        return {
            **self.target.server.env,
            **self.server_of(variant).env,
            **self.variants[variant].env,
        }

    @property
    def baseline_variant(self) -> str:
        return self.baseline or next(iter(self.variants))

    def workload_params(self, name: str) -> WorkloadParams:
        w = self.workloads[name]
        return parse_params(w.kind, w.params())
