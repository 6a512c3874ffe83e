"""The site's pages as text: pure functions of what :mod:`rpcmeter.publish` gathered.

Every name that came from a suite (suite, case, variant, tag, commit message) is escaped where
it enters the HTML; the data a page's script reads is JSON inside ``<script
type="application/json">`` with ``<``, ``>`` and ``&`` written as ``\\u`` escapes, so no name can
close the element."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape
from typing import Any

from rpcmeter.reporters.html import grid_html
from rpcmeter.reporters.view import ComparisonView


def e(value: object) -> str:
    return escape(str(value), quote=True)


@dataclass(frozen=True)
class StepNote:
    """A step that a run brought to one case's trend."""

    case: str  # the case's label, without the suite
    metric: str  # the metric's label
    text: str  # "1.21x [1.19-1.23] slower"
    worse: float  # how many times worse (below 1: better)
    verdict: str  # "faster" or "slower"


@dataclass(frozen=True)
class RunRow:
    """One line of the index."""

    id: int
    when: str
    suite: str
    suite_page: str
    revision: str  # "4f2a9c1", "4f2a9c1*" (changes in the tree), "-" outside git
    branch: str | None
    message: str | None  # the commit's subject, where a git checkout had it
    tags: tuple[str, ...]
    status: str
    ok: int
    cases: int
    planned: int | None
    previous: int | None  # the run before it of its suite
    compare: str | None  # the page comparing it with that run
    steps: tuple[StepNote, ...] = ()
    error: str | None = None  # why its document could not be read


@dataclass(frozen=True)
class SuiteLink:
    name: str
    page: str
    runs: int
    steps: int


@dataclass(frozen=True)
class Crumbs:
    """The links at the top of a page, relative to it."""

    root: str  # "" or "../"
    suite: tuple[str, str] | None = None  # (name, href)
    extra: tuple[tuple[str, str], ...] = field(default_factory=tuple)  # (text, href)

    def html(self) -> str:
        links = [f'<a href="{e(self.root)}index.html">all runs</a>']
        if self.suite is not None:
            links.append(f'<a href="{e(self.suite[1])}">suite {e(self.suite[0])}</a>')
        links += [f'<a href="{e(href)}">{e(text)}</a>' for text, href in self.extra]
        return f'<nav class="site">rpcmeter history · {"".join(links)}</nav>'


def page(title: str, body: str, root: str, script: bool = False) -> str:
    js = f'<script src="{e(root)}assets/site.js"></script>' if script else ""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<title>{e(title)}</title><link rel="stylesheet" href="{e(root)}assets/site.css">'
        f"{js}</head><body>\n{body}\n</body></html>\n"
    )


def json_script(data: Any, ident: str) -> str:
    """``data`` as JSON a page's script reads, safe inside HTML."""
    text = json.dumps(data, separators=(",", ":"), allow_nan=False, ensure_ascii=False)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return f'<script type="application/json" id="{e(ident)}">{text}</script>'


def _steps_cell(steps: Sequence[StepNote], shown: int = 3) -> str:
    def one(s: StepNote) -> str:
        cls = "slower" if s.verdict == "slower" else "faster"
        return f'<li><span class="{cls}">{e(s.text)}</span> {e(s.metric)} · {e(s.case)}</li>'

    if not steps:
        return ""
    head = "".join(one(s) for s in steps[:shown])
    more = ""
    if len(steps) > shown:
        rest = "".join(one(s) for s in steps[shown:])
        more = f"<details><summary>{len(steps) - shown} more</summary><ul>{rest}</ul></details>"
    return f'<ul class="steps">{head}</ul>{more}'


def index_page(rows: Sequence[RunRow], suites: Sequence[SuiteLink], source: str) -> str:
    """Every run, newest first, with what it brought; the suites; a filter."""
    suite_items = "".join(
        f'<li><a href="{e(s.page)}">{e(s.name or "(no name)")}</a> · {s.runs} runs · '
        f"{s.steps} steps</li>"
        for s in suites
    )
    lines = []
    for r in rows:
        tags = "".join(f'<span class="tag">{e(t)}</span>' for t in r.tags)
        status = (
            e(r.status) if r.status == "complete" else f'<span class="failed">{e(r.status)}</span>'
        )
        cases = f"{r.ok}/{r.cases}" + (
            f" of {r.planned}" if r.planned is not None and r.planned != r.cases else ""
        )
        compare = (
            f'<a href="{e(r.compare)}">vs {r.previous}</a>' if r.compare and r.previous else ""
        )
        message = e(r.message or "") + (
            f'<br><span class="failed">{e(r.error)}</span>' if r.error else ""
        )
        branch = f" ({e(r.branch)})" if r.branch else ""
        search = " ".join(
            [
                str(r.id),
                r.suite,
                r.revision,
                r.branch or "",
                r.message or "",
                r.status,
                *r.tags,
                *(s.case for s in r.steps),
            ]
        )
        lines.append(
            f'<tr class="run" id="run-{r.id}" data-search="{e(search)}">'
            f'<td><a href="runs/{r.id}.html">{r.id}</a></td>'
            f'<td class="l">{e(r.when[:16].replace("T", " "))}</td>'
            f'<td class="l"><a href="{e(r.suite_page)}">{e(r.suite or "(no name)")}</a></td>'
            f'<td class="l"><code>{e(r.revision)}</code>{branch}</td>'
            f'<td class="msg">{message}</td><td class="l">{tags}</td><td class="l">{status}</td>'
            f'<td>{cases}</td><td class="steps">{_steps_cell(r.steps)}</td><td>{compare}</td></tr>'
        )
    head = "".join(
        f'<th class="{c}">{e(t)}</th>'
        for t, c in (
            ("run", ""),
            ("when (UTC)", "l"),
            ("suite", "l"),
            ("revision", "l"),
            ("commit", "l"),
            ("tags", "l"),
            ("status", "l"),
            ("cases ok", ""),
            ("steps it brought, worst first", "l"),
            ("compare", ""),
        )
    )
    body = (
        "<header><h1>rpcmeter history</h1>"
        f'<div class="meta">{len(rows)} runs of {len(suites)} suites from {e(source)}</div></header>'
        f'<h2>Suites</h2><ul id="suites">{suite_items}</ul>'
        '<h2>Runs</h2><input class="filter" id="filter-runs" type="search" '
        'placeholder="filter: suite, case, revision, tag" aria-label="filter runs"> '
        f'<span class="note"><span id="shown-runs">{len(rows)}</span> shown</span>'
        f'<div class="scroll"><table id="runs"><tr>{head}</tr>{"".join(lines)}</table></div>'
    )
    return page("rpcmeter history", body, "", script=True)


def suite_page(name: str, data: dict[str, Any], steps: Sequence[tuple[int, StepNote]]) -> str:
    """A suite's trends (drawn by the script from ``data``), its steps, and two runs compared."""
    rows = "".join(
        f'<tr><td><a href="../runs/{run}.html">{run}</a></td>'
        f'<td class="l {"slower" if s.verdict == "slower" else "faster"}">{e(s.text)}</td>'
        f'<td class="l">{e(s.metric)}</td><td class="l">{e(s.case)}</td></tr>'
        for run, s in steps
    )
    step_table = (
        '<div class="scroll"><table id="steps"><tr><th>run</th><th class="l">step</th>'
        f'<th class="l">metric</th><th class="l">case</th></tr>{rows}</table></div>'
        if steps
        else '<p class="note" id="steps">No step in any case.</p>'
    )
    runs = data["runs"]
    body = (
        Crumbs("../").html() + f"<header><h1>{e(name)}</h1>"
        f'<div class="meta">{len(runs)} runs · {len({s["case"] for s in data["series"]})} cases'
        f"{' · runs ' + str(runs[0]['id']) + ' to ' + str(runs[-1]['id']) if runs else ''}"
        "</div></header>"
        '<h2>Trends</h2><p class="note">One point per run: the mean over its repetitions (bars: '
        "their range). Dashed lines: steps, with their size and 95 % interval. A point opens its "
        "run.</p>"
        '<div class="tabs" id="metric-tabs"></div>'
        '<input class="filter" id="filter-cases" type="search" placeholder="filter cases by name" '
        'aria-label="filter cases"> <span class="note"><span id="shown-cases">0</span> shown</span>'
        '<div class="charts" id="charts"></div>'
        f"<h2>Steps, newest first</h2>{step_table}"
        '<h2 id="compare">Compare two runs</h2><p>A <select id="compare-a" aria-label="run A">'
        '</select> B <select id="compare-b" aria-label="run B"></select></p>'
        '<div id="compare-out"></div>' + json_script(data, "site-data")
    )
    return page(f"rpcmeter · {name}", body, "../", script=True)


def compare_page(view: ComparisonView, crumbs: Crumbs) -> str:
    """Two runs compared (``rpcmeter compare``'s tables, with intervals and verdicts)."""
    head = "".join(f'<div class="meta">{e(h)}</div>' for h in view.header[1:])
    tables = (
        "".join(grid_html(g) for g in view.tables)
        if not view.empty
        else '<p class="note">No case in common.</p>'
    )
    warnings = "".join(f"<li>{e(w)}</li>" for w in view.warnings)
    warn = (
        f'<section class="warnings"><b>Warnings</b><ul>{warnings}</ul></section>'
        if warnings
        else ""
    )
    body = (
        crumbs.html()
        + f"<header><h1>{e(view.header[0])}</h1>{head}</header>{warn}"
        + f'<section id="comparison">{tables}</section>'
    )
    return page(view.header[0], body, crumbs.root)


def run_page(report: str, crumbs: Crumbs, note: str = "") -> str:
    """A run's HTML report with the site's links above it."""
    extra = f'<p class="meta">{e(note)}</p>' if note else ""
    style = (
        "<style>nav.site{font-size:13px;margin:0 0 10px;padding:6px 0;"
        "border-bottom:1px solid #e2e2e2}nav.site a{margin-right:14px}</style>"
    )
    return report.replace("</head>", f"{style}</head>", 1).replace(
        "<body>", f"<body>{crumbs.html()}{extra}", 1
    )


def error_page(title: str, message: str, crumbs: Crumbs) -> str:
    body = f'{crumbs.html()}<h1>{e(title)}</h1><p class="failed">{e(message)}</p>'
    return page(title, body, crumbs.root)
