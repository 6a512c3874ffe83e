"""Whole commands as hyperfine shows them: per command its mean wall time ± σ with user and system
CPU, the range, the runs and the peak memory; then how many times faster the baseline ran than
each other command (hyperfine's ``A ran 1.99 ± 0.05 times faster than B``), with rpcmeter's
verdict and its interval beside it.

A pure function of the result and its comparisons; every repetition (round) of a command's cases
is pooled, as the comparisons pool them.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from rpcmeter.analysis import compare as analysis
from rpcmeter.model import Result


@dataclass
class Benchmark:
    """One command's runs over all its cases."""

    name: str
    walls: list[float] = field(default_factory=list)
    users: list[float] = field(default_factory=list)
    systems: list[float] = field(default_factory=list)
    peak_rss: int = 0
    failures: list[str] = field(default_factory=list)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.walls) if self.walls else math.nan

    @property
    def stdev(self) -> float:
        return statistics.stdev(self.walls) if len(self.walls) > 1 else math.nan


def benchmarks(result: Result) -> list[Benchmark]:
    """Each variant's successful runs, in the suite's order of variants."""
    by_name: dict[str, Benchmark] = {}
    for name in result.suite.variants:
        by_name[name] = Benchmark(name)
    for case in result.cases:
        bench = by_name.setdefault(case.variant, Benchmark(case.variant))
        if case.status != "ok":
            bench.failures.append(case.reason or case.status)
        for run in case.runs or []:
            if run.exit_code != 0:
                continue
            bench.walls.append(run.wall_s)
            bench.users.append(run.user_s)
            bench.systems.append(run.sys_s)
            bench.peak_rss = max(bench.peak_rss, run.max_rss_bytes)
    return list(by_name.values())


def _unit(seconds: float) -> tuple[str, float]:
    """hyperfine's unit for a benchmark, by its mean: µs below 1 ms, ms below 1 s, else s."""
    if seconds < 1e-3:
        return "µs", 1e6
    if seconds < 1:
        return "ms", 1e3
    return "s", 1.0


def _time(seconds: float, unit: tuple[str, float]) -> str:
    """``seconds`` in ``unit``, as hyperfine writes them."""
    if math.isnan(seconds):
        return "-"
    name, scale = unit
    return f"{seconds * scale:.{3 if name == 's' else 1}f} {name}"


def _mb(size: int) -> str:
    return f"{size / 1e6:.1f} MB"


def _benchmark_lines(index: int, b: Benchmark) -> list[str]:
    lines = [f"Benchmark {index}: {b.name}"]
    if b.walls:
        unit = _unit(b.mean)  # every figure of a benchmark in its mean's unit, as hyperfine

        def t(seconds: float) -> str:
            return _time(seconds, unit)

        user, system = statistics.fmean(b.users), statistics.fmean(b.systems)
        cpu = f"[User: {t(user)}, System: {t(system)}]"
        if len(b.walls) == 1:  # as hyperfine: one run has no spread
            lines.append(f"  Time (abs ≡):        {t(b.mean):>9}                {cpu}")
        else:
            lines.append(f"  Time (mean ± σ):     {t(b.mean):>9} ± {t(b.stdev):>9}    {cpu}")
        runs = f"{len(b.walls)} run" + ("s" if len(b.walls) != 1 else "")
        lines.append(
            f"  Range (min … max):   {t(min(b.walls)):>9} … {t(max(b.walls)):>9}    "
            f"{runs}    peak RSS {_mb(b.peak_rss)}"
        )
    lines += [f"  failed: {why}" for why in dict.fromkeys(b.failures)]
    return lines


def _ratio(base: Benchmark, other: Benchmark) -> tuple[float, float]:
    """``other``'s mean over ``base``'s and its ± (hyperfine's: the relative standard deviations
    added in quadrature)."""
    ratio = other.mean / base.mean
    spread = math.hypot(base.stdev / base.mean, other.stdev / other.mean)
    return ratio, ratio * spread


def _verdict(rows: Sequence[analysis.ComparisonRow], variant: str) -> str:
    """rpcmeter's verdict on the mean wall time of ``variant`` against the baseline: its ratio,
    interval and word (why there is none, where there is none)."""
    row = next((r for r in rows if r.variant == variant and r.metric == "mean"), None)
    if row is None or row.ratio is None:
        return "no verdict (a side has no successful runs)"
    interval = (
        f", 95 % interval {row.ci_low:.3f}-{row.ci_high:.3f}"
        if row.ci_low is not None and row.ci_high is not None
        else ""
    )
    word = row.word
    if row.weak:
        word += f" (runs vary by over {analysis.MAX_CV:.0%}: a difference could hide in the noise)"
    if row.verdict == "unknown":
        word = f"no verdict ({min(row.n, row.n_baseline)} runs a side: too few, need 4 or more)"
    return f"{variant} / {row.baseline} = {row.ratio:.3f}{interval}: {word}"


def render(result: Result, comparisons: analysis.Comparison | None) -> str:
    """The hyperfine-like summary of a run of whole commands."""
    found = benchmarks(result)
    lines: list[str] = []
    for i, b in enumerate(found, 1):
        lines += [*_benchmark_lines(i, b), ""]
    base_name = result.suite.baseline or next(iter(result.suite.variants), None)
    base = next((b for b in found if b.name == base_name), None)
    others = [b for b in found if b is not base and b.walls]
    if base is not None and base.walls and others:
        rows = [r for r in comparisons.rows if r.call is None] if comparisons else []
        lines += ["Summary", f"  {base.name} ran"]
        for other in others:
            ratio, spread = _ratio(base, other)
            if ratio < 1:
                ratio, spread = 1 / ratio, spread / ratio**2
            pm = f" ± {spread:.2f}" if math.isfinite(spread) else ""
            word = "faster" if other.mean >= base.mean else "slower"
            told = f"{ratio:.2f}{pm} times {word} than {other.name}"
            lines += [f"    {told}", f"      rpcmeter: {_verdict(rows, other.name)}"]
        lines.append("")
    return "\n".join(lines)
