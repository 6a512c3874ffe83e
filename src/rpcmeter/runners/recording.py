"""What a load records, below every runner: the tally types, the sample buffers and the gate.

A loop keeps its latencies in a :class:`~rpcmeter.runners.recorder.Recorder`: preallocated buffers (:func:`samples`) that are
folded into the histograms of its :class:`ThreadStats` when full, so memory does not grow with the
number of requests. A loop of a mix of calls (:mod:`rpcmeter.drivers.varying`) also keeps each
sample's call (:func:`~rpcmeter.runners.recorder.tagging`, :func:`~rpcmeter.runners.recorder.tagged_caller`), and the fold splits the latencies by call
(``Tally.calls``, one :class:`CallTally` each). A client reports one :class:`ThreadStats` per loop; the parent merges them
into a :class:`LoadOutcome`. Both are a :class:`Tally`. The :class:`Gate` is the client's side of
the start protocol. The thread loops (:mod:`rpcmeter.runners.client`), the event loop
(:mod:`rpcmeter.runners.event_loop`) and the open-loop pacers (:mod:`rpcmeter.runners.open_loop`)
all record through these.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from rpcmeter.drivers.base import Caller, Driver
from rpcmeter.errors import ReplyError, ReplyMismatch, RequestLost, describe
from rpcmeter.metrics.connections import ConnectionCosts
from rpcmeter.metrics.histogram import Histogram
from rpcmeter.metrics.resources import peak_rss_of
from rpcmeter.runners.stages import WindowClock

if TYPE_CHECKING:  # the client processes do without pydantic
    from rpcmeter import model

BUFFER = 1 << 15  # samples per thread between folds


def samples(n: int, fmt: Literal["q", "B"] = "q") -> memoryview[int]:
    """A preallocated buffer of ``n`` zeroed samples of struct format ``fmt`` (``q``: int64,
    ``B``: uint8), a memoryview: storing an int into one costs about half of what storing it
    into an ``array`` does (which converts it through ``PyArg_Parse``), once a request."""
    return memoryview(bytearray(n * (8 if fmt == "q" else 1))).cast(fmt)


MAX_CHUNK = 4096
CHUNK_TARGET_NS = 20_000_000  # publish progress / check the clock about every 20 ms


@dataclass
class CallTally:
    """One call of a mix: its latency histogram, replies ``ok`` and errors by kind (with the
    first message of each); adds up over loops, clients and workers as the whole does."""

    name: str
    hist: Histogram = field(default_factory=Histogram)
    ok: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    first_error: dict[str, str] = field(default_factory=dict)

    @property
    def requests(self) -> int:
        return self.ok + sum(self.errors.values())

    def merge(self, other: CallTally) -> None:
        self.hist.merge(other.hist)
        self.ok += other.ok
        for kind, n in other.errors.items():
            self.errors[kind] = self.errors.get(kind, 0) + n
        for kind, text in other.first_error.items():
            self.first_error.setdefault(kind, text)


def merge_calls(into: list[CallTally], calls: list[CallTally]) -> list[CallTally]:
    """``calls`` added to ``into`` call by call (``into`` empty: copies of ``calls``)."""
    if not into:
        into.extend(CallTally(c.name) for c in calls)
    for mine, theirs in zip(into, calls, strict=True):
        mine.merge(theirs)
    return into


@dataclass
class Tally:
    """What loops count, and what adds up over loops and clients: latency histograms (``hist``;
    ``uhist`` from the actual send in an open loop, ``hist`` then from the intended send time;
    ``server_hist``, the server-reported compute time, ``queue_hist``, the server-reported queue
    time, and ``net_hist``, latency minus both, per request), requests answered ``ok``, errors by kind with the first message of each, and the
    measured interval (perf_counter ns)."""

    hist: Histogram = field(default_factory=Histogram)
    server_hist: Histogram = field(default_factory=Histogram)
    net_hist: Histogram = field(default_factory=Histogram)  # latency - server times, per request
    queue_hist: Histogram = field(default_factory=Histogram)  # server-reported queue time
    uhist: Histogram = field(default_factory=Histogram)
    ok: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    first_error: dict[str, str] = field(default_factory=dict)
    start_ns: int = 0
    end_ns: int = 0
    calls: list[CallTally] = field(default_factory=list)  # a mix's calls (else empty)

    @property
    def requests(self) -> int:
        return self.ok + sum(self.errors.values())

    def add(self, other: Tally) -> None:
        """Add ``other``'s histograms, requests and errors into this tally (exact)."""
        self.hist.merge(other.hist)
        self.server_hist.merge(other.server_hist)
        self.net_hist.merge(other.net_hist)
        self.queue_hist.merge(other.queue_hist)
        self.uhist.merge(other.uhist)
        self.ok += other.ok
        for kind, n in other.errors.items():
            self.errors[kind] = self.errors.get(kind, 0) + n


#: An empty histogram that a window holds for what its loop does not record (and nothing ever
#: merges into: its counts are read-only, so a write would fail, not spread).
UNUSED = Histogram()
UNUSED._counts.flags.writeable = False


@dataclass
class Window(Tally):
    """The tally of one interval of a case's time series (:mod:`rpcmeter.runners.windows`):
    also the requests sent and sent late in it (open loop)."""

    sent: int = 0
    late: int = 0

    def add(self, other: Tally) -> None:
        super().add(other)
        if isinstance(other, Window):
            self.sent += other.sent
            self.late += other.late


@dataclass
class ThreadStats(Tally):
    """The tally of one loop (a thread, or all loops of one event loop), as a client reports it:
    also why it stopped (``fatal``) and, in an open loop, requests sent, late sends, last send."""

    fatal: str | None = None
    sent: int = 0
    late: int = 0
    last_send_ns: int = 0


def mix_of(channel: object) -> Any:
    """The draw of a mix's channel or caller (its ``mix``: ``current`` is the call of the
    request in flight; :mod:`rpcmeter.drivers.varying`), or None."""
    return getattr(channel, "mix", None)


def call_names(channel: object) -> Sequence[str]:
    """The names of a mix's calls (empty for any other channel or caller)."""
    return tuple(getattr(channel, "names", ()))


def is_fatal(exc: BaseException, fatal: tuple[type[BaseException], ...]) -> bool:
    """True when ``exc`` means the connection is gone (not a wrong or failed reply, nor a
    request lost on a connection that the driver replaces)."""
    return isinstance(exc, fatal) and not isinstance(exc, ReplyMismatch | ReplyError | RequestLost)


def warm_up(
    call: Caller, n: int, stats: ThreadStats, fatal: tuple[type[BaseException], ...]
) -> None:
    """``n`` untimed calls whose results are discarded; a fatal error stops the thread."""
    for _ in range(n):
        try:
            call()
        except Exception as exc:
            if is_fatal(exc, fatal):
                stats.fatal = f"during warmup: {describe(exc)}"[:300]
                return


class Gate:
    """The client's side of the start protocol: report ready (or why not), wait for the gate,
    then measure this process's CPU time until :meth:`finish`."""

    def __init__(self, index: int, go: Any, conn: Any, driver: Driver, start: Any = None) -> None:
        self.index = index
        self.go = go
        self.conn = conn
        self.driver = driver
        # ``start.value``: the case's start in ns since the epoch, set before the gate opens (0:
        # when this client sees the gate open); ``base_ns``: that time on this client's clock
        self.start = start
        self.base_ns = 0
        self.usage0: Any = None
        self.counters0: dict[str, int] = {}
        self.sources: list[Callable[[], dict[str, int]]] = [driver.counters]

    def count(self, source: Callable[[], dict[str, int]]) -> None:
        """Counters of the client's own besides the driver's (a spinning loop's ``polls``),
        reported with them and, as they are, since the gate opened."""
        self.sources.append(source)

    def _totals(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for source in self.sources:
            out.update(source())
        return out

    def connected(self) -> None:
        """Tell the parent the client is connected: what it waits for now is the warmup (a
        timeout then names the warmup, not the connection)."""
        self.conn.send(("connected",))

    def ready(self, failure: str | None) -> None:
        self.counters0 = self._totals()  # warmup traffic is not the case's
        costs = self.driver.connection_costs()
        if costs is not None and costs.per_request:  # nor are the warmup's connections
            costs.reset()
        if failure:
            self.conn.send(("error", f"client {self.index}: {failure}"))
        else:
            self.conn.send(("ready",))
        self.go.wait()
        self.usage0 = resource.getrusage(resource.RUSAGE_SELF)
        now, epoch = time.perf_counter_ns(), getattr(self.start, "value", 0) or 0
        self.base_ns = now + (epoch - time.time_ns()) if epoch else now

    def cpu_s(self) -> tuple[float, float]:
        """User and system CPU seconds since the gate opened (a shipment's)."""
        user, system, _ = self.cpu()
        return user, system

    def counters(self) -> dict[str, int]:
        """The driver's counters (and the client's own) since the gate opened, and its
        :meth:`~rpcmeter.drivers.base.Driver.setup` counts."""
        since = {k: v - self.counters0.get(k, 0) for k, v in self._totals().items()}
        return since | self.driver.setup()

    def cpu(self) -> tuple[float, float, int]:
        """User and system CPU seconds since the gate opened, and the peak memory (bytes)."""
        usage1 = resource.getrusage(resource.RUSAGE_SELF)
        usage0 = self.usage0 or usage1
        return (
            usage1.ru_utime - usage0.ru_utime,
            usage1.ru_stime - usage0.ru_stime,
            # this process image's own peak (ru_maxrss would also count the image it was
            # started from: a Dask worker, when a cluster task starts the client)
            peak_rss_of(os.getpid()) or usage1.ru_maxrss * 1024,
        )


# what a client's load returns: per-loop stats, the open-loop schedule's totals (or None) and
# the windows not shipped yet
LoadReport = tuple[list[ThreadStats], dict[str, float] | None, dict[int, "Window"]]


@dataclass
class ClientReport:
    """What one client process reports at the end of its load (pickled as it is, over its
    pipe or from a Dask worker): its loops' stats, the schedule's totals (open loop), the
    driver's counters and connection costs since the gate, and its own CPU and peak memory.
    On a cluster the worker that ran it adds its address and host."""

    client: int
    pid: int
    threads: list[ThreadStats]
    schedule: dict[str, float] | None = None
    counters: dict[str, int] = field(default_factory=dict)
    connections: ConnectionCosts | None = None
    cpu_user_s: float = 0.0
    cpu_sys_s: float = 0.0
    max_rss_bytes: int = 0
    worker: str | None = None
    host: str | None = None
    windows: dict[int, Window] = field(default_factory=dict)  # the windows not shipped yet
    ended_ns: int | None = None  # when its loops ended, ns from the case's start (its clock)


@dataclass
class Interval:
    """A settled window of a case's time series as the result keeps it (windows ``first`` to
    ``last`` merged, :mod:`rpcmeter.runners.windows`): where it runs (ns from the case's start),
    its stage, its counts, its clients' CPU seconds, its latency summary (microseconds: the
    keys of :data:`SUMMARY`) and its histogram, coarsened and encoded."""

    first: int
    last: int
    start_ns: int
    end_ns: int
    stage: int | None
    requests: int
    ok: int
    errors: dict[str, int]
    sent: int
    late: int
    cpu_s: float
    summary: dict[str, float]
    histogram: dict[str, Any] | None

    def decoded(self) -> Histogram:
        return Histogram.from_dict(self.histogram) if self.histogram else Histogram()


SUMMARY = ("mean_us", "p50_us", "p90_us", "p99_us", "p999_us", "max_us")


@dataclass
class StageTally:
    """What a stage measured (or the whole series): its windows merged at full precision, its
    clients' CPU seconds, and how many of its windows are settled."""

    tally: Window = field(default_factory=Window)
    cpu_user_s: float = 0.0
    cpu_sys_s: float = 0.0
    settled: int = 0


@dataclass
class Series:
    """A case's figures over time (:class:`~rpcmeter.runners.windows.Timeline`): the clock its
    windows were cut by, the settled intervals, each stage's tally, the stages measured whole
    (every window settled) and the tally of every settled window."""

    clock: WindowClock
    intervals: list[Interval] = field(default_factory=list)
    stages: dict[int, StageTally] = field(default_factory=dict)
    finished: list[int] = field(default_factory=list)
    total: StageTally = field(default_factory=StageTally)  # every settled window


@dataclass
class LoadOutcome(Tally):
    """What a load run measured: the tally merged over clients and loops, per-client figures,
    the driver's counters, the open-loop schedule's totals and why the run failed, if it did."""

    wall_s: float = 0.0
    clients: list[model.Client] = field(default_factory=list)
    counters: dict[str, int] = field(default_factory=dict)
    failure: str | None = None
    client_pids: list[int] = field(default_factory=list)
    # open loop: the schedule's totals (offered_rps, achieved_rps, scheduled, sent, late, dropped)
    schedule: dict[str, float] | None = None
    incomplete: str | None = None  # why some clients' figures are missing (a lost worker)
    workers: list[model.Worker] = field(default_factory=list)  # per worker (cluster runs)
    connections: ConnectionCosts | None = None  # connect and handshake times (drivers that time)
    series: Series | None = None  # the case over time, and its stages
    interrupted: bool = False  # Ctrl-C: only what was settled by then


class LoadInterrupted(KeyboardInterrupt):
    """Ctrl-C while a load ran: ``outcome`` holds what was measured by then (its series; the
    clients' totals are lost)."""

    def __init__(self, outcome: LoadOutcome) -> None:
        super().__init__()
        self.outcome = outcome
