"""The HTML report: structure (pure, fast) and the real page in headless Chromium."""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rpcmeter.analysis import compare as analysis
from rpcmeter.cli import main
from rpcmeter.reporters import html
from rpcmeter.reporters.build import build
from rpcmeter.result.document import Result, write_json
from tests.support.synthetic import comparison_document

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-port=0",
    "--remote-allow-origins=*",
    "--window-size=1366,900",
]
# Shown in every console of a headless Chromium in a container without a session bus; not the page.
BROWSER_NOISE = ("dbus",)


@pytest.fixture(scope="module")
def demo_page(demo_result: Result) -> str:
    return html.render(build(demo_result))


def test_report_is_self_contained(demo_result: Result, demo_page: str) -> None:
    page = demo_page
    assert page.startswith("<!DOCTYPE html>")
    for remote in ("http://", "https://", "<script", "<link", "@import"):
        # the only URLs are the SVG namespaces, never something fetched
        hits = page.count(remote)
        if remote.startswith("http"):
            hits -= page.count(f'{remote}www.w3.org/2000/svg"')
            hits -= page.count(f'{remote}www.w3.org/1999/xlink"')
        assert hits == 0, remote
    assert page.count("<figure") == len(html.expected_plots(build(demo_result)))
    assert demo_result.suite.name in page
    assert "mean / default" in page  # the comparison table


def test_cpu_verdicts_read_less_and_more() -> None:
    """A stored faster/slower verdict on a CPU metric reads less/more, in the verdict's colour."""
    rows = [
        {
            "variant": "b",
            "metric": metric,
            "ratio": r,
            "ci_low": r - 0.1,
            "ci_high": r + 0.1,
            "verdict": verdict,
        }
        for metric, r, verdict in (("user_cpu", 0.5, "faster"), ("mean", 1.5, "slower"))
    ]
    doc = analysis.Comparison.model_validate(comparison_document(rows))
    cpu = html._ratio_cell(doc, "w", (), "b", "user_cpu", 0.5)
    wall = html._ratio_cell(doc, "w", (), "b", "mean", 1.5)
    assert '<span class="faster">less</span>' in cpu
    assert '<span class="slower">slower</span>' in wall


def test_report_command_writes_html_and_pngs(demo_result: Result, tmp_path: Path) -> None:
    # one workload of the demo run keeps this test quick; the full page is checked below
    one = demo_result.replace(cases=[c for c in demo_result.cases if c.workload == "simple"])
    write_json(one.to_json(), tmp_path / "run.json")
    page, png = tmp_path / "new" / "dir" / "r.html", tmp_path / "new" / "png"  # made as needed
    code = main(
        [
            "report",
            str(tmp_path / "run.json"),
            "--html",
            str(page),
            "--plots",
            str(png),
        ]
    )
    assert code == 0
    assert page.read_text(encoding="utf-8").count("<svg") == len(html.expected_plots(build(one)))
    pngs = sorted(p.name for p in png.glob("*.png"))
    assert len(pngs) == 8  # 2 spectra, throughput, p99, ratio, client and server CPU, idle CPU
    assert pngs == sorted(f"{i}.png" for i in html.expected_plots(build(one)))
    assert all((png / p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)


def test_report_command_errors_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", str(tmp_path / "missing.json"), "--html", "x.html"]) != 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "missing.json" in err


# headless Chromium --------------------------------------------------------------------------------
class Page:
    """A Chromium page driven over the DevTools protocol."""

    def __init__(self, ws_url: str) -> None:
        import websocket

        self.ws = websocket.create_connection(ws_url, timeout=30, suppress_origin=True)
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        ident = self.next_id
        self.ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == ident:
                if "error" in msg:
                    raise AssertionError(f"{method}: {msg['error']}")
                return dict(msg.get("result", {}))
            if "method" in msg:
                self.events.append(msg)

    def wait_event(self, method: str, timeout_s: float = 30) -> None:
        deadline = time.monotonic() + timeout_s
        while not any(e["method"] == method for e in self.events):
            assert time.monotonic() < deadline, f"no {method} within {timeout_s} s"
            msg = json.loads(self.ws.recv())
            if "method" in msg:
                self.events.append(msg)

    def open(self, url: str) -> dict[str, Any]:
        """Load ``url`` with console, log and network events on; what INSPECT_JS finds there."""
        for domain in ("Runtime", "Log", "Page", "Network"):
            self.call(f"{domain}.enable")
        self.call("Page.navigate", url=url)
        self.wait_event("Page.loadEventFired")
        found = self.call("Runtime.evaluate", expression=INSPECT_JS, returnByValue=True)
        info: dict[str, Any] = json.loads(found["result"]["value"])
        return info

    def errors(self) -> list[str]:
        """Exceptions, console errors and error log entries seen (not the container's noise)."""
        errors = []
        for e in self.events:
            p = e.get("params", {})
            if e["method"] == "Runtime.exceptionThrown":
                errors.append(p["exceptionDetails"].get("text", "exception"))
            elif e["method"] == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                errors.append(json.dumps(p.get("args")))
            elif e["method"] == "Log.entryAdded" and p["entry"].get("level") == "error":
                text = p["entry"].get("text", "")
                if not any(noise in text.lower() for noise in BROWSER_NOISE):
                    errors.append(text)
        return errors

    def requested(self) -> set[str]:
        """Every URL the page requested."""
        return {
            e["params"]["request"]["url"]
            for e in self.events
            if e["method"] == "Network.requestWillBeSent"
        }

    def value(self, expression: str) -> Any:
        """What ``expression`` evaluates to in the page."""
        return self.call("Runtime.evaluate", expression=expression, returnByValue=True)["result"][
            "value"
        ]

    def close(self) -> None:
        self.ws.close()


def evaluate_in_page(ws_url: str, report: Path, expression: str) -> Any:
    """What ``expression`` evaluates to in ``report`` opened in the page; the page raised no
    error and logged none."""
    page = Page(ws_url)
    try:
        page.open(report.resolve().as_uri())
        found = page.value(expression)
        page.value("1")  # let late messages arrive
    finally:
        page.close()
    assert page.errors() == []
    return found


@pytest.fixture
def chromium() -> Iterator[str]:
    """A headless Chromium; yields the DevTools websocket URL of its first page."""
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (Debian: apt-get install chromium)")
    pytest.importorskip("websocket", reason="websocket-client is in the test extra")
    profile = tempfile.mkdtemp(prefix="rpcmeter-chromium-")
    proc = subprocess.Popen(
        [CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "about:blank"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        port_file = Path(profile) / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text().strip()):
            assert proc.poll() is None, "chromium exited at start"
            assert time.monotonic() < deadline, "chromium did not open its DevTools port"
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        targets: list[dict[str, Any]] = []
        while not any(t.get("type") == "page" for t in targets):
            assert time.monotonic() < deadline, "chromium has no page"
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
                targets = json.load(r)
            time.sleep(0.05)
        yield next(t["webSocketDebuggerUrl"] for t in targets if t["type"] == "page")
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=10)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        shutil.rmtree(profile, ignore_errors=True)


# For every figure: its size on screen and, per series, whether any drawn element has an area.
INSPECT_JS = """
(() => {
  const out = [];
  for (const fig of document.querySelectorAll('figure.plot')) {
    const svg = fig.querySelector('svg');
    const rect = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
    const n = parseInt(fig.dataset.series, 10);
    const drawn = [];
    for (let i = 0; i < n; i++) {
      const els = svg ? svg.querySelectorAll(`[id$="series-${i}"], [id*="series-${i}-bar-"]`) : [];
      let ok = false;
      for (const el of els) {
        const b = el.getBBox();
        if (b.width > 0 && b.height > 0) { ok = true; break; }
        if (el.tagName === 'g' && (b.width > 0 || b.height > 0)) { ok = true; break; }
      }
      drawn.push(ok);
    }
    const texts = svg ? Array.from(svg.querySelectorAll('text')).map(t => t.textContent) : [];
    out.push({id: fig.dataset.plot, kind: fig.dataset.kind, width: rect.width,
              height: rect.height, drawn, texts});
  }
  return JSON.stringify({plots: out, title: document.title,
                         height: document.documentElement.scrollHeight});
})()
"""


@pytest.mark.timeout(180)
def test_report_in_headless_chromium(
    demo_result: Result, demo_page: str, chromium: str, tmp_path: Path
) -> None:
    report = tmp_path / "report.html"
    report.write_text(demo_page, encoding="utf-8")
    page = Page(chromium)
    try:
        info = page.open(report.resolve().as_uri())
        height = min(int(info["height"]), 16000)
        page.call(
            "Emulation.setDeviceMetricsOverride",
            width=1366,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )
        shot = page.call("Page.captureScreenshot", format="png")
        ARTIFACTS.mkdir(exist_ok=True)
        (ARTIFACTS / "report.png").write_bytes(base64.b64decode(shot["data"]))
        (ARTIFACTS / "report.html").write_text(demo_page, encoding="utf-8")
        # let late messages arrive, then read every console message and log entry
        page.call("Runtime.evaluate", expression="1", returnByValue=True)
    finally:
        page.close()

    assert page.errors() == []
    # self-contained: the page is the only thing loaded
    assert page.requested() == {report.resolve().as_uri()}, page.requested()

    assert info["title"] == f"rpcmeter · {demo_result.suite.name}"
    plots = {p["id"]: p for p in info["plots"]}
    expected = html.expected_plots(build(demo_result))
    assert list(plots) == expected
    # a refactor must not silently drop a plot: the demo run has these per workload
    for workload in ("simple", "random-wait"):
        for kind in ("throughput", "p99", "ratio", "cpu-client", "cpu-server"):
            assert f"{kind}-{workload}" in plots
        assert sum(1 for i in plots if i.startswith(f"spectrum-{workload}-")) == 2
    assert "idle-cpu" in plots
    for ident, p in plots.items():
        assert p["width"] > 300 and p["height"] > 150, ident
        assert p["drawn"] and all(p["drawn"]), (ident, p["drawn"])
        assert any("default" in t for t in p["texts"]), ident  # the legend names the variants
    assert (ARTIFACTS / "report.png").stat().st_size > 10_000


@pytest.mark.timeout(120)
def test_wait_lines_show_in_the_page_in_headless_chromium(
    spin_result: Result, demo_page: str, chromium: str, tmp_path: Path
) -> None:
    # the view's wait lines, as the browser lays them out: where the clients spun, their polling
    # budget, and their polls per request
    lines = build(spin_result).wait_lines
    assert len(lines) == 2 and "spin_us" in lines[0] and lines[1].startswith("polls per request")
    report = tmp_path / "wait.html"
    report.write_text(html.render(build(spin_result)), encoding="utf-8")
    found = evaluate_in_page(
        chromium,
        report,
        "(() => { const e = document.getElementById('wait'); "
        "return e ? [e.innerText, e.getBoundingClientRect().height] : null; })()",
    )
    shown, height = found
    assert shown.split("\n") == list(lines)
    assert height > 0
    # a run whose clients block has no such paragraph
    assert 'id="wait"' not in demo_page


ONE_CASE_SUITE = """
name = "one case"
[target]
driver = "rpyc"
transport = "unix"
[workloads.simple]
[load]
requests = 40
warmup = 2
[resources]
idle_s = 0.2
"""


@pytest.mark.timeout(120)
def test_run_with_one_variant_and_one_case_writes_a_sensible_report(tmp_path: Path) -> None:
    suite = tmp_path / "one.toml"
    suite.write_text(ONE_CASE_SUITE, encoding="utf-8")
    report, plots = tmp_path / "one.html", tmp_path / "plots"
    store = str(tmp_path / "history.db")
    argv = ["run", str(suite), "--store", store, "--html", str(report), "--plots", str(plots)]
    assert main(argv) == 0
    page = report.read_text(encoding="utf-8")
    # one variant: its spectrum, its CPU (client, server, idle), no ratio plot or ratio columns
    assert page.count('<figure class="plot"') == 4
    assert 'data-kind="spectrum"' in page and 'data-kind="cpu-client"' in page
    assert 'data-kind="cpu-server"' in page and 'data-kind="idle"' in page
    assert "ratio-" not in page and " / default" not in page
    assert "(baseline)" not in page
    assert sorted(p.name for p in plots.iterdir()) == [
        "cpu-client-simple.png",
        "cpu-server-simple.png",
        "idle-cpu.png",
        "spectrum-simple-all.png",
    ]
    # the stored run gives the same report again
    again = tmp_path / "again.html"
    assert main(["report", "last", "--store", store, "--html", str(again)]) == 0
    assert again.read_text(encoding="utf-8").count('<figure class="plot"') == 4


COMMAND_SUITE = """
name = "spin or sleep"
[target]
driver = "command"
command = "{python} -c 'import os, time; end = time.process_time() + 0.3; exec(\\"while time.process_time() < end: pass\\") if os.environ[\\"MODE\\"] == \\"spin\\" else time.sleep(0.3)'"
[variants.spin]
env = { MODE = "spin" }
[variants.sleep]
env = { MODE = "sleep" }
[workloads.wait]
[runs]
count = 3
warmup = 0
"""


@pytest.mark.timeout(120)
def test_command_run_report_labels_wall_user_and_system(tmp_path: Path) -> None:
    suite = tmp_path / "cmd.toml"
    suite.write_text(COMMAND_SUITE, encoding="utf-8")
    out = tmp_path / "run.json"
    argv = [
        "run",
        str(suite),
        "--no-store",
        "--output",
        str(out),
        "--html",
        str(tmp_path / "r.html"),
    ]
    assert main(argv) == 0
    from rpcmeter.result.document import read_json

    result = read_json(out)
    got = {p.id: p for p in build(result).plots["wait"]}
    assert sorted(got) == ["command-wait-all", "ratio-wait"]
    bars = got["command-wait-all"]
    assert bars.categories == ("wall", "user", "system")
    assert [s.variant for s in bars.series] == ["spin", "sleep"]
    for series, case in zip(bars.series, result.cases, strict=True):
        runs = case.runs or []
        for value, key in zip(series.y, ("wall_s", "user_s", "sys_s"), strict=True):
            assert value == pytest.approx(sum(getattr(r, key) for r in runs) / len(runs)), key
    spin, sleep = (s.y for s in bars.series)
    # the spinning command burns 300 ms of CPU per run; the sleeping one far less
    assert spin[1] + spin[2] >= 0.29 and sleep[1] + sleep[2] < spin[1] + spin[2] - 0.15
    assert spin[0] >= 0.29 and sleep[0] >= 0.29  # wall covers the 300 ms either way
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "<th>wall s</th><th>user s</th><th>system s</th>" in page
