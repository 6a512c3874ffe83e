"""A metric's trend across stored runs, and the steps in it.

A *series* is one case (suite, workload, matrix point, variant) and one metric across the runs of
the history, oldest first: one point per run (``by="run"``), per git revision (``"revision"``:
the runs of one commit pooled, a dirty tree apart from the clean one, in order of first
appearance) or per day (``"date"``, UTC). A point holds the per-repetition values of its runs
(:func:`rpcmeter.analysis.compare.metric_values`); its value is their mean.

Steps (:func:`find_steps`), on the point values:

1. Candidates: the change points of the log of the values that minimise the squared error of a
   piecewise-constant fit plus ``PENALTY * sigma**2 * log(n)`` per change point (the ``l2`` cost
   of ``ruptures``' PELT search), with every segment at least ``MIN_SEGMENT`` points long. ``sigma``
   is the noise between consecutive points estimated robustly (median absolute deviation of the
   first differences, which a step or a drift hardly moves), at least ``NOISE_FLOOR``.
2. Confirmation: each candidate compares the points of the segment after it with those of the
   segment before it exactly as two runs' repetitions are compared
   (:func:`rpcmeter.analysis.compare.compare_values`: ratio of means, 95 % bootstrap interval, Mann-Whitney
   test, verdict). A candidate whose verdict is not ``faster``/``slower`` (including ``unknown``:
   too few points on a side for the test to reach 5 %) is dropped, the weakest first, and its two
   segments merge. So is one that does not hold when any one point is left out
   (:func:`holds_without_any_point`): one noisy point, however far off, never makes a step. The
   newest runs make one from the second run after it on, given enough runs before it (the test
   needs 2 after and 8 before, 3 and 5, or 4 and 4).
3. Drift: when a straight line through the log values (one slope) explains the series at least as
   well as the confirmed steps do under the same penalty, the series drifts rather than steps; the
   drift is reported (Theil-Sen slope per point with its 99 % interval, when that interval excludes
   0) and the steps are not.

The model is asv's (asv/step_detect.py: the series is piecewise constant plus noise, and the fit
minimises its error plus a penalty per step, after Friedrich et al. 2008); here the search is
``ruptures``' PELT, the penalty is scaled by the robust noise estimate above instead of chosen by
asv's cross-validation, and every step is confirmed by the comparison rpcmeter already uses
between two runs.
"""

from __future__ import annotations

import fnmatch
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rpcmeter.analysis import compare as analysis
from rpcmeter.analysis.compare import Metric
from rpcmeter.history.store import RunInfo
from rpcmeter.model import Result
from rpcmeter.names import BY as BY
from rpcmeter.names import DEFAULT_THRESHOLD as DEFAULT_THRESHOLD
from rpcmeter.names import METRIC_ALIASES, By
from rpcmeter.result.cells import PointKey, cells

MIN_SEGMENT = 2  # points on each side of a step, at least
PENALTY = 8.0  # per change point, in units of sigma**2 * log(n)
NOISE_FLOOR = 0.002  # the smallest noise assumed between points: 0.2 % (log scale)
DRIFT_CONFIDENCE = 0.99


def trend_metric(name: str) -> Metric:
    """The metric ``--metric NAME`` names (``rps`` is throughput)."""
    return analysis.metric(METRIC_ALIASES.get(name, name))


@dataclass(frozen=True)
class TrendPoint:
    """One point of a series: the runs it pools and their per-repetition values."""

    label: str  # "run 7", "4f2a9c1", "2026-11-23"
    runs: tuple[int, ...]
    revision: str  # short commit, "*" when the tree had changes; "-" outside git
    date: str  # ISO-8601 start of its first run
    values: tuple[float, ...]

    @property
    def value(self) -> float:
        return statistics.fmean(self.values)

    @property
    def low(self) -> float:
        return min(self.values)

    @property
    def high(self) -> float:
        return max(self.values)


@dataclass(frozen=True)
class Step:
    """A confirmed change: the points from ``index`` on against the segment before them."""

    index: int  # the first point after the step
    ratio: float  # mean of the segment after / mean of the segment before
    ci_low: float
    ci_high: float
    p_value: float
    verdict: str  # "faster" or "slower" (stored words; analysis.verdict_word shows them)
    before: int  # points in the segment before
    after: int  # points in the segment after


@dataclass(frozen=True)
class Drift:
    """A steady change: ``per_point`` is the factor from one point to the next (Theil-Sen)."""

    per_point: float
    low: float
    high: float
    total: float  # the fitted last point / the fitted first point
    verdict: str  # "faster" or "slower"


@dataclass(frozen=True)
class Trend:
    suite: str
    workload: str
    point: PointKey
    variant: str
    metric: Metric
    points: tuple[TrendPoint, ...]
    steps: tuple[Step, ...] = ()
    drift: Drift | None = None

    @property
    def label(self) -> str:
        parts = [self.suite, self.workload]
        if self.point:
            parts.append(analysis.point_label(dict(self.point)))
        parts.append(self.variant)
        return " · ".join(parts)

    def worse(self, ratio: float) -> float:
        """How many times worse a ratio is (below 1: better): throughput inverted."""
        return 1 / ratio if self.metric.higher_is_better else ratio


# ---- series from stored runs --------------------------------------------------------------------


def revision_label(info: RunInfo) -> str:
    if not info.commit:
        return "-"
    return info.commit[:7] + ("*" if info.dirty else "")


def _group(info: RunInfo, by: By) -> str:
    if by == "revision":
        return revision_label(info)
    if by == "date":
        return info.started_at[:10] or "?"
    return f"run {info.id}"


def matches(label: str, pattern: str | None) -> bool:
    """A case filter: a shell pattern when it has ``*?[``, else a substring; case-insensitive."""
    if not pattern:
        return True
    label, pattern = label.lower(), pattern.lower()
    if any(ch in pattern for ch in "*?["):
        return fnmatch.fnmatchcase(label, pattern)
    return pattern in label


def collect(
    runs: Iterable[tuple[RunInfo, Result]],
    metrics: Sequence[Metric],
    by: By = "run",
    case_filter: str | None = None,
) -> list[Trend]:
    """Every case's series of every metric over ``runs`` (oldest first), steps found.

    Cases come in the order they first appear; a series is left out when no run measured its
    metric (e.g. server CPU of a remote target)."""
    groups: dict[str, dict[str, Any]] = {}  # group label -> {"runs", "revision", "date"}
    values: dict[tuple[str, str, PointKey, str, str], dict[str, list[float]]] = {}
    for info, result in runs:
        g = _group(info, by)
        group = groups.setdefault(
            g, {"runs": [], "revision": revision_label(info), "date": info.started_at}
        )
        group["runs"].append(info.id)
        if group["revision"] != revision_label(info):
            group["revision"] = "several"
        suite = result.suite.name or info.suite
        for workload, by_point in cells(result).items():
            for point, by_variant in by_point.items():
                for variant, cell in by_variant.items():
                    for m in metrics:
                        key = (suite, workload, point, variant, m.name)
                        vals = analysis.metric_values(cell, m)
                        if vals:
                            values.setdefault(key, {}).setdefault(g, []).extend(vals)
    out = []
    by_name = {m.name: m for m in metrics}
    for (suite, workload, point, variant, name), per_group in values.items():
        trend = Trend(suite, workload, point, variant, by_name[name], ())
        if not matches(trend.label, case_filter):
            continue
        points = tuple(
            TrendPoint(
                g,
                tuple(groups[g]["runs"]),
                groups[g]["revision"],
                groups[g]["date"],
                tuple(per_group[g]),
            )
            for g in groups
            if g in per_group
        )
        steps, drift = find_steps([p.value for p in points], trend.metric)
        out.append(
            Trend(suite, workload, point, variant, trend.metric, points, tuple(steps), drift)
        )
    order = {m.name: i for i, m in enumerate(metrics)}
    return sorted(out, key=lambda t: order[t.metric.name])  # stable: cases keep their order


# ---- steps --------------------------------------------------------------------------------------


def noise_sigma(logs: np.ndarray[Any, np.dtype[np.float64]]) -> float:
    """The noise between consecutive points of a log series: the median absolute deviation of
    its first differences (scaled to a normal's sigma, divided by sqrt 2), at least
    ``NOISE_FLOOR``. Steps and a drift move few differences or all of them alike, so they hardly
    change it."""
    d = np.diff(logs)
    if d.size < 2:
        return NOISE_FLOOR
    mad = float(np.median(np.abs(d - np.median(d))))
    return max(1.4826 * mad / math.sqrt(2), NOISE_FLOOR)


def _candidates(logs: np.ndarray[Any, np.dtype[np.float64]], sigma: float) -> list[int]:
    """The change points of ``ruptures``' PELT search (``Pelt(model="l2", min_size=MIN_SEGMENT,
    jump=1)``, same admissible set, pruning and first-minimum choice), with the segment costs
    from cumulative sums (about 100x faster on a series of 1,000 points): the values are
    centred first, so the sums lose no precision to their mean."""
    n = logs.size
    pen = PENALTY * sigma**2 * math.log(n)
    x = logs - logs.mean()
    s1 = np.concatenate(([0.0], np.cumsum(x)))
    s2 = np.concatenate(([0.0], np.cumsum(x * x)))
    total = np.full(n + 1, np.inf)  # the best partition's cost of values[0:t]
    total[0] = 0.0
    last = np.zeros(n + 1, dtype=np.int64)  # the start of its last segment
    admissible = np.zeros(0, dtype=np.int64)
    for end in [*range(MIN_SEGMENT, n), n]:
        admissible = np.append(admissible, end - MIN_SEGMENT)
        admissible = admissible[np.isfinite(total[admissible])]  # no partition of 0:t
        length = end - admissible
        seg = s1[end] - s1[admissible]
        cost = np.maximum((s2[end] - s2[admissible]) - seg * seg / length, 0.0)
        sums = total[admissible] + (cost + pen)
        best = int(np.argmin(sums))
        total[end], last[end] = sums[best], admissible[best]
        admissible = admissible[sums <= sums[best] + pen]
    bounds = []
    t = n
    while t > 0:
        t = int(last[t])
        if t > 0:
            bounds.append(t)
    return sorted(bounds)


def _segment_sse(logs: np.ndarray[Any, np.dtype[np.float64]], bounds: Sequence[int]) -> float:
    return float(
        sum(((seg - seg.mean()) ** 2).sum() for seg in np.split(logs, list(bounds)) if seg.size)
    )


def _log_ratio(before: Sequence[float], after: Sequence[float]) -> float:
    return math.log(statistics.fmean(after) / statistics.fmean(before))


def holds_without_any_point(before: Sequence[float], after: Sequence[float]) -> bool:
    """Whether a change stands when any one point of either side is left out: in the same
    direction and at least half as large. One far-off point next to an ordinary one can pass a
    rank test's bar on a short segment; it cannot pass this."""
    whole = _log_ratio(before, after)
    for side in (before, after):
        for j in range(len(side)):
            rest = [*side[:j], *side[j + 1 :]]
            part = _log_ratio(rest, after) if side is before else _log_ratio(before, rest)
            if part * whole <= 0 or abs(part) < abs(whole) / 2:
                return False
    return True


def _compare(values: Sequence[float], bounds: list[int], i: int, m: Metric) -> analysis.Stats:
    """The segment after change point ``i`` against the segment before it; the verdict ``same``
    when the change does not hold without any one point."""
    edges = [0, *bounds, len(values)]
    before, after = values[edges[i] : edges[i + 1]], values[edges[i + 1] : edges[i + 2]]
    stats = analysis.compare_values(before, after, m, seed=bounds[i])
    if stats.verdict in ("faster", "slower") and not holds_without_any_point(before, after):
        return stats.model_copy(update={"verdict": "same"})
    return stats


def _drift(logs: np.ndarray[Any, np.dtype[np.float64]], m: Metric) -> Drift | None:
    from scipy.stats import theilslopes

    x = np.arange(logs.size, dtype=np.float64)
    fit = theilslopes(logs, x, alpha=DRIFT_CONFIDENCE)
    slope, low, high = float(fit[0]), float(fit[2]), float(fit[3])
    if low <= 0 <= high:
        return None
    up = slope > 0
    worse = not up if m.higher_is_better else up
    return Drift(
        math.exp(slope),
        math.exp(low),
        math.exp(high),
        math.exp(slope * (logs.size - 1)),
        "slower" if worse else "faster",
    )


def _weakness(stats: analysis.Stats) -> tuple[float, float]:
    """Which unconfirmed candidate goes first: the highest p-value, then the smallest change."""
    p, ratio = stats.p_value, stats.ratio
    return (
        1.0 if p is None else float(p),
        -abs(math.log(ratio)) if ratio is not None and ratio > 0 else 0.0,
    )


def find_steps(values: Sequence[float], m: Metric) -> tuple[list[Step], Drift | None]:
    """The confirmed steps of a series of point values (oldest first) and its drift, if any
    (see the module docstring)."""
    if len(values) < 2 * MIN_SEGMENT or not all(math.isfinite(v) and v > 0 for v in values):
        return [], None
    logs = np.log(np.asarray(values, dtype=np.float64))
    sigma = noise_sigma(logs)
    bounds = _candidates(logs, sigma)
    stats = [_compare(values, bounds, i, m) for i in range(len(bounds))]
    while True:
        weak = [i for i, s in enumerate(stats) if s.verdict not in ("faster", "slower")]
        if not weak:
            break
        drop = max(weak, key=lambda i: _weakness(stats[i]))
        del bounds[drop]
        stats = [_compare(values, bounds, i, m) for i in range(len(bounds))]
    pen = PENALTY * sigma**2 * math.log(logs.size)
    drift = _drift(logs, m)
    if drift is not None and bounds:
        x = np.arange(logs.size, dtype=np.float64)
        slope, icept = np.polyfit(x, logs, 1)
        line_sse = float(((logs - (icept + slope * x)) ** 2).sum())
        if line_sse + pen <= _segment_sse(logs, bounds) + pen * len(bounds):
            bounds, stats = [], []
        else:
            drift = None
    edges = [0, *bounds, len(values)]
    steps = [
        Step(
            index=b,
            ratio=analysis.unrounded(s.ratio),
            ci_low=analysis.unrounded(s.ci_low),
            ci_high=analysis.unrounded(s.ci_high),
            p_value=analysis.unrounded(s.p_value),
            verdict=s.verdict,
            before=edges[i + 1] - edges[i],
            after=edges[i + 2] - edges[i + 1],
        )
        for i, (b, s) in enumerate(zip(bounds, stats, strict=True))
    ]
    return steps, drift


# ---- the gate -----------------------------------------------------------------------------------


def gated(trends: Iterable[Trend], threshold: float) -> list[tuple[Trend, Step]]:
    """Series whose newest points sit after a step that made them worse by more than
    ``threshold`` (a factor: 1.05 is 5 % slower, or 5 % less throughput): their last step."""
    out = []
    for t in trends:
        if not t.steps:
            continue
        last = t.steps[-1]
        if last.verdict == "slower" and t.worse(last.ratio) > threshold:
            out.append((t, last))
    return out
