"""CPU and memory cost of server and clients.

Server: a :class:`TreeMonitor` watches the server's whole process tree (the process, its threads
and every descendant). CPU time of the tree is the sum over its live processes of their own user
and system time (:func:`process_cpu`) plus the time of children they have already waited for, so
a worker that exits before the end still counts once its parent reaps it; a process that vanished
with its parent (reparented outside the tree) counts with the last values the sampler saw.
A background thread samples the tree every ``interval_s`` for peak memory (the sum of the
processes' resident sets; at the end also each process's own high-water mark, ``VmHWM``).

The tree walk misses the CPU of processes that leave the tree (a daemon: double fork, reparented
to init) and of children that exit between samples with nobody in the tree to wait for them. A
server in a cgroup of its own has no such holes: at every mark the monitor also asks a
:data:`CpuSource` (the cgroup's CPU accounting), and a span between two marks that both
have its reading takes the CPU from it (``source`` ``"cgroup"``), otherwise from the tree
(``"processes"``). Memory stays the tree's resident sets: a cgroup's memory counts page cache and
kernel memory charged to it as well, a different figure.

Clients: every client process reports its own ``getrusage`` delta over the measured interval and
its peak RSS (:mod:`rpcmeter.runners.client`).

The measured interval runs from the gate opening to the last client result
(``run_closed_loop``'s ``on_go`` and ``on_end``). Before it, :meth:`TreeMonitor.idle` measures the
server's CPU over a quiet window: the idle cost, in percent of one core.

A server rpcmeter did not start has no tree to watch: its figures are ``None`` (unknown), never 0.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeVar

import psutil

TreeFn = Callable[[], list[psutil.Process]]
# user and system CPU seconds of everything the server ever ran (its cgroup's accounting), None
# when they cannot be read now
CpuSource = Callable[[], tuple[float, float] | None]
Source = Literal["cgroup", "processes"]
CGROUP: Source = "cgroup"
PROCESSES: Source = "processes"
N = TypeVar("N", int, float)
T = TypeVar("T")


@dataclass(frozen=True)
class CpuTimes:
    """User and system CPU seconds (and the monotonic time they were read at, and where they
    came from: :data:`PROCESSES` or :data:`CGROUP`)."""

    user_s: float
    sys_s: float
    at: float = 0.0
    source: Source = PROCESSES

    @property
    def total_s(self) -> float:
        return self.user_s + self.sys_s

    def __sub__(self, other: CpuTimes) -> CpuTimes:
        """The CPU spent from ``other`` to this reading. The total is the difference of the
        totals; the split follows the parts' own differences. A part can shrink between two
        readings (a process's total is exact, its split into user and system is sampled at clock
        ticks, see :func:`split_total`): clamping each part at 0 alone would count the other's
        growth twice, and the spans between marks would then sum to more than the whole."""
        user, system = split_total(
            max(0.0, self.total_s - other.total_s),
            max(0.0, self.user_s - other.user_s),
            max(0.0, self.sys_s - other.sys_s),
        )
        return CpuTimes(user, system, self.at - other.at, self.source)


CpuTicks = list[tuple[float, float]]  # per CPU: (busy seconds, total seconds) since boot


@dataclass(frozen=True)
class TreeReadings:
    """What a :class:`TreeMonitor` had read of the server's tree when the case ended, as plain
    values: the CPU at each mark (the tree's, and the CPU source's where it could be read), the
    peak and mean (``go`` to ``end``) memory, and how busy the server's and the clients' CPUs
    were from ``go`` to ``end``."""

    marks: Mapping[str, CpuTimes]
    source_marks: Mapping[str, CpuTimes]
    peak_rss_bytes: int
    mean_rss_bytes: int | None = None
    server_cpus_busy_pct: float | None = None
    client_cpus_busy_pct: float | None = None

    def between(self, start: str, end: str) -> CpuTimes | None:
        """CPU between two marks (:func:`cpu_between`)."""
        return cpu_between(self.source_marks, self.marks, start, end)


def cpu_between(
    source_marks: Mapping[str, CpuTimes], marks: Mapping[str, CpuTimes], start: str, end: str
) -> CpuTimes | None:
    """CPU between two marks: the source's where both have its reading, else the tree's."""
    for each in (source_marks, marks):
        if start in each and end in each:
            return each[end] - each[start]
    return None


def machine_cpu() -> CpuTicks:
    """Busy and total time of every CPU of the machine (``/proc/stat``)."""
    out = []
    for t in psutil.cpu_times(percpu=True):
        total = sum(t)
        # guest time is already counted in user time
        total -= getattr(t, "guest", 0.0) + getattr(t, "guest_nice", 0.0)
        out.append((total - t.idle - getattr(t, "iowait", 0.0), total))
    return out


def busy_pct(start: CpuTicks, end: CpuTicks, cpus: list[int] | None) -> float | None:
    """How busy (with anything, not only rpcmeter's processes) the CPUs ``cpus`` (None: all) were
    between two readings, in percent; None when the readings are too close (under 20 ticks)."""
    chosen = range(min(len(start), len(end))) if cpus is None else cpus
    busy = total = 0.0
    for c in chosen:
        if c < len(start) and c < len(end):
            busy += end[c][0] - start[c][0]
            total += end[c][1] - start[c][1]
    return 100.0 * busy / total if total >= 0.2 else None


def split_total(total: float, user: float, system: float) -> tuple[float, float]:
    """``total`` seconds split into user and system in the ratio ``user`` : ``system`` (all user
    when both are 0)."""
    ticks = user + system
    user_share = user / ticks if ticks > 0 else 1.0
    return total * user_share, total * (1.0 - user_share)


def process_cpu(p: psutil.Process) -> tuple[float, float]:
    """User and system seconds of a process (all its threads, live and exited) plus those of the
    children it has waited for.

    ``/proc/PID/stat`` counts in clock ticks (10 ms), too coarse for short cases, so the total
    comes from the process's CPU clock (nanoseconds) and is split into user and system in the
    ratio of the tick counts, as the kernel itself does for ``getrusage``. Children's times are
    only available in ticks."""
    t = p.cpu_times()
    ticks = t.user + t.system
    try:
        total = time.clock_gettime_ns(((~p.pid) << 3) | 2) / 1e9  # CPUCLOCK_SCHED of the process
    except OSError:
        total = ticks
    user, system = split_total(total, t.user, t.system)
    return user + t.children_user, system + t.children_system


def peak_rss_of(pid: int) -> int | None:
    """A process's own peak resident set (``VmHWM``) in bytes, where Linux reports it."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


class TreeMonitor:
    """CPU time and peak memory of a process tree (see the module docstring)."""

    def __init__(
        self, tree: TreeFn, interval_s: float = 0.25, cpu_source: CpuSource | None = None
    ) -> None:
        self._tree = tree
        self._cpu_source = cpu_source
        self.interval_s = interval_s
        self._lock = threading.Lock()
        # pid -> (parent pid, user + children user, system + children system), last seen
        self._seen: dict[int, tuple[int, float, float]] = {}
        self._peak_rss = 0
        self._rss: list[tuple[float, int]] = []  # (monotonic time, the tree's RSS) per sample
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.marks: dict[str, CpuTimes] = {}  # the tree's CPU
        self.source_marks: dict[str, CpuTimes] = {}  # the CPU source's, where it could be read
        self.machine_marks: dict[str, CpuTicks] = {}

    def start(self) -> TreeMonitor:
        self.sample()
        self._thread = threading.Thread(target=self._run, name="tree-monitor", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
            self._thread = None

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def sample(self) -> CpuTimes:
        """Read the tree now: CPU so far, and the memory sample for the peak."""
        procs = self._tree()
        now = time.monotonic()
        live: dict[int, tuple[int, float, float]] = {}
        rss = 0
        for p in procs:
            try:
                with p.oneshot():
                    user, system = process_cpu(p)
                    mem = p.memory_info().rss
                    ppid = p.ppid()
            except psutil.Error:
                continue
            live[p.pid] = (ppid, user, system)
            rss += mem
        with self._lock:
            self._peak_rss = max(self._peak_rss, rss)
            if procs:
                self._rss.append((now, rss))
            gone = {pid: v for pid, v in self._seen.items() if pid not in live}
            # a vanished process whose parent is still in the tree is (or will be) in its
            # parent's children times; one whose parent vanished too is counted as last seen
            orphans = [v for v in gone.values() if v[0] not in live]
            self._seen = {**{p: v for p, v in gone.items() if v[0] not in live}, **live}
            user = sum(v[1] for v in live.values()) + sum(v[1] for v in orphans)
            system = sum(v[2] for v in live.values()) + sum(v[2] for v in orphans)
        return CpuTimes(user, system, now)

    def mark(self, name: str) -> None:
        """Record the server's CPU times (tree and source) and the machine's now under ``name``
        (``go``, ...)."""
        self.marks[name] = tree = self.sample()
        read = self._cpu_source() if self._cpu_source is not None else None
        if read is not None:
            self.source_marks[name] = CpuTimes(read[0], read[1], tree.at, CGROUP)
        else:
            self.source_marks.pop(name, None)
        self.machine_marks[name] = machine_cpu()

    def busy_between(self, start: str, end: str, cpus: list[int] | None) -> float | None:
        """How busy CPUs ``cpus`` were between two marks (see :func:`busy_pct`)."""
        if start not in self.machine_marks or end not in self.machine_marks:
            return None
        return busy_pct(self.machine_marks[start], self.machine_marks[end], cpus)

    def between(self, start: str, end: str) -> CpuTimes | None:
        """CPU between two marks: the source's where both have its reading, else the tree's."""
        return cpu_between(self.source_marks, self.marks, start, end)

    def readings(
        self, server_cpus: list[int] | None, client_cpus: list[int] | None
    ) -> TreeReadings:
        """What the monitor has read so far, as values (:class:`TreeReadings`): the busy figures
        over ``go`` to ``end`` of ``server_cpus`` and ``client_cpus``."""
        return TreeReadings(
            marks=dict(self.marks),
            source_marks=dict(self.source_marks),
            peak_rss_bytes=self.peak_rss_bytes(),
            mean_rss_bytes=self.mean_rss_bytes("go", "end"),
            server_cpus_busy_pct=self.busy_between("go", "end", server_cpus),
            client_cpus_busy_pct=self.busy_between("go", "end", client_cpus),
        )

    def idle(self, seconds: float) -> CpuTimes:
        """CPU the tree used over a quiet window of ``seconds`` (nothing else must be sent)."""
        self.mark("idle_start")
        time.sleep(seconds)
        self.mark("idle_end")
        delta = self.between("idle_start", "idle_end")
        assert delta is not None
        return delta

    def peak_rss_bytes(self) -> int:
        """Peak of the tree's summed RSS samples, or a process's own high-water mark if higher."""
        own = [peak_rss_of(p.pid) for p in self._tree()]
        with self._lock:
            return max([self._peak_rss, *(v for v in own if v is not None)])

    def mean_rss_bytes(self, start: str, end: str) -> int | None:
        """The mean of the tree's summed RSS over the samples taken between two marks (their
        own samples included); None without such samples."""
        if start not in self.marks or end not in self.marks:
            return None
        since, until = self.marks[start].at, self.marks[end].at
        with self._lock:
            values = [rss for at, rss in self._rss if since <= at <= until]
        return round(sum(values) / len(values)) if values else None


def percent_of_core(cpu: CpuTimes) -> float | None:
    """CPU time over a window as a percentage of one core."""
    return 100.0 * cpu.total_s / cpu.at if cpu.at > 0 else None


def per_request_us(cpu_s: float | None, requests: int) -> float | None:
    return cpu_s * 1e6 / requests if cpu_s is not None and requests > 0 else None


def client_total(clients: Sequence[T] | None, figure: Callable[[T], N | None]) -> N | None:
    """Sum of ``figure`` over the clients; None when there are none or any is unknown."""
    values = [figure(c) for c in clients or ()]
    if not values or any(v is None for v in values):
        return None
    return sum(v for v in values if v is not None)


def util_pct(cpu_s: float | None, seconds: float, cpus: float) -> float | None:
    if cpu_s is None or seconds <= 0 or cpus <= 0:
        return None
    return 100.0 * cpu_s / (seconds * cpus)
