"""A deterministic synthetic result document for tests of statistics, store and reporters."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rpcmeter.metrics.histogram import Histogram

# (workload, point, variant) -> per-repetition mean latency in microseconds
CellSpec = dict[tuple[str, tuple[tuple[str, Any], ...], str], Sequence[float]]


def synthetic_result(
    spec: CellSpec,
    *,
    samples: int = 200,
    seed: int = 0,
    cpu: bool = False,
    baseline: str | None = None,
) -> dict[str, Any]:
    """A deterministic result document: for every repetition of every cell, ``samples`` latencies
    drawn around the given mean (log-normal, 20 % spread), one closed loop, so throughput is the
    inverse of the mean latency. ``cpu`` adds per-request CPU figures proportional to latency."""
    rng = np.random.default_rng(seed)
    variants = list(dict.fromkeys(v for (_, _, v) in spec))
    keys = list(dict.fromkeys(k for (_, point, _) in spec for k, _ in point))
    matrix: dict[str, list[Any]] = {}
    for _, point, _ in spec:
        for k, v in point:
            matrix.setdefault(k, [])
            if v not in matrix[k]:
                matrix[k].append(v)
    reps = max(len(v) for v in spec.values())
    cases: list[dict[str, Any]] = []
    for rep in range(reps):
        for (workload, point, variant), means in spec.items():
            if rep >= len(means):
                continue
            lat_ns = rng.lognormal(np.log(means[rep] * 1e3), 0.2, samples).astype(np.int64)
            hist = Histogram()
            hist.record_array(lat_ns)
            wall = float(lat_ns.sum()) / 1e9
            case: dict[str, Any] = {
                "id": len(cases),
                "variant": variant,
                "workload": workload,
                "kind": workload,
                "point": dict(point),
                "params": {"clients": 1, "threads": 1},
                "repetition": rep,
                "status": "ok",
                "reason": None,
                "requests": samples,
                "ok": samples,
                "errors": {},
                "error_samples": {},
                "wall_s": wall,
                "throughput_rps": samples / wall,
                "latency": hist.summary_us(),
                "histogram": hist.to_dict(),
                "server_time": None,
                "bytes": None,
                "clients": [],
                "cpu": {"client_user_s": wall / 2, "client_sys_s": wall / 10},
                "memory": {"client_peak_rss_bytes": 30_000_000},
            }
            if cpu:
                case["cpu"]["server_us_per_request"] = hist.mean / 1e3 * 0.4
                case["cpu"]["client_us_per_request"] = hist.mean / 1e3 * 0.6
            cases.append(case)
    return {
        "schema_version": 1,
        "rpcmeter_version": "0.1.0",
        "run_id": f"5e1ec7ed{seed:04x}",
        "status": "complete",
        "started_at": "2026-01-02T03:04:05+00:00",
        "finished_at": "2026-01-02T03:05:06+00:00",
        "suite": {
            "name": "synthetic",
            "description": "",
            "path": None,
            "sha256": "0" * 64,
            "git": None,
            "driver": "rpyc",
            "transport": "unix",
            "baseline": baseline or variants[0],
            "variants": {v: {} for v in variants},
            "workloads": {},
            "matrix": matrix,
            "matrix_keys": keys,
            "repeat": reps,
            "seed": seed,
            "validate": False,
            "load": {},
        },
        "environment": {
            "host": "testhost",
            "cpu_model": "Test CPU",
            "cpu_count": 2,
            "os": "Linux 6.0",
            "python": "3.11.0",
            "packages": {"rpyc": "6.0.2"},
            "placement": {"server_cpus": [0], "client_cpus": [1]},
        },
        "planned_cases": len(cases),
        "cases": cases,
        "warnings": [],
    }
