"""``--prometheus``: the running figures in the Prometheus text format, scraped during a real
run and checked against its result."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from rpcmeter.errors import UsageError
from rpcmeter.plan.cases import Case
from rpcmeter.plan.load import build_suite
from rpcmeter.run.events import IntervalFigures, RunEvents, RunListener
from rpcmeter.run.execute import RunOptions, run_suite
from rpcmeter.run.exporter import PrometheusExporter, parse_address
from tests.support.marks import timing_sensitive


def scrape(port: int) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """Every sample at ``/metrics``: name -> labels -> value."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


class _Scraper(RunListener):
    """Scrapes the endpoint at the second interval of each case (while its load runs)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.during: list[dict[str, dict[tuple[tuple[str, str], ...], float]]] = []

    def interval(self, case: Case, total: int, figures: IntervalFigures) -> None:
        if figures.index == 1 and not figures.late:
            self.during.append(scrape(self.port))


@pytest.mark.timeout(120)
def test_a_scrape_during_the_run_and_after_matches_the_result() -> None:
    suite = build_suite(
        {
            "name": "prom",
            "target": {"driver": "rpyc", "transport": "unix"},
            "workloads": {"simple": {}},
            "load": {
                "warmup": 2,
                "stages": [
                    {"duration_s": 0.6, "rate": 200},
                    {"duration_s": 0.6, "rate": 400},
                ],
            },
            "timeseries": {"interval_s": 0.3},
            "placement": {"server_cpus": "none", "client_cpus": "none"},
            "resources": {"idle_s": 0},
        }
    )
    exporter = PrometheusExporter("127.0.0.1", 0, linger_s=0)
    try:
        scraper = _Scraper(exporter.port)
        result = run_suite(suite, RunOptions(events=RunEvents(exporter, scraper)))
        after = scrape(exporter.port)
    finally:
        exporter.close()
    (case,) = result.cases
    assert case.status == "ok", case.reason
    labels = (("case", "0"), ("run", result.run_id), ("variant", "default"), ("workload", "simple"))
    (during,) = scraper.during
    # during the run: the first interval counted (about 60 requests), the case running
    assert 0 < during["rpcmeter_requests_total"][labels] < case.requests
    assert during["rpcmeter_case_running"][labels] == 1
    assert during["rpcmeter_stage"][labels] == 1
    # after it: every request, as the result counts them, and the histogram holds every reply
    assert after["rpcmeter_requests_total"][labels] == case.requests
    assert after["rpcmeter_errors_total"][labels] == sum(case.errors.values()) == 0
    assert after["rpcmeter_latency_seconds_count"][labels] == case.ok
    inf = after["rpcmeter_latency_seconds_bucket"][tuple(sorted({*labels, ("le", "+Inf")}))]
    assert inf == case.ok
    buckets = sorted(
        (float(dict(k)["le"]), v)
        for k, v in after["rpcmeter_latency_seconds_bucket"].items()
        if dict(k)["le"] != "+Inf"
    )
    counts = [v for _, v in buckets]
    assert counts == sorted(counts) and counts[-1] == case.ok  # cumulative; all under 64 s
    p50_s = case.latency.p50_us / 1e6  # type: ignore[union-attr,operator]
    below = max(v for le, v in buckets if le <= p50_s) if buckets[0][0] <= p50_s else 0
    assert below <= case.ok / 2 + 1  # under the bound just below the median: at most half
    assert after["rpcmeter_stage"][labels] == 2


def test_addresses() -> None:
    assert parse_address(":9464") == ("0.0.0.0", 9464)
    assert parse_address("127.0.0.1:0") == ("127.0.0.1", 0)
    for bad in ("9464", "host:", "h:99999", "h:x"):
        with pytest.raises(UsageError, match="expected \\[HOST\\]:PORT"):
            parse_address(bad)


@timing_sensitive  # "the run is over" is the document's status and a pause; a busy machine lags
@pytest.mark.timeout(120)
def test_the_command_line_keeps_the_last_figures_for_a_scrape(tmp_path: Path) -> None:
    """``rpcmeter run --prometheus ... --prometheus-linger 60``: after the run, the endpoint
    still answers (the series labelled with the run's id, holding every request), and the
    command ends once that scrape read them, well before the 60 s."""

    suite = tmp_path / "prom.toml"
    suite.write_text(
        "\n".join(
            [
                'name = "prom"',
                "[target]",
                'driver = "rpyc"',
                'transport = "unix"',
                "[workloads.simple]",
                "[load]",
                "requests = 50",
                "warmup = 2",
                "[resources]",
                "idle_s = 0",
            ]
        )
    )
    out = tmp_path / "prom.json"
    with socket.socket() as s:  # a free port
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = ["run", str(suite), "-o", str(out), "--no-store", "--no-live"]
    args += ["--prometheus", f"127.0.0.1:{port}", "--prometheus-linger", "60"]
    command = subprocess.Popen(
        [sys.executable, "-m", "rpcmeter", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 90
        while not (out.exists() and json.loads(out.read_text())["status"] == "complete"):
            assert command.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(0.5)  # the tables printed: the run is over
        assert command.poll() is None  # still answering, for the scrape to come
        doc = json.loads(out.read_text())
        after = scrape(port)
        _, err = command.communicate(timeout=30)  # that scrape ends it
    finally:
        if command.poll() is None:
            command.kill()
            command.communicate()
    assert command.returncode == 0, err
    (case,) = doc["cases"]
    labels = (("case", "0"), ("run", doc["run_id"]), ("variant", "default"), ("workload", "simple"))
    assert after["rpcmeter_requests_total"][labels] == case["requests"] == 50
    assert after["rpcmeter_case_running"][labels] == 0
    assert "rpcmeter: --prometheus: answering for up to 60 s more" in err


def test_linger_needs_prometheus(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from rpcmeter.cli import main

    assert main(["run", str(tmp_path / "x.toml"), "--prometheus-linger", "1"]) == 2
    assert "--prometheus-linger is for --prometheus" in capsys.readouterr().err
