"""Building the view (:class:`~rpcmeter.reporters.view.View`): the one reading of a result for
reports. :func:`build` reads the result once, with what is derived from it
(:mod:`rpcmeter.analysis.derived`): its cells, comparisons, tables (:mod:`.workload_tables`), header,
problems, warnings, notes and JSON document; :func:`comparison_view` does the same for two runs
compared."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from rpcmeter.analysis import checks as checks
from rpcmeter.analysis import compare as analysis
from rpcmeter.analysis.derived import Derived, derive, document
from rpcmeter.analysis.rates import rate_series
from rpcmeter.metrics.histogram import Histogram
from rpcmeter.model import Case, CaseProfile, Interval, Part, Placement, Result
from rpcmeter.reporters.calls import calls_grid
from rpcmeter.reporters.format import fmt_ms, fmt_num, fmt_rate, fmt_ratio
from rpcmeter.reporters.plots import Cells, Timeline
from rpcmeter.reporters.tables import (
    Grid,
    GridCell,
    Mark,
    comparison_grids,
    environment_grid,
    summary_grid,
)
from rpcmeter.reporters.view import (
    CaseFigures,
    ComparisonView,
    Problem,
    Profile,
    Run,
    View,
    WorkloadView,
)
from rpcmeter.reporters.workload_tables import (
    breakdown_grid,
    client_command_grid,
    command_grid,
    connection_grid,
    per_request,
    ranking_grid,
    resource_grid,
    stream_grid,
    workload_grid,
)
from rpcmeter.result.cells import Cell, PointKey, baseline, cells, variant_names
from rpcmeter.run.profile import summary_lines as profile_summary
from rpcmeter.text import printable


def comparison_view(doc: analysis.Comparison, header: list[str]) -> ComparisonView:
    """Two runs compared: the comparison tables, the geometric means and, beside them, what
    differed between the runs' environments."""
    summary = summary_grid(doc)
    environment = environment_grid(doc)
    return ComparisonView(
        tuple(header),
        doc,
        tuple(
            [
                *comparison_grids(doc),
                *([summary] if summary else []),
                *([environment] if environment else []),
            ]
        ),
        doc.warnings,
    )


# ---- building the view ----------------------------------------------------------------------


def build(result: Result, derived: Derived | None = None) -> View:
    """The view of a result (the only reading of the result for reports), with what is derived
    from it (:func:`rpcmeter.analysis.derived.derive` when not given)."""
    suite = result.suite
    grid_all = cells(result)
    names = variant_names(result)
    base = baseline(result)
    keys = list(suite.matrix_keys)
    derived = derived or derive(result)
    comparisons = derived.comparisons
    verdicts = analysis.has_verdicts(comparisons)
    commands = bool(result.cases) and all(c.kind == "command" for c in result.cases)
    summary = summary_grid(comparisons, commands) if verdicts else None
    # the ratios of every compared variant, with their verdicts or why there is none
    compared = bool(comparisons.rows)
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
            [*comparison_grids(comparisons, commands), *([summary] if summary else [])]
            if compared
            else []
        ),
        rates=tuple(rate_series(result)),
        max_rate=tuple(result.max_rate or []),
        problems=tuple(_problems(result)),
        warnings=derived.warnings,
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
        document=document(result, derived),
        timelines=tuple(timelines_of(result.cases, keys)),
    )


SHORT_INTERVAL = 0.25  # a case's interval shorter than this share of the series' is drawn with
# the one before it (the last few replies after a case's end: a few ms, not a second of them)


@dataclass
class _Slot:
    """One place in a cell's time line: its repetitions' intervals there, merged."""

    start_s: float
    stage: int | None
    seconds: float = 0.0
    pieces: int = 0
    ok: int = 0
    errors: int = 0
    hist: Histogram = field(default_factory=Histogram)

    def add(self, interval: Interval, piece: bool = True) -> None:
        self.seconds += interval.seconds
        self.pieces += piece
        self.ok += interval.ok
        self.errors += sum(interval.errors.values())
        self.hist.merge(interval.decoded())


def _slots(case: Case) -> list[_Slot]:
    """A case's intervals, each short one (:data:`SHORT_INTERVAL`) folded into the one before
    it in its stage: its replies and its time weigh in there by their real length."""
    series = case.series
    out: list[_Slot] = []
    for i in series.intervals if series is not None else []:
        short = series is not None and i.seconds < SHORT_INTERVAL * series.interval_s
        if short and out and out[-1].stage == i.stage:
            out[-1].add(i, piece=False)
            continue
        out.append(_Slot(i.start_s, i.stage))
        out[-1].add(i)
    return out


def timelines_of(cases: Sequence[Case], keys: list[str]) -> list[Timeline]:
    """Each cell's cases over time (workload, matrix point and variant), as their plots take
    them (:func:`rpcmeter.reporters.plots.time_plots`): the repetitions' intervals merged by
    their place in the case (replies and seconds added, histograms merged), so a cell is one
    series, each interval weighed by its real length."""
    cells_: dict[tuple[str, str, str], list[Case]] = {}
    for c in cases:
        if c.series is not None and c.series.intervals:
            point = " ".join(f"{k}={c.point[k]}" for k in keys if k in c.point)
            cells_.setdefault((c.workload, point, c.variant), []).append(c)
    out = []
    for (workload, point, variant), group in cells_.items():
        slots: dict[float, _Slot] = {}
        for case in group:
            for s in _slots(case):
                have = slots.setdefault(round(s.start_s, 6), _Slot(s.start_s, s.stage))
                have.seconds += s.seconds
                have.pieces += s.pieces
                have.ok += s.ok
                have.errors += s.errors
                have.hist.merge(s.hist)
        line = sorted(slots.values(), key=lambda s: s.start_s)
        reps = f"{len(group)} repetitions" if len(group) > 1 else ""

        def pct(s: _Slot, p: float) -> float:
            return s.hist.percentile(p) / 1e3 if s.hist.count else math.nan

        out.append(
            Timeline(
                workload=workload,
                variant=variant,
                case_id=group[0].id,
                title=" · ".join(x for x in (workload, point) if x),
                x=tuple(s.start_s + s.seconds / max(s.pieces, 1) / 2 for s in line),
                p50_us=tuple(pct(s, 50) for s in line),
                p99_us=tuple(pct(s, 99) for s in line),
                max_us=tuple(s.hist.max / 1e3 if s.hist.count else math.nan for s in line),
                rps=tuple(s.ok / s.seconds if s.seconds > 0 else 0.0 for s in line),
                errors_ps=tuple(s.errors / s.seconds if s.seconds > 0 else 0.0 for s in line),
                stages=tuple(
                    (s.start_s, f"{printable(s.label())}: {s.load(short=True)}")
                    for s in group[0].stages or ()
                    if s.start_s >= 0
                ),
                point=point,
                repetitions=reps,
            )
        )
    return out


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
    compared = bool(comparisons.rows)  # the comparison tables give the ratios
    return WorkloadView(
        name=workload,
        kind=kind,
        cells=grid,
        summary=workload_grid(workload, grid, keys, names, base, compared, walls=True),
        summary_narrow=workload_grid(
            workload, grid, keys, names, base, compared, walls=len(names) <= 2
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
        stages=tuple(stage_grid(c) for c in result.cases if c.workload == workload and c.stages),
        profile_lines=tuple(profile_lines(result, workload)),
        profiles=tuple(
            Profile(c.id, c.variant, tuple(c.point.items()), role, p)
            for c in result.cases
            if c.workload == workload
            for role, p in _profiles(c).items()
        ),
    )


def stage_grid(case: Case) -> Grid:
    """A staged case's stages, one row each: the load it asked for, its requests/s, errors (a
    column only when there are some) and latency (corrected, with the p99 from the actual send
    and the share of sends that went out late beside it for an open loop), and the clients' and
    the server's CPU per request and the server's CPU use. It fits 100 columns: the stages'
    start times are in the plots; their request counts, and their p99.9 (resting on few samples
    in a stage of a few thousand requests), in the result document."""
    stages = case.stages or []
    opened = any(s.rate is not None for s in stages)
    errors = [sum(s.errors.values()) for s in stages]
    server = any(s.server_cpu_s is not None for s in stages)
    columns = ["stage", "load", "req/s"]
    columns += ["errors"] if any(errors) else []
    columns += ["p50", "p99"]
    columns += ["p99 from send", "late %"] if opened else []
    columns += ["client us/req"]
    columns += ["server us/req", "server CPU %"] if server else []
    rows: list[list[GridCell]] = []
    for s, failed in zip(stages, errors, strict=True):
        lat = s.latency
        row: list[GridCell] = [
            printable(s.label()) if s.complete else Mark(f"{printable(s.label())}*", "warn"),
            s.load(short=True),
            fmt_rate(s.throughput_rps if s.throughput_rps is not None else math.nan),
        ]
        if any(errors):
            row.append(Mark(f"{failed:,}", "bad") if failed else "0")
        row += [fmt_ms(_us(getattr(lat, k, None))) for k in ("p50_us", "p99_us")]
        if opened:
            late = 100 * (s.late or 0) / s.sent if s.sent else math.nan
            row += [fmt_ms(_us(getattr(s.latency_uncorrected, "p99_us", None))), fmt_num(late)]
        cpu = s.client_cpu_s
        row.append(fmt_num(cpu / s.requests * 1e6) if cpu is not None and s.requests else "-")
        if server:
            row += [fmt_num(_us(s.server_us_per_request)), fmt_num(_us(s.server_util_pct))]
        rows.append(row)
    title = f"{case.workload} · {case.variant} · stages"
    point = " ".join(f"{k}={v}" for k, v in case.point.items())
    notes = [point, f"rep {case.repetition}" if case.repetition else ""]
    if case.status != "ok":
        notes.append(case.status)
    notes.append("latency from the intended send time, ms" if opened else "closed loop, latency ms")
    notes.append("" if any(errors) else "no errors")
    if not all(s.complete for s in stages):
        notes.append("*: cut short, the case stopped during it")
    return Grid(
        title=title,
        columns=columns,
        rows=rows,
        left=2,
        note=", ".join(x for x in notes if x),
        no_wrap=frozenset({1}),
    )


def _us(value: float | None) -> float:
    return math.nan if value is None else value


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


def describe_placement(placement: Placement) -> str:
    """One phrase for a placement as :func:`rpcmeter.host.placement.applied` gives it (with its
    ``target``)."""

    def cpus(value: list[int] | None) -> str:
        return str(value) if value else "any"

    target = placement.target or "server"
    pinned = placement.server_cpus
    if target == "command":
        return "commands " + (f"on CPUs {pinned}" if pinned else "unpinned")
    server = "remote server" if target == "remote" else f"server CPUs {cpus(pinned)}"
    return f"{server}, client CPUs {cpus(placement.client_cpus)}"


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
                per = per_request(cell, "polls")
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
    """A case's profiles: role -> its profile (rpcmeter.run.profile)."""
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
            samples=tuple(c.error_samples.items()),
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
