"""Load from a real Dask LocalCluster (2 worker processes) against the real rpyc reference server:
exact merge of the workers' figures, dispatch from execute, client processes of their own that
never outlive a case, and a worker killed mid-case."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import psutil
import pytest

from rpcmeter.drivers import driver_class
from rpcmeter.drivers.base import DriverContext
from rpcmeter.errors import ClusterError
from rpcmeter.host import placement as placement
from rpcmeter.metrics import streams
from rpcmeter.metrics.histogram import SUB_BITS, Histogram
from rpcmeter.net.endpoints import Endpoint
from rpcmeter.plan.cases import expand, plan_variants
from rpcmeter.plan.load import build_suite
from rpcmeter.reporters.build import spread_lines
from rpcmeter.result.parts import stream_section
from rpcmeter.run.execute import Bench, RunOptions
from rpcmeter.runners import distributed as distributed_mod
from rpcmeter.runners.distributed import (
    ClientProcess,
    LoadCluster,
    open_cluster,
    parse_cluster,
    run_distributed,
)
from rpcmeter.runners.recording import LoadOutcome, Window
from rpcmeter.runners.spec import LoadSpec, Pacing
from rpcmeter.runners.windows import Timeline
from rpcmeter.servers.process import ServerProcess, new_endpoint
from rpcmeter.suite.workloads import parse_params
from tests.support import kv
from tests.support.load import spec_and_hooks
from tests.support.marks import timing_sensitive
from tests.support.synthetic import completed

pytest.importorskip("distributed")
pytestmark = pytest.mark.timeout(120)
WORKERS = 2


@pytest.fixture(scope="module")
def cluster() -> Iterator[LoadCluster]:
    with contextlib.closing(open_cluster(f"local:{WORKERS}")) as cl:
        yield cl


@pytest.fixture(scope="module")
def server() -> Iterator[Endpoint]:
    ep = new_endpoint("tcp")
    with ServerProcess(driver_class("rpyc").server_command(ep, {}), ep):
        yield ep


def ctx(ep: Endpoint, threads: int = 1) -> DriverContext:
    return DriverContext(endpoint=ep, workload=parse_params("simple", {}), threads=threads)


def run(cl: LoadCluster, ep: Endpoint, *, threads: int = 1, **load: Any) -> LoadOutcome:
    """Closed-loop rpyc ``simple`` load on ``cl`` (2 clients, 2 warmup calls unless given)."""
    kwargs: dict[str, Any] = {"clients": 2, "requests": None, "warmup": 2, "timeout_s": 60, **load}
    return run_distributed(cl, *spec_and_hooks("rpyc", ctx(ep, threads), **kwargs))


def worker_pids(cl: LoadCluster) -> dict[str, int]:
    pids: dict[str, int] = cl.client.run(os.getpid)
    return pids


def gone(procs: list[psutil.Process], within_s: float = 5.0) -> bool:
    """True once none of ``procs`` runs any more (a zombie awaiting its reaper counts as gone)."""
    deadline = time.monotonic() + within_s
    while True:
        alive = []
        for p in procs:
            with contextlib.suppress(psutil.NoSuchProcess):
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                    alive.append(p)
        if not alive or time.monotonic() > deadline:
            return not alive
        time.sleep(0.05)


def samples(h: Histogram) -> np.ndarray[Any, Any]:
    """The histogram's samples at bucket precision (each bucket's midpoint, repeated)."""
    mids, counts = h.bucket_values()
    return np.repeat(np.array(mids), counts)


def test_parse_cluster() -> None:
    assert parse_cluster("local:3") == 3
    assert parse_cluster("tcp://10.0.0.5:8786") == "tcp://10.0.0.5:8786"
    for bad in ("local:0", "local:x", "10.0.0.5:8786", "tcp://nohost"):
        with pytest.raises(ClusterError, match="--cluster"):
            parse_cluster(bad)


def _profiler_enabled() -> bool:
    import dask

    return bool(dask.config.get("distributed.worker.profile.enabled"))


def test_local_workers_run_without_the_sampling_profiler(cluster: LoadCluster) -> None:
    assert cluster.client.run(_profiler_enabled) == dict.fromkeys(cluster.workers(), False)


def test_workers_merge_exactly(cluster: LoadCluster, server: Endpoint) -> None:
    requests, clients, threads = 150, 4, 2
    out = run(cluster, server, threads=threads, clients=clients, requests=requests)
    assert out.failure is None and out.incomplete is None
    assert out.requests == out.ok == clients * threads * requests
    assert len(out.workers) == WORKERS
    assert {w.worker for w in out.workers} == set(cluster.workers())
    assert sum(w.requests or 0 for w in out.workers) == out.requests
    for w in out.workers:
        assert w.status == "ok" and w.requests == len(w.clients or []) * threads * requests
        assert (w.throughput_rps or 0) > 0 and w.cpu_user_s is not None
        assert w.histogram is not None and w.histogram.count == w.requests
    # merged percentiles = percentiles of the workers' concatenated samples (bucket precision)
    concat = np.concatenate([samples(w.histogram) for w in out.workers if w.histogram is not None])
    assert concat.size == out.hist.count
    for pct in (50, 90, 99, 99.9):
        expected = float(np.percentile(concat, pct, method="inverted_cdf"))
        got = out.hist.percentile(pct)
        assert math.isclose(got, expected, rel_tol=2.0 / 2 ** (SUB_BITS - 1)), (pct, got, expected)


def test_execute_dispatches_to_the_cluster(cluster: LoadCluster, server: Endpoint) -> None:
    suite = build_suite(
        {
            "target": {"driver": "rpyc", "address": f"127.0.0.1:{server.port}"},
            "workloads": {"simple": {}},
            "load": {"clients": 3, "requests": 100, "warmup": 2},
        }
    )
    case = expand(suite)[0]
    plans = plan_variants(suite, placement.Cpus(None, None))
    recorded = Bench(suite, RunOptions(), plans, cluster=cluster).run_case(case)
    assert recorded.status == "ok", recorded.reason
    assert recorded.requests == 300 and recorded.server_managed is False
    workers = recorded.workers or []
    assert sum(w.requests or 0 for w in workers) == 300
    assert sorted(c for w in workers for c in w.clients or []) == [0, 1, 2]
    spread = recorded.spread
    assert spread is not None and spread.workers == WORKERS and spread.lost == 0
    assert spread.min_max_ratio is not None and 0 < spread.min_max_ratio <= 1
    assert (recorded.cpu.client_user_s or 0) > 0
    doc: dict[str, Any] = recorded.dump()
    lines = spread_lines(
        completed(
            {
                "environment": {"cluster": cluster.describe()},
                "cases": [doc, {**doc, "spread": None}],
            }
        )
    )
    assert f"load spread over {WORKERS} Dask workers" in lines[0]
    assert f"worst {spread.min_max_ratio:.2f}" in lines[0] and "clients" not in lines[0]


@timing_sensitive
def test_workers_follow_one_schedule_of_stages(
    cluster: LoadCluster, server: Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An open loop of two stages (200/s, then 600/s, 0.6 s each) from 2 clients, one per
    worker: each worker sends its half of each stage's requests in that stage, interval by
    interval on either side of the boundary (what each client ships is tallied as the parent
    takes it in), so both follow the stages from one start time."""
    sent: dict[tuple[int, int], int] = {}  # (client, stage) -> requests sent
    windows: dict[tuple[int, int], int] = {}  # (client, window) -> requests sent

    class Spy(Timeline):
        def _tally(self, client: int, pieces: dict[int, Window]) -> None:
            for index, piece in pieces.items():
                stage = self.clock.stage_of(index)
                assert stage is not None
                sent[client, stage] = sent.get((client, stage), 0) + piece.sent
                windows[client, index] = windows.get((client, index), 0) + piece.sent

        def add(self, client: int, pieces: dict[int, Window], *rest: Any) -> None:
            self._tally(client, pieces)
            super().add(client, pieces, *rest)

        def finish(self, client: int, pieces: dict[int, Window], *rest: Any) -> None:
            self._tally(client, pieces)
            super().finish(client, pieces, *rest)

    monkeypatch.setattr(distributed_mod, "Timeline", Spy)
    rates, seconds = (200, 600), 0.6
    suite = build_suite(
        {
            "target": {"driver": "rpyc", "address": f"127.0.0.1:{server.port}"},
            "workloads": {"simple": {}},
            "load": {
                "clients": 2,
                "concurrency": 4,
                "warmup": 2,
                "stages": [{"duration_s": seconds, "rate": r} for r in rates],
            },
            "timeseries": {"interval_s": 0.2},
        }
    )
    plans = plan_variants(suite, placement.Cpus(None, None))
    recorded = Bench(suite, RunOptions(), plans, cluster=cluster).run_case(expand(suite)[0])
    assert recorded.status == "ok", recorded.reason
    by_worker = {w.worker: w.clients or [] for w in recorded.workers or []}
    assert len(by_worker) == WORKERS
    assert sorted(c for clients in by_worker.values() for c in clients) == [0, 1]
    assert recorded.stages is not None
    for stage, rate in enumerate(rates):
        share = rate * seconds / 2  # each client's half of the stage: 60, then 180
        for clients in by_worker.values():
            (client,) = clients
            assert sent.get((client, stage), 0) == pytest.approx(share, rel=0.2, abs=3)
        # and the stage as recorded is what the two shipped
        assert recorded.stages[stage].sent == sent[0, stage] + sent[1, stage]
    # the boundary lines up: each client's sends per 0.2 s interval keep to the stage's rate on
    # either side of it (a client that switched 0.1 s early or late would send 40 in both)
    for client in (0, 1):
        for index in range(6):
            share = rates[index // 3] * 0.2 / 2  # 20 a client, then 60
            assert windows.get((client, index), 0) == pytest.approx(share, rel=0.35, abs=3)


def test_request_numbers_exactly_once_across_workers(cluster: LoadCluster) -> None:
    """4 clients of 8 loops spread over the Dask workers: every request (warmup included)
    stores the key of its ``{{request_number}}``; the store holds one key per request sent."""
    with kv.kv_server() as ep:
        suite = build_suite(
            {
                "target": {
                    "driver": "http",
                    "address": f"127.0.0.1:{ep.port}",
                    "options": {"method": "PUT", "path": "/kv/{{request_number}}", "body": "x"},
                },
                "workloads": {"put": {"kind": "noop"}},
                "load": {"clients": 4, "concurrency": 8, "requests": 20, "warmup": 2},
            }
        )
        plans = plan_variants(suite, placement.Cpus(None, None))
        recorded = Bench(suite, RunOptions(), plans, cluster=cluster).run_case(expand(suite)[0])
        assert recorded.status == "ok", recorded.reason
        assert recorded.requests == 4 * 8 * 20
        assert len({w.worker for w in recorded.workers or []}) == WORKERS
        assert kv.tally(ep)["keys"] == kv.tally(ep)["puts"] == 4 * 8 * 22


def test_open_loop_paces_each_client_share(cluster: LoadCluster, server: Endpoint) -> None:
    out = run(cluster, server, duration_s=1.0, pacing=Pacing(200.0))
    assert out.failure is None and out.schedule is not None
    assert out.schedule["offered_rps"] == pytest.approx(200.0)
    assert out.schedule["scheduled"] == pytest.approx(200, abs=4)
    assert out.ok == sum(w.ok or 0 for w in out.workers) > 0


def test_clients_are_processes_of_their_own(cluster: LoadCluster, server: Endpoint) -> None:
    workers = worker_pids(cluster)
    procs: list[psutil.Process] = []
    parents: list[int] = []

    def started(pids: list[int]) -> None:  # every client is ready: the processes run now
        procs.extend(psutil.Process(p) for p in pids)
        parents.extend(p.ppid() for p in procs)

    out = run(cluster, server, clients=2, requests=300, on_start=started)
    assert out.failure is None and out.ok == 600
    pids = [c.pid or 0 for c in out.clients]
    assert sorted(pids) == sorted(out.client_pids) == sorted(p.pid for p in procs)
    assert not set(pids) & set(workers.values())
    assert sorted(parents) == sorted(workers.values())  # one client process under each worker
    assert gone(procs, within_s=0.0)  # killed and reaped before run_distributed returned
    assert not client_processes(cluster)
    for c in out.clients:
        assert c.cpu_user_s and c.cpu_user_s > 0 and c.cpu_sys_s is not None
        assert c.max_rss_bytes and c.max_rss_bytes > 0
    for w in out.workers:  # a worker's client CPU is its client processes' own
        (c,) = [c for c in out.clients if c.worker == w.worker]
        assert w.cpu_user_s == c.cpu_user_s and w.max_rss_bytes == c.max_rss_bytes
        assert w.worker_cpu_user_s is not None and (w.worker_max_rss_bytes or 0) > 0


def client_processes(cl: LoadCluster) -> list[psutil.Process]:
    """The children of the cluster's worker processes (client processes, if any are left)."""
    return [c for pid in worker_pids(cl).values() for c in psutil.Process(pid).children()]


@timing_sensitive
def test_timed_out_case_leaves_no_client_process(cluster: LoadCluster, server: Endpoint) -> None:
    out = run(cluster, server, duration_s=30.0, timeout_s=1.0)
    # timed out by the coordinator, or by a client's task not yet connected (a busy machine)
    assert out.failure is not None and "timed out while" in out.failure, out.failure
    assert out.wall_s < 10.0
    assert gone(client_processes(cluster))


def spec(ep: Endpoint, **changes: Any) -> LoadSpec:
    return LoadSpec(driver="rpyc", ctx=ctx(ep), warmup=2, **changes)


def test_client_process_protocol_and_kill(server: Endpoint) -> None:
    child = ClientProcess(spec(server, duration_s=30.0))
    try:
        assert child.messages.get(timeout=30) == ("started",)
        assert child.messages.get(timeout=30) == ("connected",)
        assert child.messages.get(timeout=30) == ("ready",)
        # the same address-space layout as every other client process (no randomization)
        if os.path.exists(f"/proc/{child.pid}/personality"):
            with open(f"/proc/{child.pid}/personality") as f:
                assert int(f.read(), 16) & 0x0040000
        child.send(("go", 0))
        msg = child.messages.get(timeout=5)
        assert msg[0] == "progress"
        assert not child.exited()
    finally:
        child.close(grace_s=0.0)  # no time to report: killed with its group
    assert child.exited() and child.proc.returncode == -signal.SIGKILL
    with pytest.raises(psutil.NoSuchProcess):
        psutil.Process(child.pid).status()


def test_client_process_that_dies_reports_its_stderr(server: Endpoint) -> None:
    bad = dataclasses.replace(ctx(server), env={"PYTHONHASHSEED": "bogus"})  # no interpreter
    child = ClientProcess(dataclasses.replace(spec(server, requests=10), ctx=bad))
    try:
        assert child.messages.get(timeout=30) == ("eof",)
        reason = child.died()
    finally:
        child.close()
    assert reason.startswith(f"client 0: client process {child.pid} exited with status 1: ")
    assert "PYTHONHASHSEED" in reason


def test_killed_worker_is_reported(cluster: LoadCluster, server: Endpoint) -> None:
    victim, pid = sorted(worker_pids(cluster).items())[0]
    killed: list[int] = []
    procs: list[psutil.Process] = []

    def kill_once(done: int, seconds: float) -> None:
        if not killed and done > 0 and seconds > 0.3:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    out = run(
        cluster,
        server,
        duration_s=20.0,
        on_progress=kill_once,
        on_start=lambda pids: procs.extend(psutil.Process(p) for p in pids),
    )
    assert killed, "the load never started"
    # the victim's client process died with it (parent-death signal), the survivor's was stopped
    assert len(procs) == 2 and gone(procs), "client processes left behind"
    assert out.incomplete is not None and victim in out.incomplete
    lost = [w for w in out.workers if w.status == "lost"]
    assert [w.worker for w in lost] == [victim]
    (survivor,) = [w for w in out.workers if w.status == "ok"]
    assert (survivor.requests or 0) > 0 and out.requests == survivor.requests
    assert out.wall_s < 15.0  # the survivor was stopped, not left running its 20 s
    cluster.client.wait_for_workers(WORKERS, timeout=30)  # the nanny restarts the victim


def test_bad_cluster_is_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    from rpcmeter.cli import main

    assert main(["run", "--quick", "--cluster", "local:zero"]) == 1
    err = capsys.readouterr().err
    assert err == "rpcmeter: error: --cluster local:zero: expected local:N with N from 1 to 256\n"


def test_stream_figures_merge_exactly_across_workers(cluster: LoadCluster) -> None:
    ep = new_endpoint("tcp")
    params = parse_params("stream", {"mode": "server", "messages": 5})
    with ServerProcess(driver_class("grpc").server_command(ep, {}), ep):
        out = run_distributed(
            cluster,
            *spec_and_hooks(
                "grpc",
                DriverContext(endpoint=ep, workload=params, threads=2),
                clients=2,
                requests=10,
                warmup=1,
                timeout_s=60,
            ),
        )
    assert out.failure is None and out.ok == 2 * 2 * 10
    _, figures = streams.split(out.counters)
    section = stream_section(figures, out.ok, out.wall_s)
    assert section.messages_in == 5 * out.ok
    first, each = section.first_message_histogram, section.message_histogram
    assert first is not None and first.count == out.ok
    assert each is not None and each.count == 4 * out.ok
