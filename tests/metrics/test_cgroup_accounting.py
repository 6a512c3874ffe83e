"""cgroup CPU accounting files (v2 ``cpu.stat``, v1 ``cpuacct``) are read from fixture text and
fixture directories, and the monitor takes a span's CPU from its source only where both marks
have the source's reading."""

from __future__ import annotations

import os
from pathlib import Path

import psutil
import pytest

from rpcmeter.host.placement import Cgroup, parse_cpu_stat, parse_cpuacct_stat, parse_ns
from rpcmeter.metrics.resources import TreeMonitor, split_total

CPU_STAT = """usage_usec 4750190682
user_usec 3610479303
system_usec 1139711379
nice_usec 8691590
core_sched.force_idle_usec 0
nr_periods 0
"""


def test_cpu_stat_gives_user_and_system_seconds() -> None:
    assert parse_cpu_stat(CPU_STAT) == pytest.approx((3610.479303, 1139.711379))


def test_cpu_stat_without_user_time_is_refused() -> None:
    with pytest.raises(ValueError, match=r"cpu\.stat has no user_usec"):
        parse_cpu_stat("usage_usec 10\nsystem_usec 3\n")


def test_cpuacct_stat_is_in_clock_ticks() -> None:
    tick = os.sysconf("SC_CLK_TCK")
    assert parse_cpuacct_stat("user 363685\nsystem 115288\n") == pytest.approx(
        (363685 / tick, 115288 / tick)
    )
    with pytest.raises(ValueError, match=r"cpuacct\.stat has no system"):
        parse_cpuacct_stat("user 1\n")


def test_nanoseconds() -> None:
    assert parse_ns("1500000000\n") == 1.5
    with pytest.raises(ValueError):
        parse_ns("")


def test_split_keeps_the_total_in_the_ticks_ratio() -> None:
    assert split_total(2.0, 3.0, 1.0) == pytest.approx((1.5, 0.5))
    assert split_total(2.0, 0.0, 0.0) == (2.0, 0.0)


def test_v2_cgroup_reads_cpu_stat(tmp_path: Path) -> None:
    (tmp_path / "cpu.stat").write_text(CPU_STAT)
    assert Cgroup(tmp_path, 2, None).cpu_times() == pytest.approx((3610.479303, 1139.711379))


def test_v1_cgroup_splits_the_exact_usage(tmp_path: Path) -> None:
    group = Cgroup(tmp_path, 1, None)
    assert group.cpu_times() is None  # no cpuacct controller: no accounting
    (tmp_path / "cpuacct.usage").write_text("2000000000\n")
    (tmp_path / "cpuacct.stat").write_text("user 30\nsystem 10\n")
    assert group.cpu_times() == pytest.approx((1.5, 0.5))  # older kernels: cpuacct.stat ratio
    (tmp_path / "cpuacct.usage_user").write_text("100000000\n")
    (tmp_path / "cpuacct.usage_sys").write_text("300000000\n")
    assert group.cpu_times() == pytest.approx((0.5, 1.5))


def test_unreadable_accounting_is_none(tmp_path: Path) -> None:
    (tmp_path / "cpu.stat").write_text("usage_usec 1\n")
    assert Cgroup(tmp_path, 2, None).cpu_times() is None
    assert Cgroup(tmp_path / "gone", 2, None).cpu_times() is None


def test_monitor_takes_the_source_only_between_marks_that_both_have_it() -> None:
    readings: list[tuple[float, float] | None] = [(1.0, 0.5)]

    def source() -> tuple[float, float] | None:
        return readings[0]

    monitor = TreeMonitor(lambda: [psutil.Process()], 10.0, source)
    monitor.mark("a")
    readings[0] = (3.0, 0.75)
    monitor.mark("b")
    readings[0] = None
    monitor.mark("c")
    between = monitor.between("a", "b")
    assert between is not None and between.source == "cgroup"
    assert (between.user_s, between.sys_s) == pytest.approx((2.0, 0.25))
    fallback = monitor.between("a", "c")  # the source could not be read at c: the tree's
    assert fallback is not None and fallback.source == "processes"
    assert fallback.total_s < 2.0
    assert monitor.between("a", "missing") is None
