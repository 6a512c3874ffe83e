"""Mergeable log-linear latency histogram with HDR semantics.

Values are integer nanoseconds. Values below ``2**SUB_BITS`` are counted exactly; above, each power
of two is split into ``2**(SUB_BITS-1)`` equal buckets, so any recorded value is known to within
``1 / 2**(SUB_BITS-1)`` of itself (about 0.05 %, better than 3 significant digits) from 1 ns up to
``MAX_VALUE_NS`` (more than one hour). Recording is vectorised: the hot path only appends raw
values to a buffer; :meth:`Histogram.record_array` folds a whole buffer at once.

Mean, standard deviation, minimum and maximum are kept exactly alongside the buckets. Histograms
merge exactly (bucket counts add), so percentiles of merged histograms equal the percentiles of the
concatenated samples within bucket precision; never average percentiles.
"""

from __future__ import annotations

import base64
import math
import zlib
from collections.abc import Iterable
from typing import Any

import numpy as np
import numpy.typing as npt

SUB_BITS = 11
_HALF = 1 << (SUB_BITS - 1)
MAX_VALUE_NS = 2**43 - 1  # about 2.4 hours
N_BUCKETS = ((MAX_VALUE_NS.bit_length() - SUB_BITS) << (SUB_BITS - 1)) + (1 << SUB_BITS)
ENCODING = "loglinear-v1"


def bucket_index(values: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Bucket index of each value (values already clipped to ``[0, MAX_VALUE_NS]``)."""
    # frexp is exact for integers below 2**53: v = m * 2**e with m in [0.5, 1), so e = bit_length.
    _, exp = np.frexp(values.astype(np.float64))
    shift = np.maximum(exp.astype(np.int64) - SUB_BITS, 0)
    return np.where(shift == 0, values, (shift << (SUB_BITS - 1)) + (values >> shift))


def bucket_bounds(index: int) -> tuple[int, int]:
    """Lowest and highest value that fall into bucket ``index``."""
    if index < (1 << SUB_BITS):
        return index, index
    shift = (index >> (SUB_BITS - 1)) - 1
    mantissa = index - (shift << (SUB_BITS - 1))
    return mantissa << shift, ((mantissa + 1) << shift) - 1


class Histogram:
    """Counts of latencies (ns) in log-linear buckets, plus exact count, sum, min and max."""

    __slots__ = ("_counts", "count", "max", "min", "sum", "sum_sq")

    def __init__(self) -> None:
        self._counts: npt.NDArray[np.int64] = np.zeros(N_BUCKETS, dtype=np.int64)
        self.count = 0
        self.sum = 0
        self.sum_sq = 0.0
        self.min = 0
        self.max = 0

    # pickled (to and from client processes and Dask workers) as its non-empty buckets only,
    # not the whole bucket array
    def __getstate__(self) -> tuple[bytes, int, int, float, int, int]:
        idx, counts = self.nonzero()
        pairs = np.stack([idx, counts]).T.astype("<i8").tobytes()
        return (pairs, self.count, self.sum, self.sum_sq, self.min, self.max)

    def __setstate__(self, state: tuple[bytes, int, int, float, int, int]) -> None:
        pairs, self.count, self.sum, self.sum_sq, self.min, self.max = state
        self._counts = np.zeros(N_BUCKETS, dtype=np.int64)
        sparse = np.frombuffer(pairs, dtype="<i8").reshape(-1, 2)
        self._counts[sparse[:, 0]] = sparse[:, 1]

    # recording -------------------------------------------------------------------------------
    def record_array(self, values: npt.ArrayLike) -> None:
        """Fold a batch of nanosecond values into the histogram."""
        arr = np.asarray(values, dtype=np.int64)
        if arr.size == 0:
            return
        arr = np.clip(arr, 0, MAX_VALUE_NS)
        self._counts += np.bincount(bucket_index(arr), minlength=N_BUCKETS)
        lo, hi = int(arr.min()), int(arr.max())
        self.min = lo if self.count == 0 else min(self.min, lo)
        self.max = max(self.max, hi)
        self.count += int(arr.size)
        self.sum += int(arr.sum())
        as_float = arr.astype(np.float64)
        # Not np.dot: BLAS would start its thread pool, whose threads then spin on the
        # client's CPU between folds and inflate the CPU figures of every client.
        self.sum_sq += float(np.square(as_float).sum())

    def record(self, value_ns: int) -> None:
        """Record one value (convenience; use :meth:`record_array` in loops)."""
        self.record_array(np.array([value_ns], dtype=np.int64))

    def merge(self, other: Histogram) -> None:
        """Add ``other``'s counts into this histogram (exact)."""
        if other.count == 0:
            return
        self._counts += other._counts
        self.min = other.min if self.count == 0 else min(self.min, other.min)
        self.max = max(self.max, other.max)
        self.count += other.count
        self.sum += other.sum
        self.sum_sq += other.sum_sq

    @classmethod
    def merged(cls, histograms: Iterable[Histogram]) -> Histogram:
        out = cls()
        for h in histograms:
            out.merge(h)
        return out

    def coarsened(self, bits: int) -> Histogram:
        """This histogram at ``bits`` sub-bucket bits instead of :data:`SUB_BITS` (a bucket then
        spans ``1 / 2**(bits - 1)`` of its value instead of ``1 / 2**(SUB_BITS - 1)``): each count
        moves to the bucket that holds the middle of the coarser bucket its value falls in, so it
        stays a histogram of this encoding, merges with the others coarsened alike, and has far
        fewer non-empty buckets. Count, sum, sum of squares, minimum and maximum stay exact."""
        out = Histogram()
        out.count, out.sum, out.sum_sq, out.min, out.max = (
            self.count,
            self.sum,
            self.sum_sq,
            self.min,
            self.max,
        )
        if bits >= SUB_BITS or not self.count:
            out._counts[:] = self._counts
            return out
        idx, counts = self.nonzero()
        shift = np.maximum((idx >> (SUB_BITS - 1)) - 1, 0)
        low = np.where(idx < (1 << SUB_BITS), idx, (idx - (shift << (SUB_BITS - 1))) << shift)
        _, exp = np.frexp(low.astype(np.float64))
        width = np.maximum(exp.astype(np.int64) - bits, 0)  # the coarser bucket's bits
        start = (low >> width) << width
        middle = start + (((np.int64(1) << width) - 1) >> 1)
        np.add.at(out._counts, bucket_index(middle), counts)
        return out

    # statistics --------------------------------------------------------------------------------
    @property
    def mean(self) -> float:
        return self.sum / self.count if self.count else math.nan

    @property
    def stdev(self) -> float:
        """Sample standard deviation (n - 1), exact."""
        if self.count < 2:
            return 0.0 if self.count == 1 else math.nan
        var = (self.sum_sq - self.sum * self.sum / self.count) / (self.count - 1)
        return math.sqrt(max(var, 0.0))

    def percentile(self, pct: float) -> float:
        """Value at percentile ``pct`` (0-100): the smallest recorded value v with at least
        ``ceil(pct/100 * count)`` values <= v, reported as its bucket's midpoint, clamped to the
        exact min and max."""
        return float(self.percentiles([pct])[0])

    def percentiles(self, pcts: Iterable[float]) -> list[float]:
        pcts = list(pcts)
        if self.count == 0:
            return [math.nan] * len(pcts)
        cum = np.cumsum(self._counts)
        out: list[float] = []
        for pct in pcts:
            rank = max(1, math.ceil(min(max(pct, 0.0), 100.0) / 100.0 * self.count))
            idx = int(np.searchsorted(cum, rank))
            lo, hi = bucket_bounds(idx)
            out.append(float(min(max((lo + hi) / 2.0, self.min), self.max)))
        return out

    def nonzero(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Indices of non-empty buckets and their counts."""
        idx = np.flatnonzero(self._counts)
        return idx.astype(np.int64), self._counts[idx]

    def bucket_values(self) -> tuple[list[float], list[int]]:
        """Midpoint value (ns) and count of each non-empty bucket, ascending."""
        idx, counts = self.nonzero()
        mids = [sum(bucket_bounds(int(i))) / 2.0 for i in idx]
        return mids, [int(c) for c in counts]

    # encoding ------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly, mergeable encoding: sparse (index, count) pairs, zlib + base64."""
        idx, counts = self.nonzero()
        pairs = np.stack([idx, counts]).T.astype("<i8").tobytes()
        return {
            "encoding": ENCODING,
            "unit": "ns",
            "sub_bucket_bits": SUB_BITS,
            "count": self.count,
            "sum": self.sum,
            "sum_sq": self.sum_sq,
            "min": self.min,
            "max": self.max,
            "buckets": base64.b64encode(zlib.compress(pairs)).decode("ascii"),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Histogram:
        """The histogram ``to_dict`` gave; ValueError for anything else (a broken document)."""
        if not isinstance(data, dict):
            raise ValueError(f"a histogram is a table (got {type(data).__name__})")
        if data.get("encoding") != ENCODING or data.get("sub_bucket_bits") != SUB_BITS:
            raise ValueError(f"unsupported histogram encoding {data.get('encoding')!r}")
        h = cls()
        try:
            raw = zlib.decompress(base64.b64decode(data["buckets"]))
            pairs = np.frombuffer(raw, dtype="<i8").reshape(-1, 2)
            if pairs.size:
                index = pairs[:, 0]
                if index.min() < 0 or index.max() >= len(h._counts) or pairs[:, 1].min() < 0:
                    raise ValueError("bucket out of range")
                h._counts[index] = pairs[:, 1]
            h.count = int(data["count"])
            h.sum = int(data["sum"])
            h.sum_sq = float(data["sum_sq"])
            h.min = int(data["min"])
            h.max = int(data["max"])
        except (KeyError, TypeError, ValueError, zlib.error) as exc:
            detail = f"no {exc}" if isinstance(exc, KeyError) else str(exc)
            raise ValueError(f"a broken histogram: {detail}") from None
        return h

    def to_counters(self, prefix: str) -> dict[str, int]:
        """The histogram as additive integer counters named ``{prefix}.{bucket}`` (and
        ``.count``, ``.sum``, ``.sum_sq``): counters that add, or subtract, as the histograms
        would (a driver's :meth:`~rpcmeter.drivers.base.Driver.counters` carries them, so they
        merge exactly across clients and workers like every other counter). The exact minimum
        and maximum do not add; :meth:`from_counters` takes them from the extreme buckets."""
        idx, counts = self.nonzero()
        out = {f"{prefix}.{int(i)}": int(c) for i, c in zip(idx, counts, strict=True)}
        out[f"{prefix}.count"] = self.count
        out[f"{prefix}.sum"] = self.sum
        out[f"{prefix}.sum_sq"] = round(self.sum_sq)
        return out

    @classmethod
    def from_counters(cls, counters: dict[str, int], prefix: str) -> Histogram:
        """The histogram :meth:`to_counters` wrote under ``prefix`` (empty when none)."""
        h = cls()
        start = prefix + "."
        for key, value in counters.items():
            if key.startswith(start) and value:
                name = key[len(start) :]
                if name.isdigit():
                    h._counts[int(name)] = value
        h.count = int(counters.get(f"{prefix}.count", 0))
        h.sum = int(counters.get(f"{prefix}.sum", 0))
        h.sum_sq = float(counters.get(f"{prefix}.sum_sq", 0))
        if h.count:
            idx, _ = h.nonzero()
            h.min = bucket_bounds(int(idx[0]))[0]
            h.max = bucket_bounds(int(idx[-1]))[1]
        return h

    def summary_us(self) -> dict[str, float]:
        """The latency summary of the result document, in microseconds."""
        p50, p90, p95, p99, p999 = self.percentiles([50, 90, 95, 99, 99.9])
        return {
            "mean_us": self.mean / 1e3,
            "stdev_us": self.stdev / 1e3,
            "min_us": self.min / 1e3 if self.count else math.nan,
            "p50_us": p50 / 1e3,
            "p90_us": p90 / 1e3,
            "p95_us": p95 / 1e3,
            "p99_us": p99 / 1e3,
            "p999_us": p999 / 1e3,
            "max_us": self.max / 1e3 if self.count else math.nan,
        }
