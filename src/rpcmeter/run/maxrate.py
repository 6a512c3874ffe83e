"""``rpcmeter run --find-max-rate --slo p99=5ms``: the highest open-loop rate that meets a
latency objective, for every workload x matrix point x variant of a suite.

Each probe is one case at one offered rate (the suite's load otherwise unchanged), recorded in
the result like any case, with the matrix dimension ``rate``. The search starts at ``load.rate``
(or the lowest rate of a sweep, or ``DEFAULT_START``); see :class:`rpcmeter.analysis.rates.RateSearch`.
The search is the run's source of cases (:class:`RateSearchCases`): handed each probe's result,
it proposes the next probe.
Idle workloads are left out; a driver that cannot run an open loop (``command``) is refused.
Every probe runs equally long (:func:`probe_duration_s`). The result document gets
``max_rate``: one entry per search with the objective, the highest passing rate, the latency
there, and every step.
"""

from __future__ import annotations

import dataclasses

from rpcmeter import model
from rpcmeter.analysis.rates import Objective, RateSearch, Step, judge, rate_point
from rpcmeter.errors import UsageError
from rpcmeter.plan.cases import Case, expand
from rpcmeter.plan.load import no_open_loop
from rpcmeter.plan.targets import target_class
from rpcmeter.result.cells import Cell
from rpcmeter.run.execute import RunOptions, run_suite
from rpcmeter.suite.model import Load, Suite, round_rate

DEFAULT_START = 100.0
PROBE_MIN_S, PROBE_MAX_S = 1.0, 10.0


def search_suite(suite: Suite) -> Suite:
    """The suite a search runs: open loop, without the rate dimension."""
    load = suite.load.model_copy(update={"mode": "open", "rates": None, "sweep": None})
    matrix = {k: v for k, v in suite.matrix.items() if k != "rate"}
    return suite.model_copy(update={"load": load, "matrix": matrix})


def start_rate(suite: Suite) -> float:
    rates = suite.load.rate_list() or suite.matrix.get("rate")
    return round_rate(float(suite.load.rate or (min(rates) if rates else DEFAULT_START)))


def probe_duration_s(load: Load, start: float) -> float:
    """How long every probe of a search runs: ``load.duration_s``, or the time the suite's
    request count takes at the starting rate, within [PROBE_MIN_S, PROBE_MAX_S]. A count of
    requests would make each probe twice as long as the last while the search halves the rate."""
    if load.duration_s is not None:
        return load.duration_s
    loops = (load.concurrency or load.threads) * load.clients
    return min(PROBE_MAX_S, max(PROBE_MIN_S, load.requests * loops / start))


def probe_case(base: Case, rate: float, index: int) -> Case:
    return dataclasses.replace(
        base,
        index=index,
        point=(*base.point, ("rate", rate)),
        load=base.load.model_copy(update={"rate": rate}),
    )


def step_data(rate: float, cell: Cell, passed: bool, reason: str) -> model.RateStep:
    p = rate_point(cell) if cell.ok_cases else None
    return model.RateStep(
        rate=rate,
        passed=passed,
        reason=reason,
        case=cell.cases[0].id,
        achieved_rps=p.achieved_rps if p else None,
        p50_us=p.p50_us if p else None,
        p99_us=p.p99_us if p else None,
        p999_us=p.p999_us if p else None,
        late=p.late if p else None,
        dropped=p.dropped if p else None,
    )


class RateSearchCases:
    """The probes of a search of each base case in turn, as a run's source of cases
    (:class:`rpcmeter.run.execute.CaseSource`): handed each probe's result, it judges it
    against the objectives and proposes the next probe; a finished search gives one
    ``max_rate`` entry."""

    matrix_keys: tuple[str, ...] = ("rate",)

    def __init__(
        self,
        bases: list[Case],
        objectives: list[Objective],
        start: float,
        *,
        tolerance: float,
        max_steps: int,
    ) -> None:
        self.bases, self.objectives, self.start = bases, objectives, start
        self.tolerance, self.max_steps = tolerance, max_steps
        self.planned = len(bases) * max_steps
        self.slo = ",".join(o.text for o in objectives)
        self.searched = 0  # the bases searched to the end
        self.search: RateSearch | None = None  # the search of bases[searched]
        self.proposed = 0  # the cases proposed so far: the next one's index
        self.entries: list[model.MaxRate] = []

    def next(self, last: model.Case | None) -> Case | None:
        if last is not None:
            self.told(last)
        while self.searched < len(self.bases):
            base = self.bases[self.searched]
            if self.search is None:
                self.search = RateSearch(
                    self.start, tolerance=self.tolerance, max_steps=self.max_steps
                )
            if self.search.rate is not None:
                self.proposed += 1
                return probe_case(base, self.search.rate, self.proposed - 1)
            self.entries.append(self.entry(base, self.search))
            self.search, self.searched = None, self.searched + 1
        return None

    def told(self, doc: model.Case) -> None:
        """The result of the probe proposed last: judged, and handed to its search."""
        base, search = self.bases[self.searched], self.search
        assert search is not None and search.rate is not None
        rate = search.rate
        cell = Cell(base.workload, (*base.point, ("rate", rate)), base.variant, [doc])
        passed, reason = judge(cell, self.objectives)
        search.told(Step(rate, passed, reason, step_data(rate, cell, passed, reason)))

    def found(self) -> list[model.MaxRate]:
        entries, self.entries = self.entries, []
        return entries

    def entry(self, base: Case, search: RateSearch) -> model.MaxRate:
        s = search.result
        best = s.best.data if s.best else None
        return model.MaxRate(
            workload=base.workload,
            variant=base.variant,
            point=base.point_dict,
            slo=self.slo,
            objectives=[model.Objective(stat=o.stat, bound_us=o.bound_us) for o in self.objectives],
            max_rate_rps=s.best.rate if s.best else None,
            achieved_rps=best.achieved_rps if best else None,
            latency_us=(
                {"p50": best.p50_us, "p99": best.p99_us, "p999": best.p999_us} if best else None
            ),
            lowest_failing_rps=s.lowest_failing,
            converged=s.converged,
            tolerance=self.tolerance,
            max_steps=self.max_steps,
            steps=[st.data for st in s.steps if st.data is not None],
        )


def find_max_rate(
    suite: Suite,
    objectives: list[Objective],
    *,
    tolerance: float = 0.05,
    max_steps: int = 12,
    options: RunOptions | None = None,
) -> model.Result:
    """Search every workload x matrix point x variant of ``suite`` (first repetition) for the
    highest rate meeting ``objectives``; returns the result document with ``max_rate``."""
    closed = no_open_loop(target_class(suite.driver_of(v)) for v in suite.variants)
    if closed:
        raise UsageError(f"--find-max-rate: {closed}")
    if suite.load.stages:
        # the stages set the rate every probe would send: the search would judge rates never sent
        raise UsageError(
            "--find-max-rate: the load has stages ([[load.stages]]), which set the rate of every "
            "probe; search a suite without stages"
        )
    searched = search_suite(suite)
    # an idle workload sends nothing: there is no rate to search
    bases = [c for c in expand(searched) if c.repetition == 0 and c.kind != "idle"]
    if not bases:
        raise UsageError("--find-max-rate: no workload sends requests (idle ones are not searched)")
    start = start_rate(suite)
    bases = [
        dataclasses.replace(
            c, load=c.load.model_copy(update={"duration_s": probe_duration_s(c.load, start)})
        )
        for c in bases
    ]
    cases = RateSearchCases(bases, objectives, start, tolerance=tolerance, max_steps=max_steps)
    return run_suite(searched, options, cases)
