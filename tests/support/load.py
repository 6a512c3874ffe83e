"""Calling the load runners from tests with keyword arguments: :func:`spec_and_hooks` splits them into the
:class:`~rpcmeter.runners.spec.LoadSpec` and the :class:`~rpcmeter.runners.spec.LoadHooks`."""

from __future__ import annotations

import dataclasses
from typing import Any

from rpcmeter.drivers.base import DriverContext
from rpcmeter.runners.spec import LoadHooks, LoadSpec

HOOKS = frozenset(f.name for f in dataclasses.fields(LoadHooks))


def spec_and_hooks(driver: str, ctx: DriverContext, **kw: Any) -> tuple[LoadSpec, LoadHooks]:
    hooks = LoadHooks(**{k: kw.pop(k) for k in list(kw) if k in HOOKS})
    return LoadSpec(driver, ctx, **kw), hooks
