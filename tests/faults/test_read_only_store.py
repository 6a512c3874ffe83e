"""A history the user may read but not write: the commands that only read it work, and nothing is
written next to it. Run as a user without the right to write (as root: without the capabilities
that override file permissions)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults.test_bad_inputs import GOLDEN, store_with_a_run

SRC = Path(__file__).parents[2] / "src"


def as_reader() -> list[str]:
    """The command prefix that runs a command bound by file permissions."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: no way to be bound by file permissions")
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search"]


@pytest.fixture(params=["directory", "file"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    """A store with one run: the file read-only, and its directory too (``directory``: SQLite
    cannot create the files it reads a WAL database through) or not (``file``)."""
    where = tmp_path / "history"
    where.mkdir()
    db = where / "history.db"
    store_with_a_run(db, GOLDEN)
    db.chmod(0o444)
    if request.param == "directory":
        where.chmod(0o555)
    yield db
    where.chmod(0o755)


@pytest.mark.parametrize(
    ("command", "says"),
    [
        (["history"], "synthetic"),
        (["trend", "--metric", "mean"], "1 runs in"),
        (["show", "last"], "synthetic"),
    ],
)
def test_read_commands_on_a_store_that_cannot_be_written(
    store: Path, command: list[str], says: str
) -> None:
    before = sorted(p.name for p in store.parent.iterdir())
    proc = subprocess.run(
        [*as_reader(), sys.executable, "-m", "rpcmeter.cli", *command, "--store", str(store)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(SRC), "COLUMNS": "120"},
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert says in proc.stdout and proc.stderr == "", proc.stderr
    assert stat.S_IMODE(store.stat().st_mode) == 0o444
    # in a directory it may write, SQLite may leave its -shm and -wal files, and only those
    new = {p.name for p in store.parent.iterdir()} - set(before)
    assert new <= {"history.db-shm", "history.db-wal"}, new
