"""Group a result's cases into cells (workload x matrix point x variant), merging repetitions.

Latency percentiles of a cell come from the merged histogram of its repetitions (exact merge);
throughput and wall time are means over repetitions.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from rpcmeter.metrics.histogram import Histogram
from rpcmeter.model import Case, Result

PointKey = tuple[tuple[str, Any], ...]


@dataclass
class Cell:
    workload: str
    point: PointKey
    variant: str
    cases: list[Case] = field(default_factory=list)
    _hist: Histogram | None = None
    _percentiles: dict[str, float] = field(default_factory=dict, repr=False, compare=False)

    @property
    def ok_cases(self) -> list[Case]:
        return [c for c in self.cases if c.status == "ok"]

    @property
    def failed(self) -> list[Case]:
        return [c for c in self.cases if c.status != "ok"]

    @property
    def hist(self) -> Histogram:
        if self._hist is None:
            self._hist = Histogram.merged(c.latency_histogram() for c in self.ok_cases)
        return self._hist

    def values(self, metric: str) -> list[float]:
        """Per-repetition values of a case metric (``throughput_rps``, ``wall_s``,
        ``latency.mean_us``, ``cpu.server_us_per_request``, ...), skipping missing ones. A path
        through a list gives one value per element: ``runs.wall_s`` is the wall time of every run
        of a whole command, over all repetitions."""
        out: list[float] = []
        for case in self.ok_cases:
            out.extend(values_at(case, metric.split(".")))
        return out

    def call_names(self) -> list[str]:
        """The calls of a mix (``kind = "mix"``), in the order its cases list them."""
        return list(dict.fromkeys(c.name for case in self.ok_cases for c in case.calls or []))

    def call_values(self, name: str, metric: str) -> list[float]:
        """Per-repetition values of call ``name``'s metric (``latency.mean_us``,
        ``throughput_rps``, ``share``, ...)."""
        out: list[float] = []
        for case in self.ok_cases:
            for call in case.calls or []:
                if call.name == name:
                    out.extend(values_at(call, metric.split(".")))
        return out

    def call_hist(self, name: str) -> Histogram:
        """Call ``name``'s latency histogram merged over repetitions."""
        return Histogram.merged(
            call.latency_histogram()
            for case in self.ok_cases
            for call in case.calls or []
            if call.name == name
        )

    def mean(self, metric: str) -> float:
        vals = self.values(metric)
        return statistics.fmean(vals) if vals else math.nan

    def cv(self, metric: str) -> float:
        """Coefficient of variation between repetitions (nan with fewer than two)."""
        vals = self.values(metric)
        if len(vals) < 2:
            return math.nan
        m = statistics.fmean(vals)
        return statistics.stdev(vals) / m if m else math.nan

    @property
    def requests_per_run(self) -> int | None:
        """For a command client's cell (rpcmeter.result.record.case_result), how many
        requests one run of its command makes; None for any other cell."""
        for case in self.cases:
            if case.command is not None and case.command.requests_per_run:
                return case.command.requests_per_run
        return None

    @property
    def requests(self) -> int:
        return sum(c.requests for c in self.cases)

    @property
    def errors(self) -> int:
        return sum(sum(c.errors.values()) for c in self.cases)

    def latency_us(self, stat: str) -> float:
        """``mean``, ``stdev``, ``min``, ``max`` or a percentile ``p50``/``p99``/``p999`` (us)."""
        h = self.hist
        if h.count == 0:
            return math.nan
        if stat == "mean":
            return h.mean / 1e3
        if stat == "stdev":
            return h.stdev / 1e3
        if stat == "min":
            return h.min / 1e3
        if stat == "max":
            return h.max / 1e3
        if stat not in self._percentiles:
            # the reports ask each cell for several: one pass over the histogram for them all
            wanted = list(dict.fromkeys([stat, *COMMON_PERCENTILES]))
            found = h.percentiles([_percent(s) for s in wanted])
            self._percentiles.update((s, v / 1e3) for s, v in zip(wanted, found, strict=True))
        return self._percentiles[stat]


COMMON_PERCENTILES = ("p50", "p90", "p95", "p99", "p999")


def _percent(stat: str) -> float:
    """``p50`` -> 50, ``p999`` -> 99.9, ``p9999`` -> 99.99."""
    pct = float(stat[1:])
    if stat.startswith("p9") and len(stat) > 3:
        pct = float(stat[1:3] + "." + stat[3:])
    return pct


def values_at(value: object, parts: list[str]) -> list[float]:
    """The finite numbers at a dotted path in a case (its parts' fields, or keys of its JSON
    values), flattening lists on the way."""
    for i, part in enumerate(parts):
        if isinstance(value, list):
            return [v for item in value for v in values_at(item, parts[i:])]
        if isinstance(value, BaseModel):
            value = getattr(value, part, None)
        else:
            value = value.get(part) if isinstance(value, dict) else None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return []
    return [float(value)]


def point_key(case: Case) -> PointKey:
    return tuple(case.point.items())


def cells(result: Result) -> dict[str, dict[PointKey, dict[str, Cell]]]:
    """workload -> point -> variant -> cell, in the order the cases ran."""
    variants = list(result.suite.variants)
    out: dict[str, dict[PointKey, dict[str, Cell]]] = {}
    for case in result.cases:
        by_point = out.setdefault(case.workload, {})
        by_variant = by_point.setdefault(point_key(case), {})
        cell = by_variant.get(case.variant)
        if cell is None:
            cell = by_variant[case.variant] = Cell(case.workload, point_key(case), case.variant)
        cell.cases.append(case)
    for by_point in out.values():
        for key, by_variant in by_point.items():
            order = {v: i for i, v in enumerate(variants)}
            by_point[key] = dict(
                sorted(by_variant.items(), key=lambda kv: order.get(kv[0], 1 << 30))
            )
    return out


def variant_names(result: Result) -> list[str]:
    names = list(result.suite.variants)
    seen = {c.variant for c in result.cases}
    return [n for n in names if n in seen] + sorted(seen - set(names))


def baseline(result: Result) -> str:
    names = variant_names(result)
    base = result.suite.baseline
    return base if base in names else (names[0] if names else "")
