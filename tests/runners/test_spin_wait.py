"""``load.wait = "spin"``: clients that poll for replies without sleeping. Real runs against the
built-in servers (counts, the setting recorded and reported, the CPU the polling takes) and the
suite checks of the setting."""

from __future__ import annotations

import asyncio
import socket
import threading
from pathlib import Path
from typing import Any

import pytest

from rpcmeter.drivers.raw import polling_recv
from rpcmeter.errors import SuiteError
from rpcmeter.model import Case, Result
from rpcmeter.plan.load import build_suite
from rpcmeter.reporters.build import build
from rpcmeter.reporters.terminal import render
from rpcmeter.run.execute import RunOptions, run_suite
from rpcmeter.runners.event_loop import new_event_loop
from rpcmeter.runners.spin import Spin
from tests.support.marks import timing_sensitive

pytestmark = pytest.mark.timeout(120)


def run(tmp_path: Path, driver: str, load: dict[str, Any], **suite: Any) -> Result:
    raw: dict[str, Any] = {
        "name": "spin",
        "target": {"driver": driver, "transport": "tcp", **suite.pop("target", {})},
        "load": {"warmup": 5, **load},
        "resources": {"idle_s": 0},
        **suite,
    }
    return run_suite(build_suite(raw), RunOptions(output=tmp_path / "r.json"))


def test_closed_loop_http_spinning_counts_every_request_and_records_the_setting(
    tmp_path: Path,
) -> None:
    result = run(
        tmp_path,
        "http",
        {"requests": 300, "threads": 3, "connections": 2, "clients": 2, "wait": "spin"},
        workloads={"echo": {"kind": "echo", "request_bytes": 64}},
        validate=True,
    )
    [case] = result.cases
    assert case.status == "ok", case.reason
    assert case.ok == case.requests == 2 * 3 * 300 and not case.errors
    assert case.histogram is not None and case.histogram.count == 1800
    assert [c.requests for c in case.clients] == [900, 900]
    assert result.suite.load["wait"] == "spin"
    text = render(build(result), width=200)
    assert 'clients poll for replies without sleeping (wait = "spin" in load)' in text
    blocking = run(tmp_path, "http", {"requests": 50}, workloads={"noop": {}})
    assert blocking.suite.load["wait"] == "block"
    assert "poll for replies" not in render(build(blocking), width=200)


def _sleeping_case(
    tmp_path: Path,
    driver: str,
    wait: str,
    target: dict[str, Any],
    spin_us: float | None = None,
) -> Case:
    """20 requests to a server sleeping 20 ms each, one loop."""
    bound = {} if spin_us is None else {"spin_us": spin_us}
    result = run(
        tmp_path,
        driver,
        {"requests": 20, "warmup": 2, "wait": wait, **bound},
        workloads={"sleep": {"ms": 20}},
        target=target,
    )
    [case] = result.cases
    assert case.status == "ok", case.reason
    assert case.ok == 20
    return case


def _client_busy(case: Case) -> float:
    """The client's CPU seconds over the measured interval's wall seconds."""
    cpu = case.cpu
    assert cpu.client_user_s is not None and cpu.client_sys_s is not None and case.wall_s
    return (cpu.client_user_s + cpu.client_sys_s) / case.wall_s


def _polls_per_request(case: Case) -> float:
    assert case.counters is not None and case.requests == 20
    return case.counters["polls"] / case.requests


@timing_sensitive
def test_a_spinning_client_keeps_its_cpu_busy_while_the_server_sleeps(tmp_path: Path) -> None:
    # the server sleeps 20 ms a request: a client asleep in the kernel uses next to no CPU (well
    # under 1 % of the wall time), a polling one all of a CPU it gets (on a CPU shared with other
    # work, a good part of it), one polling at most 200 us after each reply little more than
    # the sleeping one; loose bounds, far from either. The polls are counted per case: without a
    # bound all 20 ms of them (a poll takes about a microsecond, so thousands a request even
    # with the CPU shared), with a budget of 0 once or twice a read, none blocking. The event
    # loop (http, raw with io = "event") and the raw driver's blocking path
    for driver, target in [
        ("http", {}),
        ("raw", {"options": {"io": "blocking"}}),
        ("raw", {"options": {"io": "event"}}),
    ]:
        spinning = _sleeping_case(tmp_path, driver, "spin", target)
        blocking = _sleeping_case(tmp_path, driver, "block", target)
        bounded = _sleeping_case(tmp_path, driver, "spin", target, 200)
        at_once = _sleeping_case(tmp_path, driver, "spin", target, 0)
        busy = _client_busy(spinning)
        assert _client_busy(blocking) < 0.05, (driver, target)
        assert _client_busy(bounded) < 0.1, (driver, target)
        assert busy > max(0.15, 5 * _client_busy(blocking), 3 * _client_busy(bounded)), driver
        assert _polls_per_request(spinning) > 100, (driver, target)
        assert 1 <= _polls_per_request(at_once) <= 4, (driver, target)
        assert "polls" not in (blocking.counters or {}), (driver, target)


def test_open_loop_spinning_sends_every_slot(tmp_path: Path) -> None:
    result = run(
        tmp_path,
        "http",
        {"mode": "open", "rate": 400, "requests": 200, "wait": "spin"},
        workloads={"noop": {}},
    )
    [case] = result.cases
    assert case.status == "ok", case.reason
    assert case.ok == case.requests == 200


def test_open_loop_with_a_bounded_spin_sends_every_slot_and_counts_its_polls(
    tmp_path: Path,
) -> None:
    result = run(
        tmp_path,
        "http",
        {"mode": "open", "rate": 400, "requests": 200, "wait": "spin", "spin_us": 100},
        workloads={"noop": {}},
    )
    [case] = result.cases
    assert case.status == "ok", case.reason
    assert case.ok == case.requests == 200
    # every send and every reply starts a poll at least; 100 us at most of polls after each
    # (far fewer than the 2.5 ms between slots would take)
    assert case.counters is not None and case.counters["polls"] >= 200


def test_bounded_spin_sleeps_after_its_budget_and_wakes_on_a_reply() -> None:
    loop = new_event_loop()
    try:
        spin = Spin(loop, spin_us=2000)
        loop.run_until_complete(asyncio.sleep(0.1))
        assert spin.idle and spin.polls >= 1
        polled = spin.polls
        loop.run_until_complete(asyncio.sleep(0.05))
        assert spin.polls == polled  # asleep: no more polls without a wake
        replies: list[int] = []
        done = spin.waking(lambda server_ns, err: replies.append(1))
        loop.call_soon(done, None, None)  # a reply: polling again, for 2 ms
        loop.run_until_complete(asyncio.sleep(0.05))
        assert replies == [1] and spin.polls > polled and spin.idle
        again = spin.polls
        loop.run_until_complete(asyncio.sleep(0.02))
        assert spin.polls == again
        spin.stop()
        spin.wake()  # a stopped spin stays stopped
        loop.run_until_complete(asyncio.sleep(0.01))
        assert spin.polls == again
    finally:
        loop.close()
    unbounded = Spin(new_event_loop())
    done = unbounded.waking(lambda server_ns, err: None)
    assert done is unbounded.waking(done)  # unbounded: the loops' callbacks as they are
    unbounded.stop()
    unbounded.loop.close()


@timing_sensitive
def test_bounded_polling_recv_polls_for_its_budget_then_sleeps_in_recv() -> None:
    # the reply comes after 100 ms: an unbounded client polls all that time, a client with a
    # budget of 1 ms polls for 1 ms and then sleeps in recv (a poll takes about a microsecond;
    # loose bounds)
    counts = {}
    for spin_us in (None, 1000.0):
        a, b = socket.socketpair()
        with a, b:
            polls = [0]
            recv = polling_recv(a, spin_us, polls)
            sender = threading.Timer(0.1, b.sendall, (b"reply",))
            sender.start()
            assert recv(100) == b"reply"
            sender.join()
            counts[spin_us] = polls[0]
    assert counts[1000.0] >= 2
    assert counts[None] > 10 * counts[1000.0], counts


def test_spin_polls_until_stopped_and_then_lets_the_loop_sleep() -> None:
    loop = new_event_loop()
    try:
        spin = Spin(loop)
        loop.run_until_complete(asyncio.sleep(0.05))
        polled = spin.polls
        assert polled > 10  # at least one poll per iteration, many per 50 ms
        spin.stop()
        loop.run_until_complete(asyncio.sleep(0.05))
        assert spin.polls <= polled + 1  # at most the poll already scheduled
    finally:
        loop.close()


def test_polling_recv_returns_the_data_and_the_end_of_the_stream() -> None:
    a, b = socket.socketpair()
    with a, b:
        recv = polling_recv(a)
        sender = threading.Timer(0.05, b.sendall, (b"reply",))
        sender.start()
        assert recv(100) == b"reply"
        sender.join()
        b.shutdown(socket.SHUT_WR)
        assert recv(100) == b""


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            {"load": {"wait": "busy"}},
            "load.wait: Input should be 'block' or 'spin'",
        ),
        (
            {"load": {"spin_us": 50}},
            'load.spin_us: bounds the polling of wait = "spin", but the clients of workload '
            "'noop' block",
        ),
        (
            {"matrix": {"spin_us": [50, 500]}, "load": {"wait": "block"}},
            "matrix.spin_us: bounds the polling",
        ),
        (
            {"workloads": {"noop": {"spin_us": 10}}},
            "workloads.noop.spin_us: bounds the polling",
        ),
        (
            {"load": {"wait": "spin", "spin_us": -1}},
            "load.spin_us: Input should be greater than or equal to 0",
        ),
        (
            {"target": {"driver": "rpyc"}, "load": {"wait": "spin"}},
            "load.wait: driver 'rpyc' cannot poll without sleeping",
        ),
        (
            {"target": {"driver": "zmq"}, "matrix": {"wait": ["block", "spin"]}},
            "load.wait: driver 'zmq' cannot poll without sleeping",
        ),
        (
            {
                "target": {"driver": "grpc", "options": {"client": "grpcio"}},
                "workloads": {"noop": {"wait": "spin"}},
            },
            "its grpcio client",
        ),
        (
            {
                "target": {"driver": "command", "command": "true"},
                "load": {"wait": "spin"},
                "workloads": {"run": {}},
            },
            "load.wait: driver 'command' cannot poll without sleeping",
        ),
    ],
)
def test_bad_or_inapplicable_wait_is_a_suite_error(raw: dict[str, Any], message: str) -> None:
    suite: dict[str, Any] = {"name": "s", "workloads": {"noop": {}}, **raw}
    with pytest.raises(SuiteError, match=message.replace("(", r"\(").replace(")", r"\)")) as info:
        build_suite(suite)
    assert "\n" not in str(info.value)


def test_event_drivers_accept_spin_and_grpc_h2_too() -> None:
    for driver in ("http", "raw", "grpc"):
        suite = build_suite(
            {
                "name": "s",
                "target": {"driver": driver},
                "load": {"wait": "spin"},
                "workloads": {"noop": {}},
            }
        )
        assert suite.load.wait == "spin"
    bounded = build_suite(
        {
            "name": "s",
            "target": {"driver": "http"},
            "load": {"spin_us": 50},
            "matrix": {"wait": ["block", "spin"]},
            "workloads": {"noop": {}, "sleep": {"wait": "spin", "spin_us": 0}},
        }
    )
    assert bounded.load.spin_us == 50
    matrix = build_suite(
        {
            "name": "s",
            "target": {"driver": "http"},
            "matrix": {"wait": ["block", "spin"]},
            "workloads": {"noop": {}},
        }
    )
    assert matrix.matrix["wait"] == ["block", "spin"]


def test_spinning_over_tls_on_both_raw_paths_reads_every_reply_whole(tmp_path: Path) -> None:
    # 40 kB replies span several TLS records, so several reads (each one polled first) make one
    # reply; the blocking path polls the socket and the bytes TLS already decrypted
    result = run(
        tmp_path,
        "raw",
        {"requests": 30, "wait": "spin"},
        target={"tls": True},
        variants={
            "blocking": {"options": {"io": "blocking"}},
            "event": {"options": {"io": "event"}},
        },
        workloads={"echo": {"request_bytes": 40_000}},
        validate=True,
    )
    assert {c.variant for c in result.cases} == {"blocking", "event"}
    for case in result.cases:
        assert case.status == "ok", case.reason
        assert case.ok == case.requests == 30 and not case.errors, case.error_samples
