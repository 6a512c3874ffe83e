"""Reading a suite: TOML, ``--set`` overrides, ``--quick``, and the checks that need the drivers.

The model itself (what each key means) is :mod:`rpcmeter.suite.model`; its names are handed on
here, so ``from rpcmeter.plan.load import Suite, load_suite`` reads as one place. Every error names the
file, the key and what was expected, in one line (:class:`~rpcmeter.errors.SuiteError`, exit
status 2).

``--set KEY=VALUE`` overrides any value before validation: dotted keys (quote a part that holds dots
or spaces: ``workloads."random wait".delay_s=0.02``), values parsed as TOML (``4``, ``true``,
``[1, 4]``, ``"text"``) and taken as plain text when they do not parse. Setting one of the ways
to give the rates of a sweep (``load.rates``, ``load.sweep``, ``matrix.rate``) removes the others.
"""

from __future__ import annotations

import difflib
import hashlib
import re
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rpcmeter.drivers.base import TargetSpec
from rpcmeter.errors import SuiteError
from rpcmeter.names import METRIC_BY_NAME
from rpcmeter.net.endpoints import remote_endpoint
from rpcmeter.net.tls import TlsSettings, check_files
from rpcmeter.plan.targets import target_class
from rpcmeter.suite.model import (
    Breakdown,
    Gate,
    GitSource,
    Load,
    Placement,
    Resources,
    Runs,
    ServerSpec,
    Suite,
    Sweep,
    Target,
    Variant,
    Workload,
    round_rate,
)
from rpcmeter.suite.workloads import KINDS, parse_params

__all__ = [
    "Breakdown",
    "Gate",
    "GitSource",
    "Load",
    "Placement",
    "Resources",
    "Runs",
    "ServerSpec",
    "Suite",
    "Sweep",
    "Target",
    "Variant",
    "Workload",
    "apply_set",
    "build_suite",
    "builtin_suite_path",
    "load_suite",
    "load_suite_bytes",
    "no_open_loop",
    "round_rate",
    "split_key",
]


_LOAD_KEYS = set(Load.model_fields)


_KEY_PART = re.compile(r'"([^"]*)"|\'([^\']*)\'|([^.\'"]+)')


def split_key(key: str) -> list[str]:
    """Split a dotted key; parts may be quoted with " or '. Every part is non-empty and parts
    are separated by exactly one dot (``load..requests`` is no key)."""
    parts: list[str] = []
    pos = 0
    while True:
        m = _KEY_PART.match(key, pos)
        part = next((g for g in m.groups() if g is not None), "") if m else ""
        if m is None or part == "":
            raise SuiteError(f"--set {key}: not a valid dotted key")
        parts.append(part)
        pos = m.end()
        if pos == len(key):
            return parts
        if key[pos] != ".":
            raise SuiteError(f"--set {key}: not a valid dotted key")
        pos += 1


def parse_value(text: str) -> Any:
    """A ``--set`` value: TOML when it parses, else the text itself."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


# keys that say the same thing in different ways, of which a suite gives one: setting one (with
# --set or [quick]) removes the others, so that `--set load.rates=[...]` replaces a load.sweep
ALTERNATIVES = (("load", "rates"), ("load", "sweep"), ("matrix", "rate"))


def set_key(raw: dict[str, Any], key: str, value: Any) -> None:
    """Set dotted ``key`` to ``value`` in the raw suite mapping, creating tables on the way."""
    parts = split_key(key.strip())
    node: dict[str, Any] = raw
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise SuiteError(f"--set {key}: {part!r} is a value, not a table")
        node = child
    node[parts[-1]] = value
    if tuple(parts) in ALTERNATIVES:
        for table, name in ALTERNATIVES:
            other = raw.get(table)
            if (table, name) != tuple(parts) and isinstance(other, dict):
                other.pop(name, None)


def apply_set(raw: dict[str, Any], assignment: str) -> None:
    """Apply one ``KEY=VALUE`` override to the raw suite mapping."""
    if "=" not in assignment:
        raise SuiteError(f"--set {assignment}: expected KEY=VALUE")
    key, _, value = assignment.partition("=")
    parts = split_key(key.strip())
    variants = raw.get("variants")
    names = list(variants) if isinstance(variants, dict) else ["default"]
    if len(parts) > 2 and parts[0] == "variants" and parts[1] not in names:
        # a misspelt variant would be a new one, measured beside the others: a new variant is
        # given whole (--set 'variants.twin={}')
        close = difflib.get_close_matches(parts[1], names, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise SuiteError(
            f"--set {key.strip()}: no variant named {parts[1]!r} ({hint}the suite's variants: "
            f"{', '.join(names)}; add one whole: --set 'variants.{parts[1]}={{...}}')"
        )
    set_key(raw, key, parse_value(value.strip()))


COMPARE_REPEAT = 5  # default repeat with two or more variants (not --quick, not whole commands)

QUICK_CAPS = {"requests": 200, "duration_s": 1.0, "warmup": 5}
QUICK_IDLE_S = 0.2


def _apply_quick(raw: dict[str, Any], given: set[tuple[str, ...]], where: str) -> None:
    """Small counts, one repetition: a smoke test of any suite; then the suite's ``[quick]``
    values, except those set with ``--set`` (``given``: their dotted keys, split). Only numbers
    are capped; a value of the wrong type is left for validation to name."""
    raw["repeat"] = 1
    load = raw.setdefault("load", {})
    if isinstance(load, dict):
        _cap(load, "requests", QUICK_CAPS["requests"], QUICK_CAPS["requests"])
        _cap(load, "duration_s", None, QUICK_CAPS["duration_s"])
        _cap(load, "warmup", QUICK_CAPS["warmup"], QUICK_CAPS["warmup"])
    _cap_stages(load)
    runs = raw.setdefault("runs", {})
    if isinstance(runs, dict):  # command targets: no warmup, 3 runs, no minimum time
        runs["warmup"] = 0
        _cap(runs, "min_runs", 3, 3)
        runs["min_time_s"] = 0.0
        _cap(runs, "count", None, 3)
    workloads = raw.get("workloads")
    for w in workloads.values() if isinstance(workloads, dict) else ():
        if isinstance(w, dict):
            for key, cap in QUICK_CAPS.items():
                _cap(w, key, None, cap)
            _cap_stages(w)
    if isinstance(raw.get("breakdown"), dict):
        _cap(raw["breakdown"], "rtt_requests", QUICK_CAPS["requests"], QUICK_CAPS["requests"])
    resources = raw.setdefault("resources", {})
    if isinstance(resources, dict):
        _cap(resources, "idle_s", QUICK_IDLE_S, QUICK_IDLE_S)
    quick = raw.get("quick") or {}
    if not isinstance(quick, dict):
        raise SuiteError(f"{where}: quick: expected a table of dotted keys (got {quick!r})")
    for key, value in quick.items():
        parts = tuple(split_key(key.strip()))
        if parts in given or (parts in ALTERNATIVES and given & set(ALTERNATIVES)):
            continue  # what --set gave wins over the suite's own [quick] values
        set_key(raw, key, value)


def _cap_stages(table: Any) -> None:
    """``--quick``: each stage of a load table (or a workload's) lasts at most a second."""
    stages = table.get("stages") if isinstance(table, dict) else None
    for stage in stages if isinstance(stages, list) else ():
        if isinstance(stage, dict):
            _cap(stage, "duration_s", None, QUICK_CAPS["duration_s"])


def _check_strings(value: Any, where: str, loc: tuple[Any, ...] = ()) -> None:
    """No key or string of a suite holds a NUL character (no command line, path or environment
    variable can carry one); a SuiteError names the first."""
    if isinstance(value, str):
        if "\0" in value:
            raise SuiteError(f"{where}: {_format_loc(loc)}: a NUL character in {value!r}")
    elif isinstance(value, dict):
        for key, item in value.items():
            if "\0" in str(key):
                raise SuiteError(f"{where}: {_format_loc(loc)}: a NUL character in key {key!r}")
            _check_strings(item, where, (*loc, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_strings(item, where, (*loc, i))


def _cap(table: dict[str, Any], key: str, default: float | None, cap: float) -> None:
    """``table[key] = min(table[key], cap)`` for a number (``default`` when absent)."""
    value = table.get(key, default)
    if isinstance(value, int | float) and not isinstance(value, bool):
        table[key] = min(value, cap)
    elif key not in table and default is not None:
        table[key] = default


def _format_loc(loc: tuple[Any, ...]) -> str:
    out = []
    for part in loc:
        if isinstance(part, int):
            out.append(f"[{part}]")
        else:
            s = str(part)
            s = f'"{s}"' if (" " in s or "." in s) else s
            out.append(("." if out else "") + s)
    return "".join(out) or "(top level)"


def _validation_message(where: str, exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = _format_loc(tuple(p for p in err["loc"] if p not in ("function-after",)))
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] in ("extra_forbidden", "unexpected_keyword_argument"):
        msg = "unknown key"
    got = err.get("input")
    tables = isinstance(got, dict) or (
        isinstance(got, list) and any(isinstance(g, dict) for g in got)
    )
    shown = "" if err["type"] in ("missing",) or tables else f" (got {got!r})"
    more = f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    if loc == "(top level)" and err["type"] == "value_error":  # a check of the whole table
        return f"{where}: {msg}{shown}{more}"
    return f"{where}: {loc}: {msg}{shown}{more}"


def build_suite(
    raw: dict[str, Any],
    where: str = "<suite>",
    overrides: list[str] | tuple[str, ...] = (),
    quick: bool = False,
    only_workloads: list[str] | None = None,
    only_variants: list[str] | None = None,
) -> Suite:
    """Validate a raw mapping (as read from TOML) into a :class:`Suite`; ``only_workloads`` and
    ``only_variants`` keep those (a baseline variant left out gives way to the first kept)."""
    raw = _deep_copy(raw)
    for assignment in overrides:
        apply_set(raw, assignment)
    if quick:
        given = {tuple(split_key(a.partition("=")[0].strip())) for a in overrides}
        _apply_quick(raw, given, where)
    _check_strings(raw, where)
    try:
        suite = Suite.model_validate(raw)
    except ValidationError as exc:
        raise SuiteError(_validation_message(where, exc)) from None
    if suite.gate is not None:
        unknown = [v for v in suite.gate.variants if v not in suite.variants]
        if unknown:
            raise SuiteError(
                f"{where}: gate.variants: no variant named {unknown[0]!r} "
                f"(have: {', '.join(suite.variants)})"
            )
    if only_variants:
        _keep_variants(suite, only_variants, where)
    _check_semantics(suite, where)
    measured_per_request = any(suite.driver_of(v) != "command" for v in suite.variants)
    if "repeat" not in suite.model_fields_set and len(suite.variants) >= 2 and measured_per_request:
        # comparisons need repetitions to give verdicts (whole commands repeat runs: runs.count)
        suite.repeat = COMPARE_REPEAT
    if only_workloads:
        unknown = [w for w in only_workloads if w not in suite.workloads]
        if unknown:
            raise SuiteError(
                f"{where}: workloads: no workload named {unknown[0]!r} "
                f"(have: {', '.join(suite.workloads)})"
            )
        suite.workloads = {k: v for k, v in suite.workloads.items() if k in only_workloads}
    return suite


def _keep_variants(suite: Suite, names: list[str], where: str) -> None:
    unknown = [n for n in names if n not in suite.variants]
    if unknown:
        raise SuiteError(
            f"{where}: variants: no variant named {unknown[0]!r} (have: {', '.join(suite.variants)})"
        )
    suite.variants = {k: v for k, v in suite.variants.items() if k in names}
    if suite.baseline is not None and suite.baseline not in suite.variants:
        suite.baseline = None


def _check_gate(suite: Suite, where: str) -> None:
    """``[gate]``: known metrics, and ``where`` naming matrix keys (or ``workload``). Its values
    are not checked: a run whose matrix ``--set`` narrowed may have none of them (the gate then
    has nothing to judge and says so)."""
    gate = suite.gate
    if gate is None:
        return
    for key in ("better", "not_worse"):
        for name in getattr(gate, key):
            if name not in METRIC_BY_NAME:
                raise SuiteError(
                    f"{where}: gate.{key}: unknown metric {name!r} "
                    f"(expected one of: {', '.join(METRIC_BY_NAME)})"
                )
    for key in gate.where:
        if key != "workload" and key not in suite.matrix:
            known = ", ".join(["workload", *suite.matrix])
            raise SuiteError(f"{where}: gate.where.{key}: not a matrix key (known: {known})")


def _deep_copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_copy(v) for v in value]
    return value


def _open_loop_rates(suite: Suite, where: str) -> None:
    """A rate sweep becomes the matrix dimension ``rate`` (the innermost, after the others)."""
    rates = suite.load.rate_list()
    if rates is not None:
        if "rate" in suite.matrix:
            raise SuiteError(f"{where}: matrix.rate: the rates are given in load already")
        suite.matrix = {**suite.matrix, "rate": rates}
    if suite.load.mode == "closed" and "rate" in suite.matrix:
        raise SuiteError(f'{where}: matrix.rate: an open-loop setting: set load.mode = "open"')
    if (
        suite.load.mode == "open"
        and suite.load.rate is None
        and "rate" not in suite.matrix
        and not suite.load.stages
    ):
        raise SuiteError(
            f"{where}: load.rate: open-loop load needs a rate "
            "(load.rate, load.rates, load.sweep or matrix.rate)"
        )


def _check_option_keys(suite: Suite, vname: str, driver: type[TargetSpec], where: str) -> None:
    """Every option of a variant (the target's and its own) is one its driver declares."""
    known = driver.option_keys
    if known is None:
        return
    variant = suite.variants[vname]
    for key in [*suite.target.options, *variant.options]:
        if key in known:
            continue
        place = (
            f"variants.{_format_loc((vname,))}.options"
            if key in variant.options
            else "target.options"
        )
        close = difflib.get_close_matches(key, sorted(known), n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        have = ", ".join(sorted(known)) or "none"
        raise SuiteError(
            f"{where}: {place}.{key}: driver {driver.name!r} has no option {key!r} "
            f"({hint}its options: {have})"
        )


def _open_loop_key(suite: Suite) -> str | None:
    """Where the suite asks for an open loop (``load.mode``, or a workload's ``mode``), if it
    does."""
    if suite.load.mode == "open":
        return "load.stages" if suite.load.stages else "load.mode"
    for name, w in suite.workloads.items():
        over = w.load_overrides()
        if over.get("mode") == "open":
            return f"workloads.{_format_loc((name,))}.mode"
        if any(isinstance(s, dict) and s.get("rate") is not None for s in over.get("stages") or []):
            return f"workloads.{_format_loc((name,))}.stages"
    return None


def _stages_key(suite: Suite) -> str | None:
    """Where the suite gives stages (``load.stages``, or a workload's ``stages``), if it does."""
    if suite.load.stages:
        return "load.stages"
    for name, w in suite.workloads.items():
        if w.load_overrides().get("stages"):
            return f"workloads.{_format_loc((name,))}.stages"
    return None


def _check_matrix_stages(suite: Suite, where: str) -> None:
    """A matrix may not give what stages give a case: its rates, its length, or (stages of
    concurrency) its loops. ``matrix.concurrency`` beside stages of rate is the loops that send
    (requests in flight at most), as ``load.concurrency`` is."""
    staged: list[tuple[str, bool]] = []  # where stages are given, and whether of concurrency
    if suite.load.stages:
        staged.append(("load.stages", suite.load.stages[0].concurrency is not None))
    for name, w in suite.workloads.items():
        over = w.load_overrides().get("stages")
        if isinstance(over, list) and over and isinstance(over[0], dict):
            closed = over[0].get("concurrency") is not None
            staged.append((f"workloads.{_format_loc((name,))}.stages", closed))
    for place, closed in staged:
        for key in suite.matrix:
            given = {"rate": "rates", "duration_s": "durations"}.get(key)
            if key == "concurrency" and closed:
                given = "concurrency"
            if given is not None:
                raise SuiteError(
                    f"{where}: matrix.{key}: {place} give the {given} (drop one or the other)"
                )


def _check_stages(suite: Suite, where: str) -> None:
    """Stages drive rpcmeter's own clients: not a whole command, nor a command client."""
    key = _stages_key(suite)
    if key is None:
        return
    for vname in suite.variants:
        if suite.driver_of(vname) == "command":
            who = "the target" if suite.target.driver == "command" else f"variant {vname!r}"
            raise SuiteError(
                f'{where}: {key}: {who} runs whole commands (driver = "command"), and '
                "stages change the load of rpcmeter's own clients"
            )


def no_open_loop(drivers: Iterable[type[TargetSpec]]) -> str | None:
    """Why these drivers cannot run an open loop (None: they can)."""
    for driver in drivers:
        if not driver.open_loop:
            return f"driver {driver.name!r} cannot send requests on a schedule (open loop)"
    return None


def _check_semantics(suite: Suite, where: str) -> None:

    _check_matrix_stages(suite, where)
    _open_loop_rates(suite, where)

    drivers: dict[str, type[TargetSpec]] = {}
    for key, name in [("target.driver", suite.target.driver)] + [
        (f"variants.{_format_loc((n,))}.driver", v.driver)
        for n, v in suite.variants.items()
        if v.driver
    ]:
        try:
            drivers[name] = target_class(name)
        except KeyError as exc:
            raise SuiteError(f"{where}: {key}: {exc.args[0]}") from None
    if suite.baseline is not None and suite.baseline not in suite.variants:
        raise SuiteError(
            f"{where}: baseline: no variant named {suite.baseline!r} "
            f"(have: {', '.join(suite.variants)})"
        )
    for vname, v in suite.variants.items():
        driver = drivers[suite.server_driver_of(vname)]
        transport = v.transport or suite.target.transport
        key = f"variants.{_format_loc((vname,))}.transport" if v.transport else "target.transport"
        if driver.transports and transport not in driver.transports:
            raise SuiteError(
                f"{where}: {key}: driver {driver.name!r} has no transport {transport!r} "
                f"(expected one of: {', '.join(driver.transports)})"
            )
    _check_addresses(suite, where)
    _check_gate(suite, where)
    _check_command_clients(suite, where)
    _check_stages(suite, where)
    for vname, v in suite.variants.items():
        if v.placement is not None and v.placement.server_memory is not None:
            raise SuiteError(
                f"{where}: variants.{_format_loc((vname,))}.placement.server_memory: a memory "
                "limit is set for the whole run, in the suite's [placement]"
            )
    for vname in suite.variants:  # a command client's options go to the target's server
        _check_option_keys(suite, vname, drivers[suite.server_driver_of(vname)], where)
    _check_tls(suite, drivers, where)
    _check_wait(suite, drivers, where)
    if (open_key := _open_loop_key(suite)) is not None:
        for vname in suite.variants:
            if suite.command_client(vname):
                raise SuiteError(
                    f"{where}: {open_key}: variant {vname!r} is a command "
                    'client: its command paces itself (load.mode = "open" is for rpcmeter\'s '
                    "clients)"
                )
        closed = no_open_loop(drivers.values())
        if closed:
            raise SuiteError(f"{where}: {open_key}: {closed}")
    # the drivers that send the workloads: a command client's command sends what it sends, to a
    # server of the target's driver, which runs the workload
    clients = any(suite.command_client(v) for v in suite.variants)
    senders = {name: d for name, d in drivers.items() if not (clients and name == "command")}
    default_kind = _default_kind(senders.values())
    if not suite.workloads and default_kind:
        suite.workloads = {default_kind: Workload(kind=default_kind)}
    if not suite.workloads:
        raise SuiteError(f"{where}: workloads: at least one workload is needed")
    if suite.breakdown is not None:
        for driver in senders.values():
            if "noop" not in driver.workloads:
                raise SuiteError(
                    f"{where}: breakdown: driver {driver.name!r} has no noop workload to measure "
                    "the round trip with"
                )
    for name, w in suite.workloads.items():
        key = f"workloads.{_format_loc((name,))}"
        if not w.kind:
            w.kind = default_kind or name.replace(" ", "_")
        if w.kind not in KINDS:
            raise SuiteError(
                f"{where}: {key}.kind: unknown workload kind {w.kind!r} "
                f"(expected one of: {', '.join(sorted(KINDS))})"
            )
        for driver in senders.values():
            if w.kind != "idle" and w.kind not in driver.workloads:  # idle sends no requests
                raise SuiteError(
                    f"{where}: {key}.kind: driver {driver.name!r} cannot run workload {w.kind!r} "
                    f"(it runs: {', '.join(sorted(driver.workloads))})"
                )
        try:
            parse_params(w.kind, w.params())
            Load.model_validate({**suite.load.model_dump(), **w.load_overrides()})
        except ValidationError as exc:
            raise SuiteError(
                _validation_message(where, exc).replace(": ", f": {key}.", 1)
            ) from None
    for key, values in suite.matrix.items():
        in_workloads = all(KINDS[w.kind].accepts(key) for w in suite.workloads.values())
        if key not in _LOAD_KEYS and not in_workloads:
            raise SuiteError(
                f"{where}: matrix.{key}: not a load setting nor a parameter of every workload "
                f"(load settings: {', '.join(sorted(_LOAD_KEYS - {'mode', 'rates', 'sweep'}))})"
            )
        for value in values:
            try:
                if key in _LOAD_KEYS:  # with each workload's own load, as its cases run
                    for w in suite.workloads.values():
                        over = w.load_overrides()
                        Load.model_validate({**suite.load.model_dump(), **over, key: value})
                else:
                    for w in suite.workloads.values():
                        parse_params(w.kind, {**w.params(), key: value})
            except ValidationError as exc:
                raise SuiteError(
                    _validation_message(where, exc).replace(": ", f": matrix.{key}: ", 1)
                ) from None
    for driver in drivers.values():
        driver.check_suite(suite, where)


def _check_tls(suite: Suite, drivers: dict[str, type[TargetSpec]], where: str) -> None:
    """TLS only for drivers that speak it, with readable files; ``load.reuse = false`` only
    for drivers that can open a connection per request."""
    base = Path(where).parent if Path(where).is_file() else None
    if suite.target.tls is not None:
        try:
            suite.target.tls = check_files(suite.target.tls, base)
        except ValueError as exc:
            raise SuiteError(f"{where}: target.tls.{exc}") from None
    for vname, v in suite.variants.items():
        key = f"variants.{_format_loc((vname,))}.tls" if v.tls is not None else "target.tls"
        if isinstance(v.tls, TlsSettings):
            try:
                v.tls = check_files(v.tls, base)
            except ValueError as exc:
                raise SuiteError(f"{where}: {key}.{exc}") from None
        driver = drivers[suite.server_driver_of(vname)]  # a command client's: its server's
        if suite.tls_of(vname) is not None and not driver.tls:
            raise SuiteError(f"{where}: {key}: driver {driver.name!r} has no TLS")
        loads = [
            suite.load.reuse,
            *[w.load_overrides().get("reuse", True) for w in suite.workloads.values()],
            *suite.matrix.get("reuse", []),
        ]
        if not all(loads) and not driver.connection_per_request:
            raise SuiteError(
                f"{where}: load.reuse: driver {driver.name!r} cannot open a connection per "
                "request (reuse = false)"
            )


def _check_wait(suite: Suite, drivers: dict[str, type[TargetSpec]], where: str) -> None:
    """``load.wait = "spin"`` only for drivers whose clients can poll without sleeping."""
    waits = {
        suite.load.wait,
        *[w.load_overrides().get("wait", "block") for w in suite.workloads.values()],
        *suite.matrix.get("wait", []),
    }
    _check_spin_us(suite, where)
    if "spin" not in waits:
        return
    for vname in suite.variants:
        options = suite.options_of(vname)
        driver = target_class(suite.driver_of(vname), options)  # the options' client path
        problem = driver.spin_problem(options)
        if problem is not None:
            raise SuiteError(
                f"{where}: load.wait: driver {driver.name!r} cannot poll without sleeping (wait = "
                f'"spin"): {problem}'
            )


def _check_spin_us(suite: Suite, where: str) -> None:
    """``spin_us`` (in ``[load]``, a workload's table or the matrix) only where the workload's
    clients spin in some case (``wait = "spin"``)."""
    for wname, w in suite.workloads.items():
        over = w.load_overrides()
        waits = suite.matrix.get("wait", [over.get("wait", suite.load.wait)])
        if "spin" in waits:
            continue
        if "spin_us" in suite.matrix:
            key = "matrix.spin_us"
        elif over.get("spin_us") is not None:
            key = f"workloads.{_format_loc((wname,))}.spin_us"
        elif suite.load.spin_us is not None and "spin_us" not in over:
            key = "load.spin_us"
        else:
            continue
        raise SuiteError(
            f'{where}: {key}: bounds the polling of wait = "spin", but the clients of workload '
            f'{wname!r} block (wait = "block"): set load.wait = "spin" or drop spin_us'
        )


def _check_command_clients(suite: Suite, where: str) -> None:
    """``requests_per_run`` is given for every command client whose report does not count its
    requests (``client_report``), and only for command clients; so is ``client_report``."""
    for vname, v in suite.variants.items():
        key = f"{where}: variants.{_format_loc((vname,))}.requests_per_run"
        if v.client_report is not None and not suite.command_client(vname):
            raise SuiteError(
                f"{where}: variants.{_format_loc((vname,))}.client_report: only for a variant "
                'with driver = "command" in a suite whose target driver starts a server'
            )
        if suite.command_client(vname) and v.requests_per_run is None and not v.client_report:
            raise SuiteError(
                f"{key}: a command run against the {suite.target.driver!r} server needs the "
                "number of requests one run of it makes (or a client_report that counts them)"
            )
        if v.requests_per_run is not None and not suite.command_client(vname):
            raise SuiteError(
                f'{key}: only for a variant with driver = "command" in a suite whose target '
                "driver starts a server"
            )


def _default_kind(drivers: Any) -> str | None:
    """The workload kind when every driver runs exactly one (a command target's ``command``):
    workloads may then leave out ``kind``, and a suite without workloads gets one."""
    kinds = [d.workloads for d in drivers]
    if kinds and all(len(k) == 1 for k in kinds) and len(set(kinds)) == 1:
        return str(next(iter(kinds[0])))
    return None


def _check_addresses(suite: Suite, where: str) -> None:
    """A remote address must parse and suit the driver; it excludes a server command."""

    for vname, v in suite.variants.items():
        address = suite.address_of(vname)
        if address is None:
            continue
        key = f"variants.{_format_loc((vname,))}.address" if v.address else "target.address"
        spec = v.server or suite.target.server
        if spec.command is not None:
            raise SuiteError(
                f"{where}: {key}: a remote target ({address!r}) has no server command "
                "(remove server.command)"
            )
        try:
            endpoint = remote_endpoint(address, v.transport or suite.target.transport)
        except ValueError as exc:
            raise SuiteError(f"{where}: {key}: {exc}") from None
        driver = target_class(suite.server_driver_of(vname))
        if endpoint.transport not in driver.transports:
            raise SuiteError(
                f"{where}: {key}: driver {driver.name!r} has no transport "
                f"{endpoint.transport!r} (address {address!r})"
            )


def load_suite(
    path: str | Path,
    overrides: list[str] | tuple[str, ...] = (),
    quick: bool = False,
    only_workloads: list[str] | None = None,
    only_variants: list[str] | None = None,
) -> Suite:
    """Read, override and validate a suite file."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise SuiteError(f"{p}: no such suite file") from None
    except OSError as exc:
        raise SuiteError(f"{p}: cannot read: {exc.strerror or exc}") from None
    suite = load_suite_bytes(data, str(p), overrides, quick, only_workloads, only_variants)
    suite.path = str(p)
    return suite


def load_suite_bytes(
    data: bytes,
    where: str,
    overrides: list[str] | tuple[str, ...] = (),
    quick: bool = False,
    only_workloads: list[str] | None = None,
    only_variants: list[str] | None = None,
) -> Suite:
    """Read, override and validate a suite's TOML text (``rpcmeter run -``: standard input);
    relative paths in it are taken from the current directory."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SuiteError(
            f"{where}: not a TOML file: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
            f"{exc.start})"
        ) from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SuiteError(f"{where}: invalid TOML: {exc}") from None
    except RecursionError:
        raise SuiteError(f"{where}: invalid TOML: tables or arrays nested too deeply") from None
    try:
        suite = build_suite(raw, where, overrides, quick, only_workloads, only_variants)
    except RecursionError:  # not the file's TOML: a value it gives, or a file it names
        raise SuiteError(f"{where}: a value nested too deeply to use") from None
    suite.source_text = text
    suite.source_hash = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return suite


def builtin_suite_path(name: str = "demo") -> Path:
    """Path of a suite shipped inside the package (``rpcmeter run`` without arguments)."""
    return Path(__file__).parent.parent / "suites" / f"{name}.toml"
