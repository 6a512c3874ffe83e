"""The one writer of a case's result: an outcome built by hand becomes a typed case (the pure
:func:`case_result`, no server)."""

from __future__ import annotations

import pickle
from dataclasses import replace

import numpy as np
import pytest

from rpcmeter import model
from rpcmeter.analysis.derived import case_warnings
from rpcmeter.host import placement as placement
from rpcmeter.metrics.histogram import Histogram
from rpcmeter.metrics.resources import CpuTimes, TreeReadings
from rpcmeter.model import Result
from rpcmeter.plan.cases import expand
from rpcmeter.plan.load import build_suite
from rpcmeter.result.outcome import CaseOutcome, CommandLine, Ending, new_outcome
from rpcmeter.result.record import CaseFields, RunRecord, _Draft, case_result
from rpcmeter.runners.command import Outcome
from rpcmeter.runners.recording import ClientReport, LoadOutcome, ThreadStats
from rpcmeter.runners.tree import TreeUsage
from tests.support.synthetic import synthetic_document


def start() -> CaseOutcome:
    suite = build_suite({"workloads": {"simple": {}}, "load": {"requests": 10}})
    cpus = placement.Cpus([0], [1])
    return new_outcome(expand(suite)[0], cpus, cpus, placement.CpuQuotas())


def outcome(latencies_ns: list[int], errors: dict[str, int] | None = None) -> LoadOutcome:
    out = LoadOutcome(wall_s=2.0, errors=errors or {})
    out.hist.record_array(np.array(latencies_ns, dtype=np.int64))
    out.ok = len(latencies_ns)
    out.clients = [model.Client(client=0, pid=1, cpu_user_s=0.5, cpu_sys_s=0.1)]
    return out


def test_a_load_becomes_the_case_with_its_histogram_as_an_object() -> None:
    load = outcome([1_000, 2_000, 3_000, 4_000])
    done = replace(start(), endpoint="unix:/tmp/x", measured="load", load=load)
    case = case_result(done)
    assert case.status == "ok" and case.requests == 4 and case.throughput_rps == 2.0
    assert case.started_at == done.started_at and case.variant == done.case.variant
    assert case.histogram is load.hist  # not converted on the way
    assert case.latency is not None and case.latency.max_us == 4.0
    assert case.placement is not None and case.placement.server_cpus == [0]
    doc = case.dump()
    assert doc["histogram"] == load.hist.to_dict() and doc["endpoint"] == "unix:/tmp/x"
    assert "open_loop" not in doc and doc["server_time"] is None  # never set / set to null


def test_a_misspelt_field_is_refused_when_the_case_or_the_run_is_written() -> None:
    r = _Draft(replace(start(), measured="load", load=outcome([1_000])))
    r.fields["throughput_rp"] = 5.0  # type: ignore[typeddict-unknown-key]  # mypy refuses it too
    with pytest.raises(model.ModelError, match="throughput_rp"):
        r.build()
    run = RunRecord(Result.from_json(synthetic_document({("w", (), "a"): [100.0]})))
    run.set(status="complete")
    with pytest.raises(model.ModelError, match=r"Result\.statuss"):
        run.set(statuss="complete")
    assert run.result.status == "complete"


def test_the_fields_a_case_record_fills_are_the_case_model_s() -> None:
    assert set(CaseFields.__annotations__) == set(model.Case.model_fields)


def test_an_open_loop_adds_the_uncorrected_figures_and_the_schedule() -> None:
    load = outcome([1_000, 2_000])
    load.uhist.record_array(np.array([500, 600], dtype=np.int64))
    load.schedule = {"offered_rps": 10.0, "achieved_rps": 8.0, "scheduled": 4, "sent": 2,
                     "late": 1, "dropped": 2}  # fmt: skip
    case = case_result(replace(start(), measured="load", load=load))
    assert case.open_loop is not None and case.open_loop.dropped == 2
    assert case.throughput_rps == 8.0  # achieved_rps x ok / sent
    assert case.histogram_uncorrected is load.uhist
    assert case_warnings(case) and "target rate not reached" in case_warnings(case)[0]


def test_a_failure_and_placement_notes_are_kept() -> None:
    ending = Ending("failed", "server exited with status 1 during the case", "Traceback ...")
    case = case_result(replace(start(), notes=("cgroup: not joined",), ending=ending))
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
    case = case_result(
        replace(
            start(),
            command=CommandLine(("true",), "python3", 0, {"runs": 2}),
            placement=model.Placement(server_cpus=[0]),
            measured="command",
            runs=command_outcome(0, 0),
        )
    )
    assert case.requests == case.ok == 2 and case.endpoint is None
    assert case.latency is not None and case.latency.mean_us == pytest.approx(5e5, rel=0.01)
    assert case.placement is not None and case.placement.client_cpus is None
    assert case.command is not None and case.command.requests_per_run is None
    assert case.cpu.server_us_per_request == pytest.approx(3e5)


def test_a_command_clients_runs_count_their_requests_and_no_latency() -> None:
    line = CommandLine(("client", "--count", "100"), "python3", 0, {"requests_per_run": 100})
    case = case_result(
        replace(
            start(),
            endpoint="tcp://127.0.0.1:5555",
            command=line,
            measured="client",
            runs=command_outcome(0, 0, 3),
            requests_per_run=100,
        )
    )
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
    marks = {f"stage {i}": CpuTimes(0.5 * i * i, 0.0, float(i)) for i in range(3)}
    monitor = TreeReadings(marks, {}, peak_rss_bytes=0)  # as the stage timer would mark them
    r = _Draft(replace(start(), server=monitor))
    r.fields["stages"] = [
        model.Stage(index=i, name="", start_s=i, duration_s=1.0, requests=1000, complete=i < 2)
        for i in range(3)
    ]
    r.stage_cpu()
    first, second, cut = r.fields["stages"]
    assert (first.server_cpu_s, first.server_us_per_request, first.server_util_pct) == (
        0.5,
        500.0,
        50.0,
    )
    assert second.server_cpu_s == 1.5 and second.server_util_pct == 150.0  # to stage 2's mark
    assert cut.server_cpu_s is None  # cut short: its span is not whole
    # a case that ran to its end: the last stage runs to the end mark
    whole = [s.model_copy(update={"complete": True}) for s in r.fields["stages"]]
    monitor = replace(monitor, marks={**marks, "end": CpuTimes(4.0, 0.5, 3.5)})
    r = _Draft(replace(start(), server=monitor))
    r.fields["stages"] = whole
    r.stage_cpu()
    assert r.fields["stages"][2].server_cpu_s == 2.5 and r.fields["stages"][2].server_util_pct == (
        pytest.approx(2.5 / 1.5 * 100)
    )
    unwatched = _Draft(start())  # no server watched: no readings
    unwatched.fields["stages"] = whole
    unwatched.stage_cpu()
    assert unwatched.fields["stages"] is whole


def test_the_monitors_readings_as_values_make_the_cases_cpu_and_memory() -> None:
    load = outcome([1_000, 2_000, 3_000, 4_000])
    server = TreeReadings(
        marks={"go": CpuTimes(1.0, 0.5, 10.0), "end": CpuTimes(2.0, 1.0, 12.0)},
        source_marks={},
        peak_rss_bytes=50 << 20,
        mean_rss_bytes=40 << 20,
        server_cpus_busy_pct=75.0,
        client_cpus_busy_pct=20.0,
    )
    idle = CpuTimes(0.01, 0.0, 1.0)
    done = replace(
        start(), measured="load", load=load, server=server, idle=idle, server_managed=True
    )
    case = case_result(done)
    assert case.cpu.server_user_s == 1.0 and case.cpu.server_sys_s == 0.5
    assert case.cpu.interval_s == 2.0  # the server's span from go to end, not the load's wall
    assert case.cpu.server_us_per_request == pytest.approx(1.5 / 4 * 1e6)
    assert (case.cpu.server_cpus_busy_pct, case.cpu.client_cpus_busy_pct) == (75.0, 20.0)
    assert case.memory.server_peak_rss_bytes == 50 << 20
    assert case.server_managed is True
    assert case_result(done).dump() == case.dump()  # the same outcome, the same result
    # the clients elsewhere: their CPUs' business is not read here
    remote = case_result(replace(done, remote_load=True))
    assert remote.cpu.client_cpus_busy_pct is None and "client_cpus_busy_pct" not in (
        remote.cpu.dump()
    )
    cut = case_result(replace(done, ending=Ending("incomplete", "worker 1 lost")))
    assert (cut.status, cut.reason) == ("incomplete", "worker 1 lost")
