"""Study 003's dataflows for bytewax 0.19 to 0.21 (``bytewax.operators``; sources are built
with their step id and ``next_batch()`` returns the ready item, or an empty list)::

    python -m bytewax.testing "flow_v019:get_flow('partitioned', long_input='true')" -p 2
"""

from __future__ import annotations

import bytewax.operators as op
import study
from bytewax.connectors.stdio import StdOutSink
from bytewax.dataflow import Dataflow
from bytewax.inputs import (
    DynamicSource,
    FixedPartitionedSource,
    StatefulSourcePartition,
    StatelessSourcePartition,
)


def _batch(source: study.Paced) -> list[int]:
    item = source.poll()
    return [] if item is None else [item]


class PacedPartition(StatefulSourcePartition[int, None]):
    def __init__(self, items: int, interval: float) -> None:
        self.source = study.Paced(items, interval)

    def next_batch(self) -> list[int]:
        return _batch(self.source)

    def snapshot(self) -> None:
        return None


class PacedPartitions(FixedPartitionedSource[int, None]):
    """``partitions`` partitions of ``items`` items, spread over the workers."""

    def __init__(self, partitions: int, items: int, interval: float) -> None:
        self.partitions, self.items, self.interval = partitions, items, interval

    def list_parts(self) -> list[str]:
        return [str(i) for i in range(self.partitions)]

    def build_part(self, step_id: str, for_part: str, resume_state: None) -> PacedPartition:
        return PacedPartition(self.items, self.interval)


class PacedWorker(StatelessSourcePartition[int]):
    def __init__(self, items: int, interval: float) -> None:
        self.source = study.Paced(items, interval)

    def next_batch(self) -> list[int]:
        return _batch(self.source)


class PacedDynamic(DynamicSource[int]):
    """``items`` items on every worker (up to ``partitions`` workers)."""

    def __init__(self, partitions: int, items: int, interval: float) -> None:
        self.partitions, self.items, self.interval = partitions, items, interval

    def build(self, step_id: str, worker_index: int, worker_count: int) -> PacedWorker:
        return PacedWorker(self.items if worker_index < self.partitions else 0, self.interval)


def get_flow(
    input: str = "partitioned",
    long_input: object = False,
    heavy_map: object = False,
    items: int = 20,
    interval: float = 0.25,
    partitions: int = 16,
) -> Dataflow:
    kind = PacedPartitions if input == "partitioned" else PacedDynamic
    flow = Dataflow("study003")
    stream = op.input("inp", flow, kind(partitions, items, study.pace(long_input, interval)))
    stream = op.map("map", stream, study.mapper(heavy_map))
    stream = op.map("stringy", stream, study.stringy)
    op.output("out", stream, StdOutSink())
    return flow
