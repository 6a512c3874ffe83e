"""Latency against offered rate: sweep series, the knee, latency objectives and the search for
the highest rate that meets one. Pure functions of the result document (the search itself is
handed each probe's step and says the next rate, so it can be tested without a server).

The knee of a sweep is the offered rate from which on the system no longer keeps up: the lowest
rate at which it fails, every higher rate failing too. A rate fails when its corrected p99 exceeds
``KNEE_FACTOR`` times the lowest p99 among the rates that kept up, or when the load did not go out
as scheduled (:func:`keeps_up`: under ``ACHIEVED_MIN`` of the offered rate achieved, or more than
``1 - ACHIEVED_MIN`` of the scheduled requests dropped). A rate that failed below one that kept
up is a disturbance (another job on the machine, a stall), not the knee: it stays unmarked, its
achieved rate shown in yellow.

A rate *meets* an objective (``--slo p99=5ms``) when every named corrected percentile is at or
below its bound, the load kept up (:func:`keeps_up`) and no request failed. The search
(:class:`RateSearch`) doubles the rate from a start until a rate fails (halving instead when
the start already fails), then bisects between the highest passing and the lowest failing rate
until they are within ``tolerance`` of each other, in at most ``max_steps`` probes. Each probe is
one measurement: on a noisy machine, a rate can pass once and fail the next time, so the search
finds a rate that met the objective once (use longer ``duration_s`` for steadier answers).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from rpcmeter.errors import UsageError
from rpcmeter.metrics.histogram import Histogram
from rpcmeter.model import Case, RateStep, Result
from rpcmeter.result.cells import Cell, PointKey, cells
from rpcmeter.suite.model import round_rate

KNEE_FACTOR = 3.0
ACHIEVED_MIN = 0.98


# ---- sweep series and the knee ------------------------------------------------------------------


@dataclass
class RatePoint:
    """One offered rate of a series (repetitions merged): corrected and uncorrected latency."""

    offered_rps: float
    achieved_rps: float
    p50_us: float
    p99_us: float
    p999_us: float
    p99_uncorrected_us: float
    late: int
    dropped: int
    scheduled: int
    errors: int
    knee: bool = False

    @property
    def keeps_up(self) -> bool:
        return keeps_up(self.offered_rps, self.achieved_rps, self.dropped, self.scheduled)


def keeps_up(offered_rps: float, achieved_rps: float, dropped: int, scheduled: int) -> bool:
    """The load went out as scheduled: at least ``ACHIEVED_MIN`` of the offered rate achieved and
    of the scheduled requests sent."""
    return achieved_rps >= ACHIEVED_MIN * offered_rps and dropped <= (1 - ACHIEVED_MIN) * scheduled


@dataclass
class Series:
    workload: str
    variant: str
    point: PointKey  # the matrix point without ``rate``
    points: list[RatePoint] = field(default_factory=list)

    @property
    def knee(self) -> RatePoint | None:
        return next((p for p in self.points if p.knee), None)


def uncorrected_hist(cases: list[Case]) -> Histogram:
    return Histogram.merged(
        c.histogram_uncorrected for c in cases if c.histogram_uncorrected is not None
    )


def rate_point(cell: Cell) -> RatePoint:
    uh = uncorrected_hist(cell.ok_cases)
    return RatePoint(
        offered_rps=cell.mean("open_loop.offered_rps"),
        achieved_rps=cell.mean("open_loop.achieved_rps"),
        p50_us=cell.latency_us("p50"),
        p99_us=cell.latency_us("p99"),
        p999_us=cell.latency_us("p999"),
        p99_uncorrected_us=uh.percentile(99) / 1e3,
        late=sum(c.open_loop.late for c in cell.ok_cases if c.open_loop),
        dropped=sum(c.open_loop.dropped for c in cell.ok_cases if c.open_loop),
        scheduled=sum(c.open_loop.scheduled for c in cell.ok_cases if c.open_loop),
        errors=cell.errors,
    )


def mark_knee(points: list[RatePoint]) -> None:
    """Mark the point (ascending offered rate) that is the knee (module docstring)."""
    for p in points:
        p.knee = False
    kept = [p.p99_us for p in points if p.keeps_up and math.isfinite(p.p99_us)]
    base = min(kept) if kept else math.nan

    def fails(p: RatePoint) -> bool:
        worse = math.isfinite(base) and math.isfinite(p.p99_us) and p.p99_us > KNEE_FACTOR * base
        return worse or not p.keeps_up

    knee = None
    for p in reversed(points):  # the start of the run of failing rates that ends the sweep
        if not fails(p):
            break
        knee = p
    if knee is not None:
        knee.knee = True


def rate_series(result: Result) -> list[Series]:
    """One series per workload x variant x matrix point (without ``rate``) of the open-loop
    cases (not staged ones), points ascending by offered rate, the knee marked (with two points or more)."""
    out: dict[tuple[str, str, PointKey], Series] = {}
    for workload, by_point in cells(result).items():
        for point, by_variant in by_point.items():
            rest = tuple((k, v) for k, v in point if k != "rate")
            for variant, cell in by_variant.items():
                cases = cell.ok_cases
                # a staged case's rate changes within it: its own table shows each stage
                if not cases or not all(c.open_loop and not c.stages for c in cases):
                    continue
                key = (workload, variant, rest)
                series = out.setdefault(key, Series(workload, variant, rest))
                series.points.append(rate_point(cell))
    for series in out.values():
        series.points.sort(key=lambda p: p.offered_rps)
        if len(series.points) > 1:
            mark_knee(series.points)
    return list(out.values())


# ---- latency objectives --------------------------------------------------------------------------

_UNITS_US = {"us": 1.0, "µs": 1.0, "ms": 1e3, "s": 1e6}
_SLO_RE = re.compile(r"^\s*(p\d+(?:\.\d+)?|mean)\s*[=<]=?\s*([\d.]+)\s*(us|µs|ms|s)\s*$")


@dataclass(frozen=True)
class Objective:
    """A bound on one corrected latency statistic: ``stat`` is ``mean`` or ``p50``, ``p99``,
    ``p999`` (the aggregate's names), ``bound_us`` in microseconds."""

    stat: str
    bound_us: float
    text: str

    def value_us(self, cell: Cell) -> float:
        return cell.latency_us(self.stat)


def parse_slo(text: str) -> list[Objective]:
    """``p99=5ms`` or several, comma-separated (``p99=5ms,p99.9=20ms``)."""
    out = []
    for part in text.split(","):
        m = _SLO_RE.match(part)
        if not m:
            raise UsageError(
                f"--slo {text}: cannot read {part.strip()!r} "
                "(expected e.g. p99=5ms, p99.9=20ms or mean=1ms; units us, ms, s)"
            )
        name, value, unit = m.groups()
        stat = name.replace(".", "") if name.startswith("p") else name
        if stat.startswith("p") and not 0 < float(name[1:]) < 100:
            raise UsageError(f"--slo {text}: {name}: a percentile between p0 and p100")
        out.append(Objective(stat, float(value) * _UNITS_US[unit], part.strip()))
    return out


def judge(cell: Cell, objectives: list[Objective]) -> tuple[bool, str]:
    """Whether a probed rate meets the objectives, and why not."""
    if not cell.ok_cases:
        reason = cell.failed[0].reason if cell.failed else "no result"
        return False, f"failed: {reason}"
    p = rate_point(cell)
    if p.errors:
        return False, f"{p.errors} errors"
    if not p.keeps_up:
        return False, f"achieved {p.achieved_rps:,.0f} req/s, {p.dropped} dropped"
    for o in objectives:
        value = o.value_us(cell)
        if not value <= o.bound_us:
            return False, f"{o.stat} {value / 1e3:.3g} ms"
    return True, ""


# ---- the search ----------------------------------------------------------------------------------


@dataclass
class Step:
    rate: float
    passed: bool
    reason: str
    data: RateStep | None = None  # what the result records of the step


@dataclass
class Search:
    steps: list[Step] = field(default_factory=list)
    best: Step | None = None  # the highest passing rate
    lowest_failing: float | None = None
    converged: bool = False


class RateSearch:
    """The search for the highest passing rate (module docstring), told one probe at a time:
    ``rate`` is the rate to probe next (None once the search is over), ``told(step)`` hands it
    that probe's step, and ``result`` is what it found::

        search = RateSearch(100, max_steps=3)
        while search.rate is not None:
            search.told(probe(search.rate))
    """

    def __init__(
        self,
        start: float,
        *,
        tolerance: float = 0.05,
        max_steps: int = 12,
        min_rate: float = 1.0,
    ) -> None:
        self.tolerance, self.max_steps, self.min_rate = tolerance, max_steps, min_rate
        self.result = Search()
        self.rate: float | None = start if max_steps > 0 else None
        self._lo: float | None = None  # the highest passing rate
        self._hi: float | None = None  # the lowest failing rate

    def told(self, step: Step) -> None:
        """The step of the probe at ``self.rate``: exponential growth (or decay), then bisection."""
        rate = self.rate
        assert rate is not None, "the search is over"
        s = self.result
        s.steps.append(step)
        if step.passed:
            self._lo = rate
            s.best = step
        else:
            self._hi = rate
        s.lowest_failing = self._hi
        lo, hi = self._lo, self._hi
        if lo is not None and hi is not None:
            if hi - lo <= self.tolerance * lo:
                s.converged = True
                self.rate = None
                return
            rate = (lo + hi) / 2
        elif lo is not None:
            rate = lo * 2
        else:
            assert hi is not None
            if hi / 2 < self.min_rate:
                self.rate = None
                return
            rate = hi / 2
        rate = round(rate) if rate >= 100 else round_rate(rate, 3)
        self.rate = rate if len(s.steps) < self.max_steps else None
