"""The running figures for dashboards (``rpcmeter run --prometheus [HOST]:PORT``): an HTTP
endpoint in the Prometheus text format (``prometheus-client``), scraped while the run goes on.

Per case (labels ``run``: the run's id, as in its result; ``case``: its number in the run,
``variant``, ``workload``): the counters
``rpcmeter_requests_total`` and ``rpcmeter_errors_total``, the histogram
``rpcmeter_latency_seconds`` (cumulative counts at powers of two from 1 µs to 64 s, read from
rpcmeter's own histograms merged interval by interval), and the gauges of the last interval
(``rpcmeter_interval_requests_per_second``, ``rpcmeter_interval_p50_seconds``,
``rpcmeter_interval_p99_seconds``); ``rpcmeter_case_running`` is 1 for the running case (0 for
the others) and ``rpcmeter_stage`` its stage's number (0 without stages). It takes each
interval as the parent settles it (:meth:`rpcmeter.run.events.RunListener.interval`): the clients
do nothing more for it.

After the run, the endpoint keeps answering, so that the last figures are scraped
(:meth:`PrometheusExporter.close`): until one scrape came after the run ended, or for
``linger_s`` seconds at most (``--prometheus-linger``; default :data:`LINGER_S`, the scrape
interval of Prometheus's example configuration).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from rpcmeter.errors import UsageError
from rpcmeter.metrics.histogram import Histogram, bucket_bounds
from rpcmeter.model import Result
from rpcmeter.plan.cases import Case
from rpcmeter.run.events import IntervalFigures, RunListener
from rpcmeter.text import printable

#: the upper bounds of the latency buckets, ns: 1 µs, 2 µs, ... 64 s
BOUNDS_NS = [1000 << k for k in range(27)]
LABELS = ["run", "case", "variant", "workload"]
LINGER_S = 15.0  # after the run: a scrape interval (Prometheus's example configuration's)


def parse_address(text: str) -> tuple[str, int]:
    """``[HOST]:PORT`` as (host, port); no host: every interface. A UsageError names what is
    wrong."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise UsageError(f"--prometheus {text}: expected [HOST]:PORT, e.g. :9464")
    return host.strip("[]") or "0.0.0.0", int(port)


@dataclass
class _CaseFigures:
    labels: list[str]
    requests: int = 0
    errors: int = 0
    hist: Histogram = field(default_factory=Histogram)
    last: IntervalFigures | None = None
    stage: int = 0


class PrometheusExporter(RunListener, Collector):
    """Serves the run's figures at ``http://HOST:PORT/metrics`` from its start to :meth:`close`
    (``port`` 0: a free port, :attr:`port` says which); after the run, until a scrape read its
    last figures or ``linger_s`` passed (see the module doc)."""

    def __init__(self, host: str, port: int, linger_s: float = LINGER_S) -> None:
        self.lock = threading.Lock()
        self.cases: dict[int, _CaseFigures] = {}
        self.running: int | None = None
        self.run_id = ""
        self.linger_s = linger_s
        self.ended: float | None = None  # time.monotonic() when the run ended
        self.scraped = threading.Event()  # a scrape after the run ended
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)
        try:
            self.server, self.thread = start_http_server(port, addr=host, registry=self.registry)
        except OSError as exc:
            raise UsageError(f"--prometheus {host}:{port}: cannot listen: {exc}") from None
        self.port: int = self.server.server_port

    # the run's events
    def run_started(self, result: Result) -> None:
        with self.lock:
            self.run_id = result.run_id

    def case_started(self, case: Case, total: int) -> None:
        labels = [self.run_id, str(case.index), printable(case.variant), printable(case.workload)]
        with self.lock:
            self.cases[case.index] = _CaseFigures(labels)
            self.running = case.index

    def interval(self, case: Case, total: int, figures: IntervalFigures) -> None:
        with self.lock:
            c = self.cases.get(case.index)
            if c is None:
                return
            c.requests += figures.ok + figures.errors
            c.errors += figures.errors
            if figures.hist is not None:
                c.hist.merge(figures.hist)
            if not figures.late:
                c.last = figures
                c.stage = 0 if figures.stage_index is None else figures.stage_index + 1

    def run_finished(self, result: Result) -> None:
        with self.lock:
            self.running = None
            self.ended = time.monotonic()

    def lingers(self) -> float:
        """Seconds :meth:`close` would wait now for a scrape of the last figures (0: none)."""
        if self.ended is None or self.scraped.is_set():
            return 0.0
        return max(0.0, self.ended + self.linger_s - time.monotonic())

    def close(self, linger: bool = True) -> None:
        """Stop serving: with ``linger``, once a scrape read the finished run's figures, or
        ``linger_s`` after the run ended (at once when it did not end: an error, Ctrl-C)."""
        if linger and (wait := self.lingers()) > 0:
            with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C: stop now
                self.scraped.wait(wait)
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)

    # what a scrape reads
    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily | HistogramMetricFamily]:
        requests = CounterMetricFamily(
            "rpcmeter_requests", "Requests answered or failed", labels=LABELS
        )
        errors = CounterMetricFamily("rpcmeter_errors", "Requests failed", labels=LABELS)
        latency = HistogramMetricFamily(
            "rpcmeter_latency_seconds", "Latency of the replies ok", labels=LABELS
        )
        running = GaugeMetricFamily("rpcmeter_case_running", "1 while the case runs", labels=LABELS)
        stage = GaugeMetricFamily(
            "rpcmeter_stage", "The running stage's number (0: no stages)", labels=LABELS
        )
        rps = GaugeMetricFamily(
            "rpcmeter_interval_requests_per_second", "Replies ok/s, last interval", labels=LABELS
        )
        p50 = GaugeMetricFamily(
            "rpcmeter_interval_p50_seconds", "p50 latency, last interval", labels=LABELS
        )
        p99 = GaugeMetricFamily(
            "rpcmeter_interval_p99_seconds", "p99 latency, last interval", labels=LABELS
        )
        with self.lock:
            if self.ended is not None:  # this scrape reads the finished run's figures
                self.scraped.set()
            for index, c in self.cases.items():
                requests.add_metric(c.labels, c.requests)
                errors.add_metric(c.labels, c.errors)
                latency.add_metric(c.labels, _buckets(c.hist), c.hist.sum / 1e9)
                running.add_metric(c.labels, 1.0 if index == self.running else 0.0)
                stage.add_metric(c.labels, c.stage)
                if c.last is not None:
                    rps.add_metric(c.labels, c.last.rps)
                    p50.add_metric(c.labels, c.last.p50_us / 1e6)
                    p99.add_metric(c.labels, c.last.p99_us / 1e6)
        yield from (requests, errors, latency, running, stage, rps, p50, p99)


def _buckets(hist: Histogram) -> list[tuple[str, float]]:
    """Cumulative counts at :data:`BOUNDS_NS` (a bucket of rpcmeter's histogram counts under
    the first bound its highest value is within) and ``+Inf``."""
    idx, counts = hist.nonzero()
    highs = np.array([bucket_bounds(int(i))[1] for i in idx], dtype=np.int64)
    cumulative = np.cumsum(counts) if len(counts) else np.zeros(0, dtype=np.int64)
    out: list[tuple[str, float]] = []
    for bound in BOUNDS_NS:
        n = int(np.searchsorted(highs, bound, side="right"))
        out.append((f"{bound / 1e9:g}", float(cumulative[n - 1]) if n else 0.0))
    out.append(("+Inf", float(hist.count)))
    return out
