"""The one precomputed view every reporter draws: its types.

A :class:`View` is built once from a result (:func:`rpcmeter.reporters.build.build`) and holds
no result: cells (workload x matrix point x variant, repetitions merged), the comparison of
variants with its verdicts, and every table the reports show (the summary per workload, the
ranking, where the time goes, CPU and memory, whole commands, streaming per message, connection
costs; :mod:`rpcmeter.reporters.workload_tables`) as :class:`~rpcmeter.reporters.tables.Grid`
data, with the run's header, its problems, warnings, plots and the JSON document. The terminal,
Markdown, HTML, CSV, JSON and PNG reporters read a :class:`View` (and :mod:`.format` for
numbers), never the result.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

from rpcmeter.analysis import compare as analysis
from rpcmeter.analysis.rates import Series
from rpcmeter.model import CaseProfile, Environment, Json, MaxRate
from rpcmeter.reporters.plots import Cells, Plot, Timeline, all_plots
from rpcmeter.reporters.tables import Grid
from rpcmeter.result.cells import PointKey

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
    samples: tuple[tuple[str, str], ...] = ()  # each error kind's first kept sample

    @property
    def sample_lines(self) -> list[str]:
        """``kind: sample``, one per error kind with a kept sample (what says why it failed)."""
        return [f"{kind}: {text}" for kind, text in self.samples if text]

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
    """One profile of a case (:mod:`rpcmeter.run.profile`) as stored."""

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
    stages: tuple[Grid, ...] = ()  # a table per staged case: each stage's figures

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
                *self.stages,
            )
            if g is not None
        ]


@dataclass(frozen=True)
class View:
    run: Run
    variants: tuple[str, ...]
    baseline: str
    workloads: tuple[WorkloadView, ...]
    comparisons: analysis.Comparison  # rpcmeter.analysis.compare.compare_variants
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
    document: Json  # the result document with its comparisons and warnings, as JSON writes it
    timelines: tuple[Timeline, ...] = ()  # the cases over time (their series)

    @property
    def failed(self) -> list[Problem]:
        return [p for p in self.problems if p.status != "ok"]

    @cached_property
    def plots(self) -> Mapping[str, tuple[Plot, ...]]:
        """Workload -> its plots, in report order; ``""``: plots across workloads (idle CPU).
        Made on first use, from the view's cells, comparisons and rates: only the HTML and PNG
        reports draw them."""
        grid_all = {w.name: w.cells for w in self.workloads}
        drawn = all_plots(
            grid_all, self.variants, self.baseline, self.comparisons, self.rates, self.timelines
        )
        return {w: tuple(p) for w, p in drawn.items()}

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
