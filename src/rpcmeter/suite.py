"""Suite model and TOML loading.

A suite is the unit a user writes: a target (driver, transport, how its server starts), variants
(what is compared), workloads (what one request does), load (how requests are issued), a matrix of
parameters, repetitions and placement. Every error names the file, the key and what was expected,
in one line (:class:`~rpcmeter.errors.SuiteError`, exit status 2).

``--set KEY=VALUE`` overrides any value before validation: dotted keys (quote a part that holds dots
or spaces: ``workloads."random wait".delay_s=0.02``), values parsed as TOML (``4``, ``true``,
``[1, 4]``, ``"text"``) and taken as plain text when they do not parse.
"""

from __future__ import annotations

import difflib
import hashlib
import re
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from rpcmeter.errors import SuiteError
from rpcmeter.workloads import KINDS, WorkloadParams, parse_params

if TYPE_CHECKING:
    from rpcmeter.drivers.base import Driver


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ServerSpec(_Model):
    """How a server starts. Without ``command``, the driver's built-in reference server runs.

    ``command`` takes the placeholders ``{host}``, ``{port}`` and ``{socket}``; rpcmeter picks a
    free port or a fresh socket path for every server, so two runs never collide.
    """

    command: str | list[str] | None = None
    cwd: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    ready_timeout_s: float = Field(20.0, gt=0)
    stop_timeout_s: float = Field(5.0, gt=0)


class Target(_Model):
    """The system under test. With ``address`` (``"host:port"`` or a Unix socket path), the server
    is remote: rpcmeter starts none and reports its resource figures as unknown."""

    driver: str = "rpyc"
    transport: str = "tcp"
    host: str = "127.0.0.1"
    address: str | None = None
    server: ServerSpec = Field(default_factory=lambda: ServerSpec())
    options: dict[str, Any] = Field(default_factory=dict)
    # driver "command": the command line measured as a whole (``{param}`` placeholders), its
    # working directory (relative to the suite file) and extra environment variables
    command: str | list[str] | None = None
    cwd: str | None = None
    env: dict[str, str] = Field(default_factory=dict)


class GitSource(_Model):
    """A project at a git revision: ``repo`` is a path (relative to the suite file) or a URL;
    ``subdir`` the project's directory inside the repository when it is not the top."""

    repo: str
    rev: str = "HEAD"
    subdir: str | None = None


class Runs(_Model):
    """How often a command target runs per case: ``warmup`` runs first (not measured), then at
    least ``min_runs`` runs and at least ``min_time_s`` seconds (hyperfine's defaults), at most
    ``max_runs``; or exactly ``count`` runs. ``timeout_s`` bounds one run; descendants still
    alive ``linger_s`` after the command exited are killed."""

    warmup: int = Field(1, ge=0, le=10_000)
    min_runs: int = Field(10, ge=1, le=1_000_000)
    min_time_s: float = Field(3.0, ge=0)
    max_runs: int | None = Field(None, ge=1)
    count: int | None = Field(None, ge=1, le=1_000_000)
    timeout_s: float = Field(600.0, gt=0)
    linger_s: float = Field(10.0, ge=0)


class Variant(_Model):
    """Overrides of the target for one compared variant (any may be left out)."""

    driver: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)
    transport: str | None = None
    host: str | None = None
    address: str | None = None
    server: ServerSpec | None = None
    description: str = ""
    # environment (rpcmeter.envs): an existing interpreter, and/or an isolated virtualenv with
    # these requirements and/or a project at a git revision installed; the command of a
    # command target (else the target's)
    python: str | None = None
    install: list[str] = Field(default_factory=list)
    git: GitSource | None = None
    command: str | list[str] | None = None


class Workload(_Model):
    """One named workload: a kind and its parameters, plus optional load settings of its own
    (any key of ``[load]``: ``requests``, ``threads``, ``clients``, ...)."""

    model_config = ConfigDict(extra="allow")
    kind: str = ""
    requests: int | None = Field(None, ge=1)
    duration_s: float | None = Field(None, gt=0)
    warmup: int | None = Field(None, ge=0)

    def params(self) -> dict[str, Any]:
        """The workload kind's parameters."""
        return {k: v for k, v in (self.model_extra or {}).items() if k not in Load.model_fields}

    def load_overrides(self) -> dict[str, Any]:
        """Load settings this workload replaces; its own count replaces a suite duration."""
        out = {k: v for k, v in (self.model_extra or {}).items() if k in Load.model_fields}
        if self.warmup is not None:
            out["warmup"] = self.warmup
        if self.requests is not None:
            out.update(requests=self.requests, duration_s=self.duration_s)
        elif self.duration_s is not None:
            out["duration_s"] = self.duration_s
        return out


def round_rate(value: float, digits: int = 6) -> float:
    """A rate to ``digits`` significant digits; whole numbers as integers (``rate=200``)."""
    v = float(f"{value:.{digits}g}")
    return int(v) if v.is_integer() else v


class Sweep(_Model):
    """Offered rates ``from`` .. ``to`` in ``steps`` steps, evenly spaced (``scale = "linear"``)
    or by a constant factor (``"log"``)."""

    start: float = Field(alias="from", gt=0)
    to: float = Field(gt=0)
    steps: int = Field(ge=2, le=1000)
    scale: Literal["linear", "log"] = "linear"

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    def rates(self) -> list[float]:
        n = self.steps - 1
        if self.scale == "log":
            values = [self.start * (self.to / self.start) ** (i / n) for i in range(self.steps)]
        else:
            values = [self.start + (self.to - self.start) * i / n for i in range(self.steps)]
        return [round_rate(v) for v in values]


class Load(_Model):
    """How requests are issued. Closed loop: every loop sends its next request when the
    previous one returned; ``requests`` per loop, or for ``duration_s`` seconds.

    Each of ``clients`` processes runs ``concurrency`` loops (default: ``threads``) over
    ``connections`` connections (loops share them round-robin; rpyc: one connection per client).

    Open loop (``mode = "open"``): requests go out at ``rate`` requests/s in total, split evenly
    over the clients, whichever loop is free taking the next slot; ``requests`` per loop or
    ``duration_s`` seconds of schedule. A send lagging more than ``late_ms`` behind its slot is
    late; one lagging more than ``max_lag_ms`` is dropped (never sent). ``rates`` or ``sweep``
    run several rates as the matrix dimension ``rate``
    (:mod:`rpcmeter.runners.open_loop`)."""

    mode: Literal["closed", "open"] = "closed"
    clients: int = Field(1, ge=1, le=1024)
    threads: int = Field(1, ge=1, le=4096)
    connections: int = Field(1, ge=1, le=100_000)
    concurrency: int | None = Field(None, ge=1, le=1_000_000)
    requests: int = Field(1000, ge=1)
    duration_s: float | None = Field(None, gt=0)
    warmup: int = Field(10, ge=0)
    timeout_s: float = Field(600.0, gt=0)
    rate: float | None = Field(None, gt=0, le=1e9)
    rates: list[float] | None = None
    sweep: Sweep | None = None
    late_ms: float = Field(1.0, ge=0)
    max_lag_ms: float | None = Field(None, gt=0)

    @model_validator(mode="after")
    def _concurrency(self) -> Load:
        if self.concurrency is not None and self.concurrency < self.connections:
            raise ValueError(
                f"concurrency ({self.concurrency}) must be at least connections "
                f"({self.connections})"
            )
        return self

    @model_validator(mode="after")
    def _open_loop(self) -> Load:
        given = [k for k in ("rate", "rates", "sweep") if getattr(self, k) is not None]
        if self.mode == "closed" and given:
            raise ValueError(f'{given[0]} is an open-loop setting: set load.mode = "open"')
        if self.rates is not None and self.sweep is not None:
            raise ValueError("give either rates or sweep, not both")
        if self.rates is not None and (not self.rates or min(self.rates) <= 0):
            raise ValueError("rates must be a non-empty list of positive requests/s")
        return self

    def rate_list(self) -> list[float] | None:
        """The offered rates of a sweep (``rates`` or ``sweep``), or None."""
        if self.sweep is not None:
            return self.sweep.rates()
        return list(self.rates) if self.rates is not None else None


class Placement(_Model):
    """CPUs for server and clients: a count or an explicit list; ``"auto"`` keeps them apart when
    the machine has two or more CPUs; ``"none"`` leaves placement to the OS.

    A count (``1``, or a fraction such as ``0.5``) pins to that many CPUs (rounded up) and, where
    the machine allows it, also sets a cgroup CPU quota of exactly that many CPUs."""

    server_cpus: int | float | list[int] | Literal["auto", "none"] = "auto"
    client_cpus: int | float | list[int] | Literal["auto", "none"] = "auto"

    @field_validator("server_cpus", "client_cpus")
    @classmethod
    def _positive(cls, v: Any) -> Any:
        if isinstance(v, int | float) and v <= 0:
            raise ValueError("a CPU count must be greater than 0")
        if isinstance(v, list) and (not v or any(c < 0 for c in v)):
            raise ValueError("a CPU list must name CPUs 0, 1, ...")
        return v


DEFAULT_IDLE_S = 1.0  # resources.idle_s when a suite does not set it


class Resources(_Model):
    """CPU and memory measurement.

    ``idle_s``: the quiet window after the server is ready and before load starts over which its
    idle CPU is measured (0 skips it). ``sample_interval_s``: how often the server's process tree
    is sampled (peak memory, processes that come and go). ``cgroup``: apply CPU counts of
    ``placement`` as a cgroup CPU quota where the machine allows it."""

    idle_s: float = Field(default_factory=lambda: DEFAULT_IDLE_S, ge=0, le=3600)
    sample_interval_s: float = Field(0.25, gt=0, le=60)
    cgroup: bool = True


class Breakdown(_Model):
    """Where the time goes (:mod:`rpcmeter.breakdown`): before each case, ``rtt_requests``
    ``noop`` requests per loop measure the round trip on the same server and connections."""

    rtt_requests: int = Field(200, ge=1)


class Suite(_Model):
    name: str = "suite"
    description: str = ""
    target: Target = Field(default_factory=lambda: Target())
    variants: dict[str, Variant] = Field(default_factory=lambda: {"default": Variant()})
    baseline: str | None = None
    workloads: dict[str, Workload] = Field(default_factory=dict)
    load: Load = Field(default_factory=lambda: Load())
    matrix: dict[str, list[Any]] = Field(default_factory=dict)
    repeat: int = Field(1, ge=1, le=1000)  # unset with 2+ variants: COMPARE_REPEAT
    seed: int = 0
    validate_replies: bool = Field(False, alias="validate")
    placement: Placement = Field(default_factory=lambda: Placement())
    runs: Runs = Field(default_factory=lambda: Runs())
    resources: Resources = Field(default_factory=lambda: Resources())
    quick: dict[str, Any] = Field(default_factory=dict)
    breakdown: Breakdown | None = None

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    # filled by load_suite, not by the file
    path: str | None = Field(None, exclude=True)
    source_hash: str = Field("", exclude=True)
    source_text: str = Field("", exclude=True)

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

    def driver_of(self, variant: str) -> str:
        """The driver a variant uses (its own, or the target's)."""
        return self.variants[variant].driver or self.target.driver

    @property
    def baseline_variant(self) -> str:
        return self.baseline or next(iter(self.variants))

    def workload_params(self, name: str) -> WorkloadParams:
        w = self.workloads[name]
        return parse_params(w.kind, w.params())


# ---- loading ----------------------------------------------------------------------------------

_LOAD_KEYS = set(Load.model_fields)


def split_key(key: str) -> list[str]:
    """Split a dotted key; parts may be quoted with " or '."""
    parts: list[str] = []
    for m in re.finditer(r'"([^"]*)"|\'([^\']*)\'|([^.]+)', key):
        parts.append(next(g for g in m.groups() if g is not None))
    if not parts or any(p == "" for p in parts):
        raise SuiteError(f"--set {key}: not a valid dotted key")
    return parts


def parse_value(text: str) -> Any:
    """A ``--set`` value: TOML when it parses, else the text itself."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def set_key(raw: dict[str, Any], key: str, value: Any) -> None:
    """Set dotted ``key`` to ``value`` in the raw suite mapping, creating tables on the way."""
    parts = split_key(key.strip())
    node: dict[str, Any] = raw
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise SuiteError(f"--set {key}: {part!r} is a value, not a table")
        node = child
    node[parts[-1]] = value


def apply_set(raw: dict[str, Any], assignment: str) -> None:
    """Apply one ``KEY=VALUE`` override to the raw suite mapping."""
    if "=" not in assignment:
        raise SuiteError(f"--set {assignment}: expected KEY=VALUE")
    key, _, value = assignment.partition("=")
    set_key(raw, key, parse_value(value.strip()))


COMPARE_REPEAT = 5  # default repeat with two or more variants (not --quick, not whole commands)

QUICK_CAPS = {"requests": 200, "duration_s": 1.0, "warmup": 5}
QUICK_IDLE_S = 0.2


def _apply_quick(raw: dict[str, Any]) -> None:
    """Small counts, one repetition: a smoke test of any suite."""
    raw["repeat"] = 1
    load = raw.setdefault("load", {})
    load["requests"] = min(
        int(load.get("requests", QUICK_CAPS["requests"])), QUICK_CAPS["requests"]
    )
    if load.get("duration_s") is not None:
        load["duration_s"] = min(float(load["duration_s"]), QUICK_CAPS["duration_s"])
    load["warmup"] = min(int(load.get("warmup", QUICK_CAPS["warmup"])), QUICK_CAPS["warmup"])
    runs = raw.setdefault("runs", {})
    if isinstance(runs, dict):  # command targets: no warmup, 3 runs, no minimum time
        runs["warmup"] = 0
        runs["min_runs"] = min(int(runs.get("min_runs", 3)), 3)
        runs["min_time_s"] = 0.0
        if runs.get("count") is not None:
            runs["count"] = min(int(runs["count"]), 3)
    for w in (raw.get("workloads") or {}).values():
        if isinstance(w, dict):
            for key, cap in QUICK_CAPS.items():
                if w.get(key) is not None:
                    w[key] = min(w[key], cap)
    if isinstance(raw.get("breakdown"), dict):
        rtt = int(raw["breakdown"].get("rtt_requests", QUICK_CAPS["requests"]))
        raw["breakdown"]["rtt_requests"] = min(rtt, QUICK_CAPS["requests"])
    resources = raw.setdefault("resources", {})
    if isinstance(resources, dict):
        resources["idle_s"] = min(float(resources.get("idle_s", QUICK_IDLE_S)), QUICK_IDLE_S)
    for key, value in (raw.get("quick") or {}).items():
        set_key(raw, key, value)


def _format_loc(loc: tuple[Any, ...]) -> str:
    out = []
    for part in loc:
        if isinstance(part, int):
            out.append(f"[{part}]")
        else:
            s = str(part)
            s = f'"{s}"' if (" " in s or "." in s) else s
            out.append(("." if out else "") + s)
    return "".join(out) or "(top level)"


def _validation_message(where: str, exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = _format_loc(tuple(p for p in err["loc"] if p not in ("function-after",)))
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] in ("extra_forbidden", "unexpected_keyword_argument"):
        msg = "unknown key"
    got = err.get("input")
    shown = "" if err["type"] in ("missing",) or isinstance(got, dict) else f" (got {got!r})"
    more = f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{where}: {loc}: {msg}{shown}{more}"


def build_suite(
    raw: dict[str, Any],
    where: str = "<suite>",
    overrides: list[str] | tuple[str, ...] = (),
    quick: bool = False,
    only_workloads: list[str] | None = None,
) -> Suite:
    """Validate a raw mapping (as read from TOML) into a :class:`Suite`."""
    raw = _deep_copy(raw)
    for assignment in overrides:
        apply_set(raw, assignment)
    if quick:
        _apply_quick(raw)
    try:
        suite = Suite.model_validate(raw)
    except ValidationError as exc:
        raise SuiteError(_validation_message(where, exc)) from None
    _check_semantics(suite, where)
    measured_per_request = any(suite.driver_of(v) != "command" for v in suite.variants)
    if "repeat" not in suite.model_fields_set and len(suite.variants) >= 2 and measured_per_request:
        # comparisons need repetitions to give verdicts (whole commands repeat runs: runs.count)
        suite.repeat = COMPARE_REPEAT
    if only_workloads:
        unknown = [w for w in only_workloads if w not in suite.workloads]
        if unknown:
            raise SuiteError(
                f"{where}: workloads: no workload named {unknown[0]!r} "
                f"(have: {', '.join(suite.workloads)})"
            )
        suite.workloads = {k: v for k, v in suite.workloads.items() if k in only_workloads}
    return suite


def _deep_copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_copy(v) for v in value]
    return value


def _open_loop_rates(suite: Suite, where: str) -> None:
    """A rate sweep becomes the matrix dimension ``rate`` (the innermost, after the others)."""
    rates = suite.load.rate_list()
    if rates is not None:
        if "rate" in suite.matrix:
            raise SuiteError(f"{where}: matrix.rate: the rates are given in load already")
        suite.matrix = {**suite.matrix, "rate": rates}
    if suite.load.mode == "closed" and "rate" in suite.matrix:
        raise SuiteError(f'{where}: matrix.rate: an open-loop setting: set load.mode = "open"')
    if suite.load.mode == "open" and suite.load.rate is None and "rate" not in suite.matrix:
        raise SuiteError(
            f"{where}: load.rate: open-loop load needs a rate "
            "(load.rate, load.rates, load.sweep or matrix.rate)"
        )


def _check_option_keys(suite: Suite, vname: str, driver: type[Driver], where: str) -> None:
    """Every option of a variant (the target's and its own) is one its driver declares."""
    known = driver.option_keys
    if known is None:
        return
    variant = suite.variants[vname]
    for key in [*suite.target.options, *variant.options]:
        if key in known:
            continue
        place = (
            f"variants.{_format_loc((vname,))}.options"
            if key in variant.options
            else "target.options"
        )
        close = difflib.get_close_matches(key, sorted(known), n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        have = ", ".join(sorted(known)) or "none"
        raise SuiteError(
            f"{where}: {place}.{key}: driver {driver.name!r} has no option {key!r} "
            f"({hint}its options: {have})"
        )


def no_open_loop(drivers: Iterable[type[Driver]]) -> str | None:
    """Why these drivers cannot run an open loop (None: they can)."""
    for driver in drivers:
        if not driver.open_loop:
            return f"driver {driver.name!r} cannot send requests on a schedule (open loop)"
    return None


def _check_semantics(suite: Suite, where: str) -> None:
    from rpcmeter.drivers import driver_class

    _open_loop_rates(suite, where)

    drivers: dict[str, type[Driver]] = {}
    for key, name in [("target.driver", suite.target.driver)] + [
        (f"variants.{_format_loc((n,))}.driver", v.driver)
        for n, v in suite.variants.items()
        if v.driver
    ]:
        try:
            drivers[name] = driver_class(name)
        except KeyError as exc:
            raise SuiteError(f"{where}: {key}: {exc.args[0]}") from None
    if suite.baseline is not None and suite.baseline not in suite.variants:
        raise SuiteError(
            f"{where}: baseline: no variant named {suite.baseline!r} "
            f"(have: {', '.join(suite.variants)})"
        )
    for vname, v in suite.variants.items():
        driver = drivers[suite.driver_of(vname)]
        transport = v.transport or suite.target.transport
        key = f"variants.{_format_loc((vname,))}.transport" if v.transport else "target.transport"
        if driver.transports and transport not in driver.transports:
            raise SuiteError(
                f"{where}: {key}: driver {driver.name!r} has no transport {transport!r} "
                f"(expected one of: {', '.join(driver.transports)})"
            )
    _check_addresses(suite, where)
    for vname in suite.variants:
        _check_option_keys(suite, vname, drivers[suite.driver_of(vname)], where)
    if suite.load.mode == "open":
        closed = no_open_loop(drivers.values())
        if closed:
            raise SuiteError(f"{where}: load.mode: {closed}")
    default_kind = _default_kind(drivers.values())
    if not suite.workloads and default_kind:
        suite.workloads = {default_kind: Workload(kind=default_kind)}
    if not suite.workloads:
        raise SuiteError(f"{where}: workloads: at least one workload is needed")
    if suite.breakdown is not None:
        for driver in drivers.values():
            if "noop" not in driver.workloads:
                raise SuiteError(
                    f"{where}: breakdown: driver {driver.name!r} has no noop workload to measure "
                    "the round trip with"
                )
    for name, w in suite.workloads.items():
        key = f"workloads.{_format_loc((name,))}"
        if not w.kind:
            w.kind = default_kind or name.replace(" ", "_")
        if w.kind not in KINDS:
            raise SuiteError(
                f"{where}: {key}.kind: unknown workload kind {w.kind!r} "
                f"(expected one of: {', '.join(sorted(KINDS))})"
            )
        for driver in drivers.values():
            if w.kind != "idle" and w.kind not in driver.workloads:  # idle sends no requests
                raise SuiteError(
                    f"{where}: {key}.kind: driver {driver.name!r} cannot run workload {w.kind!r} "
                    f"(it runs: {', '.join(sorted(driver.workloads))})"
                )
        try:
            parse_params(w.kind, w.params())
            Load.model_validate({**suite.load.model_dump(), **w.load_overrides()})
        except ValidationError as exc:
            raise SuiteError(
                _validation_message(where, exc).replace(": ", f": {key}.", 1)
            ) from None
    for key, values in suite.matrix.items():
        in_workloads = all(KINDS[w.kind].accepts(key) for w in suite.workloads.values())
        if key not in _LOAD_KEYS and not in_workloads:
            raise SuiteError(
                f"{where}: matrix.{key}: not a load setting nor a parameter of every workload "
                f"(load settings: {', '.join(sorted(_LOAD_KEYS - {'mode', 'rates', 'sweep'}))})"
            )
        for value in values:
            try:
                if key in _LOAD_KEYS:
                    Load.model_validate({**suite.load.model_dump(), key: value})
                else:
                    for w in suite.workloads.values():
                        parse_params(w.kind, {**w.params(), key: value})
            except ValidationError as exc:
                raise SuiteError(
                    _validation_message(where, exc).replace(": ", f": matrix.{key}: ", 1)
                ) from None
    for driver in drivers.values():
        driver.check_suite(suite, where)


def _default_kind(drivers: Any) -> str | None:
    """The workload kind when every driver runs exactly one (a command target's ``command``):
    workloads may then leave out ``kind``, and a suite without workloads gets one."""
    kinds = [d.workloads for d in drivers]
    if kinds and all(len(k) == 1 for k in kinds) and len(set(kinds)) == 1:
        return str(next(iter(kinds[0])))
    return None


def _check_addresses(suite: Suite, where: str) -> None:
    """A remote address must parse and suit the driver; it excludes a server command."""
    from rpcmeter.drivers import driver_class
    from rpcmeter.servers.process import remote_endpoint

    for vname, v in suite.variants.items():
        address = suite.address_of(vname)
        if address is None:
            continue
        key = f"variants.{_format_loc((vname,))}.address" if v.address else "target.address"
        spec = v.server or suite.target.server
        if spec.command is not None:
            raise SuiteError(
                f"{where}: {key}: a remote target ({address!r}) has no server command "
                "(remove server.command)"
            )
        try:
            endpoint = remote_endpoint(address, v.transport or suite.target.transport)
        except ValueError as exc:
            raise SuiteError(f"{where}: {key}: {exc}") from None
        driver = driver_class(suite.driver_of(vname))
        if endpoint.transport not in driver.transports:
            raise SuiteError(
                f"{where}: {key}: driver {driver.name!r} has no transport "
                f"{endpoint.transport!r} (address {address!r})"
            )


def load_suite(
    path: str | Path,
    overrides: list[str] | tuple[str, ...] = (),
    quick: bool = False,
    only_workloads: list[str] | None = None,
) -> Suite:
    """Read, override and validate a suite file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SuiteError(f"{p}: no such suite file") from None
    except OSError as exc:
        raise SuiteError(f"{p}: cannot read: {exc.strerror}") from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SuiteError(f"{p}: invalid TOML: {exc}") from None
    suite = build_suite(raw, str(p), overrides, quick, only_workloads)
    suite.path = str(p)
    suite.source_text = text
    suite.source_hash = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return suite


def builtin_suite_path(name: str = "demo") -> Path:
    """Path of a suite shipped inside the package (``rpcmeter run`` without arguments)."""
    return Path(__file__).parent / "suites" / f"{name}.toml"
