"""A command client's own report of its requests, read from its output.

A command client (a command run against the server rpcmeter starts) is measured as whole runs:
wall time and CPU. A load tool also reports what it saw of every request; with the variant's
``client_report`` rpcmeter reads that report from each measured run's output, and the case then
has the tool's requests, statuses, requests/s and latency distribution, as rpcmeter's own cases
have theirs (:func:`rpcmeter.result.record.case_result`). That puts a peer tool beside
rpcmeter's clients in one table, on the same server: a check of either.

``"ghz"``: ghz's JSON report (``-O json``, on standard output). Every request's latency comes from
its ``details`` (one entry per request), folded into rpcmeter's own histogram, so percentiles are
computed the same way as for rpcmeter's cases; statuses from ``statusCodeDistribution``
(``Unavailable`` counted as ``grpc:UNAVAILABLE``, as rpcmeter's gRPC driver names it);
requests/s over ghz's own ``total`` time (the requests' span, not the process's start).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rpcmeter.metrics.histogram import Histogram


class ReportError(ValueError):
    """The output holds no report of the expected kind (the message says what is missing)."""


@dataclass
class ClientReport:
    """What a tool reported of one run: requests sent, those that succeeded, the others by
    kind, the time they took (seconds) and the successful requests' latencies (ns)."""

    requests: int = 0
    ok: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    elapsed_s: float = 0.0
    hist: Histogram = field(default_factory=Histogram)
    error_sample: str = ""  # the first error message the tool reported


def _json_document(text: str) -> dict[str, Any]:
    """The first JSON object in ``text`` (a tool may print other lines before it)."""
    decoder = json.JSONDecoder()
    for m in re.finditer(r"^\s*\{", text, re.MULTILINE):
        try:
            doc, _ = decoder.raw_decode(text, m.end() - 1)
        except ValueError:
            continue
        if isinstance(doc, dict):
            return doc
    raise ReportError("no JSON report in the output")


def _status_kind(status: str) -> str:
    """``Unavailable`` -> ``grpc:UNAVAILABLE`` (gRPC's code names as rpcmeter counts them)."""
    return "grpc:" + re.sub(r"(?<=[a-z])(?=[A-Z])", "_", status).upper()


def parse_ghz(text: str) -> ClientReport:
    """A ghz JSON report (``ghz -O json``); see the module documentation."""
    doc = _json_document(text)
    try:
        statuses: dict[str, int] = dict(doc["statusCodeDistribution"])
        details: list[dict[str, Any]] = list(doc.get("details") or [])
        total_ns = float(doc["total"])
        count = int(doc["count"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ReportError(f"not a ghz JSON report (no {exc})") from None
    latencies = [int(d["latency"]) for d in details if d.get("status") == "OK"]
    if count and not details:
        raise ReportError("the ghz report has no details (latencies of the requests)")
    hist = Histogram()
    hist.record_array(latencies)
    ok = int(statuses.get("OK", 0))
    errors = {_status_kind(s): int(n) for s, n in statuses.items() if s != "OK" and n}
    unsent = count - ok - sum(errors.values())  # counted by ghz without a status
    if unsent > 0:
        errors["ghz_error"] = unsent
    messages = list(doc.get("errorDistribution") or {})
    return ClientReport(
        requests=max(count, ok + sum(errors.values())),
        ok=ok,
        errors=errors,
        elapsed_s=total_ns / 1e9,
        hist=hist,
        error_sample=str(messages[0])[:200] if messages else "",
    )


#: The reports rpcmeter reads, by the name a variant's ``client_report`` gives.
PARSERS: dict[str, Callable[[str], ClientReport]] = {"ghz": parse_ghz}


def combined(reports: list[ClientReport]) -> ClientReport:
    """The reports of a case's runs as one: counts and times added, histograms merged."""
    out = ClientReport()
    for r in reports:
        out.requests += r.requests
        out.ok += r.ok
        out.elapsed_s += r.elapsed_s
        for kind, n in r.errors.items():
            out.errors[kind] = out.errors.get(kind, 0) + n
        out.hist.merge(r.hist)
        out.error_sample = out.error_sample or r.error_sample
    return out
