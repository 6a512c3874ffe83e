"""The HTML report: one self-contained file (inline CSS and SVG, no script, no network) that opens
offline. Suite and environment at the top with the warnings; then per workload the comparison
table (ratios to the baseline, with intervals and verdicts when the comparison reached them),
the tables the terminal shows (where the time goes, streaming per message, CPU and memory,
connection costs, whole commands) and the plots of :mod:`rpcmeter.reporters.plots`. A pure
function from a :class:`~rpcmeter.reporters.view.View` to text."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping
from html import escape
from pathlib import Path
from typing import Any

from rpcmeter.analysis import compare as analysis
from rpcmeter.errors import StoreError
from rpcmeter.reporters.format import fmt_ms, fmt_rate, fmt_ratio, fmt_s
from rpcmeter.reporters.plots import (
    Plot,
    comparison,
    format_value,
    is_command_cell,
    palette,
    run_mean,
    slug,
)
from rpcmeter.reporters.tables import Grid, GridCell, Mark, RatioCell, table_note
from rpcmeter.reporters.view import View, WorkloadView
from rpcmeter.result.cells import Cell, PointKey
from rpcmeter.text import details, headline

MAX_SHOWN_WARNINGS = 8  # more are folded away (a failed run can list one per case)

CSS = """
:root { --fg: #1d1d1f; --muted: #666; --line: #e2e2e2; --warn: #fff4d6; --warnline: #e0b341; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg);
       margin: 0 auto; padding: 16px 24px 48px; max-width: 1400px; }
h1 { font-size: 22px; margin: 4px 0; }
h3 { font-size: 15px; margin: 18px 0 6px; }
h2 { font-size: 18px; margin: 28px 0 8px; padding-top: 8px; border-top: 1px solid var(--line); }
p.desc { margin: 2px 0 8px; color: var(--muted); }
.meta { color: var(--muted); font-size: 13px; }
.swatch { display: inline-block; width: 12px; height: 12px; border-radius: 2px;
          vertical-align: -1px; margin-right: 4px; }
.variants span.v { margin-right: 14px; white-space: nowrap; }
table { border-collapse: collapse; font-size: 13px; font-variant-numeric: tabular-nums; }
th, td { padding: 3px 9px; border-bottom: 1px solid var(--line); text-align: right;
         white-space: nowrap; }
th { font-weight: 600; vertical-align: bottom; }
td.l, th.l { text-align: left; }
td[rowspan] { vertical-align: top; }
dl.env { display: grid; grid-template-columns: repeat(auto-fill, minmax(320px, 1fr));
         gap: 2px 18px; margin: 6px 0; font-size: 13px; }
dl.env div { display: flex; gap: 8px; border-bottom: 1px solid var(--line); }
dl.env dt { font-weight: 600; min-width: 130px; }
dl.env dd { margin: 0; overflow-wrap: anywhere; }
.scroll { overflow-x: auto; }
.warnings { background: var(--warn); border-left: 4px solid var(--warnline); padding: 6px 12px;
            margin: 10px 0; }
.warnings ul { margin: 4px 0; padding-left: 18px; }
.ci { color: var(--muted); font-size: 12px; }
.faster { color: #107a3e; font-weight: 600; }
.slower { color: #b3261e; font-weight: 600; }
.same { color: var(--muted); }
.failed { color: #b3261e; }
.warn { color: #8a5a00; }
.plots { display: grid; grid-template-columns: repeat(auto-fill, minmax(520px, 1fr)); gap: 12px;
         margin-top: 12px; }
figure.plot { margin: 0; border: 1px solid var(--line); border-radius: 6px; padding: 4px;
              background: #fff; }
figure.plot svg { width: 100%; height: auto; display: block; }
figure.profile { margin: 12px 0 0; border: 1px solid var(--line); border-radius: 6px;
                 padding: 6px; background: #fff; }
figure.profile svg { width: 100%; height: auto; display: block; }
figure.profile table { margin-top: 6px; }
details { margin-top: 24px; }
pre { background: #f6f6f6; padding: 8px; overflow-x: auto; font-size: 12px; }
"""


def _e(value: Any) -> str:
    return escape(str(value), quote=True)


def _swatch(color: str) -> str:
    return f'<span class="swatch" style="background:{_e(color)}"></span>'


def _verdict_class(verdict: str) -> str:
    v = verdict.lower()
    if any(w in v for w in ("faster", "better", "improv", "less")):
        return "faster"
    if any(w in v for w in ("slower", "worse", "regress", "more")):
        return "slower"
    return "same"


def _ratio_cell(
    doc: analysis.Comparison,
    workload: str,
    point: PointKey,
    variant: str,
    metric: str,
    plain: float,
) -> str:
    comp = comparison(doc, workload, point, variant, metric)
    if comp is None:
        return f"<td>{fmt_ratio(plain)}</td>"
    text = fmt_ratio(comp.ratio)
    if math.isfinite(comp.ci_low) and math.isfinite(comp.ci_high):
        text += f' <span class="ci">[{comp.ci_low:.2f}, {comp.ci_high:.2f}]</span>'
    if not comp.verdict:  # unknown; why: the note under the table (tables.table_note)
        text += ' <span class="same">no verdict</span>'
    else:
        text += f' <span class="{_verdict_class(comp.verdict)}">{_e(comp.word)}</span>'
    return f"<td>{text}</td>"


def _ratio(a: float, b: float) -> float:
    return a / b if math.isfinite(a) and math.isfinite(b) and b else math.nan


def _fmt_seconds(s: float) -> str:
    return f"{s:.3g}" if math.isfinite(s) and s < 100 else fmt_s(s)


def _columns(
    command: bool,
) -> list[tuple[str, str, Callable[[Cell], float], Callable[[float], str]]]:
    """(header, comparison metric, value of a cell, formatter) of the table's measures."""
    if command:
        return [
            ("wall s", "mean", lambda c: run_mean(c, "wall_s"), _fmt_seconds),
            ("user s", "user_cpu", lambda c: run_mean(c, "user_s"), _fmt_seconds),
            ("system s", "sys_cpu", lambda c: run_mean(c, "sys_s"), _fmt_seconds),
        ]
    return [
        ("mean ms", "mean", lambda c: c.latency_us("mean"), fmt_ms),
        ("p99 ms", "p99", lambda c: c.latency_us("p99"), fmt_ms),
        ("req/s", "throughput", lambda c: c.mean("throughput_rps"), fmt_rate),
    ]


def workload_table(view: View, workload: str, colors: dict[str, str]) -> str:
    """One row per matrix point and variant: the variant's figures, then its ratios to the
    baseline (with interval and verdict when the comparison reached one). Long rather than
    wide, so any number of variants fits a laptop screen."""
    grid = next(w.cells for w in view.workloads if w.name == workload)
    names = list(view.variants)
    base = view.baseline
    keys = list(view.run.matrix_keys)
    command = any(is_command_cell(c) for row in grid.values() for c in row.values())
    cols = _columns(command)
    compare = len(names) > 1
    head = "".join(f'<th class="l">{_e(k)}</th>' for k in keys) + '<th class="l">variant</th>'
    head += "".join(f"<th>{_e(h)}</th>" for h, *_ in cols)
    if compare:
        head += "".join(f"<th>{_e(h.split()[0])} / {_e(base)}</th>" for h, *_ in cols)
    rows = []
    for point, row in grid.items():
        pd = dict(point)
        b = row.get(base)
        present = [v for v in names if v in row]
        for i, v in enumerate(present):
            c = row[v]
            tds = ""
            if i == 0:
                span = f' rowspan="{len(present)}"' if len(present) > 1 else ""
                tds += "".join(
                    f'<td class="l"{span}>{_e(format_value(pd.get(k, "")))}</td>' for k in keys
                )
            tds += f'<td class="l">{_swatch(colors[v])}{_e(v)}</td>'
            if not c.ok_cases:
                n = len(cols) * (2 if compare else 1)
                rows.append(f'<tr>{tds}<td colspan="{n}" class="failed">failed</td></tr>')
                continue
            tds += "".join(f"<td>{fmt(get(c))}</td>" for _, _, get, fmt in cols)
            if compare and v == base:
                tds += f'<td colspan="{len(cols)}" class="same l">baseline</td>'
            elif compare:
                for _, metric, get, _ in cols:
                    ok = b is not None and bool(b.ok_cases)
                    plain = _ratio(get(c), get(b)) if ok and b is not None else math.nan
                    tds += _ratio_cell(view.comparisons, workload, point, v, metric, plain)
            rows.append(f"<tr>{tds}</tr>")
    note = table_note([r for r in view.comparisons.rows if r.workload == workload])
    why = f'<p class="meta undecided">{_e(note)}</p>' if note else ""
    return (
        f'<div class="scroll"><table class="cmp"><tr>{head}</tr>{"".join(rows)}</table></div>' + why
    )


def _env_text(value: Any, packages: bool = False) -> str:
    """An environment value as one line: nested mappings as ``key: value``, empties left out."""
    if isinstance(value, dict):
        parts = ((k, _env_text(v, packages=k == "packages")) for k, v in value.items())
        sep = " " if packages else ": "
        return ", ".join(f"{k}{sep}{text}" for k, text in parts if text)
    if isinstance(value, list):
        return ", ".join(t for t in (_env_text(v) for v in value) if t)
    return "" if value is None else str(value)


def _env_rows(env: Mapping[str, Any]) -> Iterable[tuple[str, str]]:
    for key, value in env.items():
        if key == "variant_packages" and isinstance(value, dict):
            text = "; ".join(f"{v}: {_env_text(p, packages=True)}" for v, p in value.items())
        else:
            text = _env_text(value, packages=key == "packages")
        if text:
            yield key.replace("_", " "), text


def _item(head: str, more: list[str]) -> str:
    """A warning or a case's problem: its line, then its details and samples beneath."""
    below = "".join(f'<br><span class="meta">{_e(m)}</span>' for m in more if m)
    return f"<li>{_e(head)}{below}</li>"


def _problems(view: View) -> list[str]:
    """The warnings (headline, details beneath) and the cases' failures and errors, each with
    the first kept sample of each error kind, as list items."""
    out = [_item(headline(w), [details(w)]) for w in view.warnings]
    for p in view.problems:
        if p.status != "ok":
            head = f"failed: {p.where} (repetition {p.repetition}): {p.reason or None}"
        else:
            kinds = ", ".join(f"{k}: {n:,}" for k, n in p.errors)
            head = f"errors: {p.where}: {kinds}"
        out.append(_item(head, p.sample_lines))
    return out


def comparison_summary(view: View, colors: dict[str, str]) -> str:
    """Per variant and metric: geometric mean of the ratios and verdict counts, when the
    comparison of variants reached a verdict."""
    doc = view.comparisons
    rows = doc.summary if view.has_verdicts else ()
    if not rows:
        return ""
    base = _e(doc.baseline or view.baseline)
    body = []
    for r in rows:
        counts = " · ".join(  # in the metric's words, as the terminal's (less/more for CPU)
            f'<span class="{_verdict_class(v)}">{n} {_e(analysis.verdict_word(r.metric, v))}</span>'
            for v, n in (
                ("faster", r.faster),
                ("slower", r.slower),
                ("same", r.same),
                ("unknown", r.unknown),
            )
            if n
        )
        body.append(
            f'<tr><td class="l">{_swatch(colors.get(r.variant, "#444"))}{_e(r.variant)}</td>'
            f'<td class="l">{_e(r.metric)}</td>'
            f"<td>{fmt_ratio(r.geomean) if r.geomean is not None else '-'}</td>"
            f'<td>{r.cases}</td><td class="l">{counts}</td></tr>'
        )
    return (
        f'<section id="summary"><h2>Against {base}</h2><div class="scroll"><table>'
        '<tr><th class="l">variant</th><th class="l">metric</th><th>geometric mean ratio</th>'
        '<th>cases</th><th class="l">verdicts</th></tr>'
        f"{''.join(body)}</table></div></section>"
    )


def _figure(plot: Plot, colors: dict[str, str]) -> str:
    from rpcmeter.reporters.figures import to_svg

    return (
        f'<figure class="plot" id="plot-{_e(plot.id)}" data-plot="{_e(plot.id)}" '
        f'data-kind="{_e(plot.kind)}" data-series="{len(plot.series)}">'
        f"{to_svg(plot, colors)}</figure>"
    )


def expected_plots(view: View) -> list[str]:
    """Ids of the plots the report draws, in page order."""
    return [p.id for p in view.all_plots]


def profile_figures(workload: WorkloadView) -> str:
    """The profiles of the workload's cases (:mod:`rpcmeter.run.profile`): the flame graph inline,
    links to it and to the raw profile, and the top frames by self time."""
    out: list[str] = []
    for profile in workload.profiles:
        p = profile.doc
        svg_path = p.svg
        point = ", ".join(f"{k}={v}" for k, v in profile.point)
        title = " · ".join(
            x for x in (f"case {profile.case_id}", profile.variant, point, profile.role) if x
        )
        if svg_path is None:
            out.append(f'<p class="meta">profile {_e(title)}: {_e(p.error or p.note)}</p>')
            continue
        try:
            svg = Path(svg_path).read_text(encoding="utf-8")
        except OSError:
            svg = f'<p class="meta">flame graph not found at {_e(svg_path)}</p>'
        rows = "".join(
            f'<tr><td>{t.self_pct:.1f} %</td><td class="l">{_e(t.frame)}</td>'
            f'<td class="l"><code>{_e(t.source or "")}</code></td></tr>'
            for t in p.top or []
        )
        out.append(
            f'<figure class="profile"><figcaption><b>profile {_e(title)}</b> '
            f'<span class="meta">({_e(p.tool)}, {p.samples or 0:,} samples over the '
            f'measured interval; <a href="{_e(Path(svg_path).as_uri())}">svg</a> · '
            f'<a href="{_e(Path(p.raw or "").as_uri())}">raw</a>)</span></figcaption>{svg}'
            f'<table><tr><th>self</th><th class="l">frame</th><th class="l">line</th></tr>'
            f"{rows}</table></figure>"
        )
    return "".join(out)


def render(view: View) -> str:
    """The whole report as one HTML document."""
    run = view.run
    names = list(view.variants)
    colors = palette(names)
    base = view.baseline
    title = f"rpcmeter · {run.title}"
    meta = [
        f"run {run.run_id or '?'}",
        run.status,
        f"{run.ok_cases} of {run.cases} cases ok",
        f"started {run.started_at}",
        f"finished {run.finished_at}",
        f"repeat {run.repeat}",
        f"rpcmeter {run.version}",
    ]
    vparts = []
    for v in names:
        over = run.variant_settings.get(v) or {}
        desc = ", ".join(f"{k}={json.dumps(val)}" for k, val in over.items() if k != "description")
        label = _e(v) + (" (baseline)" if v == base and len(names) > 1 else "")
        vparts.append(
            f'<span class="v">{_swatch(colors[v])}<b>{label}</b>'
            + (f' <span class="meta">{_e(desc)}</span>' if desc else "")
            + "</span>"
        )
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title><style>{CSS}</style></head><body>",
        f"<header><h1>{_e(run.title)}</h1>",
    ]
    if run.description:
        out.append(f'<p class="desc">{_e(run.description)}</p>')
    out.append(f'<div class="meta">{" · ".join(_e(m) for m in meta)}</div>')
    if view.wait_lines:
        lines = "<br>".join(_e(line) for line in view.wait_lines)
        out.append(f'<p class="meta" id="wait">{lines}</p>')
    out.append(f'<p class="variants">{"".join(vparts)}</p></header>')
    problems = _problems(view)
    if problems:
        items = "".join(problems[:MAX_SHOWN_WARNINGS])
        if len(problems) > MAX_SHOWN_WARNINGS:
            rest = "".join(problems[MAX_SHOWN_WARNINGS:])
            items += (
                f"<li><details><summary>{len(problems) - MAX_SHOWN_WARNINGS} more</summary>"
                f"<ul>{rest}</ul></details></li>"
            )
        out.append(
            f'<section class="warnings" id="warnings"><b>Warnings</b><ul>{items}</ul></section>'
        )
    env_rows = "".join(
        f"<div><dt>{_e(k)}</dt><dd>{_e(v)}</dd></div>" for k, v in _env_rows(run.environment.dump())
    )
    out.append(
        f'<details open id="environment"><summary><b>Environment</b></summary>'
        f'<dl class="env">{env_rows}</dl></details>'
    )
    if len(view.workloads) > 1:
        links = " · ".join(
            f'<a href="#w-{_e(slug(w.name))}">{_e(w.name)}</a>' for w in view.workloads
        )
        out.append(f'<nav class="meta">workloads: {links}</nav>')
    out.append(comparison_summary(view, colors))
    for w in view.workloads:
        out.append(
            f'<section class="workload" id="w-{_e(slug(w.name))}" data-workload="{_e(w.name)}">'
        )
        out.append(f"<h2>{_e(w.name)}</h2>")
        out.append(workload_table(view, w.name, colors))
        out.append("".join(grid_html(g) for g in w.tables))
        figs = "".join(_figure(p, colors) for p in view.plots.get(w.name, ()))
        out.append(f'<div class="plots">{figs}</div>{profile_figures(w)}</section>')
    if view.plots.get(""):
        figs = "".join(_figure(p, colors) for p in view.plots[""])
        out.append(
            f'<section class="workload"><h2>Across workloads</h2><div class="plots">{figs}</div></section>'
        )
    if run.suite_text:
        out.append(
            f"<details><summary>Suite file {_e(run.suite_path)}</summary>"
            f"<pre>{_e(run.suite_text)}</pre></details>"
        )
    out.append("</body></html>\n")
    return "\n".join(out)


MARK_CLASSES = {"bad": "failed", "good": "faster", "dim": "same", "warn": "warn"}


def _grid_cell(cell: GridCell) -> str:
    if isinstance(cell, Mark):
        return f'<span class="{MARK_CLASSES.get(cell.style, "")}">{_e(cell.text)}</span>'
    if isinstance(cell, RatioCell):
        text = fmt_ratio(cell.ratio)
        if cell.low is not None and cell.high is not None:
            text += f' <span class="ci">[{fmt_ratio(cell.low)}, {fmt_ratio(cell.high)}]</span>'
        if cell.verdict != "unknown":
            text += f' <span class="{_verdict_class(cell.verdict)}">{_e(cell.word)}</span>'
        return text
    return _e(cell)


def grid_html(grid: Grid) -> str:
    """A :class:`~rpcmeter.reporters.tables.Grid` as a titled table (the terminal's detail
    tables: where the time goes, CPU and memory, streaming, connections, whole commands)."""
    note = f' <span class="meta">({_e(grid.note)})</span>' if grid.note else ""

    def cls(i: int) -> str:
        return ' class="l"' if grid.is_left(i) else ""

    head = "".join(
        f"<th{cls(i)}>{'<br>'.join(_e(part) for part in column.split(chr(10)) if part)}</th>"
        for i, column in enumerate(grid.columns)
    )
    rows = []
    for row in grid.rows:
        padded = [*row, *[""] * (len(grid.columns) - len(row))]
        rows.append(
            "<tr>"
            + "".join(f"<td{cls(i)}>{_grid_cell(c)}</td>" for i, c in enumerate(padded))
            + "</tr>"
        )
    return (
        f'<div class="grid" data-table="{_e(slug(grid.title))}"><h3>{_e(grid.title)}{note}</h3>'
        f'<div class="scroll"><table><tr>{head}</tr>{"".join(rows)}</table></div></div>'
    )


def write(view: View, path: str | Path) -> Path:
    """Write the report to ``path``; an unwritable path is a :class:`StoreError`."""
    return write_page(render(view), path)


def write_page(text: str, path: str | Path) -> Path:
    """Write a page to ``path``, creating its directory; an unwritable path is a
    :class:`StoreError`."""
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise StoreError(f"{path}: cannot write the HTML report: {exc.strerror or exc}") from None
    return target
