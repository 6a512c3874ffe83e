"""A run's events: listeners called in order, a failing recorder marks the run failed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rpcmeter.analysis.derived import derive
from rpcmeter.errors import StoreError
from rpcmeter.history.store import Store
from rpcmeter.model import Case, Result
from rpcmeter.run.events import JsonWriter, RunEvents, RunListener
from tests.support.synthetic import CellSpec, synthetic_result


def synthetic(spec: CellSpec, seed: int = 0) -> Result:
    return synthetic_result(spec, seed=seed)


class Log(RunListener):
    def __init__(self, name: str, seen: list[str], fail: bool = False) -> None:
        self.name, self.seen, self.fail = name, seen, fail

    def run_started(self, result: Result) -> None:
        self.seen.append(f"{self.name} started")

    def case_finished(self, result: Result, case: Case) -> None:
        self.seen.append(f"{self.name} case {case.id}")

    def run_finished(self, result: Result) -> None:
        self.seen.append(f"{self.name} finished {result.status}")
        if self.fail:
            raise StoreError(f"{self.name}: cannot write")


def test_listeners_hear_every_event_in_order() -> None:
    seen: list[str] = []
    events = RunEvents(Log("a", seen))
    events.subscribe(Log("b", seen))
    result = synthetic({("w", (), "v"): [100.0]})
    events.run_started(result)
    events.case_finished(result, result.cases[0])
    events.note("ignored by both")
    events.run_finished(result)
    assert seen == [
        "a started", "b started", "a case 0", "b case 0", "a finished complete",
        "b finished complete",
    ]  # fmt: skip


def test_a_listener_that_cannot_record_fails_the_run_and_the_others_still_hear() -> None:
    seen: list[str] = []
    events = RunEvents(Log("file", seen, fail=True), RunEvents(Log("store", seen, fail=True)))
    result = synthetic({("w", (), "v"): [100.0]})
    final, error = events.finish(result)
    assert isinstance(error, StoreError) and str(error) == "file: cannot write"
    assert seen == ["file finished complete", "store finished failed"]
    assert final.status == "failed" and final.reason == "file: cannot write"
    assert result.status == "complete"  # frozen: what the first listener got is unchanged
    with pytest.raises(StoreError, match="file: cannot write"):
        events.run_finished(result)


def test_the_json_file_and_the_store_record_a_run_as_it_goes(tmp_path: Path) -> None:
    full = synthetic({("w", (), "v"): [100.0, 101.0]})
    result = full.model_copy(update={"cases": [], "status": "running"})
    out = tmp_path / "run.json"
    with Store(tmp_path / "h.db") as store:
        recorder = store.listener()
        events = RunEvents(JsonWriter(out), recorder)
        events.run_started(result)
        assert recorder.run is not None
        result = result.model_copy(update={"cases": full.cases[:1]})
        events.case_finished(result, full.cases[0])
        written = json.loads(out.read_text())
        assert len(written["cases"]) == 1 and "comparisons" not in written
        assert len(store.load(recorder.run).cases) == 1
        events.run_finished(full)
        assert store.load(recorder.run).status == "complete"
    written = json.loads(out.read_text())
    assert written["status"] == "complete" and written["warnings"] == list(derive(full).warnings)


def test_baseline_tags_the_first_run_and_compares_later_ones(tmp_path: Path) -> None:
    with Store(tmp_path / "h.db") as store:
        first = store.save(synthetic({("w", (), "v"): [100.0]}))
        assert store.baseline("main", first) is None  # nothing to compare with: tagged
        assert store.tagged("main") == first
        second = store.save(synthetic({("w", (), "v"): [90.0]}, seed=1))
        base = store.baseline("main", second)
        assert base is not None and base.id == first and base.label == f"run {first} (main)"
        assert store.tagged("main") == first  # the tag stays on the baseline
