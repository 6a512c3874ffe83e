"""How the reporters write numbers: one place for every table (terminal, ranking, HTML).

``-`` stands for a figure that is missing (NaN, infinite, None)."""

from __future__ import annotations

import math


def fmt_ms(us: float) -> str:
    if not math.isfinite(us):
        return "-"
    ms = us / 1e3
    if ms >= 100:
        return f"{ms:,.0f}"
    if ms >= 1:
        return f"{ms:.2f}"
    if ms >= 0.001 or ms == 0:
        return f"{ms:.3f}"
    return f"{ms:.2g}"  # below a microsecond: two significant digits, never a false 0.000


def fmt_rate(rps: float) -> str:
    if not math.isfinite(rps):
        return "-"
    return f"{rps:,.0f}" if rps >= 100 else f"{rps:.1f}"


def fmt_ratio(r: float | None) -> str:
    return "-" if r is None or not math.isfinite(r) else f"{r:.2f}"


def fmt_s(s: float) -> str:
    if not math.isfinite(s):
        return "-"
    return f"{s:.1f}" if s >= 10 else f"{s:.2f}"


def ratio(a: float, b: float) -> float:
    return a / b if (math.isfinite(a) and math.isfinite(b) and b) else math.nan


def fmt_num(x: float, digits: int = 1) -> str:
    if not math.isfinite(x):
        return "-"
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.{digits}f}"


def fmt_mb(n: float) -> str:
    return "-" if not math.isfinite(n) else f"{n / 1e6:,.0f}" if n >= 1e7 else f"{n / 1e6:.1f}"


def fmt_bytes(n: float) -> str:
    return "-" if not math.isfinite(n) else f"{n:,.0f}"
