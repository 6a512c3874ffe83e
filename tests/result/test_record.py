"""The one writer of a case's result: what a runner tells a CaseRecord becomes a typed case."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from rpcmeter import model
from rpcmeter.analysis.derived import case_warnings
from rpcmeter.host import placement as placement
from rpcmeter.metrics.histogram import Histogram
from rpcmeter.metrics.resources import CpuTimes, TreeMonitor
from rpcmeter.plan.cases import expand
from rpcmeter.plan.load import build_suite
from rpcmeter.result.record import CaseRecord
from rpcmeter.runners.command import Outcome
from rpcmeter.runners.recording import ClientReport, LoadOutcome, ThreadStats
from rpcmeter.runners.tree import TreeUsage


def record() -> CaseRecord:
    suite = build_suite({"workloads": {"simple": {}}, "load": {"requests": 10}})
    return CaseRecord(expand(suite)[0], placement.Cpus([0], [1]))


def outcome(latencies_ns: list[int], errors: dict[str, int] | None = None) -> LoadOutcome:
    out = LoadOutcome(wall_s=2.0, errors=errors or {})
    out.hist.record_array(np.array(latencies_ns, dtype=np.int64))
    out.ok = len(latencies_ns)
    out.clients = [model.Client(client=0, pid=1, cpu_user_s=0.5, cpu_sys_s=0.1)]
    return out


def test_a_load_becomes_the_case_with_its_histogram_as_an_object() -> None:
    r = record()
    load = outcome([1_000, 2_000, 3_000, 4_000])
    r.endpoint("unix:/tmp/x")
    r.load(load)
    case = r.build()
    assert case.status == "ok" and case.requests == 4 and case.throughput_rps == 2.0
    assert case.histogram is load.hist  # not converted on the way
    assert case.latency is not None and case.latency.max_us == 4.0
    assert case.placement is not None and case.placement.server_cpus == [0]
    doc = case.dump()
    assert doc["histogram"] == load.hist.to_dict() and doc["endpoint"] == "unix:/tmp/x"
    assert "open_loop" not in doc and doc["server_time"] is None  # never set / set to null


def test_an_open_loop_adds_the_uncorrected_figures_and_the_schedule() -> None:
    r = record()
    load = outcome([1_000, 2_000])
    load.uhist.record_array(np.array([500, 600], dtype=np.int64))
    load.schedule = {"offered_rps": 10.0, "achieved_rps": 8.0, "scheduled": 4, "sent": 2,
                     "late": 1, "dropped": 2}  # fmt: skip
    r.load(load)
    case = r.build()
    assert case.open_loop is not None and case.open_loop.dropped == 2
    assert case.throughput_rps == 8.0  # achieved_rps x ok / sent
    assert case.histogram_uncorrected is load.uhist
    assert case_warnings(case) and "target rate not reached" in case_warnings(case)[0]


def test_a_failure_and_placement_notes_are_kept() -> None:
    r = record()
    r.note_placement("cgroup: not joined")
    r.note_placement(None)
    r.fail("server exited with status 1 during the case", "Traceback ...")
    case = r.build()
    assert case.status == "failed" and case.server_output_tail == "Traceback ..."
    assert case.placement is not None and case.placement.notes == ["cgroup: not joined"]
    assert case.dump()["placement"]["notes"] == ["cgroup: not joined"]  # type: ignore[index, call-overload]


def test_a_client_report_crosses_a_pipe_as_typed_objects() -> None:
    stats = ThreadStats(ok=3, errors={"timeout": 1}, start_ns=1, end_ns=5)
    stats.hist.record_array(np.array([10, 20, 30], dtype=np.int64))
    report = ClientReport(client=0, pid=42, threads=[stats], counters={"bytes_out": 9})
    back = pickle.loads(pickle.dumps(report))
    assert isinstance(back, ClientReport) and isinstance(back.threads[0].hist, Histogram)
    assert back.threads[0].hist.to_dict() == stats.hist.to_dict()
    assert back.threads[0].errors == {"timeout": 1} and back.counters == {"bytes_out": 9}


def command_outcome(*exit_codes: int) -> Outcome:
    runs = [
        TreeUsage(wall_s=0.5, user_s=0.2, sys_s=0.1, max_rss_bytes=10 << 20, exit_code=code,
                  processes=1)
        for code in exit_codes
    ]  # fmt: skip
    return Outcome(runs=runs, elapsed_s=0.5 * len(runs) + 0.1)


def test_a_whole_commands_runs_count_as_requests_with_their_wall_times_as_latency() -> None:
    r = record()
    r.command(["true"], "python3", 0, {"runs": 2})
    r.command_cpus([0])
    r.runs(command_outcome(0, 0))
    case = r.build()
    assert case.requests == case.ok == 2 and case.endpoint is None
    assert case.latency is not None and case.latency.mean_us == pytest.approx(5e5, rel=0.01)
    assert case.placement is not None and case.placement.client_cpus is None
    assert case.command is not None and case.command.requests_per_run is None
    assert case.cpu.server_us_per_request == pytest.approx(3e5)


def test_a_command_clients_runs_count_their_requests_and_no_latency() -> None:
    r = record()
    r.endpoint("tcp://127.0.0.1:5555")
    r.command(["client", "--count", "100"], "python3", 0, {"requests_per_run": 100})
    r.client_runs(command_outcome(0, 0, 3), 100, None, None, placement.Cpus([0], [1]),
                  placement.CpuQuotas())  # fmt: skip
    case = r.build()
    # runs x requests_per_run; the failed run's requests count as failed
    assert (case.requests, case.ok, case.errors) == (300, 200, {"exit_status": 100})
    assert case.status == "ok"  # the runner says why a run failed (Outcome.failure)
    assert case.throughput_rps == pytest.approx(200 / 1.0)  # over the successful runs' wall time
    assert case.command is not None and case.command.requests_per_run == 100
    assert case.command.per_request_us == pytest.approx(1.0 / 200 * 1e6)
    assert case.latency is None and case.histogram is None
    assert case.cpu.client_us_per_request == pytest.approx(0.6 / 200 * 1e6)
    assert case.cpu.server_us_per_request is None  # no server watched here
    assert case.memory.client_peak_rss_bytes == 10 << 20
    assert case.endpoint == "tcp://127.0.0.1:5555"
    assert case.placement is not None and case.placement.client_cpus == [1]
    doc = case.dump()
    assert doc["command"]["per_request_us"] == pytest.approx(5000.0)  # type: ignore[index, call-overload]


def test_each_stage_takes_the_servers_cpu_between_its_marks() -> None:
    r = record()
    r.fields["stages"] = [
        model.Stage(index=i, name="", start_s=i, duration_s=1.0, requests=1000, complete=i < 2)
        for i in range(3)
    ]
    monitor = TreeMonitor(list)  # no tree: the marks are set as the stage timer would
    monitor.marks = {f"stage {i}": CpuTimes(0.5 * i * i, 0.0, float(i)) for i in range(3)}
    r.stage_cpu(monitor, placement.Cpus([0], [1]), placement.CpuQuotas())
    first, second, cut = r.fields["stages"]
    assert (first.server_cpu_s, first.server_us_per_request, first.server_util_pct) == (
        0.5,
        500.0,
        50.0,
    )
    assert second.server_cpu_s == 1.5 and second.server_util_pct == 150.0  # to stage 2's mark
    assert cut.server_cpu_s is None  # cut short: its span is not whole
    # a case that ran to its end: the last stage runs to the end mark
    monitor.marks["end"] = CpuTimes(4.0, 0.5, 3.5)
    r.fields["stages"] = [s.model_copy(update={"complete": True}) for s in r.fields["stages"]]
    r.stage_cpu(monitor, placement.Cpus([0], [1]), placement.CpuQuotas())
    assert r.fields["stages"][2].server_cpu_s == 2.5 and r.fields["stages"][2].server_util_pct == (
        pytest.approx(2.5 / 1.5 * 100)
    )
    before = r.fields["stages"]
    r.stage_cpu(None, placement.Cpus([0], [1]), placement.CpuQuotas())  # no server watched
    assert r.fields["stages"] is before
