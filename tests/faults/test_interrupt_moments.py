"""Ctrl-C or SIGTERM at any moment of ``rpcmeter run`` (issue 52).

Real small runs (``python -m rpcmeter run``) are interrupted at moments spread over their
phases: suite loading, a variant's environment being built, a local Dask cluster starting,
cases, the end. Each must end with the one ``interrupted`` line and exit 130, print no
traceback, and leave a valid result document (none only when the run had not begun: then the
store holds no run either), a history store whose ``integrity_check`` is ok and that holds the
same run, and no process of the ones rpcmeter started. The moments count from when rpcmeter
handles SIGTERM (its handler is installed first thing), so a slow start does not shift them.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

from rpcmeter.host.envs import find_uv
from rpcmeter.model import Result
from rpcmeter.result.document import read_json
from tests.support.interrupt import ctrl_c_default
from tests.support.marks import timing_sensitive

PKG = Path(__file__).resolve().parents[2] / "examples" / "busy_polling_pkg"
INTERRUPTED = "rpcmeter: interrupted; servers and clients stopped"

# six half-second cases on a Unix socket: longer than any moment tried
CASES = """
    [workloads.simple]
    [load]
    duration_s = 0.5
    warmup = 5
    [matrix]
    threads = [1, 2, 3, 4, 5, 6]
"""
PLAIN = '[target]\ndriver = "rpyc"\ntransport = "unix"\n' + textwrap.dedent(CASES)
# its only variant runs in an environment of its own, built at the run's start (uv, offline)
IN_ENV = (
    '[target]\ndriver = "rpyc"\ntransport = "unix"\n'
    f'[variants.isolated]\ninstall = ["{PKG}"]\n' + textwrap.dedent(CASES)
)


@dataclass
class Left:
    """What an interrupted run left behind."""

    when: str
    began: bool  # the run had begun when it was interrupted
    code: int
    stderr: str
    document: Result | None
    integrity: str | None  # the store's PRAGMA integrity_check (None: no store file)
    runs: list[tuple[str, int]]  # (status, cases) of each run in the store
    leftovers: list[str] = field(default_factory=list)  # processes still alive

    def describe(self) -> str:
        doc = self.document
        kept = "no document" if doc is None else f"{doc.status}, {len(doc.cases)} case(s)"
        return f"{self.when}: exit {self.code}, {kept}, store {self.runs}"


def handles_sigterm(pid: int) -> bool:
    """Whether ``pid`` catches SIGTERM (rpcmeter's handler is installed)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = next(line for line in status.splitlines() if line.startswith("SigCgt:"))
    return bool(int(caught.split()[1], 16) & (1 << (signal.SIGTERM - 1)))


def descendants(pid: int) -> dict[tuple[int, float], str]:
    """rpcmeter's processes: (pid, start time) -> command line."""
    found = {}
    try:
        for c in psutil.Process(pid).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                found[c.pid, c.create_time()] = " ".join(c.cmdline())
    except psutil.Error:
        pass
    return found


def alive(seen: Iterable[tuple[int, float]]) -> list[str]:
    left = []
    for pid, created in seen:
        try:
            p = psutil.Process(pid)
            if p.create_time() == created and p.status() != psutil.STATUS_ZOMBIE:
                left.append(f"{pid} {' '.join(p.cmdline())[:120]}")
        except psutil.Error:
            continue
    return left


@dataclass(frozen=True)
class Phase:
    """A moment of a run: ``seconds`` after ``seen(where, descendants)`` first holds (where:
    the run's directory; descendants: the command lines of rpcmeter's processes)."""

    name: str
    seen: Callable[[Path, list[str]], bool]
    began: bool  # the run had begun by then: its document must exist

    def at(self, seconds: float) -> tuple[Phase, float]:
        return self, seconds


# rpcmeter handles signals (it may still be reading the suite)
START = Phase("start", lambda where, procs: True, began=False)
# the store is open: the suite is read, the run is about to begin
STORE = Phase("store open", lambda where, procs: (where / "h.db").exists(), began=True)
# the run's document exists: it has begun (environments, builds, the cluster come next)
DOCUMENT = Phase("run began", lambda where, procs: (where / "r.json").exists(), began=True)
# a variant's environment is being made (the cache appears as it starts)
ENV = Phase("environment build", lambda where, procs: (where / "cache").exists(), began=True)
# a local Dask cluster is starting (its workers fork from a forkserver)
CLUSTER = Phase(
    "cluster start", lambda where, procs: any("forkserver" in p for p in procs), began=True
)
# a case is done (the next one runs)
CASE = Phase(
    "a finished case",
    lambda where, procs: (where / "r.json").exists() and bool(read_json(where / "r.json").cases),
    began=True,
)


def interrupt(
    tmp: Path,
    suite: str,
    when: tuple[Phase, float],
    *extra: str,
    sig: signal.Signals = signal.SIGTERM,
    again_s: float | None = None,
) -> Left:
    """Run ``suite`` and send ``sig`` at ``when`` (a phase, and seconds after it is seen):
    SIGINT to its process group, as a terminal does; SIGTERM to it alone, as ``timeout``
    does. And ``sig`` again ``again_s`` later (during its shutdown)."""
    phase, moment = when
    name = f"{sig.name} {moment:g} s after {phase.name}" + (
        f", again {again_s:g} s later" if again_s else ""
    )
    where = tmp / name.replace(" ", "-").replace(",", "")
    where.mkdir()
    (where / "s.toml").write_text(suite)
    out, db = where / "r.json", where / "h.db"
    argv = [sys.executable, "-m", "rpcmeter", "run", "s.toml", "-o", str(out), "--store"]
    argv += [str(db), "--no-live", *extra]
    with (where / "stderr").open("w+") as err:
        proc = subprocess.Popen(
            argv,
            cwd=where,
            env={**os.environ, "RPCMETER_CACHE": str(where / "cache")},
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
            preexec_fn=ctrl_c_default,  # Ctrl-C reaches it even when this test's is ignored
        )
        seen: dict[tuple[int, float], str] = {}
        try:
            deadline = time.monotonic() + 120
            while not handles_sigterm(proc.pid):
                assert proc.poll() is None and time.monotonic() < deadline, "no SIGTERM handler"
                time.sleep(0.01)
            while not phase.seen(where, list(seen.values())):
                assert proc.poll() is None and time.monotonic() < deadline, f"no {phase.name}"
                seen |= descendants(proc.pid)
                time.sleep(0.02)
            at = time.monotonic() + moment
            while time.monotonic() < at:
                seen |= descendants(proc.pid)
                time.sleep(0.05)
            for i in range(1 if again_s is None else 2):
                if i:
                    time.sleep(again_s or 0)
                seen |= descendants(proc.pid)
                if sig == signal.SIGINT:
                    os.killpg(proc.pid, sig)
                else:
                    proc.send_signal(sig)
            code = proc.wait(timeout=120)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        err.seek(0)
        stderr = err.read()
    deadline = time.monotonic() + 10  # orphans (Dask's forkserver) end as their pipes close
    while (left := alive(seen)) and time.monotonic() < deadline:
        time.sleep(0.1)
    integrity, runs = None, []
    if db.exists():
        con = sqlite3.connect(db)
        try:
            integrity = con.execute("PRAGMA integrity_check").fetchone()[0]
            if con.execute("SELECT COUNT(*) FROM sqlite_master WHERE name = 'runs'").fetchone()[0]:
                runs = con.execute("SELECT status, cases FROM runs").fetchall()
        finally:
            con.close()
    document = read_json(out) if out.exists() else None  # a damaged one fails here
    return Left(
        name,
        phase.began,
        code,
        stderr,
        document,
        integrity,
        runs,
        left,
    )


def check(left: Left) -> None:
    print(left.describe())  # what each moment left (pytest -s shows it)
    what = f"{left.describe()}\n{left.stderr}"
    assert left.code == 130, what
    assert "Traceback" not in left.stderr, what
    assert left.stderr.strip().splitlines()[-1] == INTERRUPTED, what
    assert left.leftovers == [], what
    assert left.integrity in (None, "ok"), what
    doc = left.document
    if doc is None:  # the run had not begun: the store holds no run either
        assert not left.began and left.runs == [], what
        return
    assert doc.status == "interrupted", what
    assert left.runs == [("interrupted", len(doc.cases))], what
    assert all(c.status == "ok" for c in doc.cases), what


def check_spread(lefts: list[Left]) -> None:
    """The moments covered the run's start (no case yet) and its cases."""
    kept = [len(left.document.cases) for left in lefts if left.document is not None]
    report = "\n".join(left.describe() for left in lefts)
    assert kept and min(kept) == 0 and max(kept) >= 1, report


@timing_sensitive
@pytest.mark.timeout(240)
def test_interrupted_while_a_local_cluster_starts_or_runs(tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    lefts = []
    for when in (START.at(0), STORE.at(0), DOCUMENT.at(0), CLUSTER.at(0.3), CASE.at(0.5)):
        lefts.append(interrupt(tmp_path, PLAIN, when, "--cluster", "local:2"))
        check(lefts[-1])
    # a terminal's Ctrl-C goes to every process of the group, Dask's workers included; and
    # a second one while rpcmeter stops what it started
    lefts.append(
        interrupt(
            tmp_path, PLAIN, CASE.at(0), "--cluster", "local:2", sig=signal.SIGINT, again_s=0.3
        )
    )
    check(lefts[-1])
    check_spread(lefts)


@timing_sensitive
@pytest.mark.timeout(240)
@pytest.mark.skipif(find_uv() is None, reason="uv is needed to build the environment offline")
def test_interrupted_while_a_variant_environment_is_built_or_runs(tmp_path: Path) -> None:
    lefts = []
    for when in (START.at(0.1), ENV.at(0), ENV.at(0.3), CASE.at(0.3)):
        lefts.append(interrupt(tmp_path, IN_ENV, when))
        check(lefts[-1])
    # a terminal's Ctrl-C as the run begins: the clients' forkserver is starting (importing the
    # client code), and it is in rpcmeter's process group
    lefts.append(interrupt(tmp_path, IN_ENV, STORE.at(0.05), sig=signal.SIGINT))
    check(lefts[-1])
    lefts.append(interrupt(tmp_path, IN_ENV, CASE.at(0), sig=signal.SIGINT, again_s=0.05))
    check(lefts[-1])
    check_spread(lefts)
