"""The regression gate (``--fail-if-slower PCT``): does a comparison show a case worse than its
baseline by more than PCT percent? And a suite's own criterion (``[gate]``): is every selected
case better than its baseline in some metrics and not worse in others?

:func:`judge` and :func:`check` read a comparison (rpcmeter.analysis.compare: a run's variants against
its baseline variant, or a run against a baseline run) and give the verdict: its exit status and
the lines that explain it. The command line prints them; the rules are here.
"""

from __future__ import annotations

from dataclasses import dataclass

from rpcmeter.analysis import compare as analysis
from rpcmeter.reporters import tables
from rpcmeter.reporters.format import fmt_ratio
from rpcmeter.suite.model import Gate

PASSED = 0
REGRESSED = 1
UNDECIDED = 3  # a case could not be settled (too few or too spread repetitions)


def worst(a: int, b: int) -> int:
    """The exit status of two gates together: REGRESSED over UNDECIDED over PASSED."""
    order = (PASSED, UNDECIDED, REGRESSED)
    return max(a, b, key=lambda s: order.index(s) if s in order else len(order))


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


# ---- the suite's own criterion ([gate]) -----------------------------------------------------


def _selected(row: analysis.ComparisonRow, where: dict[str, object]) -> bool:
    for key, value in where.items():
        have = row.workload if key == "workload" else row.point.get(key)
        if have != value:
            return False
    return True


def _label(m: analysis.Metric, rows: list[analysis.ComparisonRow]) -> str:
    """A metric's name in a sentence: ``mean`` of whole commands is their wall time per run."""
    if m.name == "mean" and any(r.metric in ("user_cpu", "sys_cpu") for r in rows):
        return "wall time per run"
    return m.label


def _line(doc: analysis.Comparison, r: analysis.ComparisonRow, label: str, why: str) -> str:
    m = analysis.METRIC_BY_NAME[r.metric]
    base = r.baseline if doc.kind == "variants" else doc.baseline
    ratio = (
        f"{fmt_ratio(r.ratio)}x [{fmt_ratio(r.ci_low)}-"
        f"{fmt_ratio(r.ci_high)}] {analysis.verdict_word(m.name, r.verdict)}"
        if r.ratio is not None
        else "unknown"
    )
    p = f", p={r.p_value:.3g}" if r.p_value is not None else ""
    reps = f"{r.n} and {r.n_baseline} repetitions{p}"
    return f"{analysis.row_label(r)}: {label} {ratio} of {base} ({reps}): {why}"


def check(doc: analysis.Comparison, rules: Gate) -> Verdict:
    """The suite's ``[gate]`` on a comparison: in the cases ``rules.where`` selects, every metric
    of ``rules.better`` significantly better than the baseline (verdict ``faster``/``less``) and
    none of ``rules.not_worse`` significantly worse. REGRESSED when a case breaks a rule, listing
    which; UNDECIDED when none does but a case cannot be settled (too few repetitions for the
    test), or no case was measured on both sides; else PASSED."""
    rows = [
        r
        for r in doc.rows
        if _selected(r, rules.where) and (not rules.variants or r.variant in rules.variants)
    ]
    wanted = [(n, True) for n in rules.better] + [(n, False) for n in rules.not_worse]
    failed: list[str] = []
    unsettled: list[str] = []
    judged: set[str] = set()
    for name, must_improve in wanted:
        m = analysis.metric(name)
        label = _label(m, rows)
        for r in (r for r in rows if r.metric == m.name):
            judged.add(analysis.row_label(r))
            if r.verdict == "unknown":
                unsettled.append(_line(doc, r, label, "too few repetitions to tell"))
            elif r.verdict == "slower":
                failed.append(_line(doc, r, label, "worse"))
            elif must_improve and r.verdict != "faster":
                failed.append(_line(doc, r, label, "not significantly better"))
    rule = "; ".join(
        [f"{_label(analysis.metric(n), rows)} better" for n in rules.better]
        + [f"{_label(analysis.metric(n), rows)} not worse" for n in rules.not_worse]
    )
    where = " ".join(f"{k}={v}" for k, v in rules.where.items()) or "every case"
    who = f"{', '.join(rules.variants)} against the baseline; " if rules.variants else ""
    head = f"gate ({rule}; {who}{where})"
    if failed:
        return Verdict(
            REGRESSED,
            [f"{head}: failed in {len(failed)} comparison(s):", *(f"  {x}" for x in failed)],
        )
    if not judged:
        which = f"no case with {where}" if rules.where else "no case"
        which += f" of {', '.join(rules.variants)}" if rules.variants else ""
        return Verdict(
            UNDECIDED,
            [
                f"{head}: {which} was measured for a variant and its baseline: nothing to "
                f"judge (exit status {UNDECIDED})"
            ],
        )
    if unsettled:
        return Verdict(
            UNDECIDED,
            [
                f"{head}: cannot tell for {len(unsettled)} comparison(s) (exit status "
                f"{UNDECIDED}):",
                *(f"  {x}" for x in unsettled),
                f"  a gate needs at least {analysis.GATE_MIN_REPEAT} repetitions per side "
                "(for a whole command, runs)",
            ],
        )
    return Verdict(PASSED, [f"{head}: passed in {len(judged)} case(s)"])
