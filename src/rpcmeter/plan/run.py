"""A run's plan, in two steps: what it settles before its document is written
(:func:`plan_run`: CPUs and quotas, each variant's plan, the cases, the certificates), and what
it prepares before its first case (:func:`prepare`: each variant's environment and server
build). Both call down only: the host's side, the servers' builds, the suite.

The run (:func:`rpcmeter.run.execute.run_suite`) writes its document's header from the
:class:`RunPlan`, prepares each variant's :class:`VariantSetup`, and only then runs the cases.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from rpcmeter.errors import EnvError
from rpcmeter.host import placement
from rpcmeter.host.envs import Env, prepare_variants
from rpcmeter.net.tls import RunCertificates
from rpcmeter.plan.cases import Case, VariantPlan, expand, plan_variants
from rpcmeter.servers.build import Build, prepare_builds
from rpcmeter.suite.model import Suite

Note = Callable[[str, str], None]  # note(variant, message): a line about its preparation


@dataclass(frozen=True)
class RunPlan:
    """What a run settles before its document is written (:func:`plan_run`): the suite, each
    variant's plan, every case (expanded once), the CPU quotas applied and the certificates
    made for it. :meth:`close` releases the quotas and the certificates."""

    suite: Suite
    plans: Mapping[str, VariantPlan]
    cases: list[Case]
    quotas: placement.CpuQuotas
    certs: RunCertificates | None

    def managed(self, variant: str) -> bool:
        """Whether rpcmeter starts the variant's server (a server or command client target
        without an address)."""
        plan = self.plans[variant]
        return plan.target in ("server", "client") and plan.address is None

    def first_cases(self) -> dict[str, Case]:
        """Each variant's first case."""
        first: dict[str, Case] = {}
        for case in self.cases:
            first.setdefault(case.variant, case)
        return first

    def close(self) -> None:
        if self.certs is not None:
            self.certs.close()
        self.quotas.close()


def plan_run(suite: Suite, remote_clients: bool = False, cgroups: bool = True) -> RunPlan:
    """Plan the run of ``suite``: CPUs and quotas (``remote_clients``: the load comes from
    elsewhere, so local client CPUs do not apply; ``cgroups``: False where nothing is measured,
    so no quota is applied), the variants' plans, the cases, and with TLS to a server rpcmeter
    starts, a CA and server certificate made for the run. What it made is released if it
    fails."""
    cpus = placement.resolve(suite.placement, where=suite.path)
    quotas = (
        placement.apply_quotas(cpus, suite.resources.cgroup, suite.placement.server_memory)
        if cgroups
        else placement.CpuQuotas()
    )
    try:
        if remote_clients:
            cpus = placement.Cpus(cpus.server, None)
        plans = plan_variants(suite, cpus)
        cases = expand(suite)
        managed_tls = any(p.tls is not None and p.address is None for p in plans.values())
        certs = RunCertificates() if managed_tls else None
    except BaseException:
        quotas.close()
        raise
    return RunPlan(suite, plans, cases, quotas, certs)


@dataclass(frozen=True)
class VariantSetup:
    """What a variant's cases are given once it is prepared (:func:`prepare`): its environment
    (rpcmeter.host.envs; the error when it could not be made; None: rpcmeter's own) and its
    server's build (rpcmeter.servers.build; None: none)."""

    env: Env | EnvError | None = None
    build: Build | None = None


def prepare(plan: RunPlan, note: Note) -> dict[str, VariantSetup]:
    """Each variant's setup: the environments first, then the builds of the servers rpcmeter
    starts, in those environments (a variant whose environment failed is not built). A
    variant's failure is in its setup, and fails its cases; the other variants run."""
    suite = plan.suite
    envs = prepare_variants(suite, note)
    builds = prepare_builds(suite, envs, plan.managed, note)
    return {v: VariantSetup(envs.get(v), builds.get(v)) for v in suite.variants}
