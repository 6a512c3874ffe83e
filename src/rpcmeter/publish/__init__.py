"""``rpcmeter publish DIR``: a static site of the history store.

The site, all of it files that open from disk or any static host (no server, no network)::

    DIR/index.html              every run, newest first: when, suite, revision and commit
                                message, tags, status, cases, the steps it brought (worst first)
    DIR/suites/<suite>.html     each case's trend per metric, drawn in the page from the page's
                                own JSON; steps marked; a point opens its run; two runs compared
    DIR/runs/<id>.html          the run's HTML report (rpcmeter.reporters.html)
    DIR/compare/<a>-<b>.html    run b against run a (rpcmeter.analysis.compare.compare_runs): for each run
                                and the run before it of its suite, and each tagged run and the
                                newest run of its suite
    DIR/data/<suite>.json       a suite's trends and steps, as its page carries them
    DIR/assets/                 the style sheet and the one small script
    DIR/manifest.json           what was rendered, from which run, and each run's figures

Incremental: a run's page and a comparison's page are rendered once, and again only when the
run changed in the store (a run still going when last published); each run's figures are kept
in the manifest, so a publish reads from the store only the runs it renders. The index and the
suites' pages are rendered every time (the trends and steps change with every run).

Bounded: run pages are rendered in worker processes. A run's report draws its plots with
matplotlib (about 1.5 s a run), so only the newest ``plots`` runs of a publish get them; the
others carry the report's tables (their trends are on the suite's page).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import subprocess
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from rpcmeter.analysis import compare as analysis
from rpcmeter.errors import RpcmeterError, StoreError, UsageError
from rpcmeter.history.store import RunInfo, Store
from rpcmeter.history.trend import Trend, TrendPoint, find_steps, revision_label
from rpcmeter.model import Result
from rpcmeter.publish import pages
from rpcmeter.publish.assets import SITE_CSS, SITE_JS
from rpcmeter.reporters import html
from rpcmeter.reporters.build import build, comparison_view
from rpcmeter.reporters.trend import fmt, unit_of
from rpcmeter.result.cells import PointKey, cells

#: the metrics of a suite's trends (those a run measured)
METRICS = ("mean", "p99", "throughput", "server_cpu", "client_cpu")
MANIFEST = "manifest.json"
FORMAT = 1  # the manifest's format: another one is rendered anew
DEFAULT_PLOTS = 5
CHUNK = 25  # runs a worker renders in one task


@dataclass(frozen=True)
class Published:
    """What a publish did."""

    directory: Path
    runs: int
    suites: int
    rendered_runs: int
    rendered_compares: int
    steps: int
    seconds: float
    size_bytes: int

    def line(self) -> str:
        kept = self.runs - self.rendered_runs
        return (
            f"published {self.runs} runs of {self.suites} suite(s) to {self.directory}: "
            f"{self.rendered_runs} run pages rendered ({kept} kept), "
            f"{self.rendered_compares} comparisons rendered, {self.steps} steps; "
            f"{self.size_bytes / 1e6:.1f} MB in {self.seconds:.1f} s"
        )


def suite_file(name: str) -> str:
    """A suite's file name: its name in ASCII letters and digits, and a short hash of the whole
    name (two names that read alike stay apart)."""
    text = "".join(ch.lower() if ch.isascii() and ch.isalnum() else "-" for ch in name)
    text = "-".join(part for part in text.split("-") if part)[:40] or "suite"
    return f"{text}-{hashlib.sha1(name.encode()).hexdigest()[:6]}"


def _key(info: RunInfo) -> list[Any]:
    """What a run's pages were rendered from: a run that changes in the store (it was still
    going) renders again."""
    return [info.run_id, info.status, info.cases]


def _case_label(workload: str, point: PointKey, variant: str) -> str:
    parts = [workload]
    if point:
        parts.append(analysis.point_label(dict(point)))
    parts.append(variant)
    return " · ".join(parts)


def figures(result: Result) -> dict[str, Any]:
    """A run's figures for the trends: per case (label) its workload, point, variant and, per
    metric it measured, the values per repetition."""
    out: dict[str, Any] = {}
    for workload, by_point in cells(result).items():
        for point, by_variant in by_point.items():
            for variant, cell in by_variant.items():
                measured = {}
                for name in METRICS:
                    values = [
                        float(f"{v:.6g}")
                        for v in analysis.metric_values(cell, analysis.metric(name))
                        if math.isfinite(v)
                    ]
                    if values:
                        measured[name] = values
                out[_case_label(workload, point, variant)] = {
                    "w": workload,
                    "p": [list(kv) for kv in point],
                    "v": variant,
                    "m": measured,
                }
    return out


# ---- the workers: run pages and comparisons -------------------------------------------------------


@dataclass(frozen=True)
class _Task:
    store: str
    directory: str
    runs: tuple[tuple[int, str, bool, int | None], ...]  # (run, suite, with plots, previous)
    pairs: tuple[tuple[int, int, str], ...]  # (a, b, suite): b against a


def _write(path: Path, text: str) -> None:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise StoreError(f"{path}: cannot write the site: {exc.strerror or exc}") from None


def _header(run: int, result: Result) -> str:
    git = result.suite.git
    commit = f" · commit {(git.commit or '')[:10]}{' (dirty)' if git.dirty else ''}" if git else ""
    return (
        f"run {run}: {result.suite.name or '?'} · {result.started_at or '?'}{commit} · "
        f"{len(result.cases)} cases · {result.status}"
    )


def _suite_crumb(suite: str) -> tuple[str, str]:
    return (suite, f"../suites/{suite_file(suite)}.html")


def _work(task: _Task) -> dict[int, dict[str, Any]]:
    """Render a task's run pages and comparisons; returns each rendered run's figures."""
    out: dict[int, dict[str, Any]] = {}
    loaded: dict[int, Result | str] = {}
    directory = Path(task.directory)
    with Store(task.store, read_only=True) as store:

        def load(run: int) -> Result | str:
            if run not in loaded:
                if len(loaded) > 4:
                    loaded.pop(next(iter(loaded)))
                try:
                    loaded[run] = store.load(run)
                except RpcmeterError as exc:  # a damaged or unreadable document: said on its page
                    loaded[run] = str(exc)
            return loaded[run]

        for run, suite, plots, previous in task.runs:
            result = load(run)
            extra = (
                (("compare with run " + str(previous), f"../compare/{previous}-{run}.html"),)
                if previous is not None
                else ()
            )
            crumbs = pages.Crumbs("../", _suite_crumb(suite), extra)
            path = directory / "runs" / f"{run}.html"
            if isinstance(result, str):
                _write(path, pages.error_page(f"run {run}", result, crumbs))
                out[run] = {"values": {}, "ok": 0, "cases": 0, "error": result}
                continue
            view = build(result)
            note = ""
            if not plots:
                # the report's plots take matplotlib some 1.5 s a run: left out of older runs'
                # pages (the view draws them on first use; this fills that use with none)
                view.__dict__["plots"] = {}
                note = (
                    "This page leaves out the report's plots (older runs of a long history); "
                    f"rpcmeter report {run} --html draws them. The suite's page has the trends."
                )
            _write(path, pages.run_page(html.render(view), crumbs, note))
            out[run] = {
                "values": figures(result),
                "ok": sum(1 for c in result.cases if c.status == "ok"),
                "cases": len(result.cases),
                "error": None,
            }
        for a, b, suite in task.pairs:
            ra, rb = load(a), load(b)
            crumbs = pages.Crumbs(
                "../",
                _suite_crumb(suite),
                (("run " + str(a), f"../runs/{a}.html"), ("run " + str(b), f"../runs/{b}.html")),
            )
            path = directory / "compare" / f"{a}-{b}.html"
            if isinstance(ra, str) or isinstance(rb, str):
                why = ra if isinstance(ra, str) else rb
                _write(path, pages.error_page(f"run {b} against run {a}", str(why), crumbs))
                continue
            doc = analysis.compare_runs(ra, rb, f"run {a}", f"run {b}")
            compared = comparison_view(
                doc, [f"run {b} against run {a}", _header(a, ra), _header(b, rb)]
            )
            _write(path, pages.compare_page(compared, crumbs))
    return out


def _run_tasks(tasks: Sequence[_Task], jobs: int) -> dict[int, dict[str, Any]]:
    out: dict[int, dict[str, Any]] = {}
    if jobs <= 1 or len(tasks) <= 1:
        for task in tasks:
            out.update(_work(task))
        return out
    with ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("fork")) as pool:
        for part in pool.map(_work, tasks):
            out.update(part)
    return out


# ---- trends and steps ------------------------------------------------------------------------------


def trends(suite: str, runs: Sequence[RunInfo], values: dict[int, dict[str, Any]]) -> list[Trend]:
    """Each case's trend per metric over ``runs`` (oldest first), steps found: one point per
    run that measured it (as ``rpcmeter trend --by run``)."""
    series: dict[tuple[str, str], list[tuple[RunInfo, list[float]]]] = {}
    cases: dict[str, dict[str, Any]] = {}
    for info in runs:
        for label, case in values.get(info.id, {}).items():
            cases.setdefault(label, case)
            for name, vals in case["m"].items():
                series.setdefault((label, name), []).append((info, vals))
    out = []
    for name in METRICS:
        m = analysis.metric(name)
        for label, case in cases.items():
            found = series.get((label, name))
            if not found:
                continue
            points = tuple(
                TrendPoint(
                    f"run {info.id}", (info.id,), revision_label(info), info.started_at, tuple(v)
                )
                for info, v in found
            )
            steps, drift = find_steps([p.value for p in points], m)
            point: PointKey = tuple((str(k), v) for k, v in case["p"])
            out.append(Trend(suite, case["w"], point, case["v"], m, points, tuple(steps), drift))
    return out


def _case(trend: Trend) -> str:
    return _case_label(trend.workload, trend.point, trend.variant)


def step_note(trend: Trend, index: int) -> pages.StepNote:
    s = trend.steps[index]
    word = analysis.verdict_word(trend.metric.name, s.verdict)
    return pages.StepNote(
        case=_case(trend),
        metric=trend.metric.label,
        text=f"{s.ratio:.2f}x [{s.ci_low:.2f}-{s.ci_high:.2f}] {word}",
        worse=trend.worse(s.ratio),
        verdict=s.verdict,
    )


def suite_data(
    suite: str,
    runs: Sequence[RunInfo],
    found: Sequence[Trend],
    compared: dict[str, str],
) -> dict[str, Any]:
    """What a suite's page draws: its runs (oldest first) and each series, in display units."""
    index = {info.id: i for i, info in enumerate(runs)}
    metrics = []
    for name in METRICS:
        if any(t.metric.name == name for t in found):
            m = analysis.metric(name)
            metrics.append({"name": name, "label": m.label})
    series = []
    for t in found:
        unit, scale = unit_of(t)
        several = any(len(p.values) > 1 for p in t.points)
        steps = []
        for i, s in enumerate(t.steps):
            note = step_note(t, i)
            steps.append(
                {
                    "index": s.index,
                    "run": t.points[s.index].runs[0],
                    "after": t.points[s.index - 1].runs[0],
                    "verdict": s.verdict,
                    "short": note.text,
                }
            )
        notes = [f"{fmt(t.points[-1].value, scale)} {unit} at run {t.points[-1].runs[0]}"]
        if t.steps:
            notes.append(f"{len(t.steps)} step(s)")
        if t.drift is not None:
            word = analysis.verdict_word(t.metric.name, t.drift.verdict)
            notes.append(f"drifts {word} {(t.drift.per_point - 1) * 100:+.2f} %/run")
        entry: dict[str, Any] = {
            "case": _case(t),
            "metric": t.metric.name,
            "unit": unit,
            "higher": t.metric.higher_is_better,
            "x": [index[p.runs[0]] for p in t.points],
            "y": [_round(p.value / scale) for p in t.points],
            "steps": steps,
            "note": " · ".join(notes),
        }
        if several:
            entry["lo"] = [_round(p.low / scale) for p in t.points]
            entry["hi"] = [_round(p.high / scale) for p in t.points]
        series.append(entry)
    return {
        "suite": suite,
        "runs": [
            {
                "id": info.id,
                "when": info.started_at[:16].replace("T", " "),
                "rev": revision_label(info),
                "tags": info.tags,
                "status": info.status,
                "page": f"../runs/{info.id}.html",
            }
            for info in runs
        ],
        "metrics": metrics,
        "series": series,
        "compared": compared,
    }


def _round(value: float) -> float:
    return float(f"{value:.4g}")


# ---- git -------------------------------------------------------------------------------------------


def commit_messages(commits: Iterable[str], directories: Iterable[Path]) -> dict[str, str]:
    """The subject of each commit found in the git checkouts at ``directories`` (none where git
    or a checkout is missing)."""
    wanted = sorted(set(commits))
    found: dict[str, str] = {}
    for directory in dict.fromkeys(directories):
        missing = [c for c in wanted if c not in found]
        if not missing or not directory.is_dir():
            continue
        try:
            proc = subprocess.run(
                [
                    "git",
                    "-C",
                    str(directory),
                    "log",
                    "--no-walk",
                    "--ignore-missing",
                    "--stdin",
                    "--format=%H%x1f%s",
                ],
                input="\n".join(missing) + "\n",
                capture_output=True,
                text=True,
                timeout=30,
            )
        except (OSError, subprocess.SubprocessError):
            continue
        if proc.returncode != 0:
            continue
        for line in proc.stdout.splitlines():
            commit, _, subject = line.partition("\x1f")
            found[commit] = subject
    return found


# ---- the site --------------------------------------------------------------------------------------


def _read_manifest(directory: Path) -> dict[str, Any]:
    path = directory / MANIFEST
    empty: dict[str, Any] = {"format": FORMAT, "runs": {}, "compares": {}}
    if not path.exists():
        if directory.exists() and any(directory.iterdir()):
            raise UsageError(
                f"{directory}: not empty and not an rpcmeter site (no {MANIFEST}); name a new "
                "or empty directory"
            )
        return empty
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return empty
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        return empty
    return manifest


def _size(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())


def publish(
    directory: str | Path,
    store_path: str | Path,
    suite: str | None = None,
    last: int | None = None,
    jobs: int | None = None,
    plots: int = DEFAULT_PLOTS,
    repo: str | Path | None = None,
) -> Published:
    """Write (or bring up to date) the site of the history at ``store_path`` in ``directory``:
    the runs of suite ``suite`` only when given, the newest ``last`` only when given."""
    start = time.perf_counter()
    out = Path(directory)
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out}: a file, not a directory for the site")
    manifest = _read_manifest(out)
    with Store(store_path, read_only=True) as store:
        infos = store.runs(last, suite=suite)[::-1]  # oldest first
    if not infos:  # nothing to show: the directory is left as it is (a mistyped --suite)
        return Published(out, 0, 0, 0, 0, 0, time.perf_counter() - start, 0)
    try:
        for sub in ("runs", "compare", "suites", "data", "assets"):
            (out / sub).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"{out}: cannot create the site: {exc.strerror or exc}") from None

    by_suite: dict[str, list[RunInfo]] = {}
    for info in infos:
        by_suite.setdefault(info.suite, []).append(info)
    previous: dict[int, int | None] = {}
    for runs in by_suite.values():
        for before, info in zip([None, *runs[:-1]], runs, strict=True):
            previous[info.id] = before.id if before else None

    known: dict[str, Any] = manifest.get("runs", {})
    newest = {info.id for info in sorted(infos, key=lambda i: i.id)[-plots:]} if plots else set()
    to_render = [
        info
        for info in infos
        if (known.get(str(info.id)) or {}).get("key") != _key(info)
        or not (out / "runs" / f"{info.id}.html").exists()
    ]
    rendered_ids = {info.id for info in to_render}
    keys = {info.id: _key(info) for info in infos}
    pairs: list[tuple[int, int, str]] = []
    for info in infos:
        prior = previous[info.id]
        if prior is not None:
            pairs.append((prior, info.id, info.suite))
    for runs in by_suite.values():
        last_run = runs[-1]
        for info in runs[:-1]:
            if info.tags:
                pairs.append((info.id, last_run.id, info.suite))
    pairs = list(dict.fromkeys(pairs))
    old_pairs: dict[str, Any] = manifest.get("compares", {})

    def stale(a: int, b: int) -> bool:
        name = f"{a}-{b}"
        return (
            a in rendered_ids
            or b in rendered_ids
            or old_pairs.get(name) != [keys[a], keys[b]]
            or not (out / "compare" / f"{name}.html").exists()
        )

    todo_pairs = [p for p in pairs if stale(p[0], p[1])]
    tasks = _tasks(str(store_path), out, to_render, todo_pairs, previous, newest)
    workers = jobs if jobs is not None else max(1, min(os.cpu_count() or 1, 8))
    fresh = _run_tasks(tasks, workers)

    runs_doc: dict[str, Any] = {}
    values: dict[int, dict[str, Any]] = {}
    for info in infos:
        entry = fresh.get(info.id) or known.get(str(info.id)) or {}
        values[info.id] = entry.get("values", {})
        runs_doc[str(info.id)] = {
            "key": keys[info.id],
            "suite": info.suite,
            "values": entry.get("values", {}),
            "ok": entry.get("ok", 0),
            "cases": entry.get("cases", info.cases),
            "error": entry.get("error"),
        }

    # the trends, the steps each run brought, the suites' pages
    compared_pairs = {f"{a}-{b}" for a, b, _ in pairs}
    brought: dict[int, list[pages.StepNote]] = {}
    suite_links = []
    total_steps = 0
    for name, runs in by_suite.items():
        found = trends(name, runs, values)
        listed: list[tuple[int, pages.StepNote]] = []
        for t in found:
            for i, s in enumerate(t.steps):
                note = step_note(t, i)
                run = t.points[s.index].runs[0]
                brought.setdefault(run, []).append(note)
                listed.append((run, note))
        listed.sort(key=lambda item: (-item[0], -item[1].worse))
        total_steps += len(listed)
        compared = {
            key: f"../compare/{key}.html"
            for key in compared_pairs
            if int(key.split("-")[1]) in {i.id for i in runs}
        }
        data = suite_data(name, runs, found, compared)
        file = suite_file(name)
        _write(out / "data" / f"{file}.json", json.dumps(data, separators=(",", ":")))
        _write(out / "suites" / f"{file}.html", pages.suite_page(name, data, listed))
        suite_links.append(pages.SuiteLink(name, f"suites/{file}.html", len(runs), len(listed)))

    store_dir = Path(store_path).resolve().parent
    directories = [Path(repo) if repo else Path.cwd(), store_dir.parent, store_dir]
    messages = commit_messages((i.commit for i in infos if i.commit), directories)
    rows = []
    for info in reversed(infos):
        entry = runs_doc[str(info.id)]
        prior = previous[info.id]
        rows.append(
            pages.RunRow(
                id=info.id,
                when=info.started_at,
                suite=info.suite,
                suite_page=f"suites/{suite_file(info.suite)}.html",
                revision=revision_label(info),
                branch=info.branch,
                message=messages.get(info.commit or ""),
                tags=tuple(info.tags),
                status=info.status,
                ok=int(entry["ok"]),
                cases=int(entry["cases"]),
                planned=info.planned_cases,
                previous=prior,
                compare=f"compare/{prior}-{info.id}.html" if prior is not None else None,
                steps=tuple(sorted(brought.get(info.id, []), key=lambda s: -s.worse)),
                error=entry["error"],
            )
        )
    _write(out / "assets" / "site.css", html.CSS + SITE_CSS)
    _write(out / "assets" / "site.js", SITE_JS)
    _write(out / "index.html", pages.index_page(rows, suite_links, str(store_path)))

    # what this site no longer shows: the pages the manifest had rendered for it
    for gone in set(known) - set(runs_doc):
        (out / "runs" / f"{gone}.html").unlink(missing_ok=True)
    new_pairs = {f"{a}-{b}": [keys[a], keys[b]] for a, b, _ in pairs}
    for name in set(old_pairs) - set(new_pairs):
        (out / "compare" / f"{name}.html").unlink(missing_ok=True)
    live = {f"{suite_file(n)}" for n in by_suite}
    for old in {v.get("suite", "") for v in known.values()} - set(by_suite):
        if suite_file(old) not in live:
            (out / "suites" / f"{suite_file(old)}.html").unlink(missing_ok=True)
            (out / "data" / f"{suite_file(old)}.json").unlink(missing_ok=True)
    manifest = {"format": FORMAT, "runs": runs_doc, "compares": new_pairs}
    _write(out / MANIFEST, json.dumps(manifest, separators=(",", ":")))
    return Published(
        directory=out,
        runs=len(infos),
        suites=len(by_suite),
        rendered_runs=len(to_render),
        rendered_compares=len(todo_pairs),
        steps=total_steps,
        seconds=time.perf_counter() - start,
        size_bytes=_size(out),
    )


def _tasks(
    store: str,
    out: Path,
    runs: Sequence[RunInfo],
    pairs: Sequence[tuple[int, int, str]],
    previous: dict[int, int | None],
    plots: set[int],
) -> list[_Task]:
    """The work in chunks of consecutive runs of a suite: a run's comparison with the run before
    it goes with the run, so a worker reads each run about once."""
    by_run: dict[int, list[tuple[int, int, str]]] = {}
    loose = []
    rendering = {info.id for info in runs}
    for pair in pairs:
        if pair[1] in rendering and previous.get(pair[1]) == pair[0]:
            by_run.setdefault(pair[1], []).append(pair)
        else:
            loose.append(pair)
    tasks = []
    # runs whose report draws its plots (seconds each) first, one a task, to spread them out
    ordered = sorted(runs, key=lambda i: (i.id not in plots, i.suite, i.id))
    heavy = sum(1 for i in ordered if i.id in plots)
    bounds = [*range(heavy + 1), *range(heavy + CHUNK, len(ordered), CHUNK), len(ordered)]
    for lo, hi in itertools.pairwise(bounds):
        chunk = ordered[lo:hi]
        if not chunk:
            continue
        tasks.append(
            _Task(
                store,
                str(out),
                tuple((c.id, c.suite, c.id in plots, previous.get(c.id)) for c in chunk),
                tuple(p for c in chunk for p in by_run.get(c.id, [])),
            )
        )
    for i in range(0, len(loose), CHUNK):
        tasks.append(_Task(store, str(out), (), tuple(loose[i : i + CHUNK])))
    return tasks
