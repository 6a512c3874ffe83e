"""The history store: every run in a SQLite database.

Default location ``.rpcmeter/history.db`` under the current directory, or ``$RPCMETER_STORE``
when set (``--store PATH``, ``--no-store``). Tables::

    runs(id INTEGER PRIMARY KEY, run_id TEXT UNIQUE, started_at, finished_at, status,
         suite_name, suite_path, suite_sha256, git_commit, git_branch, git_dirty,
         variants (JSON list), cases, planned_cases, environment (JSON),
         document (JSON: the result without its cases))
    cases(run REFERENCES runs(id), seq, document (JSON: one case))   PRIMARY KEY (run, seq)
    tags(name TEXT PRIMARY KEY, run REFERENCES runs(id), tagged_at)

``git_commit``, ``git_branch`` (null when detached) and ``git_dirty`` (0/1) are the revision of
the suite file's directory, null outside git; indexed with ``suite_name``, so ``SELECT ... WHERE
git_commit = ?`` needs no document. A database of an older schema (``PRAGMA user_version``) is
migrated in place when opened (:data:`MIGRATIONS`), in one transaction.

A run's row is created when it starts and updated, in one transaction with the new case, after
every case; the database is in WAL mode, so a run killed at any moment leaves a readable database
holding the cases done so far. :meth:`Store.load` reassembles the exact result document.

A run is named (:func:`resolve_run`, wherever a command takes a run) by its id (``7``), ``last``,
``last~N`` (N runs before the last), a baseline tag, a prefix of its ``run_id``, or the path of a
result JSON file.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rpcmeter import model
from rpcmeter.analysis.derived import document
from rpcmeter.errors import NoSuchRun, StoreError
from rpcmeter.host import interrupts as interrupts
from rpcmeter.names import DEFAULT_STORE
from rpcmeter.names import STORE_ENV as STORE_ENV
from rpcmeter.result.document import Document, Result, _clean, now_iso, parse, read_json
from rpcmeter.run.events import RunListener

DEFAULT_PATH = DEFAULT_STORE


SCHEMA_VERSION = 2

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT UNIQUE NOT NULL,
    started_at TEXT, finished_at TEXT, status TEXT,
    suite_name TEXT, suite_path TEXT, suite_sha256 TEXT,
    git_commit TEXT, git_branch TEXT, git_dirty INTEGER,
    variants TEXT, cases INTEGER NOT NULL DEFAULT 0, planned_cases INTEGER,
    environment TEXT, document TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS cases (
    run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    document TEXT NOT NULL,
    PRIMARY KEY (run, seq)
);
CREATE TABLE IF NOT EXISTS tags (
    name TEXT PRIMARY KEY,
    run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    tagged_at TEXT
);
CREATE INDEX IF NOT EXISTS runs_suite ON runs (suite_name, id);
CREATE INDEX IF NOT EXISTS runs_commit ON runs (git_commit);
"""

#: ``MIGRATIONS[v]`` brings a database of schema ``v`` to ``v + 1``.
MIGRATIONS: dict[int, str] = {
    # 1 -> 2: the branch as a column; the revision columns filled from the documents wherever
    # they are null (the documents always carried suite.git), and the columns indexed
    1: """
    ALTER TABLE runs ADD COLUMN git_branch TEXT;
    UPDATE runs SET
        git_commit = COALESCE(git_commit, json_extract(document, '$.suite.git.commit')),
        git_branch = json_extract(document, '$.suite.git.branch'),
        git_dirty = COALESCE(git_dirty, json_extract(document, '$.suite.git.dirty'));
    CREATE INDEX IF NOT EXISTS runs_suite ON runs (suite_name, id);
    CREATE INDEX IF NOT EXISTS runs_commit ON runs (git_commit);
    """,
}


def _json(value: Any) -> str:
    return json.dumps(_clean(value), allow_nan=False)


@dataclass(frozen=True)
class RunInfo:
    """One line of ``rpcmeter history``."""

    id: int
    run_id: str
    started_at: str
    status: str
    suite: str
    commit: str | None
    branch: str | None
    dirty: bool
    variants: list[str]
    cases: int
    planned_cases: int | None
    tags: list[str]


@dataclass(frozen=True)
class RunRef:
    """A resolved run: its document and how to call it in output."""

    result: Result
    label: str
    id: int | None = None


class Recorder(RunListener):
    """Stores a run in a :class:`Store` as its events come (:meth:`Store.listener`)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.run: int | None = None  # the run's id, once it has started

    def run_started(self, result: model.Result) -> None:
        self.run = self.store.begin(result)

    def case_finished(self, result: model.Result, case: model.Case) -> None:
        assert self.run is not None, "a case finished before the run started"
        self.store.add_case(self.run, result, case)

    def run_finished(self, result: model.Result) -> None:
        if self.run is not None:
            self.store.finish(self.run, result)


class Store:
    """The SQLite history at ``path`` (created with its directory when missing).

    ``read_only``: for the commands that only read (``history``, ``trend``, ``show``, ...): the
    database must exist and is opened read-only, so a store the user may read but not write
    works; one that must be written first (created, or migrated from an older schema) is opened
    as usual."""

    def __init__(
        self, path: str | Path = DEFAULT_PATH, create: bool = True, read_only: bool = False
    ) -> None:
        self.path = Path(path)
        if (read_only or not create) and not self.path.exists():
            raise StoreError(f"{self.path}: no history database (run a suite first)")
        if self.path.is_dir():
            raise StoreError(f"{self.path}: a directory, not a history database")
        if read_only and self._open_read_only():
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except FileExistsError as exc:
            raise StoreError(
                f"{self.path}: cannot create the history database: {exc.filename} is a file"
            ) from None
        except OSError as exc:
            raise StoreError(
                f"{self.path}: cannot create the history database: {exc.strerror or exc}"
            ) from None
        try:
            self.db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            # look before anything is written (the journal mode changes the file's header)
            version, tables = self._schema_state()
            self._check_version(version, tables)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.execute("PRAGMA foreign_keys=ON")
            if version == 0:  # executescript runs in its own transaction
                self.db.executescript(
                    f"BEGIN IMMEDIATE; {_SCHEMA} PRAGMA user_version={SCHEMA_VERSION}; COMMIT;"
                )
            elif version < SCHEMA_VERSION:
                self._migrate(version)
        except StoreError:
            self.close()
            raise
        except sqlite3.Error as exc:
            self.close()
            raise StoreError(
                f"{self.path}: cannot use the history database: {exc} (nothing was written to "
                "it; move it away or name another with --store)"
            ) from None

    def _open_read_only(self) -> bool:
        """Open the database read-only when it holds the current schema (False: it must be
        created or migrated first). SQLite reads a database in WAL mode through its ``-shm``
        file, which it cannot create in a directory the user may not write: then, when no
        ``-wal`` file holds changes not yet in the database, it is read as an immutable file."""
        uri = self.path.resolve().as_uri()
        wal = self.path.with_name(self.path.name + "-wal")
        modes = ["mode=ro"]
        if not (wal.exists() and wal.stat().st_size):
            modes.append("mode=ro&immutable=1")
        failure: sqlite3.Error | None = None
        for mode in modes:
            try:
                self.db = sqlite3.connect(f"{uri}?{mode}", uri=True, timeout=30)
                version, tables = self._schema_state()
            except sqlite3.Error as exc:
                self.close()
                failure = exc
                continue
            if version > SCHEMA_VERSION or (version == 0 and tables):
                self.close()
                self._check_version(version, tables)
            if version == SCHEMA_VERSION:
                return True
            self.close()  # an empty file or an older schema: written first, as usual
            return False
        raise StoreError(
            f"{self.path}: cannot read the history database: {failure} (nothing was written to it)"
        )

    def _schema_state(self) -> tuple[int, int]:
        """The database's schema version and how many tables, indexes and the like it holds,
        read in one statement, so in one read transaction: read apart, a run creating the
        database between the two reads made it look like another program's (version 0 with
        tables)."""
        row = self.db.execute(
            "SELECT (SELECT user_version FROM pragma_user_version), "
            "(SELECT COUNT(*) FROM sqlite_master)"
        ).fetchone()
        return int(row[0]), int(row[1])

    def _check_version(self, version: int, tables: int) -> None:
        """A StoreError for a database this rpcmeter cannot use (a newer schema, or another
        program's)."""
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path}: history schema {version} is newer than this rpcmeter "
                f"understands ({SCHEMA_VERSION})"
            )
        if version == 0 and tables:
            raise StoreError(
                f"{self.path}: not an rpcmeter history database (it holds tables of its "
                "own); name another with --store"
            )

    def _migrate(self, version: int) -> None:
        """Bring a database of schema ``version`` to :data:`SCHEMA_VERSION`, in one transaction
        (another process that migrated it first leaves nothing to do)."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            version = self.db.execute("PRAGMA user_version").fetchone()[0]
            for v in range(version, SCHEMA_VERSION):
                for statement in MIGRATIONS[v].split(";"):
                    if statement.strip():
                        self.db.execute(statement)
            self.db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def close(self) -> None:
        if getattr(self, "db", None) is not None:
            self.db.close()

    @contextmanager
    def _reading(self) -> Iterator[None]:
        """Reading errors of a damaged database are StoreErrors naming it."""
        try:
            yield
        except (sqlite3.Error, ValueError, TypeError) as exc:
            raise StoreError(f"{self.path}: the history database is damaged: {exc}") from None

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; Ctrl-C or SIGTERM waits until it is committed or rolled back
        (:func:`rpcmeter.host.interrupts.deferred`)."""
        with interrupts.deferred(), self._transaction() as db:
            yield db

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        try:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                yield self.db
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
            self.db.execute("COMMIT")
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: history write failed: {exc}") from None

    # ---- writing --------------------------------------------------------------------------------

    def _header(self, result: model.Result, derived: bool = False) -> dict[str, Any]:
        suite = result.suite
        git = suite.git
        return {
            "started_at": result.started_at,
            "finished_at": result.finished_at,
            "status": result.status,
            "suite_name": suite.name,
            "suite_path": suite.path,
            "suite_sha256": suite.sha256,
            "git_commit": git.commit if git else None,
            "git_branch": git.branch if git else None,
            "git_dirty": int(bool(git.dirty)) if git else None,
            "variants": _json(list(suite.variants)),
            "cases": len(result.cases),
            "planned_cases": result.planned_cases,
            "environment": _json(result.environment.dump()),
            "document": _json({**(document(result) if derived else result.to_json()), "cases": []}),
        }

    def begin(self, result: model.Result) -> int:
        """Create the run's row (no cases yet); returns its id."""
        header = self._header(result)
        with self.transaction() as db:
            cur = db.execute(
                f"INSERT INTO runs (run_id, {', '.join(header)}) "
                f"VALUES (?, {', '.join('?' * len(header))})",
                [result.run_id, *header.values()],
            )
        assert cur.lastrowid is not None
        return cur.lastrowid

    def _update(
        self, db: sqlite3.Connection, run: int, result: model.Result, derived: bool = False
    ) -> None:
        header = self._header(result, derived)
        db.execute(
            f"UPDATE runs SET {', '.join(f'{k} = ?' for k in header)} WHERE id = ?",
            [*header.values(), run],
        )

    def add_case(self, run: int, result: model.Result, case: model.Case) -> None:
        """Store one finished case (one of ``result``'s) and the run's updated header, in one
        transaction."""
        seq = next(i for i, c in enumerate(result.cases) if c is case)
        with self.transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO cases (run, seq, document) VALUES (?, ?, ?)",
                (run, seq, _json(case.dump())),
            )
            self._update(db, run, result)

    def finish(self, run: int, result: model.Result) -> None:
        """Store the final result (every case; its comparisons and warnings, for SQL of your
        own: they are derived again when it is loaded)."""
        with self.transaction() as db:
            db.execute("DELETE FROM cases WHERE run = ?", (run,))
            db.executemany(
                "INSERT INTO cases (run, seq, document) VALUES (?, ?, ?)",
                [(run, i, _json(c.dump())) for i, c in enumerate(result.cases)],
            )
            self._update(db, run, result, derived=True)

    def save(self, result: Document | Result) -> int:
        """Store a whole result at once (e.g. one read from a JSON file); returns its id."""
        typed = result if isinstance(result, model.Result) else parse(result, str(self.path))
        run = self.begin(typed)
        self.finish(run, typed)
        return run

    def listener(self) -> Recorder:
        """A listener of a run's events (rpcmeter.run.events) that stores it here: the run's row
        at start, every case as it finishes, the final document at the end (also when
        interrupted); its ``run`` is the run's id once the run has started."""
        return Recorder(self)

    def tag(self, name: str, run: int) -> None:
        if re.fullmatch(r"\d+|last(~\d+)?", name):
            raise StoreError(f"tag {name!r}: a tag cannot look like a run id or 'last'")
        with self.transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO tags (name, run, tagged_at) VALUES (?, ?, ?)",
                (name, run, now_iso()),
            )

    def baseline(self, name: str, run: int) -> RunRef | None:
        """``--baseline NAME`` after run ``run``: the run tagged ``name`` to compare against;
        None when no other run has that tag yet, and ``run`` is then tagged ``name``."""
        tagged = self.tagged(name)
        if tagged is None or tagged == run:
            self.tag(name, run)
            return None
        return RunRef(self.load(tagged), f"run {tagged} ({name})", tagged)

    # ---- reading --------------------------------------------------------------------------------

    def load(self, run: int) -> Result:
        """Run ``run`` as stored, read through the typed model (an older schema version
        migrated; comparisons and warnings derived from its cases when first asked for)."""
        with self._reading():
            row = self.db.execute("SELECT document FROM runs WHERE id = ?", (run,)).fetchone()
            if row is None:
                raise StoreError(f"{self.path}: no run {run}")
            result: Document = json.loads(row[0])
            result["cases"] = [
                json.loads(doc)
                for (doc,) in self.db.execute(
                    "SELECT document FROM cases WHERE run = ? ORDER BY seq", (run,)
                )
            ]
        return parse(result, f"{self.path}: run {run}")

    def tagged(self, name: str) -> int | None:
        with self._reading():
            row = self.db.execute("SELECT run FROM tags WHERE name = ?", (name,)).fetchone()
            return None if row is None else int(row[0])

    def runs(self, limit: int | None = None, suite: str | None = None) -> list[RunInfo]:
        """Stored runs, newest first; only those of the suite named ``suite`` when given."""
        with self._reading():
            tags: dict[int, list[str]] = {}
            for name, run in self.db.execute("SELECT name, run FROM tags ORDER BY name"):
                tags.setdefault(run, []).append(name)
            rows = self.db.execute(
                "SELECT id, run_id, started_at, status, suite_name, git_commit, git_branch, "
                "git_dirty, variants, cases, planned_cases FROM runs "
                "WHERE ? IS NULL OR suite_name = ? ORDER BY id DESC LIMIT ?",
                (suite, suite, -1 if limit is None else limit),
            )
            return [
                RunInfo(
                    id=r[0],
                    run_id=r[1],
                    started_at=r[2] or "",
                    status=r[3] or "?",
                    suite=r[4] or "",
                    commit=r[5],
                    branch=r[6],
                    dirty=bool(r[7]),
                    variants=json.loads(r[8] or "[]"),
                    cases=r[9],
                    planned_cases=r[10],
                    tags=tags.get(r[0], []),
                )
                for r in rows
            ]

    def resolve(self, name: str) -> int:
        """The id of the run called ``name``: an id, ``last``, ``last~N``, a tag or a run_id
        prefix."""
        with self._reading():
            m = re.fullmatch(r"last(?:~(\d+))?", name)
            if m:
                back = int(m.group(1) or 0)
                row = self.db.execute(
                    "SELECT id FROM runs ORDER BY id DESC LIMIT 1 OFFSET ?", (back,)
                ).fetchone()
                if row is None:
                    count = self.db.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
                    raise NoSuchRun(f"{name}: the history at {self.path} holds {count} runs")
                return int(row[0])
            if name.isdigit():
                row = self.db.execute("SELECT id FROM runs WHERE id = ?", (int(name),)).fetchone()
                if row is not None:
                    return int(row[0])
            tagged = self.tagged(name)
            if tagged is not None:
                return tagged
            if len(name) >= 4:
                rows = self.db.execute(
                    "SELECT id FROM runs WHERE run_id LIKE ? || '%'", (name,)
                ).fetchall()
                if len(rows) == 1:
                    return int(rows[0][0])
            raise NoSuchRun(
                f"{name}: no such run in {self.path} (name a run by id, last, last~N, a tag, "
                "or a result JSON file)"
            )


def resolve_run(name: str, store_path: str | Path | None = DEFAULT_PATH) -> RunRef:
    """The run called ``name``: a result JSON file, or a run of the history at ``store_path``."""
    path = Path(name)
    if path.suffix == ".json" or path.is_file():
        return RunRef(read_json(path), str(path))
    if store_path is None:
        raise StoreError(f"{name}: not a result file, and the history store is disabled")
    with Store(store_path, read_only=True) as store:
        run = store.resolve(name)
        return RunRef(store.load(run), f"run {run}", run)
