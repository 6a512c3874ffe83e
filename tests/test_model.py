"""The typed result model: documents of every schema version read, written back unchanged."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from rpcmeter.analysis import compare as analysis
from rpcmeter.analysis.derived import case_warnings, derive, document
from rpcmeter.metrics.histogram import Histogram
from rpcmeter.model import SCHEMA_VERSION, Case, ModelError, Result
from tests.support.synthetic import CellSpec, synthetic_document, synthetic_result

GOLDEN = Path(__file__).parent / "reporters" / "golden"


def measured(doc: dict[str, Any]) -> dict[str, Any]:
    """A document less its derived parts, at the current schema version."""
    out = {k: v for k, v in doc.items() if k not in ("comparisons", "warnings")}
    return {**out, "schema_version": SCHEMA_VERSION}


@pytest.mark.parametrize("name", ["result.json", "busy_polling_quick.json"])
def test_golden_documents_read_and_write_back_unchanged(name: str) -> None:
    doc = json.loads((GOLDEN / name).read_text())
    assert doc["schema_version"] == 1  # stored by an older rpcmeter
    result = Result.from_json(doc, name)
    assert json.loads(json.dumps(result.to_json())) == measured(doc)
    # what it stored is what the model derives again
    assert list(derive(result).warnings) == doc["warnings"]
    if "comparisons" in doc:
        assert json.loads(json.dumps(derive(result).comparisons.to_json())) == doc["comparisons"]


def test_histograms_are_objects_in_memory_and_tables_in_json() -> None:
    doc = synthetic_document({("w", (), "a"): [100.0]})
    result = Result.from_json(doc)
    h = result.cases[0].histogram
    assert isinstance(h, Histogram) and h.count == 200
    assert result.to_json()["cases"][0]["histogram"] == h.to_dict()  # type: ignore[index, call-overload]
    assert result.cases[0].latency is not None
    assert result.cases[0].latency.p99_us == pytest.approx(h.percentile(99) / 1e3)


def test_absent_and_null_stay_as_they_were_and_unknown_keys_are_kept() -> None:
    doc = synthetic_document({("w", (), "a"): [100.0]})
    case = doc["cases"][0]
    del case["error_samples"]
    case["server_time"] = None
    case["a_future_figure"] = {"x": [1, 2.5, None]}
    doc["environment"]["cpu_governor"] = {"performance": [0, 1]}
    back = Result.from_json(doc).to_json()
    assert "error_samples" not in back["cases"][0]  # type: ignore[index, operator]
    assert back["cases"][0]["server_time"] is None  # type: ignore[index, call-overload]
    assert back["cases"][0]["a_future_figure"] == {"x": [1, 2.5, None]}  # type: ignore[index, call-overload]
    assert back["environment"]["cpu_governor"] == {"performance": [0, 1]}  # type: ignore[index, call-overload]


def test_nan_is_written_as_null() -> None:
    doc = synthetic_document({("w", (), "a"): [100.0]})
    doc["cases"][0]["bytes"] = {"out_per_request": math.nan, "in_per_request": 3.0}
    back = Result.from_json(doc).to_json()
    assert back["cases"][0]["bytes"] == {"out_per_request": None, "in_per_request": 3.0}  # type: ignore[index, call-overload]
    json.dumps(back, allow_nan=False)


def test_derived_parts_are_computed_not_read_back() -> None:
    spec: CellSpec = {("w", (), "a"): [100.0, 101, 99], ("w", (), "b"): [90.0, 91, 89]}
    doc = synthetic_document(spec)
    doc["comparisons"] = {"kind": "stale"}
    doc["warnings"] = ["stale"]
    result = Result.from_json(doc)
    assert derive(result).comparisons == analysis.compare_variants(synthetic_result(spec))
    assert "stale" not in derive(result).warnings
    assert document(result)["comparisons"] == derive(result).comparisons.to_json()
    assert "comparisons" not in result.to_json()  # the model writes what was measured


def test_a_command_clients_case_reads_and_writes_back_with_its_per_request_figures() -> None:
    doc = synthetic_document({("w", (), "a"): [100.0]})
    case = doc["cases"][0]
    case.update(latency=None, histogram=None, requests=4000, ok=4000)
    case["command"] = {"argv": ["client"], "runs": 2, "wall_s": 0.5, "requests_per_run": 2000,
                       "per_request_us": 250.0}  # fmt: skip
    case["runs"] = [{"wall_s": 0.5, "user_s": 0.2, "sys_s": 0.1, "cpu_s": 0.3,
                     "max_rss_bytes": 1, "exit_code": 0, "processes": 1}] * 2  # fmt: skip
    result = Result.from_json(doc)
    command = result.cases[0].command
    assert command is not None and command.requests_per_run == 2000
    assert command.per_request_us == 250.0 and not command.__pydantic_extra__  # named fields
    assert json.loads(json.dumps(result.to_json())) == measured(doc)


def test_a_case_that_mostly_failed_warns() -> None:
    case = Case(id=0, variant="v", workload="w", point={"n": 2}, status="failed",
                requests=40, ok=2, errors={"http_500": 38})  # fmt: skip
    assert case_warnings(case) == ["v · w · n=2: 38 of 40 requests failed (http_500: 38)"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"schema_version": SCHEMA_VERSION + 1}, "newer than this rpcmeter understands"),
        ({"schema_version": "2"}, "schema_version not a number"),
        ({"schema_version": 0}, "no such version"),
        ({"cases": [{"id": 0, "variant": "a", "workload": "w", "status": "lost"}]}, "cases[0].status"),
        ({"cases": [{"id": 0, "variant": "a", "workload": "w", "status": "ok",
                     "histogram": {"count": 1}}]},
         "cases[0].histogram: unsupported histogram encoding"),
        ({"suite": {"name": "s", "matrix": {"n": 3}}}, "suite.matrix.n"),
    ],
)  # fmt: skip
def test_a_document_that_does_not_fit_names_where(change: dict[str, Any], message: str) -> None:
    doc = {**synthetic_document({("w", (), "a"): [100.0]}), **change}
    with pytest.raises(ModelError) as err:
        Result.from_json(doc, "run.json")
    assert str(err.value).startswith("run.json")
    assert message in str(err.value)


def test_the_current_version_needs_no_migration() -> None:
    doc = {**synthetic_document({("w", (), "a"): [100.0]}), "schema_version": SCHEMA_VERSION}
    assert Result.from_json(doc).schema_version == SCHEMA_VERSION
