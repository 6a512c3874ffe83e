"""What was measured, as parts of the result: placement and cgroups, TLS, connections, streams,
and the case's figures (:mod:`rpcmeter.result.record` writes them into the case)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rpcmeter import model
from rpcmeter.host import placement as placement_mod
from rpcmeter.metrics import streams
from rpcmeter.metrics.connections import ConnectionCosts
from rpcmeter.metrics.histogram import Histogram
from rpcmeter.metrics.resources import (
    CpuTimes,
    client_total,
    per_request_us,
    percent_of_core,
    util_pct,
)
from rpcmeter.net.tls import RunCertificates, TlsSettings, file_fingerprint

if TYPE_CHECKING:
    from rpcmeter.plan.cases import VariantPlan


def given(cpus: placement_mod.Cpus, quotas: placement_mod.CpuQuotas) -> tuple[float, float]:
    """CPUs the server and the clients were given (quota where applied, else affinity)."""
    return (
        placement_mod.cpus_given(cpus.server, quotas.server.cpus if quotas.server else None),
        placement_mod.cpus_given(cpus.client, quotas.client.cpus if quotas.client else None),
    )


def placement_of(cpus: placement_mod.Cpus, **more: Any) -> model.Placement:
    """A placement as the result records it (``more``: its other fields, ``target``)."""
    return model.Placement(
        **more,
        server_cpus=cpus.server,
        client_cpus=cpus.client,
        server_quota_cpus=cpus.server_quota,
        client_quota_cpus=cpus.client_quota,
    )


def cgroup_of(group: placement_mod.Cgroup) -> model.Cgroup:
    return model.Cgroup(
        path=str(group.path), version=group.version, cpus=group.cpus, memory_bytes=group.memory
    )


def placement_doc(
    plans: Mapping[str, VariantPlan], quotas: placement_mod.CpuQuotas | None
) -> model.Placement:
    """The run's placement as applied: the first variant's, and ``by_variant`` (each variant's,
    with its ``target`` kind) when the variants' target kinds place them differently."""
    by_variant = {v: placement_of(p.applied, target=p.placed_as) for v, p in plans.items()}
    first = next(iter(by_variant.values()))
    doc = with_cgroups(first, quotas) if quotas else first
    placed = [p.model_copy(update={"target": None}) for p in by_variant.values()]
    if any(p != placed[0] for p in placed):  # a command client is placed as a server case
        doc = doc.model_copy(update={"by_variant": by_variant})
    return doc


def with_cgroups(placement: model.Placement, quotas: placement_mod.CpuQuotas) -> model.Placement:
    """``placement`` with the run's cgroups, the server's memory limit and their notes."""
    memory = quotas.server_memory
    separate = memory is not None and memory is not quotas.server
    return placement.model_copy(
        update={
            "server_cgroup": cgroup_of(quotas.server) if quotas.server else None,
            "client_cgroup": cgroup_of(quotas.client) if quotas.client else None,
            "cgroup_notes": list(quotas.notes),
            "server_memory_bytes": quotas.memory_limit,
            **({"server_memory_cgroup": cgroup_of(memory)} if separate and memory else {}),
        }
    )


def tls_of(settings: TlsSettings, run: RunCertificates | None, managed: bool) -> model.Tls:
    """What the result records of a variant's TLS: settings and fingerprints, never a key."""
    out = model.Tls(
        verify=settings.verify,
        resume=settings.resume,
        server_name=settings.server_name,
        alpn=settings.alpn,
        mutual=settings.cert_file is not None,
    )
    if settings.ca_file is not None:
        out = out.updated(
            model.Tls(ca_file=settings.ca_file, ca_sha256=file_fingerprint(settings.ca_file))
        )
    elif managed and run is not None:
        out = out.updated(model.Tls(ca="made for the run", ca_sha256=run.ca_fingerprint))
    if managed and run is not None:
        out = out.updated(model.Tls(server_cert_sha256=run.cert_fingerprint))
    if settings.cert_file is not None:
        out = out.updated(model.Tls(client_cert_sha256=file_fingerprint(settings.cert_file)))
    return out


def connections_of(costs: ConnectionCosts) -> model.Connections:
    """The case's ``connections``: connections opened, and per part recorded its summary (us)
    and histogram."""
    costs.fold()
    parts = {part: model.Timing.of(h) for part, h in costs.hists.items() if h.count}
    doc = model.Connections(per_request=costs.per_request, opened=costs.connections)
    return doc.model_copy(update=parts)


def stream_section(figures: dict[str, int], streams_ok: int, wall_s: float) -> model.Stream:
    """The ``stream`` section (:mod:`rpcmeter.metrics.streams`) of ``streams_ok`` good streams
    in ``wall_s``; its CPU per message unknown until :func:`stream_with_cpu`."""
    prefix = streams.PREFIX
    out_n = figures.get(f"{prefix}messages_out", 0)
    in_n = figures.get(f"{prefix}messages_in", 0)
    messages = max(out_n, in_n)
    first = Histogram.from_counters(figures, f"{prefix}first_ns")
    each = Histogram.from_counters(figures, f"{prefix}message_ns")
    nan = math.nan
    return model.Stream(
        streams=streams_ok,
        messages=messages,
        messages_out=out_n,
        messages_in=in_n,
        streams_per_s=streams_ok / wall_s if wall_s > 0 else 0.0,
        messages_per_s=messages / wall_s if wall_s > 0 else 0.0,
        messages_per_stream=messages / streams_ok if streams_ok else nan,
        count_mismatch=figures.get(f"{prefix}count_mismatch", 0),
        bytes_out_per_message=figures.get(f"{prefix}bytes_out", 0) / out_n if out_n else nan,
        bytes_in_per_message=figures.get(f"{prefix}bytes_in", 0) / in_n if in_n else nan,
        first_message=model.Latency.of(first) if first.count else None,
        first_message_histogram=first if first.count else None,
        message=model.Latency.of(each) if each.count else None,
        message_histogram=each if each.count else None,
        cpu_us_per_message=model.StreamCpu(client=None, server=None),
    )


def stream_with_cpu(stream: model.Stream, cpu: model.Cpu) -> model.Stream:
    """``stream`` with its CPU per message on both sides, from the case's ``cpu`` totals
    (unchanged when it counted no messages)."""
    if not stream.messages:
        return stream
    per: dict[str, float | None] = {}
    for side, user, sys_ in (
        ("client", cpu.client_user_s, cpu.client_sys_s),
        ("server", cpu.server_user_s, cpu.server_sys_s),
    ):
        total = user + sys_ if user is not None and sys_ is not None else 0.0
        ok = math.isfinite(total) and total > 0
        per[side] = total * 1e6 / stream.messages if ok else None
    return stream.model_copy(update={"cpu_us_per_message": model.StreamCpu(**per)})


def case_figures(
    *,
    requests: int,
    server: CpuTimes | None,
    server_peak_rss: int | None,
    server_idle: CpuTimes | None,
    server_mean_rss: int | None = None,
    server_cpus: float,
    clients: Sequence[model.Client] | None,
    client_cpus: float | None,
    interval_s: float,
) -> tuple[model.Cpu, model.Memory]:
    """The case's ``cpu`` and ``memory`` (:mod:`rpcmeter.metrics.resources`).

    ``server`` is the server tree's CPU over the measured interval (None: unknown, e.g. a server
    rpcmeter did not start); ``clients`` the load processes' figures (None: no clients ran; one
    whose CPU is None, e.g. a lost worker, makes the total unknown); ``*_cpus`` how many CPUs
    each side was given (None: unknown); ``interval_s`` the measured interval.
    """
    server_total = server.total_s if server else None
    client_user = client_total(clients, lambda c: c.cpu_user_s)
    client_sys = client_total(clients, lambda c: c.cpu_sys_s)
    client_cpu = (
        client_user + client_sys if client_user is not None and client_sys is not None else None
    )
    cpu = model.Cpu(
        interval_s=interval_s,
        server_user_s=server.user_s if server else None,
        server_sys_s=server.sys_s if server else None,
        client_user_s=client_user,
        client_sys_s=client_sys,
        server_us_per_request=per_request_us(server_total, requests),
        client_us_per_request=per_request_us(client_cpu, requests),
        server_util_pct=util_pct(server_total, interval_s, server_cpus),
        client_util_pct=util_pct(client_cpu, interval_s, client_cpus or 0.0),
        server_cpus_given=server_cpus if server else None,
        client_cpus_given=client_cpus if clients else None,
        server_idle_pct=percent_of_core(server_idle) if server_idle else None,
        server_idle_window_s=server_idle.at if server_idle else None,
        server_source=server.source if server else None,
    )
    memory = model.Memory(
        server_peak_rss_bytes=server_peak_rss,
        client_peak_rss_bytes=client_total(clients, lambda c: c.max_rss_bytes),
        **({"server_mean_rss_bytes": server_mean_rss} if server_mean_rss is not None else {}),
    )
    return cpu, memory
