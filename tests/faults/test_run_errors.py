"""A run that an error ends says so (document and history: ``failed`` with the reason, exit 1),
and ``-o -`` writes the document to stdout."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from rpcmeter.cli import main
from rpcmeter.history.store import Store
from tests.support.synthetic import written

pytestmark = pytest.mark.timeout(120)


def suite(tmp_path: Path, first_server: str = "") -> Path:
    path = tmp_path / "suite.toml"
    path.write_text(
        f"""\
name = "x"
repeat = 1
[target]
driver = "http"
transport = "tcp"
[variants.a]
{first_server}
[variants.b]
[workloads.noop]
kind = "noop"
[load]
requests = 20
warmup = 2
[resources]
idle_s = 0
"""
    )
    return path


def test_output_lost_mid_run_fails_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.json"
    db = tmp_path / "history.db"
    # the first case's server turns the output file into a directory as it starts
    server = shlex.join(
        [
            "sh",
            "-c",
            f'rm -f "{out}" && mkdir "{out}" && exec "$0" "$@"',
            sys.executable,
            "-m",
            "rpcmeter.servers.http_server",
            "--transport",
            "tcp",
            "--host",
            "{host}",
            "--port",
            "{port}",
            "--options",
            "{}",
        ]
    )
    path = suite(tmp_path, f"server.command = {json.dumps(server)}")
    code = main(["run", str(path), "-o", str(out), "--store", str(db)])
    err = capsys.readouterr().err
    assert code == 1
    assert (
        err.splitlines()[-1]
        == f"rpcmeter: error: {out}: a directory: the result is written to a regular file"
    )
    assert "Traceback" not in err
    with Store(db) as store:
        stored = written(store.load(1))
        assert stored["status"] == "failed" and str(out) in stored["reason"]
        assert [r.status for r in store.runs()] == ["failed"]


def test_output_to_stdout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", str(suite(tmp_path)), "-o", "-", "--no-store"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    doc = json.loads(captured.out)  # the document alone on stdout
    assert doc["status"] == "complete" and len(doc["cases"]) == 2
    assert "p99" in captured.err  # the tables went to stderr
    assert not (tmp_path / "-").exists()
