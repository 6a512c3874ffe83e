"""One target's screen, as a user of oha, wrk or ghz expects it after a one-line command: the
summary (requests/s, the requests and their outcome, latency, CPU per request), the latency
percentiles, a histogram of the latency, the status of the replies, and the errors.

A pure function from a :class:`~rpcmeter.reporters.view.View` of one variant and one workload
(``rpcmeter http URL``, ``rpcmeter grpc ADDRESS METHOD``) to text; repetitions are merged as in
every report (the histogram exactly, throughput as the mean)."""

from __future__ import annotations

import math
from collections.abc import Iterable

from rpcmeter.reporters.format import fmt_ms, fmt_rate
from rpcmeter.reporters.view import View
from rpcmeter.result.cells import Cell
from rpcmeter.text import printable

PERCENTILES = (10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.9, 99.99)
HISTOGRAM_ROWS = 11  # as oha draws it
BAR = "■"
WRITTEN_BY = "written by: "  # how a one-liner's suite describes itself (rpcmeter.cli.oneline)
DEFAULT_NAMES = ("http ", "grpc ")  # its name when --name gives none
STATUS_KINDS = ("http_", "grpc:")  # error kinds that are a reply's status


def _cell(view: View) -> Cell | None:
    for w in view.workloads:
        for row in w.cells.values():
            for cell in row.values():
                return cell
    return None


def _mean(values: Iterable[float | None]) -> float:
    got = [v for v in values if v is not None and math.isfinite(v)]
    return sum(got) / len(got) if got else math.nan


def _pct(p: float) -> str:
    return f"p{p:g}"


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def load_line(cell: Cell) -> str:
    """How the load was made: connections, loops, count or duration, rate, repetitions."""
    params = cell.cases[0].params if cell.cases else {}
    conns = int(_number(params.get("connections")) or 1)
    loops = int(_number(params.get("concurrency")) or _number(params.get("threads")) or 1)
    parts = [f"{conns:,} connection{'s' if conns != 1 else ''}"]
    if loops != conns:
        parts.append(f"{loops:,} in flight")
    rate, duration = _number(params.get("rate")), _number(params.get("duration_s"))
    per_loop = _number(params.get("requests_per_thread"))
    if rate is not None:
        parts.append(f"open loop at {fmt_rate(rate)} req/s")
    if duration is not None:
        parts.append(f"{duration:g} s")
    elif per_loop is not None:
        parts.append(f"{int(per_loop) * loops:,} requests")
    if len(cell.cases) > 1:
        parts.append(f"{len(cell.cases)} repetitions")
    return " · ".join(parts)


def histogram_lines(cell: Cell, width: int) -> list[str]:
    """The latency as rows of equal width on a log scale from fastest to slowest (on a linear
    one a long tail puts every request in the first row)."""
    h = cell.hist
    if h.count == 0:
        return []
    values, counts = h.bucket_values()
    lo, hi = max(h.min, 1.0), max(h.max, 1.0)
    rows = HISTOGRAM_ROWS if hi > lo else 1
    ratio = (hi / lo) ** (1 / rows) if hi > lo else 1.0
    edges = [lo * ratio**i for i in range(rows + 1)]
    tally = [0] * rows
    for value, n in zip(values, counts, strict=True):
        i = 0 if ratio == 1.0 else int(math.log(max(value, lo) / lo) / math.log(ratio))
        tally[min(max(i, 0), rows - 1)] += n
    labels = [f"{fmt_ms(edges[i + 1] / 1e3)}" for i in range(rows)]
    label_w = max(len(s) for s in labels)
    count_w = max(len(f"{n:,}") for n in tally)
    room = max(10, width - label_w - count_w - 10)
    top = max(tally)
    out = []
    for label, n in zip(labels, tally, strict=True):
        bar = BAR * (round(n / top * room) if top else 0)
        out.append(f"  {label:>{label_w}} ms [{n:>{count_w},}] {bar}".rstrip())
    return out


def status_lines(errors: dict[str, int], ok: int, grpc: bool) -> list[str]:
    """Replies by status: the successes, then each failing status (``http_503``,
    ``grpc:NOT_FOUND``)."""
    kinds = [k for k in errors if k.startswith(STATUS_KINDS)]
    if not kinds and not ok:
        return []
    ok_label = "[OK]" if grpc else "[2xx]"
    rows = [(ok_label, ok)] + [(f"[{k[5:]}]", errors[k]) for k in sorted(kinds)]
    w = max(len(f"{n:,}") for _, n in rows)
    lw = max(len(label) for label, _ in rows)
    return [f"  {label:<{lw}} {n:>{w},} replies" for label, n in rows]


def _driver(view: View) -> str:
    suite = view.document.get("suite") if isinstance(view.document, dict) else None
    driver = suite.get("driver") if isinstance(suite, dict) else None
    return driver if isinstance(driver, str) else ""


def render(view: View, width: int = 120, color: bool = False) -> str:
    """The screen of one target (``color`` is taken and ignored: the screen is plain text)."""
    cell = _cell(view)
    run = view.run
    command = run.description.removeprefix(WRITTEN_BY)
    if run.description.startswith(WRITTEN_BY):  # a one-liner's: the command line says it all
        own_name = not run.title.startswith(DEFAULT_NAMES)
        lines = [printable(run.title), printable(command)] if own_name else [printable(command)]
    else:
        lines = [printable(run.title)] + ([printable(command)] if command else [])
    if cell is None or not cell.cases:
        return "\n".join([*lines, "no case ran", ""])
    lines.append(load_line(cell))
    for line in (*view.tls_lines, *view.wait_lines):
        lines.append(printable(line))
    errors: dict[str, int] = {}
    for case in cell.cases:
        for kind, n in case.errors.items():
            errors[kind] = errors.get(kind, 0) + n
    requests = cell.requests
    failed = sum(errors.values())
    ok = requests - failed
    rps = cell.mean("throughput_rps")
    wall = sum(c.wall_s or 0.0 for c in cell.ok_cases)
    h = cell.hist
    lines += ["", "Summary:"]
    lines.append(f"  requests/s     {fmt_rate(rps)}")
    share = f" ({100 * ok / requests:.2f} % ok)" if requests else ""
    lines.append(
        f"  requests       {requests:,} in {wall:.2f} s: {ok:,} ok, {failed:,} failed{share}"
    )
    if h.count:
        lines.append(
            f"  latency ms     mean {fmt_ms(h.mean / 1e3)} · sd {fmt_ms(h.stdev / 1e3)} · "
            f"fastest {fmt_ms(h.min / 1e3)} · slowest {fmt_ms(h.max / 1e3)}"
        )
    client = _mean(c.cpu.client_us_per_request for c in cell.ok_cases)
    client_pct = _mean(c.cpu.client_util_pct for c in cell.ok_cases)
    if math.isfinite(client):
        lines.append(f"  client CPU     {client:.1f} us per request ({client_pct:.0f} % of a core)")
    server = _mean(c.cpu.server_us_per_request for c in cell.ok_cases)
    if math.isfinite(server):
        lines.append(f"  server CPU     {server:.1f} us per request")
    elif any(c.server_managed is False for c in cell.cases):
        lines.append("  server CPU     - (a server rpcmeter did not start)")
    out_b = _mean(c.bytes.out_per_request for c in cell.ok_cases if c.bytes is not None)
    in_b = _mean(c.bytes.in_per_request for c in cell.ok_cases if c.bytes is not None)
    if math.isfinite(out_b):
        lines.append(f"  bytes          {out_b:,.0f} out, {in_b:,.0f} in per request")
    opened = [c.open_loop for c in cell.ok_cases if c.open_loop is not None]
    if opened:
        late = sum(o.late for o in opened)
        dropped = sum(o.dropped for o in opened)
        lines.append(
            f"  open loop      {sum(o.sent for o in opened):,} sent of "
            f"{sum(o.scheduled for o in opened):,} scheduled · {late:,} late · "
            f"{dropped:,} dropped"
        )
    streams = [c.stream for c in cell.ok_cases if c.stream is not None]
    if streams:
        lines += ["", "Streams (a request above is a whole stream):"]
        lines.append(
            f"  messages/s     {fmt_rate(_mean(x.messages_per_s for x in streams))} · "
            f"{_mean(x.messages_per_stream for x in streams):,.1f} per stream"
        )
        for label, key in (("first message", "first_message"), ("per message", "message")):
            got = [getattr(x, key) for x in streams if getattr(x, key) is not None]
            if got:
                p50 = _mean(g.p50_us for g in got)
                p99 = _mean(g.p99_us for g in got)
                lines.append(f"  {label:<14} p50 {fmt_ms(p50)} ms · p99 {fmt_ms(p99)} ms")
    if h.count:
        lines += ["", "Latency percentiles (ms):"]
        values = h.percentiles(PERCENTILES)
        cells = [f"{_pct(p)} {fmt_ms(v / 1e3)}" for p, v in zip(PERCENTILES, values, strict=True)]
        row = " "
        for text in cells:
            if len(row) + len(text) + 3 > width:
                lines.append(row.rstrip())
                row = " "
            row += f" {text}  "
        lines.append(row.rstrip())
        lines += [
            "",
            "Latency histogram (each row: the requests up to its latency):",
            *histogram_lines(cell, min(width, 100)),
        ]
    status = status_lines(errors, ok, _driver(view) == "grpc")
    if status:
        lines += ["", "Status:", *status]
    other = {k: n for k, n in errors.items() if not k.startswith(STATUS_KINDS)}
    if other:
        lines += ["", "Errors:"]
        samples = {k: s for c in cell.cases for k, s in c.error_samples.items()}
        for kind, n in sorted(other.items(), key=lambda kv: -kv[1]):
            sample = samples.get(kind)
            lines.append(f"  {n:>8,} {kind}" + (f" ({printable(sample)[:100]})" if sample else ""))
    for p in view.failed:
        lines.append(f"{p.status}: {printable(p.reason)} (rep {p.repetition})")
        if p.server_output_tail:
            lines.append(
                "  server output: " + printable(p.server_output_tail.splitlines()[-1])[:200]
            )
    if view.warnings:
        lines.append("")
    lines += [f"warning: {printable(w)}" for w in view.warnings]
    return "\n".join(lines) + "\n"
