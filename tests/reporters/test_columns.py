"""``--columns grpc-bench``: grpc_bench's table (ranked by requests/s, latency percentiles, server
CPU and memory) and each server under two load tools, drawn from a result (golden Markdown), and
the command line that prints them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rpcmeter import model
from rpcmeter.cli import main
from rpcmeter.reporters import markdown
from rpcmeter.reporters.build import build
from rpcmeter.reporters.columns import grpc_bench, server_cpu_pct
from tests.reporters.test_exports import check_golden
from tests.support.synthetic import synthetic_result, with_case

SERVER_A = {"command": "./a {host}:{port}", "cwd": "a"}
SERVER_B = {"command": "./b {host}:{port}", "cwd": "b"}
GHZ = {"driver": "command", "client_report": "ghz", "command": "ghz {host}:{port}"}


def result() -> model.Result:
    """Two servers, each under rpcmeter's client and ghz; a third server whose case failed."""
    base = synthetic_result(
        {
            ("hello", (), "fast"): [100],
            ("hello", (), "slow"): [400],
            ("hello", (), "fast (ghz)"): [150],
            ("hello", (), "slow (ghz)"): [380],
            ("hello", (), "broken"): [100],
        },
        samples=400,
    )
    suite = base.suite.model_copy(
        update={
            "variants": {
                "fast": {"server": SERVER_A},
                "slow": {"server": SERVER_B},
                "fast (ghz)": {**GHZ, "server": SERVER_A},
                "slow (ghz)": {**GHZ, "server": SERVER_B},
                "broken": {"server": {"command": "./c {port}"}},
            }
        }
    )
    out = base.replace(suite=suite)
    for i, (cpu_s, mean_mib, peak_mib) in enumerate([(0.5, 10, 12), (0.9, 100, 130)] * 2):
        case = out.cases[i]
        out = with_case(
            out,
            i,
            cpu=case.cpu.model_copy(
                update={
                    "interval_s": 1.0,
                    "server_user_s": cpu_s * 0.75,
                    "server_sys_s": cpu_s * 0.25,
                    "client_us_per_request": 10.0 * (i + 1),
                    "server_us_per_request": 20.0 * (i + 1),
                }
            ).dump(),
            memory={
                "server_mean_rss_bytes": mean_mib << 20,
                "server_peak_rss_bytes": peak_mib << 20,
            },
        )
    return with_case(out, 4, status="failed", reason="build failed: cargo: not found")


def test_grpc_bench_columns_golden() -> None:
    check_golden("grpc_bench.md", markdown.grids_markdown(grpc_bench(build(result()))))


def test_ranked_by_requests_per_second_with_server_figures() -> None:
    table, check = grpc_bench(build(result()))
    names = [row[0] for row in table.rows]
    assert names == ["fast", "fast (ghz)", "slow (ghz)", "slow", "broken"]
    fast = table.rows[0]
    assert fast[6:] == ["50.00%", "10.00 MiB", "12.00 MiB"]
    assert table.rows[-1][1] == model_mark("failed")
    assert [row[:2] for row in check.rows] == [
        ["fast", "rpcmeter"],
        ["", "ghz"],
        ["slow", "rpcmeter"],
        ["", "ghz"],
    ]
    assert check.rows[0][5] == "1.00" and check.rows[1][5] == "0.67"  # 100 us against 150 us


def model_mark(text: str) -> object:
    from rpcmeter.reporters.tables import Mark

    return Mark(text, "bad")


def test_server_cpu_is_a_share_of_one_core() -> None:
    case = result().cases[1]
    assert server_cpu_pct(case) == pytest.approx(90.0)
    assert server_cpu_pct(case.model_copy(update={"cpu": model.Cpu()})) is None


def test_the_command_line_prints_the_columns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "run.json"
    path.write_text(json.dumps(result().to_json()))
    assert main(["report", str(path), "--columns", "grpc-bench", "--width", "140"]) == 0
    text = capsys.readouterr().out
    assert "grpc_bench's table, ranked by requests/s" in text
    assert "each server under two load tools" in text
    assert main(["show", str(path), "--columns", "grpc-bench", "-f", "markdown"]) == 0
    assert "| fast | " in capsys.readouterr().out
    assert main(["show", str(path), "--columns", "grpc-bench", "-f", "json"]) == 2
    assert "--columns grpc-bench: only with --format text or markdown" in capsys.readouterr().err
