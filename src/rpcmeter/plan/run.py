"""A run's plan, in two steps: what it settles before its document is written
(:func:`plan_run`: CPUs and quotas, each variant's plan, the cases, the certificates), and what
it prepares before its first case (:func:`prepare`: each variant's environment, its server's
build, what its clients are handed). Both call down only: the host's side, the servers'
builds, the drivers, the suite. What only the run can do (start a server to ask it) is handed
in (``ask``).

The run (:func:`rpcmeter.run.execute.run_suite`) writes its document's header from the
:class:`RunPlan`, prepares into a :class:`Prepared`, and only then runs the cases.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rpcmeter.errors import EnvError
from rpcmeter.host import placement
from rpcmeter.host.build import Build, prepare_builds
from rpcmeter.host.envs import Env, prepare_variants
from rpcmeter.net.tls import RunCertificates
from rpcmeter.plan.cases import Case, VariantPlan, expand, plan_variants
from rpcmeter.suite.model import Suite

Note = Callable[[str, str], None]  # note(variant, message): a line about its preparation
# ask(case): what the case's variant's server tells its driver (its server started as the case
# would start it, asked and stopped; :meth:`rpcmeter.run.execute.ServerCase.ask`)
Ask = Callable[[Case], Mapping[str, Any]]


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


@dataclass
class Prepared:
    """What a run prepares before its first case (:func:`prepare`), filled in as it is made, so
    that what was made is recorded however the preparation ends
    (:meth:`rpcmeter.result.record.RunRecord.prepared`)."""

    cluster: Mapping[str, Any] | None = None  # rpcmeter.runners.distributed.LoadCluster.describe
    envs: dict[str, Env | EnvError] = field(default_factory=dict)  # rpcmeter.host.envs
    builds: dict[str, Build] = field(default_factory=dict)  # rpcmeter.host.build
    # what each variant's clients are handed (DriverContext.prepared), and what its driver
    # describes of it (the result's ``schemas``)
    calls: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    schemas: dict[str, Mapping[str, Any]] = field(default_factory=dict)


def prepare(
    plan: RunPlan, prepared: Prepared, note: Note, ask: Ask, environments: bool = True
) -> None:
    """Prepare every variant before the first case, into ``prepared``, in the order each step
    needs the last: its environment; the build of the server rpcmeter starts for it, in that
    environment (a variant whose environment failed is not built); then what its clients are
    handed (``calls``) and what its driver describes of that (``schemas``): what its driver
    prepared when the suite was loaded, or for a driver that asks the server (gRPC's
    reflection; :meth:`~rpcmeter.drivers.base.TargetSpec.ask_server`) its answer, asked with
    ``ask`` and the variant's first case (of the remote server, or of the variant's server
    started for the question and stopped).

    A variant whose environment or build failed fails its cases; the other variants run. An
    answer that cannot be had is raised. ``environments=False``: no environment is prepared
    and no server built (rpcmeter's own Python; ``rpcmeter describe``)."""
    suite = plan.suite
    if environments:
        prepared.envs = prepare_variants(suite, note)
        prepared.builds = prepare_builds(suite, prepared.envs, plan.managed, note)
    prepared.calls = dict(suite.prepared)
    for variant, case in plan.first_cases().items():
        driver, target = plan.plans[variant].driver, plan.plans[variant].target
        if target in ("server", "remote") and driver.asks_server(suite.options_of(variant)):
            note(variant, f"asking its server ({driver.name} reflection)")
            prepared.calls[variant] = ask(case)
    for variant, vplan in plan.plans.items():
        described = vplan.driver.describe_prepared(prepared.calls.get(variant, {}))
        if described is not None:
            prepared.schemas[variant] = described
