"""The one precomputed view every reporter draws: built once from a result by :func:`build`.

Cells (workload x matrix point x variant, repetitions merged), the comparison of variants with
its verdicts, and every table the reports show (the summary per workload, the ranking, where the
time goes, CPU and memory, whole commands, streaming per message, connection costs) as
:class:`~rpcmeter.reporters.tables.Grid` data, with the run's header, its problems, warnings and
plots. This module is the only one of the reporters that reads the result document; the terminal,
Markdown, HTML, CSV and JSON reporters read a :class:`View` (and :mod:`.format` for numbers).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property

from rpcmeter import analysis, checks
from rpcmeter.aggregate import Cell, PointKey, baseline, cells, variant_names
from rpcmeter.breakdown import overhead_cell
from rpcmeter.metrics.histogram import Histogram
from rpcmeter.model import (
    Case,
    CaseProfile,
    Connections,
    Environment,
    Json,
    MaxRate,
    Part,
    Placement,
    Result,
)
from rpcmeter.placement import describe as describe_placement
from rpcmeter.profile import summary_lines as profile_summary
from rpcmeter.rates import Series, rate_series
from rpcmeter.reporters.calls import calls_grid
from rpcmeter.reporters.format import (
    fmt_bytes,
    fmt_mb,
    fmt_ms,
    fmt_num,
    fmt_rate,
    fmt_ratio,
    fmt_s,
    ratio,
)
from rpcmeter.reporters.plots import Plot, all_plots
from rpcmeter.reporters.tables import (
    Grid,
    GridCell,
    Mark,
    comparison_grids,
    summary_grid,
)

Cells = Mapping[PointKey, Mapping[str, Cell]]

MAX_RATIO_VARIANTS = 3  # beyond this many variants the terminal shows the ranking table only


@dataclass(frozen=True)
class Run:
    """What the report's header says about the run."""

    name: str
    description: str
    run_id: str
    status: str
    started_at: str
    finished_at: str
    repeat: int
    version: str
    cases: int
    ok_cases: int
    matrix_keys: tuple[str, ...]
    variant_settings: Mapping[str, Json]  # each variant's settings as the suite gave them
    suite_path: str
    suite_text: str
    environment: Environment
    environment_line: str

    @property
    def title(self) -> str:
        return self.name or "suite"


@dataclass(frozen=True)
class Problem:
    """A case that failed (``status`` not ok) or that had errors (``status`` ok, ``errors``)."""

    status: str
    variant: str
    workload: str
    point: PointKey
    repetition: int
    reason: str
    errors: tuple[tuple[str, int], ...]
    error_sample: str
    server_output_tail: str

    @property
    def where(self) -> str:
        """``variant · workload · k=v ...``."""
        point = " ".join(f"{k}={v}" for k, v in self.point)
        return f"{self.variant} · {self.workload}" + (f" · {point}" if point else "")


@dataclass(frozen=True)
class CaseFigures:
    """One case's numeric figures as (dotted metric name, value), for the tidy CSV."""

    id: int
    variant: str
    workload: str
    point: PointKey
    repetition: int
    status: str
    metrics: tuple[tuple[str, float], ...]


@dataclass(frozen=True)
class Profile:
    """One profile of a case (:mod:`rpcmeter.profile`) as stored."""

    case_id: int
    variant: str
    point: PointKey
    role: str
    doc: CaseProfile


@dataclass(frozen=True)
class WorkloadView:
    name: str
    kind: str  # "requests", "command" (whole commands) or "idle"
    cells: Cells
    summary: Grid  # per point: the baseline's figures, other variants as ratios, wall times
    summary_narrow: Grid  # the same without wall times beside three or more variants
    ranking: Grid | None  # with more than one variant
    breakdown: Grid | None  # where the time goes, bytes per request
    streams: Grid | None  # streaming cases, per message
    resources: Grid | None  # CPU and memory, both sides
    connections: Grid | None  # connect and TLS handshake times
    command: Grid | None  # whole-command runs: wall, CPU, memory, ratios with verdicts
    clients: Grid | None  # command clients' runs, per request (Suite.command_client)
    profile_lines: tuple[str, ...]
    profiles: tuple[Profile, ...]
    calls: Grid | None = None  # a mix's calls apart (rpcmeter.reporters.calls)

    @property
    def tables(self) -> list[Grid]:
        """The detail tables, in report order (the summary and ranking apart)."""
        return [
            g
            for g in (
                self.command,
                self.clients,
                self.calls,
                self.breakdown,
                self.streams,
                self.resources,
                self.connections,
            )
            if g is not None
        ]


@dataclass(frozen=True)
class View:
    run: Run
    variants: tuple[str, ...]
    baseline: str
    workloads: tuple[WorkloadView, ...]
    comparisons: analysis.Comparison  # rpcmeter.analysis.compare_variants
    has_verdicts: bool
    comparison_tables: tuple[Grid, ...]  # per workload, then the geometric means
    rates: tuple[Series, ...]  # open loop: latency against offered rate
    max_rate: tuple[MaxRate, ...]  # rate searches
    problems: tuple[Problem, ...]
    warnings: tuple[str, ...]
    tls_lines: tuple[str, ...]
    wait_lines: tuple[str, ...]
    spread_lines: tuple[str, ...]
    cases: tuple[CaseFigures, ...]
    result: Result

    @cached_property
    def document(self) -> Json:
        """The result document with its comparisons and warnings, as JSON writes it."""
        return self.result.to_json()

    @property
    def failed(self) -> list[Problem]:
        return [p for p in self.problems if p.status != "ok"]

    @cached_property
    def plots(self) -> Mapping[str, tuple[Plot, ...]]:
        """Workload -> its plots, in report order; ``""``: plots across workloads (idle CPU).
        Made on first use: only the HTML and PNG reports draw them."""
        return {w: tuple(p) for w, p in all_plots(self.result).items()}

    @property
    def all_plots(self) -> list[Plot]:
        """Every plot, in page order."""
        return [p for plots in self.plots.values() for p in plots]


@dataclass(frozen=True)
class ComparisonView:
    """A comparison of two runs (``rpcmeter compare``, ``run --baseline``)."""

    header: tuple[str, ...]
    comparison: analysis.Comparison
    tables: tuple[Grid, ...]
    warnings: tuple[str, ...]

    @property
    def document(self) -> Json:
        """The comparison document, as JSON writes it."""
        return self.comparison.to_json()

    @property
    def empty(self) -> bool:
        return not self.comparison.rows


def as_view(value: View | Result) -> View:
    """``value`` itself when it is a view, else the view of a result."""
    return value if isinstance(value, View) else build(value)


def comparison_view(doc: analysis.Comparison, header: list[str]) -> ComparisonView:
    summary = summary_grid(doc)
    return ComparisonView(
        tuple(header),
        doc,
        tuple([*comparison_grids(doc), *([summary] if summary else [])]),
        doc.warnings,
    )


# ---- building the view ----------------------------------------------------------------------


def build(result: Result) -> View:
    """The view of a result (the only reading of the result for reports)."""
    suite = result.suite
    grid_all = cells(result)
    names = variant_names(result)
    base = baseline(result)
    keys = list(suite.matrix_keys)
    comparisons = result.comparisons
    verdicts = analysis.has_verdicts(comparisons)
    summary = summary_grid(comparisons) if verdicts else None
    run = Run(
        name=suite.name,
        description=suite.description or "",
        run_id=result.run_id,
        status=result.status,
        started_at=result.started_at or "?",
        finished_at=result.finished_at or "-",
        repeat=suite.repeat,
        version=str(_given(result, "rpcmeter_version")),
        cases=len(result.cases),
        ok_cases=sum(1 for c in result.cases if c.status == "ok"),
        matrix_keys=tuple(keys),
        variant_settings=suite.variants,
        suite_path=suite.path or "",
        suite_text=suite.text or "",
        environment=result.environment,
        environment_line=environment_line(result),
    )
    workloads = tuple(
        _workload(result, w, grid_all[w], keys, names, base, comparisons) for w in grid_all
    )
    return View(
        run=run,
        variants=tuple(names),
        baseline=base,
        workloads=workloads,
        comparisons=comparisons,
        has_verdicts=verdicts,
        comparison_tables=tuple(
            [*comparison_grids(comparisons), *([summary] if summary else [])] if verdicts else []
        ),
        rates=tuple(rate_series(result)),
        max_rate=tuple(result.max_rate or []),
        problems=tuple(_problems(result)),
        warnings=tuple(result.warnings),
        tls_lines=tuple(tls_lines(result)),
        wait_lines=tuple(wait_lines(result, grid_all)),
        spread_lines=tuple(spread_lines(result)),
        cases=tuple(
            CaseFigures(
                c.id,
                c.variant,
                c.workload,
                tuple((k, c.point.get(k, "")) for k in keys),
                c.repetition,
                c.status,
                tuple(case_metrics(c)),
            )
            for c in result.cases
        ),
        result=result,
    )


def _workload(
    result: Result,
    workload: str,
    grid: dict[PointKey, dict[str, Cell]],
    keys: list[str],
    names: list[str],
    base: str,
    comparisons: analysis.Comparison,
) -> WorkloadView:
    kinds = {c.kind for c in result.cases if c.workload == workload}
    kind = "command" if "command" in kinds else "idle" if kinds == {"idle"} else "requests"
    verdicts = analysis.has_verdicts(comparisons)
    return WorkloadView(
        name=workload,
        kind=kind,
        cells=grid,
        summary=workload_grid(workload, grid, keys, names, base, verdicts, walls=True),
        summary_narrow=workload_grid(
            workload, grid, keys, names, base, verdicts, walls=len(names) <= 2
        ),
        ranking=ranking_grid(workload, grid, keys, base) if len(names) > 1 else None,
        breakdown=breakdown_grid(workload, grid, keys, several=len(names) > 1),
        streams=stream_grid(workload, grid, keys),
        resources=resource_grid(workload, grid, keys),
        connections=connection_grid(workload, grid, keys),
        command=(
            command_grid(workload, grid, keys, names, base, comparisons)
            if kind == "command"
            else None
        ),
        clients=client_command_grid(workload, grid, keys),
        calls=calls_grid(workload, grid, keys),
        profile_lines=tuple(profile_lines(result, workload)),
        profiles=tuple(
            Profile(c.id, c.variant, tuple(c.point.items()), role, p)
            for c in result.cases
            if c.workload == workload
            for role, p in _profiles(c).items()
        ),
    )


# ---- the header ------------------------------------------------------------------------------


def environment_line(result: Result) -> str:
    env = result.environment
    pkgs = ", ".join(f"{k} {v}" for k, v in env.packages.items() if v)
    placement = env.placement or Placement()
    return (
        f"{_given(env, 'cpu_model')} ({_given(env, 'cpu_count')} CPUs) · {_given(env, 'os')} · "
        f"Python {_given(env, 'python')}"
        + (f" · {pkgs}" if pkgs else "")
        + f" · {placement_phrase(placement)}"
    )


def _given(part: Part, field: str) -> object:
    """A field as the document gave it (``?`` when it did not)."""
    return getattr(part, field) if field in part.model_fields_set else "?"


def placement_phrase(placement: Placement) -> str:
    """The placement as applied: one phrase, and each variant placed otherwise after it."""
    phrase = describe_placement(placement)
    for name, own in (placement.by_variant or {}).items():
        if describe_placement(own) != phrase:
            phrase += f"; {name}: {describe_placement(own)}"
    return phrase


def tls_lines(result: Result) -> list[str]:
    """One line per variant that does not verify the server's certificate (``tls.verify =
    false``): its figures are of a connection nobody authenticated."""
    off = [v for v, t in (result.environment.tls or {}).items() if not t.verify]
    if not off:
        return []
    return [f"TLS certificate verification OFF (tls.verify = false): {', '.join(off)}"]


def wait_lines(result: Result, grid_all: Mapping[str, Cells] | None = None) -> list[str]:
    """When clients polled for replies without sleeping (``wait = "spin"`` in the suite's load, a
    workload's or the matrix): where it was set, the polling budget (``spin_us``) where one was
    set, and that the client CPU of those cases includes the polling; then the polls per request
    of each cell that spun (counter ``polls``), so the cost of the polling shows beside it."""
    suite = result.suite

    def places(key: str, hit: Callable[[object], bool]) -> list[str]:
        where = ["load"] if hit(suite.load.get(key)) else []
        where += [
            f"workload {name}"
            for name, w in suite.workloads.items()
            if isinstance(w, dict) and hit(w.get(key))
        ]
        return where + (["matrix"] if any(hit(v) for v in suite.matrix.get(key, [])) else [])

    where = places("wait", lambda v: v == "spin")
    if not where:
        return []
    spun = [c for c in result.cases if checks.spinning(result, c)]
    budgets = sorted(
        {b for c in spun if (b := checks.load_setting(result, c, "spin_us")) is not None}
    )
    bounded_only = len(budgets) > 0 and all(
        checks.load_setting(result, c, "spin_us") is not None for c in spun
    )
    line = "clients poll for replies" + ("" if bounded_only else " without sleeping")
    line += f' (wait = "spin" in {", ".join(where)})'
    if budgets:
        us = ", ".join(f"{b:g}" for b in budgets)
        line += (
            f", {'' if bounded_only else 'those with a budget '}for at most {us} us after each "
            "reply or send, then sleep until the next event (spin_us in "
            f"{', '.join(places('spin_us', lambda v: v is not None))})"
        )
    line += ": their client CPU includes the polling" + (
        "" if bounded_only else ", about a core per client process"
    )
    grid_all = grid_all if grid_all is not None else cells(result)
    spun_ids = {c.id for c in spun}
    many_variants = len(variant_names(result)) > 1
    polls = []
    for workload, grid in grid_all.items():
        for point, row in grid.items():
            for variant, cell in row.items():
                per = _per_request(cell, "polls")
                if not any(c.id in spun_ids for c in cell.cases) or not math.isfinite(per):
                    continue
                label = [workload] if len(grid_all) > 1 else []
                label += [analysis.point_label(dict(point))] if point else []
                label += [variant] if many_variants else []
                polls.append(f"{' · '.join(label)} {fmt_num(per)}".strip())
    lines = [line]
    if polls:
        lines.append(f"polls per request (client): {', '.join(polls)}")
    return lines


def spread_lines(result: Result) -> list[str]:
    """For load from a cluster: how evenly the workers carried it (per-worker throughput, lowest
    over highest; median over the cases and the worst case)."""
    cluster = result.environment.cluster
    spread = [
        (c.spread.min_max_ratio, c)
        for c in result.cases
        if c.spread is not None and c.spread.min_max_ratio is not None
    ]
    if cluster is None or not spread:
        return []
    spread.sort(key=lambda rc: rc[0])
    worst, case = spread[0]
    median = spread[len(spread) // 2][0]
    point = " ".join(f"{k}={v}" for k, v in case.point.items())
    lost = sum(c.spread.lost or 0 for c in result.cases if c.spread is not None)
    return [
        f"load spread over {cluster.workers} Dask workers ({cluster.spec}): per-worker "
        f"req/s min/max median {fmt_ratio(median)}, worst {fmt_ratio(worst)}"
        + (f"; {lost} worker(s) lost" if lost else ""),
        f"  worst: {case.variant} · {case.workload}" + (f" · {point}" if point else ""),
    ]


def profile_lines(result: Result, workload: str) -> list[str]:
    """The top frames by self time of every profiled case of ``workload``."""
    out: list[str] = []
    for case in result.cases:
        if case.workload == workload and case.profiles:
            point = ",".join(f"{k}={v}" for k, v in case.point.items())
            label = " · ".join(x for x in (workload, case.variant, point) if x)
            out += profile_summary(_profiles(case), label)
    return out


def _profiles(case: Case) -> Mapping[str, CaseProfile]:
    """A case's profiles: role -> its profile (rpcmeter.profile)."""
    return case.profiles or {}


def _problems(result: Result) -> Iterator[Problem]:
    for c in result.cases:
        if c.status == "ok" and not c.errors:
            continue
        yield Problem(
            status=c.status,
            variant=c.variant,
            workload=c.workload,
            point=tuple(c.point.items()),
            repetition=c.repetition,
            reason=c.reason or "",
            errors=tuple(c.errors.items()),
            error_sample=next(iter(c.error_samples.values()), ""),
            server_output_tail=c.server_output_tail or "",
        )


# ---- CSV figures -----------------------------------------------------------------------------

SECTIONS = ("latency", "server_time", "bytes", "cpu", "memory")
# top-level figures of a case and their metric names (``ok``, the requests that succeeded, would
# read like the status column beside it)
TOP_LEVEL = (
    ("requests", "requests"),
    ("ok", "requests_ok"),
    ("wall_s", "wall_s"),
    ("throughput_rps", "throughput_rps"),
)


def case_metrics(case: Case) -> Iterator[tuple[str, float]]:
    """Every numeric figure the case recorded, as (dotted name, value)."""
    for key, name in TOP_LEVEL:
        value = getattr(case, key) if key in case.model_fields_set else None
        if isinstance(value, int | float):
            yield name, value
    yield "errors", sum(case.errors.values())
    for section in SECTIONS:
        part = getattr(case, section)
        values = part.dump() if part is not None and section in case.model_fields_set else {}
        for key, value in values.items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                yield f"{section}.{key}", value


# ---- the tables ------------------------------------------------------------------------------


def workload_grid(
    workload: str,
    grid: Cells,
    keys: list[str],
    names: list[str],
    base: str,
    verdicts: bool,
    walls: bool = True,
) -> Grid:
    """Per matrix point: the baseline's latency and throughput; every other variant as ratios to
    the baseline (left out when the comparison tables give them with intervals and verdicts);
    with ``walls``, each variant's wall time."""
    others = [] if verdicts else [v for v in names if v != base]
    columns = [*keys, f"{base}\nmean ms", "\nsd ms", "\np50 ms", "\np99 ms", "\nreq/s"]
    for v in others:
        columns += [f"{v}\nmean", "\np99", "\nreq/s"]
    if walls:
        columns.append("wall s\n" + " / ".join(names))
    any_errors = any(c.errors for row in grid.values() for c in row.values())
    if any_errors:
        columns.append("errors")
    note = f"baseline {base}; other variants as ratios to it" if others else ""
    out = Grid(workload, columns, note=note)
    for point, row in grid.items():
        pd = dict(point)
        b: Cell | None = row.get(base)
        cols: list[GridCell] = [str(pd.get(k, "")) for k in keys]
        if b is None or not b.ok_cases:
            cols += [Mark("failed", "bad"), "", "", "", ""]
        else:
            cols += [
                fmt_ms(b.latency_us("mean")),
                fmt_ms(b.latency_us("stdev")),
                fmt_ms(b.latency_us("p50")),
                fmt_ms(b.latency_us("p99")),
                fmt_rate(b.mean("throughput_rps")),
            ]
        for v in others:
            c = row.get(v)
            if c is None or not c.ok_cases or b is None or not b.ok_cases:
                cols += [Mark("failed", "bad") if c is not None else "-", "", ""]
                continue
            cols += [
                fmt_ratio(ratio(c.latency_us("mean"), b.latency_us("mean"))),
                fmt_ratio(ratio(c.latency_us("p99"), b.latency_us("p99"))),
                fmt_ratio(ratio(c.mean("throughput_rps"), b.mean("throughput_rps"))),
            ]
        if walls:
            cols.append(
                " / ".join(fmt_s(row[v].mean("wall_s")) if v in row else "-" for v in names)
            )
        if any_errors:
            cols.append(str(sum(c.errors for c in row.values())))
        out.rows.append(cols)
    return out


def _point_grid(title: str, keys: list[str], note: str = "", variant: bool = True) -> Grid:
    """A grid whose rows start with the matrix point's values (right-aligned) and the variant
    (left-aligned)."""
    return Grid(
        title,
        [*keys, *(["variant"] if variant else [])],
        note=note,
        left_at=frozenset([len(keys)] if variant else []),
    )


def _per_request(cell: Cell, counter: str) -> float:
    """A driver counter divided by the requests of the cases that have it."""
    total = n = 0
    for case in cell.ok_cases:
        value = (case.counters or {}).get(counter)
        if value is not None and case.requests:
            total += value
            n += case.requests
    return total / n if n else math.nan


def ranking_grid(workload: str, grid: Cells, keys: list[str], base: str) -> Grid:
    """Rows: matrix point x variant, sorted by requests/s (highest first) within each point."""
    all_cells = [c for row in grid.values() for c in row.values()]
    has_server = any(c.values("server_time.mean_us") for c in all_cells)
    has_bytes = any(c.values("bytes.out_per_request") for c in all_cells)
    has_block = any(math.isfinite(_per_request(c, "would_block_ns")) for c in all_cells)
    out = _point_grid(f"{workload} · ranked by requests/s", keys)
    out.no_wrap = frozenset([len(keys)])
    out.columns += ["req/s", f"req/s ÷\n{base}", "mean ms", "p90 ms", "p95 ms", "p99 ms", "wall s"]
    if has_server:
        out.columns.append("server ms")
    if has_block:
        out.columns.append("would block ms")
    if has_bytes:
        out.columns += ["B out", "B in"]
    for point, row in grid.items():
        pd = dict(point)
        ranked = sorted(
            row.values(),
            key=lambda c: -c.mean("throughput_rps") if c.ok_cases else math.inf,
        )
        b = row.get(base)
        base_rps = b.mean("throughput_rps") if b is not None else math.nan
        for i, c in enumerate(ranked):
            cols: list[GridCell] = [str(pd.get(k, "")) if i == 0 else "" for k in keys]
            cols.append(c.variant)
            if not c.ok_cases:
                cols.append(Mark("failed", "bad"))
                cols += [""] * (len(out.columns) - len(cols))
                out.rows.append(cols)
                continue
            cols += [
                fmt_rate(c.mean("throughput_rps")),
                fmt_ratio(ratio(c.mean("throughput_rps"), base_rps)),
                fmt_ms(c.latency_us("mean")),
                fmt_ms(c.latency_us("p90")),
                fmt_ms(c.latency_us("p95")),
                fmt_ms(c.latency_us("p99")),
                fmt_s(c.mean("wall_s")),
            ]
            if has_server:
                cols.append(fmt_ms(c.mean("server_time.mean_us")))
            if has_block:
                cols.append(fmt_ms(_per_request(c, "would_block_ns") / 1e3))
            if has_bytes:
                cols += [fmt_bytes(c.mean(f"bytes.{d}_per_request")) for d in ("out", "in")]
            out.rows.append(cols)
    return out


def _mean_sd(cell: Cell, key: str) -> str:
    mean, sd = cell.mean(f"{key}.mean"), cell.mean(f"{key}.stdev")
    return "-" if not math.isfinite(mean) else f"{fmt_ms(mean)} ± {fmt_ms(sd)}"


def _round_trip(cell: Cell) -> GridCell:
    """The round trip's median (p99) in a version-2 document, mean ± sd in a version-1 one;
    ``network RTT`` for a remote target's breakdown, whose round trip is the network's."""
    if cell.ok_cases and all(
        c.breakdown is not None and c.breakdown.rtt_basis == "network" for c in cell.ok_cases
    ):
        return Mark("network RTT", "dim")
    p50 = cell.mean("breakdown.rtt_us.p50")
    if not math.isfinite(p50):
        return _mean_sd(cell, "breakdown.rtt_us")
    return f"{fmt_ms(p50)} (p99 {fmt_ms(cell.mean('breakdown.rtt_us.p99'))})"


def _queue(cell: Cell) -> str:
    """The queue time, or ``unknown`` when the replies carried no queue time (a version-1
    document has no such column: ``-``)."""
    parts = [c.breakdown for c in cell.ok_cases]
    if parts and all(
        b is not None and "queue_us" in b.model_fields_set and b.server_us and not b.queue_us
        for b in parts
    ):
        return "unknown"
    return _mean_sd(cell, "breakdown.queue_us")


def _overhead(cell: Cell) -> GridCell:
    """The overhead: mean ± half its 95 % interval, or ``~0 (within noise)`` when the interval
    includes 0 (in any repetition); a version-1 document's mean ± sd."""
    shown = [s for c in cell.ok_cases if (s := overhead_cell(c.breakdown))]
    if not shown:
        return "-"
    if any(kind == "noise" for kind, _, _ in shown):
        return Mark("~0 (within noise)", "dim")
    mean = sum(m for _, m, _ in shown) / len(shown)
    half = max(h for _, _, h in shown)
    text = f"{fmt_ms(mean)} ± {fmt_ms(half)}"
    return Mark(text, "bad") if mean < 0 else text


def breakdown_grid(workload: str, grid: Cells, keys: list[str], several: bool) -> Grid | None:
    """Where the time goes (study 004's table): per matrix point and variant, latency, server
    compute, round trip and overhead (mean ± sd, ms; means over repetitions), and bytes sent and
    received per request. None when the workload's cases have neither breakdown nor bytes."""
    all_cells = [c for row in grid.values() for c in row.values()]
    with_breakdown = any(c.values("breakdown.rtt_us.mean") for c in all_cells)
    with_bytes = any(c.values("bytes.out_per_request") for c in all_cells)
    with_network = any(c.values("network_rtt_us.p50") for c in all_cells)
    if not (with_breakdown or with_bytes or with_network):
        return None
    title, note = (
        (
            "where the time goes",
            "ms: mean ± sd; round trips: median; overhead: mean ± 95 % interval",
        )
        if with_breakdown or with_network
        else ("bytes per request", "ms: mean ± sd")
    )
    out = _point_grid(f"{workload} · {title}", keys, note, variant=several)
    out.columns += ["req/s", "latency"]
    if with_network:
        out.columns += ["network RTT", "latency -\nnetwork RTT"]
    if with_breakdown:
        out.columns += ["round trip", "queue", "server compute", "overhead"]
    if with_bytes:
        out.columns += ["bytes out", "bytes in"]
    for point, row in grid.items():
        pd = dict(point)
        for variant, cell in row.items():
            cols: list[GridCell] = [str(pd.get(k, "")) for k in keys]
            if several:
                cols.append(variant)
            if not cell.ok_cases:
                out.rows.append([*cols, Mark("failed", "bad")])
                continue
            cols.append(fmt_rate(cell.mean("throughput_rps")))
            cols.append(f"{fmt_ms(cell.latency_us('mean'))} ± {fmt_ms(cell.latency_us('stdev'))}")
            if with_network:
                network = cell.mean("network_rtt_us.p50")
                cols += [fmt_ms(network), fmt_ms(cell.latency_us("mean") - network)]
            if with_breakdown:
                cols += [
                    _round_trip(cell),
                    _queue(cell),
                    _mean_sd(cell, "breakdown.server_us"),
                    _overhead(cell),
                ]
            if with_bytes:
                cols += [
                    fmt_bytes(cell.mean("bytes.out_per_request")),
                    fmt_bytes(cell.mean("bytes.in_per_request")),
                ]
            out.rows.append(cols)
    return out


def merged(cell: Cell, key: str) -> Histogram:
    """The ``stream.{key}`` histograms of the cell's good repetitions, merged."""
    out = Histogram()
    for case in cell.ok_cases:
        h = getattr(case.stream, key) if case.stream is not None else None
        if h is not None and h.count:
            out.merge(h)
    return out


def _us(value: float) -> str:
    return "-" if not math.isfinite(value) else f"{value:,.1f}"


def stream_grid(workload: str, grid: Cells, keys: list[str]) -> Grid | None:
    """Streaming cases (workload ``stream``): per point and variant, streams and messages per
    second, time to the first message, per-message latency, whole-stream duration, bytes and CPU
    per message. Percentiles come from the repetitions' histograms merged (exactly); rates, bytes
    and CPU are means over the repetitions. None when the workload's cases have no stream
    figures."""
    if not any(c.stream for row in grid.values() for cell in row.values() for c in cell.ok_cases):
        return None
    out = _point_grid(f"{workload} · per message", keys, "ms; CPU: us per message")
    out.columns += [
        "streams/s",
        "msgs/s",
        "first msg\np50",
        "per msg\np50",
        "per msg\np99",
        "stream\np50",
        "bytes/msg\nout",
        "bytes/msg\nin",
        "client\nCPU/msg",
        "server\nCPU/msg",
    ]
    for point, row in grid.items():
        pd = dict(point)
        for variant, cell in row.items():
            cols: list[GridCell] = [*(str(pd.get(k, "")) for k in keys), variant]
            if not cell.ok_cases:
                out.rows.append([*cols, Mark("failed", "bad")])
                continue
            first, each = merged(cell, "first_message_histogram"), merged(cell, "message_histogram")
            cols += [
                fmt_rate(cell.mean("stream.streams_per_s")),
                fmt_rate(cell.mean("stream.messages_per_s")),
                fmt_ms(first.percentile(50) / 1e3),
                fmt_ms(each.percentile(50) / 1e3),
                fmt_ms(each.percentile(99) / 1e3),
                fmt_ms(cell.hist.percentile(50) / 1e3),
                f"{cell.mean('stream.bytes_out_per_message'):,.0f}",
                f"{cell.mean('stream.bytes_in_per_message'):,.0f}",
                _us(cell.mean("stream.cpu_us_per_message.client")),
                _us(cell.mean("stream.cpu_us_per_message.server")),
            ]
            out.rows.append(cols)
    return out


RESOURCE_COLUMNS = (  # header, case metric, formatter
    ("server\nus/req", "cpu.server_us_per_request", fmt_num),
    ("client\nus/req", "cpu.client_us_per_request", fmt_num),
    ("server\nCPU %", "cpu.server_util_pct", fmt_num),
    ("client\nCPU %", "cpu.client_util_pct", fmt_num),
    ("idle\n% core", "cpu.server_idle_pct", fmt_num),
    ("server\nRSS MB", "memory.server_peak_rss_bytes", fmt_mb),
    ("client\nRSS MB", "memory.client_peak_rss_bytes", fmt_mb),
)


def server_cpu_note(grid: Cells) -> str:
    """Where the server CPU figures of the good cases came from (``cpu.server_source``): its
    cgroup's accounting or the sum over its process tree; empty when no case says."""
    sources = [
        c.cpu.server_source
        for row in grid.values()
        for cell in row.values()
        for c in cell.ok_cases
        if c.cpu is not None and c.cpu.server_source is not None
    ]
    cgroup = sources.count("cgroup")
    if not sources:
        return ""
    if cgroup == len(sources):
        return "server CPU from its cgroup"
    if cgroup == 0:
        return "server CPU from its process tree"
    return f"server CPU from its cgroup in {cgroup} of {len(sources)} cases, else its process tree"


def resource_grid(workload: str, grid: Cells, keys: list[str]) -> Grid | None:
    """CPU per request (user + system) of server and clients, each side's CPU use as a share of
    the CPUs it was given, the server's idle CPU and peak memory; one row per point and variant
    (means over repetitions; ``-``: not measured), noting where the server CPU came from. None
    without a good case."""
    out = _point_grid(f"{workload} · CPU and memory", keys, server_cpu_note(grid))
    out.columns += [header for header, _, _ in RESOURCE_COLUMNS]
    for point, row in grid.items():
        pd = dict(point)
        for variant, cell in row.items():
            if cell.ok_cases:
                values = [fmt(cell.mean(metric)) for _, metric, fmt in RESOURCE_COLUMNS]
                out.rows.append([*(str(pd.get(k, "")) for k in keys), variant, *values])
    return out if out.rows else None


CONNECTION_PARTS = (
    ("connect", "connect"),
    ("handshake", "TLS handshake"),
    ("handshake_resumed", "resumed handshake"),
    ("request", "request"),
)


def connection_histogram(connections: Connections, part: str) -> Histogram | None:
    """The histogram of one part of a case's connection costs (``connect``, ``handshake``,
    ...), None when the case has no such part."""
    timing = connections.timing(part)
    return timing.histogram if timing is not None else None


def connection_grid(workload: str, grid: Cells, keys: list[str]) -> Grid | None:
    """What connections cost (cases whose driver timed them): connections opened per case, TCP
    connect, TLS handshake (full and resumed apart) and, with a new connection per request
    (``load.reuse = false``), the request's own time; p50 and p99 of the histograms merged over
    repetitions. None when no case of the workload has them."""
    rows: list[tuple[PointKey, str, dict[str, Histogram], float]] = []
    present: set[str] = set()
    for point, row in grid.items():
        for variant, cell in row.items():
            docs = [c.connections for c in cell.ok_cases if c.connections]
            if not docs:
                continue
            hists = {
                part: Histogram.merged(h for d in docs if (h := connection_histogram(d, part)))
                for part, _ in CONNECTION_PARTS
            }
            present |= {part for part, h in hists.items() if h.count}
            rows.append((point, variant, hists, statistics.fmean(d.opened or 0 for d in docs)))
    if not rows:
        return None
    out = _point_grid(f"{workload} · connections", keys, "ms: p50 / p99")
    parts = [(part, label) for part, label in CONNECTION_PARTS if part in present]
    out.columns += ["opened", *(label for _, label in parts)]
    for point, variant, hists, opened in rows:
        pd = dict(point)
        values = [
            f"{fmt_ms(hists[part].percentile(50) / 1e3)} / "
            f"{fmt_ms(hists[part].percentile(99) / 1e3)}"
            if hists[part].count
            else "-"
            for part, _ in parts
        ]
        out.rows.append([*(str(pd.get(k, "")) for k in keys), variant, f"{opened:,.0f}", *values])
    return out


def command_grid(
    workload: str,
    grid: Cells,
    keys: list[str],
    names: list[str],
    base: str,
    comparisons: analysis.Comparison,
) -> Grid:
    """A whole-command workload: one row per matrix point and variant, with means over runs (wall
    time, user, system and total CPU of the process tree, CPUs kept busy, peak memory of the
    largest process) and, for every variant but the baseline, the wall and CPU ratios to the
    baseline with the verdicts of the run's comparisons (rpcmeter.analysis: run by run)."""
    rows = {(r.workload, tuple(r.point.items()), r.variant, r.metric): r for r in comparisons.rows}
    compared = len(names) > 1
    note = "means over runs" + (f"; ratios to {base}, verdicts over runs" if compared else "")
    out = _point_grid(workload, keys, note)
    out.columns += ["runs", "wall s", "± s", "user s", "sys s", "CPU s", "CPUs", "peak MB"]
    if compared:
        out.columns += ["wall ratio", "CPU ratio"]
    for point, row in grid.items():
        pd = dict(point)
        base_cell = row.get(base)
        for name, cell in row.items():
            cols: list[GridCell] = [*(str(pd.get(k, "")) for k in keys), name]
            wall = cell.values("runs.wall_s")
            if not wall:
                out.rows.append([*cols, Mark("failed", "bad"), *[""] * (9 if compared else 7)])
                continue
            user, sys_, cpu = (cell.values(f"runs.{m}_s") for m in ("user", "sys", "cpu"))
            mean_wall, mean_cpu = statistics.fmean(wall), statistics.fmean(cpu)
            peak = max(r.max_rss_bytes for c in cell.ok_cases for r in c.runs or [])
            cols += [
                str(len(wall)),
                f"{mean_wall:.3f}",
                f"{statistics.stdev(wall):.3f}" if len(wall) > 1 else "-",
                f"{statistics.fmean(user):.3f}",
                f"{statistics.fmean(sys_):.3f}",
                f"{mean_cpu:.3f}",
                f"{mean_cpu / mean_wall:.2f}" if mean_wall > 0 else "-",
                f"{peak / 1e6:.0f}",
            ]
            if compared and (name == base or base_cell is None):
                cols += ["", ""]
            elif compared and base_cell is not None:
                for metric, path in (("mean", "runs.wall_s"), ("server_cpu", "runs.cpu_s")):
                    found = rows.get((workload, point, name, metric))
                    verdict = found.verdict if found else "-"
                    r = ratio(statistics.fmean(cell.values(path)), base_cell.mean(path))
                    text = fmt_ratio(r)  # no verdict word where none was reached
                    if verdict not in ("unknown", "-"):
                        text += f" {analysis.verdict_word(metric, verdict)}"
                    style = {"faster": "good", "slower": "bad"}.get(verdict)
                    cols.append(Mark(text, style) if style else text)
            out.rows.append(cols)
    return out


def client_command_grid(workload: str, grid: Cells, keys: list[str]) -> Grid | None:
    """The command clients of a workload (a command run against the suite's server,
    ``requests_per_run`` requests a run; runners/command.py): their runs (means over them, start
    included) and the wall time per request and requests/s those give, the figures that stand
    beside the other variants' (a run's wall time is no latency: no percentiles). None without
    command clients."""
    out = _point_grid(
        f"{workload} · command clients", keys, "means over runs, each run's start included"
    )
    out.columns += ["runs", "req/run", "wall s", "± s", "ms/req", "req/s", "CPU s", "peak MB"]
    for point, row in grid.items():
        pd = dict(point)
        for variant, cell in row.items():
            per_run = cell.requests_per_run
            if per_run is None:
                continue
            cols: list[GridCell] = [*(str(pd.get(k, "")) for k in keys), variant]
            wall = cell.values("runs.wall_s")
            if not wall:
                out.rows.append([*cols, Mark("failed", "bad"), *[""] * 7])
                continue
            mean_wall = statistics.fmean(wall)
            peak = max(r.max_rss_bytes for c in cell.ok_cases for r in c.runs or [])
            out.rows.append(
                [
                    *cols,
                    str(len(wall)),
                    f"{per_run:,}",
                    f"{mean_wall:.3f}",
                    f"{statistics.stdev(wall):.3f}" if len(wall) > 1 else "-",
                    fmt_ms(mean_wall / per_run * 1e6),
                    fmt_rate(per_run / mean_wall),
                    f"{statistics.fmean(cell.values('runs.cpu_s')):.3f}",
                    f"{peak / 1e6:.0f}",
                ]
            )
    return out if out.rows else None
