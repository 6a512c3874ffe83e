"""How long ``rpcmeter publish`` takes, and how large the site is, for a long history: a store
of RUNS runs of a 20-case suite (2 workloads x 5 matrix points x 2 variants, one repetition),
each a real result document (the typed model's, with histograms, CPU and memory figures) and
its own revision; from run 600 on, one workload's variant ``b`` is 20 % slower, so the trends
have a step. Prints the first publish (every page rendered), a second one with nothing new, and
a third after 10 new runs.

    python benchmarks/publish.py --runs 1000
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the synthetic result documents of the tests

from rpcmeter.history.store import Store  # noqa: E402
from rpcmeter.publish import publish  # noqa: E402
from tests.support.synthetic import CellSpec, synthetic_document  # noqa: E402

FAMILY = 20  # distinct documents per level; the runs cycle through them
STEP_AT = 600


def spec(slow: float) -> CellSpec:
    return {
        (w, (("threads", t),), v): [
            (100.0 + 10 * t) * (slow if (w == "payload" and v == "b") else 1.0)
        ]
        for w in ("simple", "payload")
        for t in (1, 2, 4, 8, 16)
        for v in ("a", "b")
    }


def build_store(path: Path, runs: int, first: int = 1) -> None:
    """``runs`` runs, ids from ``first``: FAMILY documents per level saved through the store, the
    rest copies of their rows with a run id, a start time and a revision of their own."""
    with Store(path) as store:
        db = store.db
        sources: dict[bool, list[int]] = {}
        for slow in (False, True):
            docs = [
                synthetic_document(spec(1.2 if slow else 1.0), seed=s, cpu=True)
                for s in range(FAMILY)
            ]
            for doc in docs:
                doc["suite"]["name"] = "checkout api"
                doc["run_id"] = f"template{slow:d}{doc['run_id']}"
            sources[slow] = [store.save(d) for d in docs]
        cols = (
            "status, suite_name, suite_path, suite_sha256, git_branch, git_dirty, "
            "variants, cases, planned_cases, environment"
        )
        with store.transaction():
            for n in range(first, first + runs):
                src = sources[n >= STEP_AT][n % FAMILY]
                commit = hashlib.sha1(f"revision {n}".encode()).hexdigest()
                day = f"2026-{1 + n // 600 % 12:02d}-{1 + n // 24 % 28:02d}T{n % 24:02d}"
                when, end = f"{day}:00:00+00:00", f"{day}:01:00+00:00"
                db.execute(
                    "INSERT INTO runs (run_id, started_at, finished_at, git_commit, "
                    f"{cols}, document) "
                    f"SELECT ?, ?, ?, ?, {cols}, json_set(document, '$.run_id', ?, '$.started_at',"
                    " ?, '$.finished_at', ?, '$.suite.git', json(?)) FROM runs WHERE id = ?",
                    (
                        f"run{n:08d}",
                        when,
                        end,
                        commit,
                        f"run{n:08d}",
                        when,
                        end,
                        json.dumps({"commit": commit, "branch": "main", "dirty": False}),
                        src,
                    ),
                )
                new = db.execute("SELECT last_insert_rowid()").fetchone()[0]
                db.execute(
                    "INSERT INTO cases (run, seq, document) SELECT ?, seq, document FROM cases "
                    "WHERE run = ?",
                    (new, src),
                )
            ids = [i for v in sources.values() for i in v]
            db.execute(f"DELETE FROM runs WHERE id IN ({','.join('?' * len(ids))})", ids)


def cpu_seconds() -> float:
    """CPU time of this process and of its finished children (the publish's workers)."""
    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def timed(what: str, site: Path, store: Path, jobs: int | None) -> None:
    """One publish: its own line, and the CPU seconds it took in all its processes (on a
    machine shared with other work, the wall time grows; the CPU time is the publish's own)."""
    cpu = cpu_seconds()
    done = publish(site, store, jobs=jobs)
    print(f"{what}: {done.line()}; {cpu_seconds() - cpu:.1f} CPU s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=None, help="worker processes (all CPUs)")
    parser.add_argument("--keep", type=Path, help="build the site here and keep it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rpcmeter-publish-") as tmp:
        store = Path(tmp) / "history.db"
        site = args.keep or Path(tmp) / "site"
        t = time.perf_counter()
        build_store(store, args.runs)
        with sqlite3.connect(store) as db:
            count = db.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
        print(
            f"store: {count} runs of 20 cases, {store.stat().st_size / 1e6:.1f} MB, built in "
            f"{time.perf_counter() - t:.1f} s; {os.cpu_count()} CPUs"
        )
        timed("first publish", site, store, args.jobs)
        timed("nothing new", site, store, args.jobs)
        build_store(store, 10, first=args.runs + 1)
        timed("10 new runs", site, store, args.jobs)


if __name__ == "__main__":
    main()
