"""``rpcmeter publish``: the static site of a history, built from a small store of result
documents (a step in one case, a run of an older schema version, a failed run, runs without a
revision, names that are HTML), checked as files and driven in a real headless Chromium from
disk."""

from __future__ import annotations

import base64
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from rpcmeter import publish as site_module
from rpcmeter.cli import main
from rpcmeter.cli import publish as publish_command
from rpcmeter.errors import UsageError
from rpcmeter.history.store import Store
from rpcmeter.publish import publish, suite_file
from tests.reporters.test_html import ARTIFACTS, Page, chromium  # noqa: F401
from tests.support.synthetic import CellSpec, synthetic_document

EVIL = "<script>alert(1)</script>"
SUITE = f"api {EVIL}"
RUNS, STEP_AT = 12, 7  # the seventh run and later: case `slow` of variant `b` 1.5x slower


def spec(slow: bool) -> CellSpec:
    return {
        ("get", (("threads", 1),), "a"): [100.0, 100.0],
        ("get", (("threads", 1),), "b"): [150.0, 150.0] if slow else [100.0, 100.0],
        (EVIL, (), "a"): [200.0, 200.0],
    }


def git_repo(path: Path) -> str:
    """A git checkout with one commit; its hash."""
    path.mkdir()
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t"}
    env |= {"GIT_COMMITTER_EMAIL": "t@t", "HOME": str(path), "PATH": "/usr/bin:/bin"}
    for cmd in (["init", "-q"], ["commit", "-q", "--allow-empty", "-m", f"faster {EVIL} path"]):
        subprocess.run(["git", "-C", str(path), *cmd], check=True, env=env)
    out = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True)
    return out.stdout.decode().strip()


def make_store(path: Path, commit: str, runs: int = RUNS, first: int = 1) -> None:
    with Store(path) as store:
        for n in range(first, first + runs):
            doc = synthetic_document(spec(n >= STEP_AT), seed=n, cpu=True)
            doc["suite"]["name"] = SUITE
            doc["started_at"] = f"2026-03-{n:02d}T10:00:00+00:00"
            if n % 3:  # every third run outside git
                doc["suite"]["git"] = {"commit": commit, "branch": "main", "dirty": n == 5}
            if n == 4:  # a failed run: its first case failed, the run stopped
                doc["status"] = "failed"
                doc["cases"][0].update(status="failed", reason="server exited with status 1")
            run = store.save(doc)
            if n == 2:  # stored by an older rpcmeter
                store.db.execute(
                    "UPDATE runs SET document = json_set(document, '$.schema_version', 1) "
                    "WHERE id = ?",
                    (run,),
                )
        if first == 1:
            store.tag("release-1", 3)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("publish")
    commit = git_repo(tmp / "repo")
    store = tmp / "h.db"
    make_store(store, commit)
    out = tmp / "site"
    first = publish(out, store, jobs=2, plots=1, repo=tmp / "repo")
    return {"dir": out, "store": store, "first": first, "commit": commit, "repo": tmp / "repo"}


def test_the_site_holds_every_page(site: dict[str, Any]) -> None:
    out: Path = site["dir"]
    first = site["first"]
    assert (first.runs, first.suites, first.rendered_runs) == (RUNS, 1, RUNS)
    # consecutive runs, and the tagged run against the newest
    assert first.rendered_compares == RUNS - 1 + 1
    assert sorted(p.name for p in (out / "runs").iterdir()) == sorted(
        f"{n}.html" for n in range(1, RUNS + 1)
    )
    assert (out / "compare" / "3-12.html").exists() and (out / "compare" / "11-12.html").exists()
    page = (out / "suites" / f"{suite_file(SUITE)}.html").read_text(encoding="utf-8")
    data = json.loads((out / "data" / f"{suite_file(SUITE)}.json").read_text(encoding="utf-8"))
    assert [m["name"] for m in data["metrics"]] == [
        "mean",
        "p99",
        "throughput",
        "server_cpu",
        "client_cpu",
    ]
    # the step: where it happened, in mean latency of the case that changed, and only there
    slow = [s for s in data["series"] if s["steps"]]
    assert {(s["case"], s["metric"]) for s in slow} >= {("get · threads=1 · b", "mean")}
    assert all(s["case"] == "get · threads=1 · b" for s in slow)
    step = next(s for s in slow if s["metric"] == "mean")["steps"][0]
    assert (step["run"], step["after"], step["verdict"]) == (STEP_AT, STEP_AT - 1, "slower")
    assert step["short"].startswith("1.5")
    assert f'<a href="../runs/{STEP_AT}.html">{STEP_AT}</a>' in page
    # the page carries its data, and it is the file's
    found = re.search(r'<script type="application/json" id="site-data">(.*?)</script>', page)
    assert found is not None and json.loads(found.group(1)) == data
    # the report of a run of the older schema, of the failed run; the older runs' pages leave
    # the report's plots out, the newest have them
    assert "failed" in (out / "runs" / "4.html").read_text(encoding="utf-8")
    assert '<figure class="plot"' not in (out / "runs" / "2.html").read_text(encoding="utf-8")
    assert '<figure class="plot"' in (out / "runs" / f"{RUNS}.html").read_text(encoding="utf-8")


def test_the_index_lists_runs_with_revision_message_tags_and_steps(site: dict[str, Any]) -> None:
    index = (site["dir"] / "index.html").read_text(encoding="utf-8")
    rows = re.findall(r'<tr class="run" id="run-(\d+)"', index)
    assert rows == [str(n) for n in range(RUNS, 0, -1)]  # newest first
    row = {n: index.split(f'id="run-{n}"')[1].split("</tr>")[0] for n in (1, 3, 4, 5, STEP_AT)}
    # the revision, and its commit message read from the checkout
    commit = site["commit"]
    assert f"<code>{commit[:7]}</code> (main)" in row[1]
    assert "faster &lt;script&gt;alert(1)&lt;/script&gt; path" in row[1]
    assert "<code>-</code>" in row[3]  # outside git
    assert f"<code>{commit[:7]}*</code>" in row[5]  # changes in the tree
    assert '<span class="tag">release-1</span>' in row[3]
    assert '<span class="failed">failed</span>' in row[4] and "5/6" in row[4]
    assert (
        "1.5" in row[STEP_AT] and "slower" in row[STEP_AT] and "get · threads=1 · b" in row[STEP_AT]
    )
    assert f'href="compare/{STEP_AT - 1}-{STEP_AT}.html"' in row[STEP_AT]


def test_every_name_from_a_suite_is_escaped(site: dict[str, Any]) -> None:
    pages = list(site["dir"].rglob("*.html"))
    assert len(pages) == 1 + 1 + RUNS + RUNS  # the index, the suite, the runs, the comparisons
    for path in pages:
        text = path.read_text(encoding="utf-8")
        assert EVIL not in text, path
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text or "\\u003cscript" in text, path


def test_a_second_publish_renders_only_new_runs(site: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "site"
    store = tmp_path / "h.db"
    make_store(store, site["commit"], runs=RUNS)
    publish(out, store, jobs=1, plots=0)
    stamp = {p: p.stat().st_mtime_ns for p in (out / "runs").iterdir()}
    again = publish(out, store, jobs=1, plots=0)
    assert (again.rendered_runs, again.rendered_compares) == (0, 0)
    make_store(store, site["commit"], runs=1, first=RUNS + 1)
    third = publish(out, store, jobs=1, plots=0)
    assert (third.runs, third.rendered_runs) == (RUNS + 1, 1)
    # its comparison with the run before, and the tagged run against the new newest
    assert third.rendered_compares == 2
    assert all(p.stat().st_mtime_ns == t for p, t in stamp.items())
    assert f"{RUNS + 1}.html" in {p.name for p in (out / "runs").iterdir()}
    assert not (out / "compare" / f"3-{RUNS}.html").exists()  # the tag's old pair is gone
    # --last: the site shows the newest runs only, and what it no longer shows is removed
    fewer = publish(out, store, last=4, jobs=1, plots=0)
    assert fewer.runs == 4 and len(list((out / "runs").iterdir())) == 4


def test_publish_refuses_a_directory_that_is_not_a_site(tmp_path: Path) -> None:
    (tmp_path / "h.db").touch()
    other = tmp_path / "docs"
    other.mkdir()
    (other / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(UsageError, match="not an rpcmeter site"):
        publish(other, tmp_path / "h.db")
    assert [p.name for p in other.iterdir()] == ["notes.txt"]


def test_publish_command(
    site: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert publish_command.DEFAULT_PLOTS == site_module.DEFAULT_PLOTS
    out = tmp_path / "site"
    argv = ["publish", str(out), "--store", str(site["store"]), "--plots", "0", "--jobs", "1"]
    assert main([*argv, "--last", "3"]) == 0
    said = capsys.readouterr().out.splitlines()
    assert said[0].startswith(f"published 3 runs of 1 suite(s) to {out}: 3 run pages rendered")
    assert said[1] == f"open {out / 'index.html'}"
    assert main(argv) == 0
    assert "12 runs of 1 suite(s)" in capsys.readouterr().out
    # a suite with no runs publishes nothing, and leaves the site as it was
    assert main([*argv, "--suite", "other"]) == 0
    assert (
        capsys.readouterr().out
        == f"no runs of suite 'other' in {site['store']}: nothing published\n"
    )
    assert len(list((out / "runs").iterdir())) == RUNS
    # errors a user can cause: one line
    for bad, code, words in (
        (["publish", str(out), "--store", str(tmp_path / "none.db")], 2, "no history database"),
        (["publish", str(site["repo"]), "--store", str(site["store"])], 2, "not an rpcmeter site"),
        ([*argv, "--last", "0"], 2, "--last 0"),
    ):
        assert main(bad) == code
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("rpcmeter: error: ") and words in err


def test_an_unreadable_run_gets_a_page_that_says_why(tmp_path: Path) -> None:
    make_store(tmp_path / "h.db", "0" * 40, runs=3)
    with Store(tmp_path / "h.db") as store:
        store.db.execute('UPDATE cases SET document = \'{"id": "x"}\' WHERE run = 2')
    done = publish(tmp_path / "site", tmp_path / "h.db", jobs=1, plots=0)
    assert done.runs == 3
    page = (tmp_path / "site" / "runs" / "2.html").read_text(encoding="utf-8")
    assert "run 2" in page and "cases[0]" in page
    assert "run 2" in (tmp_path / "site" / "compare" / "2-3.html").read_text(encoding="utf-8")
    index = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert 'id="run-2"' in index and 'id="run-3"' in index


# ---- in a real browser ---------------------------------------------------------------------------


def visit(page: Page, url: str) -> None:
    """Open ``url``; no error on the way, and nothing fetched from anywhere but the disk."""
    page.events.clear()
    page.open(url)
    page.value("1")  # let late messages arrive
    assert page.errors() == [], (url, page.errors())
    assert all(u.startswith("file://") for u in page.requested()), page.requested()
    assert not any(e["method"] == "Page.javascriptDialogOpening" for e in page.events)


def act(page: Page, expression: str) -> None:
    """Run ``expression`` in the page (no value back); it must not throw."""
    found = page.call("Runtime.evaluate", expression=expression)
    assert "exceptionDetails" not in found, found


def type_in(page: Page, ident: str, text: str) -> None:
    """Type ``text`` into the input ``ident`` (its input event, as typing sends)."""
    act(
        page,
        f"(() => {{ const i = document.getElementById({json.dumps(ident)}); "
        f"i.value = {json.dumps(text)}; i.dispatchEvent(new Event('input')); }})()",
    )


def choose(page: Page, ident: str, value: str) -> None:
    act(
        page,
        f"(() => {{ const s = document.getElementById({json.dumps(ident)}); "
        f"s.value = {json.dumps(value)}; s.dispatchEvent(new Event('change')); }})()",
    )


def click(page: Page, selector: str) -> None:
    """Click the middle of the element ``selector`` picks, as a mouse does, and wait for the
    page it opens."""
    box = page.value(
        f"(() => {{ const e = document.querySelector({json.dumps(selector)}); "
        "e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect(); "
        "return [r.x + r.width / 2, r.y + r.height / 2]; })()"
    )
    page.events.clear()
    for kind in ("mousePressed", "mouseReleased"):
        page.call(
            "Input.dispatchMouseEvent", type=kind, x=box[0], y=box[1], button="left", clickCount=1
        )
    page.wait_event("Page.loadEventFired")
    page.value("1")
    assert page.errors() == [], page.errors()


def shot(page: Page, name: str) -> None:
    height = min(int(page.value("document.documentElement.scrollHeight")), 2400)
    page.call(
        "Emulation.setDeviceMetricsOverride",
        width=1280,
        height=height,
        deviceScaleFactor=1,
        mobile=False,
    )
    data = page.call("Page.captureScreenshot", format="png")["data"]
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / name).write_bytes(base64.b64decode(data))
    page.call("Emulation.clearDeviceMetricsOverride")


@pytest.mark.timeout(180)
def test_the_site_in_headless_chromium(site: dict[str, Any], chromium: str) -> None:  # noqa: F811
    out: Path = site["dir"]
    page = Page(chromium)
    try:
        for domain in ("Runtime", "Log", "Page", "Network"):
            page.call(f"{domain}.enable")
        index = (out / "index.html").resolve().as_uri()
        visit(page, index)
        assert page.value("document.querySelectorAll('tr.run').length") == RUNS
        assert page.value("document.title") == "rpcmeter history"
        # the filter: a case name
        type_in(page, "filter-runs", "threads=1 · b")
        assert page.value("document.getElementById('shown-runs').textContent") == "1"
        type_in(page, "filter-runs", "")
        shot(page, "site-index.png")

        # a run, from the index
        click(page, f"#run-{STEP_AT} td a")
        assert page.value("location.href").endswith(f"/runs/{STEP_AT}.html")
        assert page.value("document.querySelectorAll('section.workload').length") == 2
        # the older schema's run and the failed run open too
        for run in (2, 4):
            visit(page, (out / "runs" / f"{run}.html").resolve().as_uri())
            assert page.value("document.querySelectorAll('nav.site a').length") >= 2

        # a suite, from the index: a chart per case of the metric shown, steps marked
        visit(page, index)
        click(page, f"#run-{STEP_AT} td.l a[href^='suites/']")
        assert page.value("location.pathname").endswith(f"{suite_file(SUITE)}.html")
        assert page.value("document.querySelectorAll('figure.trend').length") == 3
        assert page.value("document.querySelectorAll('#metric-tabs button').length") == 5
        assert page.value("document.querySelectorAll('figure.trend line.step').length") == 1
        step_label = page.value("document.querySelector('figure.trend text.step').textContent")
        assert step_label.startswith("1.5") and step_label.endswith("slower")
        # the case named with HTML is shown as text
        assert page.value("document.querySelectorAll('script').length") == 2
        cases = page.value(
            "[...document.querySelectorAll('figure.trend')].map(f => f.dataset.case)"
        )
        assert f"{EVIL} · a" in cases
        # filter by case name, and another metric
        type_in(page, "filter-cases", "THREADS=1")
        assert page.value("document.getElementById('shown-cases').textContent") == "2"
        act(page, "document.querySelector('#metric-tabs button[data-metric=throughput]').click()")
        assert page.value("document.querySelector('figure.trend').dataset.metric") == "throughput"
        assert page.errors() == []
        act(page, "document.querySelector('#metric-tabs button[data-metric=mean]').click()")
        shot(page, "site-suite.png")

        # a trend point opens its run
        click(page, "figure.trend a.pt[data-run='9'] circle")
        assert page.value("location.href").endswith("/runs/9.html")

        # two runs compared in the page, and the comparison page of a consecutive pair
        visit(page, (out / "suites" / f"{suite_file(SUITE)}.html").resolve().as_uri())
        choose(page, "compare-a", str(STEP_AT - 2))  # run STEP_AT - 1 against the newest
        ratios = page.value(
            "[...document.querySelectorAll('#compare-table tr')].map(r => r.innerText)"
        )
        assert len(ratios) == 4, ratios  # a header, three cases
        changed = next(r for r in ratios if r.startswith("get · threads=1 · b"))
        assert 1.4 < float(changed.split("\t")[1].rstrip("x")) < 1.6, changed
        assert page.value("document.getElementById('compare-link')") is None  # not rendered
        choose(page, "compare-a", str(RUNS - 2))
        act(page, "document.getElementById('compare').scrollIntoView()")
        shot(page, "site-compare-picker.png")
        click(page, "#compare-link")
        assert page.value("location.href").endswith(f"/compare/{RUNS - 1}-{RUNS}.html")
        tables = page.value("document.querySelectorAll('#comparison table').length")
        assert tables >= 1
        visit(page, (out / "compare" / f"{STEP_AT - 1}-{STEP_AT}.html").resolve().as_uri())
        text = page.value("document.body.innerText")
        assert f"run {STEP_AT} against run {STEP_AT - 1}" in text
        assert re.search(r"\n1\tb\t1\.[45]\d", text), text  # the case that changed: 1.5x
        shot(page, "site-compare.png")
    finally:
        page.close()
