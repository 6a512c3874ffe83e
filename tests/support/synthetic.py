"""A deterministic synthetic result document for tests of statistics, store and reporters,
built through the typed result model (rpcmeter.model), so it has the real document's shape."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rpcmeter import model
from rpcmeter.analysis import compare as analysis
from rpcmeter.analysis import derived as derived
from rpcmeter.metrics.histogram import Histogram
from rpcmeter.reporters.build import build
from rpcmeter.reporters.view import View

# (workload, point, variant) -> per-repetition mean latency in microseconds
CellSpec = dict[tuple[str, tuple[tuple[str, Any], ...], str], Sequence[float]]


def synthetic_result(
    spec: CellSpec,
    *,
    samples: int = 200,
    seed: int = 0,
    cpu: bool = False,
    baseline: str | None = None,
) -> model.Result:
    """A deterministic result: for every repetition of every cell, ``samples`` latencies
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
    cases: list[model.Case] = []
    for rep in range(reps):
        for (workload, point, variant), means in spec.items():
            if rep >= len(means):
                continue
            lat_ns = rng.lognormal(np.log(means[rep] * 1e3), 0.2, samples).astype(np.int64)
            hist = Histogram()
            hist.record_array(lat_ns)
            wall = float(lat_ns.sum()) / 1e9
            cases.append(
                model.Case(
                    id=len(cases),
                    variant=variant,
                    workload=workload,
                    kind=workload,
                    point=dict(point),
                    params={"clients": 1, "threads": 1},
                    repetition=rep,
                    status="ok",
                    reason=None,
                    requests=samples,
                    ok=samples,
                    errors={},
                    error_samples={},
                    wall_s=wall,
                    throughput_rps=samples / wall,
                    latency=model.Latency.of(hist),
                    histogram=hist,
                    server_time=None,
                    bytes=None,
                    clients=[],
                    cpu=model.Cpu(
                        client_user_s=wall / 2,
                        client_sys_s=wall / 10,
                        **(
                            {
                                "server_us_per_request": hist.mean / 1e3 * 0.4,
                                "client_us_per_request": hist.mean / 1e3 * 0.6,
                            }
                            if cpu
                            else {}
                        ),
                    ),
                    memory=model.Memory(client_peak_rss_bytes=30_000_000),
                )
            )
    result = model.Result(
        schema_version=1,
        rpcmeter_version="0.1.0",
        run_id=f"5e1ec7ed{seed:04x}",
        status="complete",
        started_at="2026-01-02T03:04:05+00:00",
        finished_at="2026-01-02T03:05:06+00:00",
        suite=model.SuiteInfo(
            name="synthetic",
            description="",
            path=None,
            sha256="0" * 64,
            git=None,
            driver="rpyc",
            transport="unix",
            baseline=baseline or variants[0],
            variants={v: {} for v in variants},
            workloads={},
            matrix=matrix,
            matrix_keys=keys,
            repeat=reps,
            seed=seed,
            validate_replies=False,
            load={},
        ),
        environment=model.Environment(
            host="testhost",
            cpu_model="Test CPU",
            cpu_count=2,
            os="Linux 6.0",
            python="3.11.0",
            packages={"rpyc": "6.0.2"},
            placement=model.Placement(server_cpus=[0], client_cpus=[1]),
        ),
        planned_cases=len(cases),
        cases=cases,
    )
    return result


def with_case(result: model.Result, index: int, **changes: Any) -> model.Result:
    """``result`` with case ``index`` changed (each change validated as the model's field)."""
    cases = list(result.cases)
    cases[index] = model.Case.model_validate({**cases[index].dump(), **changes})
    return result.replace(cases=cases)


def parsed(doc: dict[str, Any]) -> model.Result:
    """The result of a test's JSON document (the comparisons and warnings a document stores are
    not read back: :func:`view_of` takes a test's own)."""
    return model.Result.from_json(doc)


def view_of(value: dict[str, Any] | model.Result) -> View:
    """The view reports draw (:func:`rpcmeter.reporters.build.build`) of a result, or of a test's
    JSON document: a document that gives its own comparisons (a whole comparison document, read
    through :class:`rpcmeter.analysis.compare.Comparison`) or warnings has them in place of the derived
    ones."""
    if isinstance(value, model.Result):
        return build(value)
    result = parsed(value)
    comparisons, warnings = value.get("comparisons"), value.get("warnings")
    found = derived.derive(result)
    given = derived.Derived(
        found.comparisons
        if comparisons is None
        else analysis.Comparison.model_validate(comparisons),
        found.warnings if warnings is None else tuple(warnings),
    )
    return build(result, given)


def document(result: model.Result) -> dict[str, Any]:
    """The JSON document of ``result`` without its derived parts, for a test to edit and read
    back through :func:`parsed`."""
    return result.to_json()


def written(result: model.Result) -> dict[str, Any]:
    """The JSON document rpcmeter writes for ``result`` (with its comparisons and warnings)."""
    return derived.document(result)


def completed(doc: dict[str, Any]) -> model.Result:
    """The result of a test's partial document: the keys the model requires and the test does
    not care about filled in (schema version, suite name, each case's id, variant, workload and
    status), the rest as given (:func:`parsed`)."""
    cases = [
        {"id": i, "variant": "v", "workload": "w", "status": "ok", **c}
        for i, c in enumerate(doc.get("cases", []))
    ]
    suite = {"name": "t", **doc.get("suite", {})}
    return parsed({"schema_version": model.SCHEMA_VERSION, **doc, "suite": suite, "cases": cases})


def synthetic_document(spec: CellSpec, **options: Any) -> dict[str, Any]:
    """The JSON document of :func:`synthetic_result` (without its derived parts)."""
    return document(synthetic_result(spec, **options))


def comparison_document(
    rows: Sequence[dict[str, Any]] = (), summary: Sequence[dict[str, Any]] = ()
) -> dict[str, Any]:
    """A comparison document of variants against ``base`` (as a result stores it) with ``rows``:
    each a row's keys that matter to the test, the rest filled in (no figures, verdict unknown).
    :class:`rpcmeter.analysis.compare.Comparison` reads it."""
    blank = {
        "workload": "w",
        "point": {},
        "variant": "fast",
        "baseline": "base",
        "metric": "mean",
        "unit": "us",
        "n": 2,
        "n_baseline": 2,
        "mean": None,
        "mean_baseline": None,
        "cv": None,
        "cv_baseline": None,
        "ratio": None,
        "ci_low": None,
        "ci_high": None,
        "p_value": None,
        "verdict": "unknown",
    }
    return {
        "kind": "variants",
        "baseline": "base",
        "against": None,
        "confidence": 0.95,
        "alpha": 0.05,
        "resamples": 2000,
        "rows": [{**blank, **row} for row in rows],
        "summary": list(summary),
        "warnings": [],
    }
