"""Where server and clients run: CPU lists resolved from the suite's placement."""

from __future__ import annotations

import os
from dataclasses import dataclass

from rpcmeter.suite import Placement


@dataclass(frozen=True)
class Cpus:
    server: list[int] | None
    client: list[int] | None

    def as_dict(self) -> dict[str, list[int] | None]:
        return {"server_cpus": self.server, "client_cpus": self.client}


def available_cpus() -> list[int]:
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def resolve(placement: Placement, cpus: list[int] | None = None) -> Cpus:
    """Explicit lists are kept; counts take CPUs from the front (server) and the back (clients);
    ``auto`` keeps server and clients apart when there are two or more CPUs (server gets one)."""
    cpus = available_cpus() if cpus is None else cpus
    server_spec, client_spec = placement.server_cpus, placement.client_cpus

    def pick(spec: int | list[int] | str, from_front: bool) -> list[int] | None:
        if spec == "none":
            return None
        if isinstance(spec, list):
            return list(spec)
        if isinstance(spec, int):
            n = max(1, min(spec, len(cpus)))
            return cpus[:n] if from_front else cpus[-n:]
        return None  # auto, resolved below

    server = pick(server_spec, True)
    client = pick(client_spec, False)
    if len(cpus) >= 2:
        if server_spec == "auto":
            taken = set(client or [])
            free = [c for c in cpus if c not in taken] or cpus
            server = free[:1]
        if client_spec == "auto":
            taken = set(server or [])
            client = [c for c in cpus if c not in taken] or cpus
    return Cpus(server, client)
