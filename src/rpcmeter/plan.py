"""Suite -> cases, in interleaved order (A B A B, not A A B B)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from rpcmeter.suite_model import Load, Suite
from rpcmeter.workloads import WorkloadParams, parse_params

LOAD_KEYS = frozenset(Load.model_fields)


@dataclass(frozen=True)
class Case:
    """One point of a suite: variant x workload x matrix point x repetition."""

    index: int
    variant: str
    workload: str
    point: tuple[tuple[str, Any], ...]
    repetition: int
    load: Load
    params: WorkloadParams

    @property
    def kind(self) -> str:
        return self.params.kind

    @property
    def point_dict(self) -> dict[str, Any]:
        return dict(self.point)

    def params_dict(self) -> dict[str, Any]:
        """The case's parameters as stored in the result: load shape and workload parameters."""
        load = self.load
        out: dict[str, Any] = {"clients": load.clients, "threads": load.threads}
        if load.connections != 1 or "connections" in self.point_dict:
            out["connections"] = load.connections
        if load.concurrency is not None:
            out["concurrency"] = load.concurrency
        if load.duration_s is not None:
            out["duration_s"] = load.duration_s
        else:
            out["requests_per_thread"] = load.requests
        out["warmup"] = load.warmup
        if load.mode == "open":
            out["rate"] = load.rate
        out.update(self.params.model_dump())
        return out

    def label(self) -> str:
        point = " ".join(f"{k}={v}" for k, v in self.point)
        return f"{self.variant} · {self.workload}" + (f" · {point}" if point else "")


def matrix_points(suite: Suite) -> list[tuple[tuple[str, Any], ...]]:
    keys = list(suite.matrix)
    return [
        tuple(zip(keys, values, strict=True))
        for values in itertools.product(*suite.matrix.values())
    ]


def expand(suite: Suite) -> list[Case]:
    """Every case of the suite: repetitions outermost, variants innermost (interleaved)."""
    cases: list[Case] = []
    for rep in range(suite.repeat):
        for wname, w in suite.workloads.items():
            for point in matrix_points(suite):
                load_over = w.load_overrides()
                params_over: dict[str, Any] = {}
                for key, value in point:
                    if key in LOAD_KEYS:
                        load_over[key] = value
                    else:
                        params_over[key] = value
                load = Load.model_validate({**suite.load.model_dump(), **load_over})
                params = parse_params(w.kind, {**w.params(), **params_over})
                for variant in suite.variants:
                    cases.append(Case(len(cases), variant, wname, point, rep, load, params))
    return cases
