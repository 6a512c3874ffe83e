"""Study 003's dataflows for bytewax 0.16 (``Dataflow().input(...)``; a source's ``next()``
returns an item, or None while none is ready)::

    python -m bytewax.run "flow_v016:get_flow('partitioned', long_input='true')" -p 2
"""

from __future__ import annotations

import study
from bytewax.connectors.stdio import StdOutput
from bytewax.dataflow import Dataflow
from bytewax.inputs import DynamicInput, PartitionedInput, StatefulSource, StatelessSource


class PacedPartition(StatefulSource):
    def __init__(self, items: int, interval: float) -> None:
        self.source = study.Paced(items, interval)

    def next(self) -> int | None:
        return self.source.poll()

    def snapshot(self) -> None:
        return None


class PacedPartitions(PartitionedInput):
    """``partitions`` partitions of ``items`` items, spread over the workers."""

    def __init__(self, partitions: int, items: int, interval: float) -> None:
        self.partitions, self.items, self.interval = partitions, items, interval

    def list_parts(self) -> set[str]:
        return {str(i) for i in range(self.partitions)}

    def build_part(self, for_part: str, resume_state: None) -> PacedPartition:
        return PacedPartition(self.items, self.interval)


class PacedWorker(StatelessSource):
    def __init__(self, items: int, interval: float) -> None:
        self.source = study.Paced(items, interval)

    def next(self) -> int | None:
        return self.source.poll()


class PacedDynamic(DynamicInput):
    """``items`` items on every worker (up to ``partitions`` workers)."""

    def __init__(self, partitions: int, items: int, interval: float) -> None:
        self.partitions, self.items, self.interval = partitions, items, interval

    def build(self, worker_index: int, worker_count: int) -> PacedWorker:
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
    flow = Dataflow()
    flow.input("inp", kind(partitions, items, study.pace(long_input, interval)))
    flow.map(study.mapper(heavy_map))
    flow.map(study.stringy)
    flow.output("out", StdOutput())
    return flow
