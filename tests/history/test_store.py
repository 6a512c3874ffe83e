"""The history store: round trip, incremental writes, naming runs."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from rpcmeter.analysis.derived import derive, document
from rpcmeter.errors import StoreError
from rpcmeter.history.store import Store, resolve_run
from rpcmeter.model import SCHEMA_VERSION, Result
from rpcmeter.result.document import dumps, write_json
from tests.support.synthetic import CellSpec, synthetic_document, written

SPEC: CellSpec = {
    ("w", (("threads", 1),), "a"): [100, 101, 99],
    ("w", (("threads", 1),), "b"): [90, 91, 89],
}


def as_stored(result: dict[str, Any]) -> dict[str, Any]:
    """What a document looks like after JSON (NaN as null) and the typed model (the current
    schema version; comparisons and warnings derived)."""
    loaded: dict[str, Any] = json.loads(dumps(result))
    return document(Result.from_json(loaded))


def measured(result: dict[str, Any]) -> dict[str, Any]:
    """The parts of a document a run measured (not its derived comparisons and warnings)."""
    return {k: v for k, v in result.items() if k not in ("comparisons", "warnings")}


def test_round_trip_gives_the_identical_document(tmp_path: Path) -> None:
    result = synthetic_document(SPEC)
    result["schema_version"] = SCHEMA_VERSION
    result["cases"][0]["bytes"] = {"out_per_request": float("nan"), "in_per_request": 3.0}
    with Store(tmp_path / "h.db") as store:
        run = store.save(result)
        back = written(store.load(run))
    assert measured(back) == measured(json.loads(dumps(result)))
    assert back == as_stored(result)
    assert list(measured(back)) == list(measured(result))  # key order kept too
    assert back["comparisons"]["baseline"] == "a"  # derived on read
    assert back["warnings"] == list(derive(Result.from_json(back)).warnings)


def test_an_older_schema_version_is_migrated_on_load(tmp_path: Path) -> None:
    result = synthetic_document(SPEC)
    result["schema_version"] = 1
    result["comparisons"] = {"stale": True}  # stored by an older rpcmeter: not read back
    with Store(tmp_path / "h.db") as store:
        back = written(store.load(store.save(result)))
    assert back["schema_version"] == SCHEMA_VERSION
    assert "stale" not in back["comparisons"]
    assert back["cases"] == json.loads(dumps(result))["cases"]


def test_run_row_is_updated_after_every_case(tmp_path: Path) -> None:
    full = Result.from_json(synthetic_document(SPEC))
    result = full.model_copy(update={"cases": [], "status": "running", "finished_at": None})
    path = tmp_path / "h.db"
    with Store(path) as store:
        run = store.begin(result)
        assert written(store.load(run))["cases"] == []
        for case in full.cases:
            result = result.model_copy(update={"cases": [*result.cases, case]})
            store.add_case(run, result, case)
            # another connection (another process, e.g. `rpcmeter history`) sees the case
            with Store(path, create=False) as reader:
                assert len(written(reader.load(run))["cases"]) == len(result.cases)
                assert reader.runs()[0].cases == len(result.cases)
        result = result.model_copy(update={"status": "complete", "finished_at": full.finished_at})
        store.finish(run, result)
        assert written(store.load(run)) == document(full)
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_history_and_naming_runs(tmp_path: Path) -> None:
    path = tmp_path / "h.db"
    with Store(path) as store:
        ids = [store.save(synthetic_document(SPEC, seed=s)) for s in range(3)]
        store.tag("main", ids[0])
        infos = store.runs()
        assert [i.id for i in infos] == ids[::-1]
        assert infos[-1].tags == ["main"] and infos[0].variants == ["a", "b"]
        assert infos[0].cases == 6 and infos[0].suite == "synthetic"
        with pytest.raises(StoreError, match="cannot look like"):
            store.tag("last~2", ids[0])
    assert resolve_run("last", path).id == ids[2]
    assert resolve_run("last~1", path).id == ids[1]
    assert resolve_run(str(ids[1]), path).id == ids[1]
    assert resolve_run("main", path).id == ids[0]
    assert resolve_run("5e1ec7ed0002", path).id == ids[2]  # run_id
    assert resolve_run("last", path).result.run_id == "5e1ec7ed0002"
    for bad, match in [("last~3", "holds 3 runs"), ("nope", "no such run"), ("99", "no such run")]:
        with pytest.raises(StoreError, match=match):
            resolve_run(bad, path)
    file = tmp_path / "r.json"
    write_json(synthetic_document(SPEC, seed=9), file)
    ref = resolve_run(str(file), path)
    assert ref.id is None and ref.result.run_id == "5e1ec7ed0009"
    with pytest.raises(StoreError, match="no history database"):
        resolve_run("last", tmp_path / "missing.db")
    with pytest.raises(StoreError, match="no such result file"):
        resolve_run(str(tmp_path / "missing.json"), path)


# The schema rpcmeter 0.1 created (user_version 1), verbatim: a store of that age must keep working.
SCHEMA_V1 = """
CREATE TABLE runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT UNIQUE NOT NULL,
    started_at TEXT, finished_at TEXT, status TEXT,
    suite_name TEXT, suite_path TEXT, suite_sha256 TEXT,
    git_commit TEXT, git_dirty INTEGER,
    variants TEXT, cases INTEGER NOT NULL DEFAULT 0, planned_cases INTEGER,
    environment TEXT, document TEXT NOT NULL
);
CREATE TABLE cases (
    run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    document TEXT NOT NULL,
    PRIMARY KEY (run, seq)
);
CREATE TABLE tags (
    name TEXT PRIMARY KEY,
    run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    tagged_at TEXT
);
PRAGMA user_version=1;
"""


def test_an_old_store_is_migrated_in_place(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    old = sqlite3.connect(path)
    old.executescript(SCHEMA_V1)
    docs = []
    for seed, git in enumerate(
        [
            {"commit": "a" * 40, "dirty": True},
            {"commit": "b" * 40, "branch": "main", "dirty": False},
        ]
    ):
        doc = synthetic_document(SPEC, seed=seed)
        doc["suite"]["git"] = git
        docs.append(doc)
        head = {**doc, "cases": []}
        # the first row as 0.1 wrote it; the second with its revision columns left empty
        commit, dirty = (git["commit"], 1) if seed == 0 else (None, None)
        cur = old.execute(
            "INSERT INTO runs (run_id, started_at, status, suite_name, git_commit, git_dirty, "
            "variants, cases, document) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                doc["run_id"],
                doc["started_at"],
                "complete",
                "synthetic",
                commit,
                dirty,
                '["a", "b"]',
                len(doc["cases"]),
                dumps(head),
            ),
        )
        old.executemany(
            "INSERT INTO cases (run, seq, document) VALUES (?, ?, ?)",
            [(cur.lastrowid, i, dumps(c)) for i, c in enumerate(doc["cases"])],
        )
    old.commit()
    old.close()

    with Store(path, create=False) as store:
        assert store.db.execute("PRAGMA user_version").fetchone()[0] == 2
        infos = store.runs()[::-1]
        assert [(i.commit, i.branch, i.dirty) for i in infos] == [
            ("a" * 40, None, True),
            ("b" * 40, "main", False),
        ]
        assert written(store.load(infos[1].id)) == as_stored(docs[1])
        new = synthetic_document(SPEC, seed=7)
        new["suite"]["git"] = {"commit": "c" * 40, "branch": "topic", "dirty": False}
        run = store.save(new)
        rows = store.db.execute(
            "SELECT id FROM runs WHERE git_branch = ? AND git_dirty = 0", ("topic",)
        ).fetchall()
        assert rows == [(run,)]
        indexes = {
            r[0] for r in store.db.execute("SELECT name FROM sqlite_master WHERE type='index'")
        }
        assert {"runs_suite", "runs_commit"} <= indexes
    with Store(path) as again:  # opening a migrated store changes nothing
        assert [i.id for i in again.runs()] == [run, infos[1].id, infos[0].id]


def test_a_store_from_a_newer_rpcmeter_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    sqlite3.connect(path).execute("PRAGMA user_version=99").connection.commit()
    with pytest.raises(StoreError, match="newer than this rpcmeter"):
        Store(path)


@pytest.mark.parametrize("read_only", [False, True])
def test_a_store_created_by_another_run_while_opening_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, read_only: bool
) -> None:
    """Another run creates the database just after this one's first read of it: the store
    must see either the empty file or the whole schema, never an empty version with tables
    (which it refuses as another program's database)."""
    path = tmp_path / "h.db"
    path.touch()  # the other run's connection made the file, and has written nothing yet
    connect = sqlite3.connect
    statements: list[str] = []

    class Racing(sqlite3.Connection):
        def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
            statements.append(sql)
            if len(statements) == 2:  # between this run's first statement and its second
                with monkeypatch.context() as m:
                    m.setattr(sqlite3, "connect", connect)
                    Store(path).close()  # the other run creates the schema
            return super().execute(sql, *args)

    monkeypatch.setattr(sqlite3, "connect", lambda *a, **k: connect(*a, factory=Racing, **k))
    with Store(path, create=False, read_only=read_only) as store:
        assert store.runs() == []
    assert len(statements) >= 2, "the other run never created the database"
