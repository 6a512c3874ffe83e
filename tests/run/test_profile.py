"""Profiles per case: folding, top frames, the flame graph, the samplers' failures, a real run."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import psutil
import pytest

from rpcmeter.plan.load import build_suite
from rpcmeter.reporters import html, terminal
from rpcmeter.run.execute import RunOptions, run_suite
from rpcmeter.run.profile import (
    CaseProfiler,
    Sampler,
    flamegraph_svg,
    fold_perf,
    read_collapsed,
    top_self,
)
from tests.support.synthetic import view_of, written

PERF_SCRIPT = """\
nginx 101  10.1:   1 cpu-clock:ppp:
\t    1aa344 ngx_http_process+0x4 (/usr/sbin/nginx)
\t    1aa000 main+0x10 (/usr/sbin/nginx)

nginx 101  10.2:   1 cpu-clock:ppp:
\t    ffff [unknown] (/usr/lib/libc.so.6)
\t    1aa000 main+0x10 (/usr/sbin/nginx)

nginx 101  10.3:   1 cpu-clock:ppp:
\t    1aa344 ngx_http_process+0x8 (/usr/sbin/nginx)
\t    1aa000 main+0x10 (/usr/sbin/nginx)
"""


def test_perf_script_folds_into_collapsed_stacks_root_first() -> None:
    stacks = fold_perf(PERF_SCRIPT)
    assert stacks == Counter({"nginx;main;ngx_http_process": 2, "nginx;main;[libc.so.6]": 1})


def test_collapsed_stacks_and_self_time() -> None:
    text = "a (/x/m.py:1);b (/x/m.py:2) 30\na (/x/m.py:1) 10\na (/x/m.py:1);c (/x/n.py:9) 60\n"
    stacks = read_collapsed(text + "garbage line\n")
    assert sum(stacks.values()) == 100
    top = top_self(stacks, 2)
    assert [(t.frame, t.self_samples) for t in top] == [
        ("c (n.py:9)", 60),
        ("b (m.py:2)", 30),
    ]
    assert top[0].self_pct == pytest.approx(60.0)


def test_flame_graph_boxes_are_as_wide_as_their_samples() -> None:
    svg = flamegraph_svg(Counter({"main;work": 75, "main;idle<&>": 25}), "t", width=408)
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert 'width="400.0"' in svg  # main: all samples over 400 px
    assert 'width="300.0"' in svg and 'width="100.0"' in svg
    assert "idle&lt;&amp;&gt;" in svg and "idle<&>" not in svg  # names escaped


def test_a_process_that_cannot_be_sampled_gives_one_line(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()  # gone: py-spy cannot attach
    s = Sampler(proc.pid, tmp_path / "x", 100)
    s.tool = "py-spy"
    s.data = tmp_path / "x.pyspy.txt"
    s.start()
    assert s.stop() == Counter()
    assert s.error is not None and "\n" not in s.error and "py-spy" in s.error
    denied = s._failure("Error: Permission Denied (os error 1)\n", 1)
    assert "ptrace not permitted" in denied and "\n" not in denied


@pytest.mark.timeout(120)
def test_server_profile_over_the_measured_interval(tmp_path: Path) -> None:
    suite = build_suite(
        {
            "name": "profiled",
            "target": {"driver": "http"},
            "load": {"requests": 6, "warmup": 1, "timeout_s": 60},
            "workloads": {"big": {"kind": "factorial", "n": 60_000}},
            "profile": {"server": True, "client": True, "rate": 200},
        }
    )
    out = tmp_path / "r.json"
    result = written(run_suite(suite, RunOptions(output=out)))
    [case] = result["cases"]
    assert case["status"] == "ok", case["reason"]
    server = case["profiles"]["server"]
    assert server["tool"] == "py-spy" and server["samples"] > 10
    assert Path(server["svg"]).parent == tmp_path / "r.profiles"
    assert Path(server["svg"]).read_text().startswith("<svg")
    assert read_collapsed(Path(server["raw"]).read_text())
    frames = " ".join(t["frame"] for t in server["top"])
    assert "factorial_digits" in frames  # the compute dominates the server's samples
    assert case["profiles"]["client"]["samples"] > 0
    text = terminal.render(view_of(result))
    assert "top frames by self time" in text and "factorial_digits" in text
    page = html.render(view_of(result))
    assert page.count('<figure class="profile">') == 2 and "<svg" in page
    assert not [p for p in os.listdir(tmp_path / "r.profiles") if "pyspy" in p]


def test_without_a_profile_table_nothing_is_sampled() -> None:
    p = CaseProfiler.for_case(None, None, 0, os.getpid())
    p.clients([os.getpid()])
    p.start()
    p.halt()
    assert p.stop() == {}


@pytest.mark.timeout(60)
def test_a_non_python_process_is_sampled_with_perf_or_noted(tmp_path: Path) -> None:
    """A shell spinning in a loop: perf where the machine allows it, else a one-line note."""
    busy = subprocess.Popen(["sh", "-c", "while :; do :; done"])
    try:
        s = Sampler(busy.pid, tmp_path / "sh", 200)
        assert s.tool == "perf"
        proc = psutil.Process(busy.pid)
        s.start()
        # until the shell has run 0.5 s of CPU (100 samples' worth at 200 Hz), however busy the
        # machine is, within 20 s
        deadline = time.monotonic() + 20
        while sum(proc.cpu_times()[:2]) < 0.5 and time.monotonic() < deadline:
            time.sleep(0.1)
        stacks = s.stop()
    finally:
        busy.kill()
        busy.wait()
    if stacks:
        assert sum(stacks.values()) > 10 and all(k.startswith("sh") for k in stacks)
    else:
        assert s.error is not None and "\n" not in s.error
