"""The result document: the only contract between measuring and reporting.

In memory a result is the typed model of :mod:`rpcmeter.model` (frozen pydantic models; histograms
as :class:`~rpcmeter.metrics.histogram.Histogram` objects; a case's is built by its one writer,
:func:`rpcmeter.result.record.case_result`); this module writes and reads its JSON form, versioned by ``schema_version`` (older versions are migrated when read, :func:`parse`).
``comparisons`` and ``warnings`` are derived from the cases whenever a document is read; they are
written for readers outside rpcmeter::

    {
      "schema_version": 2,
      "rpcmeter_version": "...",
      "run_id": "...", "status": "running" | "complete" | "interrupted" | "failed",
      "reason": str (only when "failed": the error that ended the run),
      "started_at": ISO-8601, "finished_at": ISO-8601 | null,
      "suite": {"name", "description", "path", "sha256", "text", "driver", "transport",
                "baseline", "variants", "workloads", "matrix", "matrix_keys", "repeat", "seed",
                "validate", "load"},
      "environment": {"host", "cpu_model", "cpu_count", "os", "kernel", "python", "rpcmeter",
                      "packages", "cpu_governor": {governor: [cpu, ...]} | null,
                      "cpuidle_driver", "cpuidle_governor", "load_average": [1, 5, 15 min],
                      "virtualization": {"detect_virt", "hypervisor_flag", "product_name"},
                      "resolved_hosts": {name: [address, ...]},
                      "variant_packages": {variant: {package: version}},
                      "placement": {"target", "server_cpus", "client_cpus",
                                    "server_quota_cpus", "client_quota_cpus", "server_cgroup",
                                    "client_cgroup", "cgroup_notes", "by_variant"} (as applied:
                                    target "server", "remote", "client" (a command client,
                                    placed as "server"; of a server at an address:
                                    "remote") or "command"; a command runs
                                    unpinned unless server_cpus was set; by_variant when
                                    variants are placed differently),
                      "cluster": {"spec", "scheduler", "workers", "hosts", "dask"} (--cluster),
                      ...},
      "cases": [case, ...],
      "warnings": [str, ...]                             (derived: rpcmeter.analysis.derived),
      "comparisons": analysis.compare_variants(result)   (derived: rpcmeter.analysis.derived)
    }

``suite.git`` is ``{"commit", "branch", "dirty"}`` of the suite file's directory (``branch`` null
when detached; absent in results from before it was recorded), or null outside git.

A case::

    {"id", "variant", "workload", "kind", "point": {matrix key: value}, "params": {...},
     "repetition", "status": "ok" | "failed" | "incomplete" (a load worker was lost),
     "reason": str | null, "server_managed": bool (false: a remote target's address),
     "requests", "ok", "errors": {kind: count}, "error_samples": {kind: message},
     "wall_s", "throughput_rps",
     "latency": {"mean_us", "stdev_us", "min_us", "p50_us", "p90_us", "p95_us", "p99_us",
                 "p999_us", "max_us"},
     "histogram": Histogram.to_dict(),
     "server_time": {"latency"-like summary, "histogram"} | null,
     "bytes": {"out_per_request", "in_per_request"} | null,
     "breakdown": {"rtt_us", "queue_us", "server_us", "overhead_us": {"mean", "stdev", "p50",
                   "p99", ...}, "rtt_requests", "rtt_loops"}
                  (optional: suites with [breakdown]; see rpcmeter.result.breakdown),
     "calls": [{"name", "requests", "ok", "errors", "error_samples", "share",
                "throughput_rps", "latency", "histogram"}]
              (a mix of calls, kind = "mix": each call apart, merged over clients and
               workers; its requests/s its part of the case's),
     "counters": {name: total} (optional: the driver's own totals over the measured requests,
                 e.g. bytes_out, bytes_in, would_block_ns; and the clients' polls when they
                 spun, load.wait = "spin"),
     "clients": [{"client", "pid", "requests", "errors", "throughput_rps", "cpu_user_s",
                  "cpu_sys_s", "max_rss_bytes"}],
     "cpu": {"interval_s", "server_user_s", "server_sys_s", "client_user_s", "client_sys_s",
             "server_us_per_request", "client_us_per_request", "server_util_pct",
             "client_util_pct", "server_cpus_given", "client_cpus_given", "server_idle_pct",
             "server_idle_window_s", "server_cpus_busy_pct", "client_cpus_busy_pct"},
     "memory": {"server_peak_rss_bytes", "client_peak_rss_bytes"},
     (server figures are null when rpcmeter did not start the server: unknown, not zero;
      see rpcmeter.metrics.resources)
     "placement": {"server_cpus", "client_cpus"}, "endpoint": str, "started_at": ISO-8601,
     with --cluster also (clients then carry "worker"; a worker's cpu_* and max_rss_bytes are
     the sums over its client processes, worker_* the Dask worker process's own):
     "workers": [{"worker", "host", "pid", "status": "ok" | "lost", "reason", "clients": [i],
                  "requests", "ok", "errors", "wall_s", "throughput_rps", "cpu_user_s",
                  "cpu_sys_s", "max_rss_bytes", "worker_cpu_user_s", "worker_cpu_sys_s",
                  "worker_max_rss_bytes", "latency", "histogram"}],
     "spread": {"workers", "lost", "min_rps", "max_rps", "min_max_ratio"}}

Open-loop cases (``load.mode = "open"``; :mod:`rpcmeter.runners.open_loop`) measure latency from
each request's intended send time: ``latency`` and ``histogram`` are then the *corrected* figures
(coordinated omission accounted for), and beside them::

     "latency_uncorrected": "latency"-like summary (from the actual send, as a closed loop sees it),
     "histogram_uncorrected": Histogram.to_dict(),
     "open_loop": {"offered_rps", "achieved_rps", "scheduled", "sent", "late", "dropped"}

and ``throughput_rps`` is on the schedule's time base: ``achieved_rps`` (requests sent per second,
first slot to last send) times the fraction of sent requests that came back ok; ``wall_s`` also
counts the wait for the last replies.

``params`` and ``point`` carry ``rate`` (total requests/s offered). A run made with
``--find-max-rate`` also has ``"max_rate"``: one entry per workload x point x variant searched::

    {"workload", "variant", "point", "slo": "p99=5ms", "objectives": [{"stat", "bound_us"}],
     "max_rate_rps": float | null, "achieved_rps", "latency_us": {"p50", "p99", "p999"} | null,
     "lowest_failing_rps", "converged", "tolerance", "max_steps",
     "steps": [{"rate", "passed", "reason", "case": case id, "achieved_rps", "p50_us", "p99_us",
                "p999_us", "late", "dropped"}]}

Whole-command cases (driver ``command``; :mod:`rpcmeter.runners.command`) count runs as requests
(``latency``/``histogram``: the runs' wall times; the command's CPU is the server side of ``cpu``
and ``memory``) and add::

     "runs": [{"wall_s", "user_s", "sys_s", "cpu_s", "max_rss_bytes", "exit_code", "processes",
               "outlived" (when descendants outlived the command)}],
     "command": {"argv", "python", "warmup_runs", "runs", "wall_s", "wall_stdev_s", "user_s",
                 "sys_s", "cpu_s", "cpu_stdev_s", "cores", "max_rss_bytes"} (means over runs),
     "output_tail": str (a failed case: the end of the command's output)

A command client's case (a ``command`` variant in a suite whose target starts a server;
:func:`rpcmeter.result.record.case_result`) has the same ``runs`` and ``command``, counts
``requests`` as runs x ``requests_per_run``, has no ``latency``/``histogram`` and a ``cpu`` and
``memory`` as any server case's (the command is the client side); its ``command`` adds
``"requests_per_run"`` and ``"per_request_us"`` (the successful runs' wall time per request),

and the result's ``environment`` has ``"variant_envs": {variant: {"source", "python",
"python_version", "virtualenv", "key", "git_sha", "created", "prepare_s", "packages"} | {"error"}}``
for variants with their own environment (:mod:`rpcmeter.host.envs`), and ``"schemas": {variant:
{"source", "origin", "sha256", "files", "call"}}`` for gRPC variants whose call is named from a
protobuf schema (:mod:`rpcmeter.drivers.grpc_calls`).
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rpcmeter import model
from rpcmeter.errors import NoSuchRun, StoreError
from rpcmeter.host import interrupts as interrupts
from rpcmeter.metrics.histogram import Histogram

SCHEMA_VERSION = model.SCHEMA_VERSION

Result = model.Result
Case = model.Case
Document = dict[str, Any]  # the result's JSON form


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


_clean = model.clean  # NaN and infinities become null: JSON has no such numbers


def dumps(result: Document) -> str:
    return json.dumps(_clean(result), indent=1, sort_keys=False, allow_nan=False) + "\n"


def check_output(path: str | Path, probe: bool = True) -> None:
    """A StoreError unless ``path`` can take a result document: a regular file or a new name in
    a directory rpcmeter can write. A symbolic link, a directory, a device or a pipe is refused
    (the document replaces the file it is written to; follow a link yourself to write its
    target); so is a directory that cannot take a new file (read-only, not a directory)."""
    target = Path(path)
    try:
        st = target.lstat()
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise StoreError(f"{target}: cannot write the result: {exc.strerror or exc}") from None
    if st is not None and stat.S_ISLNK(st.st_mode):
        raise StoreError(f"{target}: a symbolic link: give the file it points to")
    if st is not None and not stat.S_ISREG(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        raise StoreError(f"{target}: {kind}: the result is written to a regular file")
    if not probe:
        return
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        raise StoreError(f"{target}: cannot write the result: {exc.strerror or exc}") from None


def _new_file_mode() -> int:
    """The mode ``open()`` gives a new file: 0o666 less the umask (read from /proc, so that no
    other thread ever sees a changed umask; else set and put back)."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def write_json(result: Document, path: str | Path) -> None:
    """Write atomically (temporary file in the same directory, then rename): a crash never
    leaves half a document, and Ctrl-C or SIGTERM waits until it is in place
    (:func:`rpcmeter.host.interrupts.deferred`). Only a regular file is replaced so
    (:func:`check_output`); any failure is a StoreError naming the file."""
    target = Path(path)
    check_output(target, probe=False)
    tmp = None
    with interrupts.deferred():
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
            os.fchmod(fd, _new_file_mode())  # as any file written there (mkstemp's is 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(dumps(result))
            os.replace(tmp, target)
        except OSError as exc:
            raise StoreError(f"{target}: cannot write the result: {exc.strerror or exc}") from None
        finally:
            if tmp is not None and os.path.lexists(tmp):
                with contextlib.suppress(OSError):
                    os.unlink(tmp)


def read_json(path: str | Path) -> Result:
    """The result a JSON file holds (of any earlier schema version; see :func:`parse`)."""
    try:
        data = json.loads(Path(path).read_bytes().decode("utf-8"))
    except FileNotFoundError:
        raise NoSuchRun(f"{path}: no such result file") from None
    except OSError as exc:
        raise StoreError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise StoreError(f"{path}: not a result document (not UTF-8 text)") from None
    except (json.JSONDecodeError, RecursionError) as exc:
        raise StoreError(f"{path}: not a readable result document: {exc}") from None
    return parse(data, str(path))


def parse(data: object, where: str) -> Result:
    """A JSON document (of any earlier schema version) read through the typed model
    (:class:`rpcmeter.model.Result`): a StoreError naming ``where`` and the first part that
    does not fit. Its comparisons and warnings are derived from its cases when first asked
    for."""
    if isinstance(data, dict):
        check_document(data, where)
    try:
        return model.Result.from_json(data, where)
    except model.ModelError as exc:
        raise StoreError(str(exc)) from None


def check_document(result: Document, where: str) -> None:
    """The parts of a result every report reads are there and well formed (a StoreError naming
    the first that is not): ``suite`` and ``cases`` tables, each case's status and histograms.
    The typed model (:func:`parse`) checks the rest."""
    if not isinstance(result.get("suite"), dict):
        raise StoreError(f"{where}: not a complete result document (no suite table)")
    cases = result.get("cases")
    if not isinstance(cases, list) or not all(isinstance(c, dict) for c in cases):
        raise StoreError(f"{where}: not a complete result document (cases is not a list of tables)")
    for i, case in enumerate(cases):
        if not isinstance(case.get("status"), str):
            raise StoreError(f"{where}: cases[{i}]: no status")
        server = case.get("server_time")
        for key, data in (
            ("histogram", case.get("histogram")),
            ("histogram_uncorrected", case.get("histogram_uncorrected")),
            (
                "server_time.histogram",
                server.get("histogram") if isinstance(server, dict) else None,
            ),
        ):
            if data is not None:
                try:
                    Histogram.from_dict(data)
                except ValueError as exc:
                    raise StoreError(f"{where}: cases[{i}].{key}: {exc}") from None
