"""Packed key buckets: a bucket's rows reach :class:`BucketProcessor` as Arrow values.

A keyed single query's staged rows are packed per bucket and input
partition before Spark groups them (:func:`wql.spark.streaming.pack_buckets`,
docs/streaming.md, "Key buckets"). Unpacked, a bucket's rows are the frame
Spark's worker builds for an unpacked call: the same rows in the same order,
the same pandas values (Spark's conversion, then its ``itertuples`` regrouping,
is the reference). ``PackedDriver`` plays Spark's part with packed rows: on
random streams cut into random micro-batches it gives what the per-key
processor gives.
"""

from __future__ import annotations

import datetime as dt
import zlib
from dataclasses import replace

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("pyspark")

from pyspark.sql.conversion import ArrowBatchTransformer  # noqa: E402
from pyspark.sql.streaming.stateful_processor import TimerValues  # noqa: E402

from tests.spark.processor_helpers import (  # noqa: E402
    BUCKETS,
    DRAINED,
    QUERIES,
    BucketDriver,
    assert_as_per_key,
    rows_st,
    split_batches,
)
from wql.spark.streaming import BucketProcessor, pack_buckets, unpack_buckets  # noqa: E402

_TIMES = st.datetimes(dt.datetime(1970, 1, 1), dt.datetime(2100, 1, 1)).map(
    lambda t: t.replace(microsecond=t.microsecond // 1000 * 1000)
)

#: Staged columns as Spark hands them to Python (Arrow), nulls included
_COLUMNS = [
    (pa.string(), st.one_of(st.none(), st.text(max_size=3))),
    (pa.int64(), st.one_of(st.none(), st.integers(-(2**62), 2**62))),
    (pa.int32(), st.integers(-100, 100)),
    (pa.float64(), st.one_of(st.none(), st.floats(allow_nan=True))),
    (pa.bool_(), st.one_of(st.none(), st.booleans())),
    (
        pa.timestamp("us", tz="UTC"),
        st.one_of(st.none(), _TIMES.map(lambda t: t.replace(tzinfo=dt.UTC))),
    ),
    (pa.date32(), st.one_of(st.none(), st.dates())),
    (pa.decimal128(10, 2), st.one_of(st.none(), st.decimals(-100, 100, places=2))),
]


def _spark_frame(batch: pa.RecordBatch, timezone: str) -> pd.DataFrame:
    """What Spark's worker hands a call: its conversion, then rows regrouped by
    ``itertuples`` into ``pandas.DataFrame(rows)`` (``pyspark/worker.py``)."""
    series = ArrowBatchTransformer.to_pandas(batch, timezone=timezone)
    rows = list(pd.concat(series, axis=1).itertuples(index=False))
    return pd.DataFrame(rows)


def _same_frames(got: pd.DataFrame, want: pd.DataFrame) -> None:
    assert list(got.columns) == list(want.columns)
    assert len(got) == len(want)
    for c in got.columns:
        a, b = got[c], want[c]
        assert a.dtype == b.dtype, c
        for x, y in zip(a.tolist(), b.tolist(), strict=True):
            if isinstance(x, float) and isinstance(y, float) and x != x:  # noqa: PLR0124
                assert y != y  # noqa: PLR0124 - NaN
            elif x is pd.NaT or y is pd.NaT:
                assert x is y
            else:
                assert type(x) is type(y) and x == y, c


@st.composite
def _batches(draw):
    picked = draw(st.lists(st.sampled_from(range(len(_COLUMNS))), min_size=1, max_size=4))
    sizes = draw(st.lists(st.integers(0, 12), min_size=1, max_size=3))
    out = []
    for n in sizes:
        arrays = [
            pa.array(draw(st.lists(_COLUMNS[i][1], min_size=n, max_size=n)), _COLUMNS[i][0])
            for i in picked
        ]
        buckets = pa.array(draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)), pa.int64())
        names = [f"__wql_c{j}" for j in range(len(picked))] + ["__wql_bucket"]
        out.append(pa.record_batch([*arrays, buckets], names=names))
    return out


@settings(max_examples=60, deadline=None)
@given(batches=_batches(), timezone=st.sampled_from(["UTC", "America/Los_Angeles"]))
def test_unpacked_rows_are_the_frame_spark_hands_a_call(batches, timezone):
    packed = list(pack_buckets(iter(batches)))
    rows = pa.Table.from_batches(batches)
    buckets = rows.column("__wql_bucket").to_numpy()
    staged = rows.drop_columns(["__wql_bucket"])
    seen = []
    for p in packed:
        for b, blob in zip(p.column(0).to_pylist(), p.column(1).to_pylist(), strict=True):
            seen.append(b)
            # one packed row is a frame of Spark's regrouped packed input: bucket, rows
            frame = pd.DataFrame({"_0": [b], "_1": [blob]})
            got = unpack_buckets([frame], timezone)
            idx = np.flatnonzero(buckets == b)
            want = _spark_frame(
                staged.take(pa.array(idx)).combine_chunks().to_batches()[0], timezone
            )
            _same_frames(got, want)
    # every bucket of the partition once (all of it is held at once: fewer than 2**20 rows)
    assert sorted(seen) == sorted(set(buckets.tolist()))


class PackedDriver(BucketDriver):
    """:class:`BucketDriver` with each bucket's rows packed as Spark's plan packs them:
    staged Arrow columns, the bucket last, through :func:`pack_buckets`, each packed
    row handed to the call as Spark's worker frames it (bucket, rows)."""

    def __init__(self, text: str, *, drainable: bool = False) -> None:
        super().__init__(text, drainable=drainable)
        self.proc = BucketProcessor(replace(self.proc.layout, packed=True, timezone="UTC"))
        self.proc.init(self)

    def input_phase(self, rows: list[tuple], columns: dict[str, list], tv: TimerValues) -> None:
        buckets = [zlib.crc32(r[0].encode()) % BUCKETS for r in rows]
        arrays = []
        for values in columns.values():
            if isinstance(values, pd.DatetimeIndex):
                arrays.append(
                    pa.array(values.tz_localize("UTC")).cast(pa.timestamp("us", tz="UTC"))
                )
            else:
                arrays.append(pa.array(values))
        names = [f"__wql_c{i}" for i in range(len(arrays))] + ["__wql_bucket"]
        staged = pa.record_batch([*arrays, pa.array(buckets, pa.int64())], names=names)
        # two input partitions: a bucket's rows come in two packed rows
        half = len(rows) // 2
        parts = [staged.slice(0, half), staged.slice(half)]
        packed: dict[int, list[bytes]] = {}
        for part in parts:
            for p in pack_buckets(iter([part])):
                for b, blob in zip(p.column(0).to_pylist(), p.column(1).to_pylist(), strict=True):
                    packed.setdefault(b, []).append(blob)
        for b in sorted(packed):
            self.key = (b,)
            frame = pd.DataFrame({"_0": [b] * len(packed[b]), "_1": packed[b]})
            self._collect(self.proc.handleInputRows((b,), iter([frame]), tv))


@pytest.mark.parametrize("name", sorted(QUERIES))
@settings(max_examples=15, deadline=None)
@given(rows=rows_st, cuts=st.lists(st.integers(0, 40), max_size=6))
def test_packed_buckets_equal_the_per_key_processor(name, rows, cuts):
    assert_as_per_key(PackedDriver, QUERIES[name], split_batches(rows, cuts), drainable=False)


@pytest.mark.parametrize("name", sorted(DRAINED))
@settings(max_examples=10, deadline=None)
@given(rows=rows_st, cuts=st.lists(st.integers(0, 40), max_size=6))
def test_drained_packed_buckets_equal_the_per_key_processor(name, rows, cuts):
    assert_as_per_key(PackedDriver, DRAINED[name], split_batches(rows, cuts), drainable=True)


def test_packing_holds_rows_in_input_order_per_bucket():
    """A bucket's rows keep their input order across batches (ties in event time
    are processed in the order Spark delivers them)."""
    ks = pa.array([f"k{i}" for i in range(10)])
    b1 = pa.record_batch([ks, pa.array([1, 0] * 5, pa.int64())], names=["k", "b"])
    b2 = pa.record_batch([ks, pa.array([0, 1] * 5, pa.int64())], names=["k", "b"])
    (out,) = list(pack_buckets(iter([b1, b2])))
    got = {}
    for b, blob in zip(out.column(0).to_pylist(), out.column(1).to_pylist(), strict=True):
        got[b] = unpack_buckets([pd.DataFrame({"_0": [b], "_1": [blob]})], "UTC")["_0"].tolist()
    assert got[0] == ["k1", "k3", "k5", "k7", "k9", "k0", "k2", "k4", "k6", "k8"]
    assert got[1] == ["k0", "k2", "k4", "k6", "k8", "k1", "k3", "k5", "k7", "k9"]
