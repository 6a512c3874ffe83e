"""Suite -> plan -> cases: each variant resolved once into how its cases run
(:class:`VariantPlan`), and every case of the suite in interleaved order (A B A B, not
A A B B)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from rpcmeter.drivers.base import TargetSpec
from rpcmeter.host.placement import Cpus, applied, resolve
from rpcmeter.net.tls import TlsSettings
from rpcmeter.plan.targets import TargetKind, variant_target
from rpcmeter.suite.model import Load, Suite
from rpcmeter.suite.workloads import WorkloadParams, parse_params

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
        staged = load.stage_seconds()
        if staged is not None:
            out["duration_s"] = staged
            out["stages"] = len(load.stages or ())
        elif load.duration_s is not None:
            out["duration_s"] = load.duration_s
        else:
            out["requests_per_thread"] = load.requests
        out["warmup"] = load.warmup
        if load.mode == "open" and staged is None:
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


# ---- the per-variant plan ------------------------------------------------------------------------


@dataclass(frozen=True)
class VariantPlan:
    """How the cases of one variant run, resolved once from the suite (:func:`plan_variants`):
    its driver and the driver whose server its target starts, its target kind, the CPUs its
    cases are given and those they really get, and its TLS. What is prepared for it before its
    first case (its environment, its server's build, what its clients are handed) is in the
    run's :class:`rpcmeter.plan.run.Prepared`."""

    name: str
    driver: type[TargetSpec]
    server_driver: type[TargetSpec]
    target: TargetKind  # see :class:`rpcmeter.plan.targets.VariantTarget`
    placed_as: TargetKind  # the target kind its placement is recorded as
    cpus: Cpus  # the suite's placement, or the variant's own
    applied: Cpus  # what its cases really get (rpcmeter.host.placement.applied)
    own_cpus: bool  # its own placement: its cases are given no CPU quotas
    address: str | None  # the server at an address rpcmeter does not start
    tls: TlsSettings | None


def plan_variant(suite: Suite, variant: str, cpus: Cpus) -> VariantPlan:
    """The plan of ``variant`` on the suite's placement ``cpus``: what it runs against
    (:func:`rpcmeter.plan.targets.variant_target`), then where it runs."""
    target = variant_target(suite, variant)
    address = suite.address_of(variant)
    # a command client of a server at an address: only the client side is placed
    placed_as: TargetKind = (
        "remote" if target.kind == "client" and address is not None else target.kind
    )
    own = suite.variants[variant].placement
    if own is not None:
        resolved = resolve(own, where=f"{suite.path or '<suite>'}: variants.{variant}")
        cpus = Cpus(resolved.server, resolved.client)
    explicit = (own or suite.placement).server_cpus != "auto"
    return VariantPlan(
        name=variant,
        driver=target.driver,
        server_driver=target.server_driver,
        target=target.kind,
        placed_as=placed_as,
        cpus=cpus,
        applied=applied(cpus, placed_as, explicit),
        own_cpus=own is not None,
        address=address,
        tls=suite.tls_of(variant),
    )


def plan_variants(suite: Suite, cpus: Cpus) -> dict[str, VariantPlan]:
    """Every variant's plan on the suite's placement ``cpus`` (a SuiteError naming a variant
    whose own placement does not fit the machine)."""
    return {v: plan_variant(suite, v, cpus) for v in suite.variants}
