"""What a result says beyond what it measured: every variant compared with the baseline
(:mod:`rpcmeter.analysis.compare`) and the warnings that make its figures doubtful (each case's own,
every rule of :mod:`rpcmeter.analysis.checks`, the comparisons' own).

Derived figures are computed from the cases, never read back: a document stores them for readers
outside rpcmeter (:func:`document`), and reading it derives them again
(:func:`rpcmeter.model.migrate` drops what it stored). :func:`derive` computes them once per
result object, whoever asks first (the JSON file and the history store when a run finishes, the
view a report is built from): a :class:`~rpcmeter.model.Result` is frozen, so what was derived
from it stays true.
"""

from __future__ import annotations

import json
import weakref
from dataclasses import dataclass

from rpcmeter.analysis import checks as checks
from rpcmeter.analysis import compare as analysis
from rpcmeter.analysis.rates import keeps_up
from rpcmeter.model import Case, Json, Result
from rpcmeter.text import warning


@dataclass(frozen=True)
class Derived:
    """A result's comparisons and warnings."""

    comparisons: analysis.Comparison
    warnings: tuple[str, ...]


_DERIVED: dict[int, Derived] = {}  # by the id of a result still alive


def derive(result: Result) -> Derived:
    """The comparisons and warnings of ``result``, computed on the first call for it."""
    key = id(result)
    found = _DERIVED.get(key)
    if found is None:
        found = _DERIVED[key] = _compute(result)
        weakref.finalize(result, _DERIVED.pop, key, None)
    return found


def _compute(result: Result) -> Derived:
    comparisons = analysis.compare_variants(result)
    own = [w for case in result.cases for w in case_warnings(case)]
    verdicts = [f"comparisons against {comparisons.baseline}: {w}" for w in comparisons.warnings]
    warnings = dict.fromkeys([*own, *checks.warnings_for(result), *verdicts])
    return Derived(comparisons, tuple(warnings))


def case_warnings(case: Case) -> list[str]:
    """Warnings about one case: most of its requests failed; an open loop that did not reach
    its rate."""
    reason = case.mostly_failed()
    if case.status == "failed" and reason:
        return [f"{case.label()}: {reason}"]
    ol = case.open_loop
    if ol is None or case.status != "ok" or not ol.offered_rps:
        return []
    achieved = ol.achieved_rps or 0.0
    if keeps_up(ol.offered_rps, achieved, ol.dropped, ol.scheduled):
        return []
    return [
        warning(
            f"{case.label()}: target rate not reached: {achieved:,.0f} of "
            f"{ol.offered_rps:,.0f} req/s offered ({achieved / ol.offered_rps:.1%})",
            f"{ol.late:,} late, {ol.dropped:,} dropped",
        )
    ]


def document(result: Result, derived: Derived | None = None) -> Json:
    """The result's JSON document with its derived ``warnings`` and ``comparisons`` (for readers
    outside rpcmeter; ``derived``: :func:`derive`'s, when not given)."""
    doc = result.to_json()
    found = derived or derive(result)
    doc["warnings"] = list(found.warnings)
    doc["comparisons"] = found.comparisons.to_json()
    return doc


def dumps(result: Result) -> str:
    """:func:`document` as JSON text."""
    return json.dumps(document(result), indent=1, allow_nan=False) + "\n"
