"""Comparisons that say whether a difference is real.

For every cell (workload x matrix point) and every metric that matters, a compared side is set
against a baseline side using the per-repetition values of the two cells (for whole commands, the
values of every run: wall time, CPU; :func:`metric_values`):

- ``ratio``: mean over the compared side's repetitions / mean over the baseline's;
- ``ci_low``/``ci_high``: a 95 % percentile-bootstrap interval for that ratio (both sides resampled
  independently over their repetitions; 2000 resamples; seeded from the cell, so the same data
  always gives the same interval);
- ``p_value``: a two-sided Mann-Whitney U test of the two sets of repetitions (exact distribution
  without ties, normal approximation with tie and continuity correction otherwise);
- ``verdict``: ``faster`` / ``slower`` only when the interval excludes 1 **and** the test agrees at
  the 5 % level, else ``same``; ``unknown`` when there are too few repetitions for the test to
  reach 5 % at all (fewer than 4 per side; :func:`can_decide`). For throughput higher is better;
  for latency and CPU time lower is better (``faster`` there means less CPU time). Stored verdicts
  are always these words; tables show them through :func:`verdict_word`, which makes a CPU
  metric's ``faster``/``slower`` read ``less``/``more``.

A mix of calls (``kind = "mix"``) is compared as a whole and call by call: a row with ``call``
set compares that call's latency and requests/s (:data:`CALL_METRICS`, from ``cases[].calls``);
the geometric means of the summary rest on the whole cases' rows.

Two uses share one mechanism (:func:`compare_pairs`): variants of one run against the run's
baseline variant (:func:`compare_variants`, stored in the result as ``comparisons``) and the cases
of one run against the same cases of another (:func:`compare_runs`). Both are pure functions of
their inputs, so ``rpcmeter show`` and ``rpcmeter compare`` recompute them at will.

The comparison (:class:`Comparison`, a frozen model; :meth:`Comparison.to_json` is its JSON
document)::

    {"kind": "variants" | "runs", "baseline": label, "against": label | null,
     "confidence": 0.95, "alpha": 0.05, "resamples": 2000,
     "rows": [{"workload", "point": {...}, "variant", "baseline", "metric", "unit",
               "n", "n_baseline", "mean", "mean_baseline", "cv", "cv_baseline",
               "ratio", "ci_low", "ci_high", "p_value", "verdict"}],
     "summary": [{"variant", "metric", "geomean", "cases", "faster", "slower", "same",
                  "unknown"}],
     "warnings": [str]}
"""

from __future__ import annotations

import math
import statistics
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, JsonValue

from rpcmeter.analysis import run_differences as run_differences
from rpcmeter.analysis.run_differences import Difference
from rpcmeter.model import Json, Result, Run

# the metrics are named where the command line reads them (re-exported here)
from rpcmeter.names import CALL_METRICS as CALL_METRICS
from rpcmeter.names import CPU_WORDS as CPU_WORDS
from rpcmeter.names import METRIC_BY_NAME as METRIC_BY_NAME
from rpcmeter.names import METRICS as METRICS
from rpcmeter.names import Metric as Metric
from rpcmeter.names import verdict_word as verdict_word
from rpcmeter.result.cells import Cell, PointKey, baseline, cells, variant_names
from rpcmeter.text import warning

CONFIDENCE = 0.95
ALPHA = 0.05
RESAMPLES = 2000
MIN_REPEAT = 5  # fewer repetitions than this per side: a warning
MAX_CV = 0.10  # a same on repetitions spread above this (CV) reads same? (Stats.weak)
VERDICTS = ("faster", "slower", "same", "unknown")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class _Cell(_Frozen):
    """Which cell a row compares: workload, matrix point, compared variant and its baseline,
    and for one call of a mix, its name (None: the whole case)."""

    workload: str
    point: dict[str, JsonValue]
    variant: str
    baseline: str
    call: str | None = None


class Stats(_Frozen):
    """The statistics of one metric of one cell against its baseline (:func:`compare_values`).
    Figures are rounded; ``None`` where there is none (NaN)."""

    metric: str
    unit: str
    n: int
    n_baseline: int
    mean: float | None
    mean_baseline: float | None
    cv: float | None
    cv_baseline: float | None
    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    verdict: str

    @property
    def weak(self) -> bool:
        """A ``same`` that rests on repetitions spread by over :data:`MAX_CV` (either side): a
        difference could hide in that noise. A ``faster`` or ``slower`` is never weak: its
        interval already excludes 1 and the test agrees."""
        cvs = [c for c in (self.cv, self.cv_baseline) if c is not None]
        return self.verdict == "same" and bool(cvs) and max(cvs) > MAX_CV

    @property
    def word(self) -> str:
        """The verdict as a table shows it: in the metric's words
        (:func:`~rpcmeter.names.verdict_word`), and ``same?`` where it is weak."""
        return verdict_word(self.metric, self.verdict) + ("?" if self.weak else "")


class ComparisonRow(Stats, _Cell):
    """One metric of one cell against its baseline (the cell's keys first, as in the JSON)."""


class SummaryRow(_Frozen):
    """Per compared variant and metric: the geometric mean of the ratios and verdict counts."""

    variant: str
    metric: str
    geomean: float | None
    cases: int
    faster: int
    slower: int
    same: int
    unknown: int


class Comparison(_Frozen):
    """A comparison (see the module docstring): variants of a run, or two runs."""

    kind: Literal["variants", "runs"]
    baseline: str
    against: str | None
    confidence: float
    alpha: float
    resamples: int
    rows: tuple[ComparisonRow, ...]
    summary: tuple[SummaryRow, ...]
    warnings: tuple[str, ...]
    # two runs: what differed between their environments (rpcmeter.analysis.run_differences)
    environment: tuple[Difference, ...] = ()

    def to_json(self) -> Json:
        """The comparison document, as the result's ``comparisons`` and ``compare --format
        json`` write it (a row's ``call`` only where it compares one call of a mix; the
        ``environment`` only where two runs' environments differed)."""
        doc: Json = self.model_dump(
            mode="json", exclude={"environment"} if not self.environment else None
        )
        for row in doc["rows"]:  # type: ignore[union-attr]
            if isinstance(row, dict) and row.get("call") is None:
                row.pop("call", None)
        return doc


# Whole commands (runners/command.py) record every run of a case: there each run is a repetition.
RUN_VALUES: dict[str, Callable[[Run], float]] = {
    "mean": lambda run: run.wall_s * 1e6,
    "server_cpu": lambda run: (run.user_s + run.sys_s) * 1e6,
    "user_cpu": lambda run: run.user_s,
    "sys_cpu": lambda run: run.sys_s,
}


# A command client (a command run against the suite's server, ``requests_per_run`` requests a
# run; runners/command.py) is compared with the other variants per request: requests/s over each
# run's wall time (its start included) and its CPU per request; its server CPU per repetition,
# as theirs. A run's wall time is no request's latency: latency is not compared.
CLIENT_RUN_VALUES: dict[str, Callable[[Run, int], float]] = {
    "throughput": lambda run, n: n / run.wall_s if run.wall_s > 0 else math.nan,
    "client_cpu": lambda run, n: (run.user_s + run.sys_s) * 1e6 / n,
}


def metric_values(cell: Cell, m: Metric) -> list[float]:
    """The values a comparison rests on: one per repetition of the cell; for whole commands, one
    per successful run (every run of every repetition); for a command client, see
    :data:`CLIENT_RUN_VALUES`."""
    per_run = RUN_VALUES.get(m.name)
    runs = [r for c in cell.ok_cases for r in c.runs or [] if r.exit_code == 0]
    per_request = cell.requests_per_run
    if per_request is not None:
        client = CLIENT_RUN_VALUES.get(m.name)
        if client is None:  # server CPU per request per repetition; latency: none recorded
            return cell.values(m.path) if m.path.startswith("cpu.") else []
        return [v for v in (client(r, per_request) for r in runs) if math.isfinite(v)]
    if per_run is not None and runs:
        values = [per_run(r) for r in runs]
        return [v for v in values if math.isfinite(v)]
    return cell.values(m.path)


def metric(name: str) -> Metric:
    from rpcmeter.errors import UsageError

    try:
        return METRIC_BY_NAME[name]
    except KeyError:
        raise UsageError(
            f"--metric {name}: unknown metric (expected one of: {', '.join(METRIC_BY_NAME)})"
        ) from None


# ---- statistics ---------------------------------------------------------------------------------


def _ranks(values: Sequence[float]) -> tuple[list[float], list[int]]:
    """Mid-ranks (1-based) of ``values`` and the sizes of their groups of ties."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    ties: list[int] = []
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        ties.append(j - i + 1)
        i = j + 1
    return ranks, ties


def _u_counts(n1: int, n2: int) -> list[int]:
    """How many of the C(n1+n2, n1) arrangements give U = 0, 1, ..., n1*n2 (no ties).

    These are the coefficients of the Gaussian binomial [n1+n2 choose n1]_q, built as
    prod_{i=1..n1} (1 - q^(n2+i)) / (1 - q^i) with exact integer polynomial arithmetic.
    """
    size = n1 * n2 + 1
    poly = [0] * (size + n1 + n2 + 1)
    poly[0] = 1
    for i in range(1, n1 + 1):  # multiply by (1 - q^(n2+i))
        step = n2 + i
        for k in range(len(poly) - 1, step - 1, -1):
            poly[k] -= poly[k - step]
    for i in range(1, n1 + 1):  # divide by (1 - q^i): b[k] = a[k] + b[k-i]
        for k in range(i, len(poly)):
            poly[k] += poly[k - i]
    return poly[:size]


def mann_whitney_u(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """Two-sided Mann-Whitney U test: (U of ``x``, p-value).

    Exact without ties when n1*n2 <= 2500; otherwise the normal approximation with tie correction
    and continuity correction. The p-value is 1 when either sample is empty or all values tie.
    """
    n1, n2 = len(x), len(y)
    if n1 == 0 or n2 == 0:
        return math.nan, 1.0
    ranks, ties = _ranks([*x, *y])
    u1 = sum(ranks[:n1]) - n1 * (n1 + 1) / 2
    if all(t == 1 for t in ties) and n1 * n2 <= 2500:
        counts = _u_counts(n1, n2)
        total = sum(counts)
        u = round(u1)
        low = sum(counts[: u + 1])  # P(U <= u) * total
        high = sum(counts[u:])  # P(U >= u) * total
        return u1, min(1.0, 2 * min(low, high) / total)
    n = n1 + n2
    mu = n1 * n2 / 2
    tie_term = sum(t**3 - t for t in ties) / (n * (n - 1))
    var = n1 * n2 / 12 * ((n + 1) - tie_term)
    if var <= 0:
        return u1, 1.0
    z = max(abs(u1 - mu) - 0.5, 0.0) / math.sqrt(var)
    return u1, min(1.0, math.erfc(z / math.sqrt(2)))


def bootstrap_ratio_ci(
    baseline_values: Sequence[float],
    values: Sequence[float],
    *,
    confidence: float = CONFIDENCE,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile-bootstrap interval for mean(values) / mean(baseline_values).

    Both samples are resampled with replacement, independently, ``resamples`` times from a generator
    seeded with ``seed``: the same inputs always give the same interval.
    """
    base = np.asarray(baseline_values, dtype=np.float64)
    other = np.asarray(values, dtype=np.float64)
    if base.size == 0 or other.size == 0:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    base_means = base[rng.integers(0, base.size, size=(resamples, base.size))].mean(axis=1)
    other_means = other[rng.integers(0, other.size, size=(resamples, other.size))].mean(axis=1)
    valid = base_means > 0
    if not valid.any():
        return math.nan, math.nan
    ratios = other_means[valid] / base_means[valid]
    tail = (1 - confidence) / 2 * 100
    lo, hi = np.percentile(ratios, [tail, 100 - tail])
    return float(lo), float(hi)


def can_decide(n: int, n_baseline: int, alpha: float = ALPHA) -> bool:
    """Whether the test can reach ``alpha`` at all with these sample sizes: the smallest two-sided
    p-value of the exact Mann-Whitney test is 2 / C(n + n_baseline, n) (3 and 3: 0.1; 4 and 4:
    0.029)."""
    return n >= 1 and n_baseline >= 1 and 2 / math.comb(n + n_baseline, n) < alpha


# the fewest repetitions per side with which the test can reach ALPHA at all (4: and then only
# when every repetition of one side lies beyond every one of the other)
GATE_MIN_REPEAT = next(n for n in range(1, 100) if can_decide(n, n))


def verdict_of(
    ratio: float, ci_low: float, ci_high: float, p_value: float, higher_is_better: bool
) -> str:
    """``faster``/``slower`` when the interval excludes 1 and the test agrees, else ``same``."""
    if not all(math.isfinite(v) for v in (ratio, ci_low, ci_high)):
        return "unknown"
    excludes_one = ci_high < 1 or ci_low > 1
    if not (excludes_one and p_value < ALPHA):
        return "same"
    better = ratio > 1 if higher_is_better else ratio < 1
    return "faster" if better else "slower"


def geomean(ratios: Iterable[float]) -> float:
    logs = [math.log(r) for r in ratios if math.isfinite(r) and r > 0]
    return math.exp(statistics.fmean(logs)) if logs else math.nan


def _cv(values: Sequence[float]) -> float:
    if len(values) < 2:
        return math.nan
    m = statistics.fmean(values)
    return statistics.stdev(values) / m if m else math.nan


def _round(value: float, digits: int = 4) -> float | None:
    """Stored figures: rounded (stable across platforms), NaN as null."""
    if not math.isfinite(value):
        return None
    if value == 0:
        return 0.0
    return round(value, max(0, digits - 1 - math.floor(math.log10(abs(value)))))


def unrounded(value: float | None) -> float:
    """A stored figure as a float again: ``None`` (no figure) as NaN."""
    return math.nan if value is None else value


def _seed(*parts: object) -> int:
    return zlib.crc32("|".join(map(str, parts)).encode())


def compare_values(
    baseline_values: Sequence[float], values: Sequence[float], m: Metric, seed: int = 0
) -> Stats:
    """The statistics of one metric of one cell against its baseline."""
    mean_b = statistics.fmean(baseline_values) if baseline_values else math.nan
    mean_v = statistics.fmean(values) if values else math.nan
    ratio = mean_v / mean_b if mean_b and math.isfinite(mean_b) else math.nan
    if len(values) >= 2 and len(baseline_values) >= 2:
        lo, hi = bootstrap_ratio_ci(baseline_values, values, seed=seed)
        _, p = mann_whitney_u(values, baseline_values)
    else:
        lo, hi, p = math.nan, math.nan, math.nan
    return Stats(
        metric=m.name,
        unit=m.unit,
        n=len(values),
        n_baseline=len(baseline_values),
        mean=_round(mean_v, 6),
        mean_baseline=_round(mean_b, 6),
        cv=_round(_cv(values), 3),
        cv_baseline=_round(_cv(baseline_values), 3),
        ratio=_round(ratio),
        ci_low=_round(lo),
        ci_high=_round(hi),
        p_value=_round(p),
        verdict=verdict_of(ratio, lo, hi, p, m.higher_is_better)
        if can_decide(len(values), len(baseline_values))
        else "unknown",
    )


# ---- comparisons --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pair:
    """One compared cell against its baseline cell."""

    workload: str
    point: PointKey
    variant: str
    base: Cell
    other: Cell


def compare_pairs(
    pairs: Iterable[Pair],
    kind: Literal["variants", "runs"],
    baseline_label: str,
    against: str | None = None,
) -> Comparison:
    """The comparison of ``pairs`` (see the module docstring)."""
    rows: list[ComparisonRow] = []
    for pair in pairs:
        for call, m, base_vals, vals in _compared(pair):
            if not base_vals or not vals:
                continue  # metric not measured (e.g. no CPU figures)
            parts = (m.name,) if call is None else (call, m.name)
            seed = _seed(pair.workload, pair.point, pair.variant, *parts)
            rows.append(
                ComparisonRow(
                    workload=pair.workload,
                    point=dict(pair.point),
                    variant=pair.variant,
                    baseline=pair.base.variant,
                    call=call,
                    **compare_values(base_vals, vals, m, seed).model_dump(),
                )
            )
    return Comparison(
        kind=kind,
        baseline=baseline_label,
        against=against,
        confidence=CONFIDENCE,
        alpha=ALPHA,
        resamples=RESAMPLES,
        rows=tuple(rows),
        summary=tuple(summarize(rows)),
        warnings=tuple(comparison_warnings(rows)),
    )


def _compared(pair: Pair) -> Iterator[tuple[str | None, Metric, list[float], list[float]]]:
    """What a pair compares: each metric of the whole cells (call None), then, for a mix, each
    call's (:data:`CALL_METRICS`) where both sides have replies of it; with the values of each
    side."""
    whole = all(c.kind == "command" for cell in (pair.base, pair.other) for c in cell.cases)
    for m in METRICS:
        if whole and m.name not in RUN_VALUES:
            continue  # a whole command's p50, p99 and runs/s per repetition say what its runs do
        yield None, m, metric_values(pair.base, m), metric_values(pair.other, m)
    base, other = pair.base, pair.other
    for call in base.call_names():
        oks = base.call_values(call, "ok") + other.call_values(call, "ok")
        if not base.call_values(call, "ok") or not other.call_values(call, "ok") or min(oks) <= 0:
            continue
        for m in CALL_METRICS:
            yield call, m, base.call_values(call, m.path), other.call_values(call, m.path)


def summarize(rows: Sequence[ComparisonRow]) -> list[SummaryRow]:
    """Per variant and metric: geometric mean of the ratios across cases and verdict counts
    (whole cases: a mix's calls apart are not counted again)."""
    groups: dict[tuple[str, str], list[ComparisonRow]] = {}
    for row in rows:
        if row.call is None:
            groups.setdefault((row.variant, row.metric), []).append(row)
    out = []
    for (variant, name), group in groups.items():
        counts = {v: sum(1 for r in group if r.verdict == v) for v in VERDICTS}
        ratios = [r.ratio for r in group if r.ratio is not None]
        out.append(
            SummaryRow(
                variant=variant,
                metric=name,
                geomean=_round(geomean(ratios)),
                cases=len(group),
                **counts,
            )
        )
    return out


def point_label(point: Mapping[str, object]) -> str:
    return " ".join(f"{k}={v}" for k, v in point.items())


def row_label(row: ComparisonRow) -> str:
    parts = [row.workload]
    if row.point:
        parts.append(point_label(row.point))
    if row.call is not None:
        parts.append(f"call {row.call}")
    parts.append(row.variant)
    return " · ".join(parts)


def comparison_warnings(rows: Sequence[ComparisonRow]) -> list[str]:
    """Verdicts resting on few repetitions (a headline and its details:
    :func:`rpcmeter.text.warning`). A ``same`` resting on spread repetitions is no warning
    about the run: its table marks it ``same?`` and says why (:attr:`Stats.weak`,
    ``reporters.tables.weak_note``), as ratios with no verdict at all say why in their tables
    (``reporters.tables.undecided_note``)."""
    thin = [
        r for r in rows if min(r.n, r.n_baseline) < MIN_REPEAT and can_decide(r.n, r.n_baseline)
    ]
    if not thin:
        return []
    fewest = min(min(r.n, r.n_baseline) for r in thin)
    return [
        warning(
            f"{len(thin)} of {len(rows)} verdicts rest on as few as {fewest} repetitions",
            f"a verdict there needs every repetition of one side beyond every one of the "
            f"other; use repeat >= {MIN_REPEAT}",
        )
    ]


def compare_variants(result: Result) -> Comparison:
    """Every variant of a run against the run's baseline variant, cell by cell."""
    base = baseline(result)
    pairs = []
    for workload, by_point in cells(result).items():
        for point, by_variant in by_point.items():
            b = by_variant.get(base)
            if b is None:
                continue
            for variant in variant_names(result):
                other = by_variant.get(variant)
                if variant != base and other is not None:
                    pairs.append(Pair(workload, point, variant, b, other))
    return compare_pairs(pairs, "variants", base)


def compare_runs(a: Result, b: Result, label_a: str = "A", label_b: str = "B") -> Comparison:
    """Run ``b`` against run ``a`` (the baseline), case by case: the cells both runs share."""
    grid_a, grid_b = cells(a), cells(b)
    pairs = []
    for workload, by_point in grid_b.items():
        for point, by_variant in by_point.items():
            for variant, other in by_variant.items():
                base = grid_a.get(workload, {}).get(point, {}).get(variant)
                if base is not None:
                    pairs.append(Pair(workload, point, variant, base, other))
    doc = compare_pairs(pairs, "runs", label_a, label_b)
    found = run_differences.differences(a, b)
    verdicts = sum(1 for r in doc.rows if r.call is None and r.verdict in ("faster", "slower"))
    beside = run_differences.warning_of(found, verdicts)
    doc = doc.model_copy(
        update={
            "environment": tuple(found),
            "warnings": (*doc.warnings, *([beside] if beside else [])),
        }
    )
    if a.suite.sha256 != b.suite.sha256:
        different = (
            "the two runs used different suite files; only the cases they share are compared"
        )
        doc = doc.model_copy(update={"warnings": (different, *doc.warnings)})
    return doc


def regressions(doc: Comparison, metric_name: str, pct: float) -> list[ComparisonRow]:
    """Rows of ``metric_name`` that are significantly worse than the baseline by more than ``pct``
    percent (verdict ``slower`` and the ratio beyond 1 + pct/100, or below 1 - pct/100 for
    higher-is-better metrics)."""
    m = metric(metric_name)
    limit = pct / 100
    out = []
    for row in doc.rows:
        if row.metric != m.name or row.verdict != "slower" or row.ratio is None:
            continue
        worse = (1 - row.ratio) if m.higher_is_better else (row.ratio - 1)
        if worse > limit:
            out.append(row)
    return out


def undecided(doc: Comparison, metric_name: str, pct: float) -> list[ComparisonRow]:
    """Rows of ``metric_name`` a gate at ``pct`` percent cannot settle: too few repetitions for
    the test to reach significance at all (verdict ``unknown``), or a ratio worse by more than
    ``pct`` percent that is not significant (verdict ``same``)."""
    m = metric(metric_name)
    limit = pct / 100
    out = []
    for row in doc.rows:
        if row.metric != m.name:
            continue
        if row.verdict == "unknown":
            out.append(row)
        elif row.verdict == "same" and row.ratio is not None:
            worse = (1 - row.ratio) if m.higher_is_better else (row.ratio - 1)
            if worse > limit:
                out.append(row)
    return out


def has_verdicts(doc: Comparison | None) -> bool:
    if doc is None:
        return False
    return any(r.verdict != "unknown" for r in doc.rows)
