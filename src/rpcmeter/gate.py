"""The regression gate (``--fail-if-slower PCT``): does a comparison show a case worse than its
baseline by more than PCT percent?

:func:`judge` reads a comparison (rpcmeter.analysis: a run's variants against its
baseline variant, or a run against a baseline run) and gives the verdict: its exit status and the
lines that explain it. The command line prints them; the rules are here.
"""

from __future__ import annotations

from dataclasses import dataclass

from rpcmeter import analysis
from rpcmeter.reporters import tables

PASSED = 0
REGRESSED = 1
UNDECIDED = 3  # a case could not be settled (too few or too spread repetitions)


@dataclass(frozen=True)
class Verdict:
    """The gate's exit status (:data:`PASSED`, :data:`REGRESSED` or :data:`UNDECIDED`) and the
    lines that say why."""

    status: int
    lines: list[str]


def judge(comparison: analysis.Comparison, metric: str, pct: float) -> Verdict:
    """REGRESSED when a case's ``metric`` is significantly worse than the baseline by more than
    ``pct`` percent, listing which; UNDECIDED when none is but some case cannot be settled (too
    few repetitions for significance, or a difference beyond the threshold that is not
    significant), or when no case was measured on both sides; else PASSED."""
    m = analysis.metric(metric)
    found = analysis.regressions(comparison, m.name, pct)
    open_rows = analysis.undecided(comparison, m.name, pct)
    rows = [r for r in comparison.rows if r.metric == m.name]
    if found:
        head = (
            f"gate: {len(found)} case(s) {m.label} worse than the baseline by more than {pct:g} %:"
        )
        lines = tables.regression_lines(comparison, found, pct)
        return Verdict(REGRESSED, [head, *(f"  {line}" for line in lines)])
    if not rows:
        return Verdict(
            UNDECIDED,
            [
                f"gate: no case has {m.label} measured on both sides: nothing to gate on (exit "
                f"status {UNDECIDED})"
            ],
        )
    if open_rows:
        head = (
            f"gate: cannot tell for {len(open_rows)} of {len(rows)} case(s) whether {m.label} "
            f"is worse than the baseline by more than {pct:g} % (exit status {UNDECIDED}):"
        )
        lines = tables.undecided_lines(comparison, open_rows)
        advice = (
            f"  a gate needs at least {analysis.GATE_MIN_REPEAT} repetitions per side, more when "
            "they spread: raise repeat, or gate on a steadier metric (--metric p50)"
        )
        return Verdict(UNDECIDED, [head, *(f"  {line}" for line in lines), advice])
    return Verdict(
        PASSED,
        [
            f"gate: no case's {m.label} is significantly worse than the baseline by more than "
            f"{pct:g} % ({len(rows)} cases judged)"
        ],
    )
