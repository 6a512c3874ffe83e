"""Profiles per case: where the server's (and the clients') time went over the measured interval.

A suite's ``[profile]`` table (``server = true``, ``client = true``, ``rate`` samples per second,
default 100) has every case's server process, and rpcmeter's own client processes, sampled from
the moment the start gate opens to the moment the last client reported (the measured interval
alone: no warmup, no round trip):

- a Python process with `py-spy <https://github.com/benfred/py-spy>`_ (``py-spy record --format
  raw``; Python frames with file and line);
- any other process with ``perf record -g`` where the machine allows it (``perf script`` folded
  into the same collapsed-stack form); otherwise the case gets a one-line note.

For each profile, two files are written next to the result (``RESULT.profiles/``, or
``.rpcmeter/profiles/RUN_ID/`` without ``--output``): the raw profile in collapsed-stack form
(``frame;frame;... count`` per line, what ``flamegraph.pl`` and speedscope read) and a flame graph
SVG. The case document links them::

    "profiles": {"server": {"tool": "py-spy" | "perf", "pids": [int], "samples": int,
                            "raw": path, "svg": path, "sampler_cpu_s": float,
                            "top": [{"frame", "self_samples", "self_pct", "source"}]}
                           | {"error": str} | {"note": str},
                 "client": ...}

``top`` lists the frames with the most samples of their own (self time); ``sampler_cpu_s`` is the
CPU time the samplers used (on top of the case's; py-spy also pauses a process while it reads its
stack, see docs/concepts/where-the-time-goes.md for the measured slowdown). When ptrace is not
permitted (a container without ``CAP_SYS_PTRACE``, ``kernel.yama.ptrace_scope``), the profile
holds the one-line error.
"""

from __future__ import annotations

import contextlib
import html
import linecache
import os
import re
import signal
import subprocess
import zlib
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

from rpcmeter.host.envs import find_tool
from rpcmeter.model import CaseProfile, TopFrame

if TYPE_CHECKING:
    from rpcmeter.suite.model import Profile as ProfileSpec

TOP_FRAMES = 8
STOP_TIMEOUT_S = 20.0


def is_python(pid: int) -> bool:
    """True when process ``pid`` runs a Python interpreter."""
    try:
        exe = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
    except OSError:
        return False
    return exe.startswith("python") or exe.startswith("pypy")


def cpu_seconds(pid: int) -> float:
    """User and system CPU time process ``pid`` has used so far (0 when it is gone)."""
    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return 0.0
    return float(times.user + times.system)


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


class Sampler:
    """One sampling profiler attached to one process, from :meth:`start` to :meth:`stop`."""

    def __init__(self, pid: int, base: Path, rate: int) -> None:
        self.pid = pid
        self.base = base  # output path without suffix
        self.rate = rate
        self.tool = "py-spy" if is_python(pid) else "perf"
        self.proc: subprocess.Popen[bytes] | None = None
        self.error: str | None = None
        self.cpu_s = 0.0
        self.data = base.with_suffix(".perf.data" if self.tool == "perf" else ".pyspy.txt")

    def start(self) -> None:
        exe = find_tool(self.tool)
        if exe is None:
            if self.tool == "py-spy":
                self.error = "py-spy is not installed (pip install py-spy)"
            else:
                self.error = "not profiled: perf is not installed (a non-Python process)"
            return
        if self.tool == "py-spy":
            argv = [exe, "record", "--pid", str(self.pid), "--format", "raw"]
            argv += ["--rate", str(self.rate), "--full-filenames", "--output", str(self.data)]
        else:
            argv = [exe, "record", "-F", str(self.rate), "-g", "-p", str(self.pid)]
            argv += ["-o", str(self.data)]
        self.data.parent.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )

    def halt(self) -> None:
        """Stop sampling (SIGINT: the sampler writes its output and exits)."""
        proc = self.proc
        if proc is None or proc.returncode is not None or self.cpu_s:
            return
        self.cpu_s = cpu_seconds(proc.pid)
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGINT)

    def stop(self) -> Counter[str]:
        """Stop sampling; the collapsed stacks (empty, with :attr:`error` set, on failure)."""
        proc = self.proc
        if proc is None:
            return Counter()
        self.halt()
        try:
            out, _ = proc.communicate(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        text = out.decode("utf-8", "replace")
        if not self.data.exists() or (proc.returncode and not self.data.stat().st_size):
            self.error = self._failure(text, proc.returncode)
            return Counter()
        if self.tool == "py-spy":
            return read_collapsed(self.data.read_text(encoding="utf-8", errors="replace"))
        script = subprocess.run(
            [find_tool("perf") or "perf", "script", "-i", str(self.data)],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=120,
            check=False,
        )
        stacks = fold_perf(script.stdout)
        if not stacks:
            self.error = f"perf recorded no samples: {_last_line(script.stderr or text)}"
        return stacks

    def _failure(self, text: str, code: int | None) -> str:
        low = text.lower()
        if "permission" in low or "ptrace" in low or "operation not permitted" in low:
            what = "py-spy" if self.tool == "py-spy" else "perf"
            return (
                f"{what} cannot attach to process {self.pid}: ptrace not permitted (run with "
                "CAP_SYS_PTRACE or kernel.yama.ptrace_scope = 0)"
                if self.tool == "py-spy"
                else f"not profiled: {what} is not allowed here ({_last_line(text)})"
            )
        return f"{self.tool} failed (exit status {code}): {_last_line(text) or 'no output'}"


def read_collapsed(text: str) -> Counter[str]:
    """Collapsed stacks (``a;b;c 12`` per line) as a counter."""
    stacks: Counter[str] = Counter()
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            stacks[stack] += int(count)
    return stacks


_PERF_FRAME = re.compile(r"^\s*[0-9a-f]+\s+(.+?)(?:\+0x[0-9a-f]+)?\s+\((.*)\)\s*$")


def fold_perf(script: str) -> Counter[str]:
    """``perf script`` output folded into collapsed stacks (root first)."""
    stacks: Counter[str] = Counter()
    frames: list[str] = []
    comm = ""
    for line in [*script.splitlines(), ""]:
        if not line.strip():
            if comm:
                stacks[";".join([comm, *reversed(frames)])] += 1
            frames, comm = [], ""
        elif not line[0].isspace():
            comm = line.split()[0]
        else:
            m = _PERF_FRAME.match(line)
            if m:
                sym = m.group(1)
                frames.append(sym if sym != "[unknown]" else f"[{os.path.basename(m.group(2))}]")
    return stacks


def _frame_source(frame: str) -> str:
    """The source line of a py-spy frame ``func (/path/file.py:123)``, when readable."""
    m = re.search(r"\((.+):(\d+)\)$", frame)
    if not m:
        return ""
    return linecache.getline(m.group(1), int(m.group(2))).strip()


def _short(frame: str) -> str:
    """``func (/long/path/rpcmeter/suite/workloads.py:209)`` -> ``func (workloads.py:209)``."""
    return re.sub(r"\((?:[^():]*/)?([^/():]+:\d+)\)$", r"(\1)", frame)


def top_self(stacks: Counter[str], n: int = TOP_FRAMES) -> list[TopFrame]:
    """The ``n`` frames with the most samples of their own (the leaf of a stack)."""
    total = sum(stacks.values())
    leaves: Counter[str] = Counter()
    for stack, count in stacks.items():
        leaves[stack.rsplit(";", 1)[-1]] += count
    return [
        TopFrame(
            frame=_short(frame),
            self_samples=count,
            self_pct=100.0 * count / total if total else 0.0,
            source=_frame_source(frame),
        )
        for frame, count in leaves.most_common(n)
    ]


def _color(name: str) -> str:
    h = zlib.crc32(name.encode("utf-8", "replace"))
    return f"rgb({205 + h % 50},{(h >> 8) % 180 + 40},{(h >> 16) % 55})"


def flamegraph_svg(stacks: Counter[str], title: str, width: int = 1200) -> str:
    """A flame graph of collapsed stacks: one box per frame, as wide as its samples, callers
    below callees; hovering a box shows the frame and its samples."""
    total = sum(stacks.values())
    tree: dict[str, Any] = {}
    depth = 0
    for stack, count in stacks.items():
        node = tree
        frames = stack.split(";")
        depth = max(depth, len(frames))
        for frame in frames:
            child = node.setdefault(frame, {"": 0})
            child[""] += count
            node = child
    row, top = 16, 24
    height = top + row * (depth + 1)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="monospace" font-size="11">',
        f'<text x="4" y="15" font-size="13">{html.escape(title)} ({total:,} samples)</text>',
    ]
    scale = (width - 8) / total if total else 0.0

    def draw(node: dict[str, Any], x: float, level: int) -> None:
        for name, child in sorted((k, v) for k, v in node.items() if k):
            w = child[""] * scale
            if w >= 0.5:
                y = height - row * (level + 1)
                label = html.escape(_short(name))
                pct = 100.0 * child[""] / total
                parts.append(
                    f"<g><title>{label} ({child['']:,} samples, {pct:.1f} %)</title>"
                    f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{row - 1}" '
                    f'fill="{_color(name)}" rx="1"/>'
                )
                chars = int(w / 7)
                if chars >= 3:
                    text = _short(name)
                    text = text if len(text) <= chars else text[: chars - 2] + ".."
                    parts.append(f'<text x="{x + 2:.1f}" y="{y + 11}">{html.escape(text)}</text>')
                parts.append("</g>")
                draw(child, x, level + 1)
            x += w

    draw(tree, 4.0, 0)
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


class CaseProfiler:
    """The profiles of one case: :meth:`clients` when the client processes exist, :meth:`start`
    when the gate opens, :meth:`stop` when the measured interval ends (the document entry)."""

    def __init__(
        self, server: bool, client: bool, rate: int, out_dir: Path | None, case_id: int
    ) -> None:
        self.want_server = server
        self.want_client = client
        self.rate = rate
        self.out_dir = out_dir
        self.case_id = case_id
        self.server_pids: list[int] = []
        self.client_pids: list[int] = []
        self.samplers: dict[str, list[Sampler]] = {}

    def clients(self, pids: list[int]) -> None:
        self.client_pids = list(pids)

    @classmethod
    def for_case(
        cls, spec: ProfileSpec | None, out_dir: Path | None, case_id: int, server_pid: int | None
    ) -> CaseProfiler:
        """The case's profiler (one that does nothing without a ``[profile]`` table)."""
        if spec is None or out_dir is None:
            return cls(False, False, 100, None, case_id)
        profiler = cls(spec.server, spec.client, spec.rate, out_dir, case_id)
        if server_pid is not None:
            profiler.server_pids = [server_pid]
        return profiler

    def start(self) -> None:
        if self.out_dir is None:
            return
        roles: dict[str, list[int]] = {}
        if self.want_server:
            roles["server"] = self.server_pids
        if self.want_client:
            roles["client"] = self.client_pids
        for role, pids in roles.items():
            self.samplers[role] = [
                Sampler(pid, self.out_dir / f"case{self.case_id}-{role}-{pid}", self.rate)
                for pid in pids
            ]
            for s in self.samplers[role]:
                s.start()

    def halt(self) -> None:
        """Stop sampling now (the measured interval is over); :meth:`stop` collects."""
        for samplers in self.samplers.values():
            for s in samplers:
                s.halt()

    def stop(self) -> dict[str, CaseProfile]:
        """Stop every sampler and write the profiles; the case's ``profiles`` entry (empty
        without profiling)."""
        out: dict[str, CaseProfile] = {}
        out_dir = self.out_dir
        if out_dir is None:
            return out
        for role, samplers in self.samplers.items():
            stacks: Counter[str] = Counter()
            for s in samplers:
                stacks.update(s.stop())
            errors = [s.error for s in samplers if s.error]
            if not samplers:
                out[role] = CaseProfile(note=f"no {role} process to profile (a remote server)")
                continue
            for s in samplers:  # the samplers' own files, folded into the collapsed one
                if s.tool == "py-spy":
                    with contextlib.suppress(OSError):
                        s.data.unlink()
            if not stacks:
                if errors:
                    note = errors[0].startswith("not profiled")
                    out[role] = (
                        CaseProfile(note=errors[0]) if note else CaseProfile(error=errors[0])
                    )
                else:
                    out[role] = CaseProfile(
                        note="no samples: the measured interval ended before the "
                        "sampler took one (a longer case: more requests)"
                    )
                continue
            tools = sorted({s.tool for s in samplers})
            raw = out_dir / f"case{self.case_id}-{role}.collapsed.txt"
            svg = out_dir / f"case{self.case_id}-{role}.svg"
            raw.write_text(
                "".join(f"{stack} {count}\n" for stack, count in sorted(stacks.items())),
                encoding="utf-8",
            )
            svg.write_text(
                flamegraph_svg(stacks, f"case {self.case_id} · {role} · {'+'.join(tools)}"),
                encoding="utf-8",
            )
            out[role] = CaseProfile(
                tool="+".join(tools),
                pids=[s.pid for s in samplers],
                samples=sum(stacks.values()),
                raw=str(raw),
                svg=str(svg),
                sampler_cpu_s=sum(s.cpu_s for s in samplers),
                top=top_self(stacks),
            )
            if errors:
                out[role] = out[role].model_copy(update={"errors": errors})
        return out


def profile_dir(output: Path | None, run_id: str) -> Path:
    """Where a run's profiles go: beside ``--output`` (``RESULT.profiles``), else
    ``.rpcmeter/profiles/RUN_ID``."""
    if output is not None:
        return output.parent.resolve() / f"{output.stem}.profiles"
    return Path(".rpcmeter", "profiles", run_id).resolve()


def summary_lines(profiles: Mapping[str, CaseProfile], label: str) -> list[str]:
    """Terminal lines for a case's profiles (role -> profile, as the case stores them): the
    top frames by self time, or why none."""
    lines: list[str] = []
    for role, p in profiles.items():
        head = f"profile {label} · {role}"
        if p.error is not None or p.note is not None:
            lines.append(f"{head}: {p.error or p.note}")
            continue
        lines.append(
            f"{head} ({p.tool}, {p.samples or 0:,} samples; sampler CPU "
            f"{p.sampler_cpu_s or 0.0:.2f} s): top frames by self time  [{p.svg}]"
        )
        for t in p.top or []:
            src = f"  `{t.source}`" if t.source else ""
            lines.append(f"  {t.self_pct:5.1f} %  {t.frame}{src}")
    return lines
