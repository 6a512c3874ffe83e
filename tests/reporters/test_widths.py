"""Tables at 120 columns (what the CLI uses when stdout is not a terminal): nothing wider, no
figure or matrix key cut; headers wrap instead."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from rpcmeter import model
from rpcmeter.cli import main
from rpcmeter.history.store import Store
from rpcmeter.reporters import tables, terminal
from rpcmeter.reporters.build import build
from tests.support.synthetic import document, synthetic_result

GOLDEN = Path(__file__).parent / "golden"
WIDTH = 120


def check_fits(text: str) -> None:
    long = [line for line in text.splitlines() if len(line.rstrip()) > WIDTH]
    assert not long, long
    assert "…" not in text, text


def test_three_variants_with_a_long_matrix_key_fit() -> None:
    # grpc-vs-rest's shape: three variants, the matrix key request_bytes, bytes and server time
    point = (("request_bytes", 10000),)
    result = document(
        synthetic_result(
            {
                ("echo", point, "grpc"): [20_350, 20_100],
                ("echo", point, "grpc threaded"): [16_070, 16_500],
                ("echo", point, "rest"): [1_990, 2_010],
            }
        )
    )
    for case in result["cases"]:
        case["server_time"] = {"mean_us": 1.0}
        case["bytes"] = {"out_per_request": 10_069.0, "in_per_request": 10_115.0}
    text = terminal.render(build(model.Result.from_json(result)), width=WIDTH)
    check_fits(text)
    assert "request_bytes" in text and "ranked by requests/s" in text
    # the wall times are in the ranking table (three of them no longer fit beside the ratios)
    assert "grpc threaded / rest" not in text
    ranking = text[text.index("ranked by requests/s") :]
    assert "wall" in ranking.splitlines()[3] + ranking.splitlines()[4]


def test_a_command_table_with_verdicts_fits() -> None:
    # busy-polling's table: a 2 x 2 matrix of one-word keys, both ratio columns with verdicts
    result: dict[str, Any] = json.loads((GOLDEN / "busy_polling_quick.json").read_text())
    for case in result["cases"]:  # 12 runs a case, park's CPU cut: verdicts in both columns
        runs = case["runs"]
        case["runs"] = [
            {
                **copy.deepcopy(r),
                "wall_s": r["wall_s"] * (1 + 0.01 * i),
                "user_s": r["user_s"] * (0.4 if case["variant"] == "park" else 1) * (1 + 0.01 * i),
            }
            for i, r in enumerate(runs * 4)
        ]
    text = terminal.render(build(model.Result.from_json(result)), width=WIDTH)
    check_fits(text)
    assert "heavy_map" in text and "long_input" in text
    assert " less" in text  # a verdict word beside a ratio


def test_history_with_long_suite_names_fits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "h.db"
    with Store(path) as store:
        for i, name in enumerate(
            [
                "busy polling: spinning vs parking workers",
                "gRPC vs REST",
                "latency-vs-rate-of-the-reference-http-server",  # one long word
            ]
        ):
            result = synthetic_result(
                {
                    ("w", (), "grpc"): [100],
                    ("w", (), "grpc threaded"): [100],
                    ("w", (), "rest"): [100],
                },
                seed=i,
            )
            suite = result.suite.model_copy(
                update={"name": name, "git": model.Git(commit="f2eeb99cfe" * 4, dirty=True)}
            )
            store.tag("main", store.save(result.replace(suite=suite, run_id=f"{i:012d}")))
    assert main(["history", "--store", str(path)]) == 0
    out = capsys.readouterr().out
    check_fits(out)
    rows = [line.split() for line in out.splitlines() if line[:4].strip().isdigit()]
    assert [row[0] for row in rows] == ["3", "2", "1"]  # the ids, whole
    assert "complete" in out and "busy polling: spinning" in out
    assert "latency-vs-rate-of-the" in out.replace(" ", "")


def test_a_table_of_figures_with_words_too_wide_wraps_them_and_cuts_nothing() -> None:
    """The breakdown table of a case with bytes: every column a figure, some with words beside
    them; at 120 columns the widest of those go onto two lines rather than lose characters."""
    grid = tables.Grid(
        "round trip · where the time goes",
        ["variant", "req/s", "latency", "round trip", "queue", "server compute", "overhead",
         "bytes out", "bytes in"],
        left=1,
    )  # fmt: skip
    for name in ("libzmq", "zmtp"):
        grid.rows.append(
            [name, "10,506", "0.097 ± 0.297", "0.040 (p99 0.130)", "0.046 ± 0.235",
             "0.001 ± 0.001", "~0 (within noise)", "201,000,000", "916,000,000"]
        )  # fmt: skip
    for width in (120, 100):
        text = terminal.render_grid(grid, width=width)
        assert max(len(line.rstrip()) for line in text.splitlines()) <= width
        words = text.split()
        for whole in ("(within", "noise)", "(p99", "0.130)", "201,000,000", "916,000,000"):
            assert whole in words, (whole, text)
