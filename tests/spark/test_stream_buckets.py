"""Key buckets: :class:`wql.spark.streaming.BucketProcessor` equals the per-key processor.

A keyed single query on a stream is grouped by its key's bucket
(docs/streaming.md, "Key buckets"). ``BucketDriver`` plays Spark's part for
it exactly as ``processor_helpers.Driver`` does for
:class:`~wql.spark.streaming.WindowProcessor` (per micro-batch one
``handleInputRows`` per grouping key with rows, then ``handleExpiredTimer`` per
(grouping key, timer) strictly below the watermark, in time order), with the
grouping key a bucket of few (``BUCKETS``) so that buckets hold several keys,
and each bucket's ``MapState`` in dicts. On random streams cut into random
micro-batches both drivers give the same results, late rows and counters,
drained or not, and leave no state behind at the end.
"""

from __future__ import annotations

import zlib
from collections import Counter

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("pyspark")

from pyspark.sql.streaming.stateful_processor import (  # noqa: E402
    ExpiredTimerInfo,
)

from tests.spark.processor_helpers import (  # noqa: E402
    BASE,
    DRAINED,
    QUERIES,
    Driver,
    rows_st,
    source_text,
    split_batches,
)
from wql.errors import ErrorCode, WqlUnsupportedError  # noqa: E402
from wql.spark.layout import sum_counters  # noqa: E402
from wql.spark.streaming import KEY_BUCKETS, BucketProcessor  # noqa: E402

BUCKETS = 2  # few buckets: keys share them


class _Map:
    """One MapState of the bucket in ``driver.key``."""

    def __init__(self, driver: BucketDriver, name: str) -> None:
        self.d = driver
        self.name = name

    def _map(self) -> dict:
        return self.d.maps.setdefault(self.name, {}).setdefault(self.d.key, {})

    def getValue(self, key):  # noqa: N802 - Spark's API
        self.d.map_calls += 1
        return self._map().get(key)

    def updateValue(self, key, value) -> None:  # noqa: N802
        self.d.map_calls += 1
        self._map()[key] = value

    def removeKey(self, key) -> None:  # noqa: N802
        self.d.map_calls += 1
        self._map().pop(key, None)


class _Bucket:
    """The ValueState of the bucket in ``driver.key``."""

    def __init__(self, driver: BucketDriver) -> None:
        self.d = driver

    def get(self):
        self.d.map_calls += 1
        return self.d.buckets.get(self.d.key)

    def update(self, value) -> None:
        self.d.map_calls += 1
        self.d.buckets[self.d.key] = value

    def clear(self) -> None:
        self.d.map_calls += 1
        self.d.buckets.pop(self.d.key, None)


class BucketDriver(Driver):
    """Spark's micro-batch loop for a query grouped by key bucket (one partition)."""

    def __init__(self, text: str, *, drainable: bool = False) -> None:
        super().__init__(text, drainable=drainable)
        self.maps: dict = {}
        self.buckets: dict = {}
        self.map_calls = 0
        self.proc = BucketProcessor(self.proc.layout)
        self.proc.init(self)

    def getValueState(self, name, schema):  # noqa: N802 - Spark's API
        return _Bucket(self)

    def getMapState(self, name, key_schema, value_schema):  # noqa: N802 - Spark's API
        return _Map(self, name)

    def held(self) -> int:
        """Entries left in the buckets' maps and values."""
        return sum(len(m) for per in self.maps.values() for m in per.values()) + len(self.buckets)

    def batch(self, rows: list[tuple[str, float, int]], watermark: int | None = None) -> None:
        wm, tv, columns = self.staged(rows, watermark)
        n = len(self.op.values)
        columns[f"_{n + 2}"] = [zlib.crc32(r[0].encode()) % BUCKETS for r in rows]
        frame = pd.DataFrame(columns)
        for b in sorted(set(columns[f"_{n + 2}"])):
            self.key = (b,)
            part = frame[frame[f"_{n + 2}"] == b].reset_index(drop=True)
            self._collect(self.proc.handleInputRows((b,), iter([part]), tv))
        due = sorted((t, key) for key, ts in self.timers.items() for t in ts if t < wm)
        for t, key in due:
            if t not in self.timers[key]:
                continue  # deleted by an earlier call of the micro-batch
            self.key = key
            self._collect(
                self.proc.handleExpiredTimer(
                    key=key, timerValues=tv, expiredTimerInfo=ExpiredTimerInfo(t)
                )
            )
            self.timers[key].discard(t)  # Spark deletes a timer once it fired
        if rows:
            top = BASE + max(r[2] for r in rows)
            self.max_ts = top if self.max_ts is None else max(self.max_ts, top)


def _run(driver_type, text: str, batches: list[list], *, drainable: bool):
    d = driver_type(text, drainable=drainable)
    for rows in batches:
        d.batch(rows)
    if drainable:
        d.drain()
    else:
        d.end()
    return d


@pytest.mark.parametrize("name", sorted(QUERIES))
@settings(max_examples=25, deadline=None)
@given(rows=rows_st, cuts=st.lists(st.integers(0, 40), max_size=6))
def test_buckets_equal_the_per_key_processor(name, rows, cuts):
    text = QUERIES[name]
    batches = split_batches(rows, cuts)
    per_key = _run(Driver, text, batches, drainable=False)
    bucketed = _run(BucketDriver, text, batches, drainable=False)
    assert Counter(bucketed.results) == Counter(per_key.results)
    assert Counter(bucketed.late) == Counter(per_key.late)
    assert sum_counters(bucketed.counters) == sum_counters(per_key.counters)


@pytest.mark.parametrize("name", sorted(DRAINED))
@settings(max_examples=20, deadline=None)
@given(rows=rows_st, cuts=st.lists(st.integers(0, 40), max_size=6))
def test_drained_buckets_equal_the_per_key_processor(name, rows, cuts):
    text = DRAINED[name]
    batches = split_batches(rows, cuts)
    per_key = _run(Driver, text, batches, drainable=True)
    bucketed = _run(BucketDriver, text, batches, drainable=True)
    assert Counter(bucketed.results) == Counter(per_key.results)
    assert Counter(bucketed.late) == Counter(per_key.late)
    assert sum_counters(bucketed.counters) == sum_counters(per_key.counters)
    # the end of input leaves no key, no index entry and no timer behind
    assert bucketed.held() == 0 and not any(bucketed.timers.values())


def test_a_micro_batch_reads_only_the_keys_it_runs():
    """Keys without rows or due timers cost no state call: 200 open sessions, then a
    micro-batch with rows of one key reads and writes that key's entries only."""
    text = source_text() + (
        "SELECT k, SUM(v) AS total FROM s GROUP BY k, SESSION(ts, INTERVAL '30' SECOND)"
    )
    d = BucketDriver(text)
    d.batch([(f"k{i}", 1, i) for i in range(200)])
    wakes = {t for ts in d.timers.values() for t in ts}
    assert d.held() == 200 + len(wakes) + len(d.buckets)
    d.map_calls = 0
    d.batch([("k7", 1, 1000), ("k7", 1, 1001)])
    # the bucket's value (get, update: rows wait), the key's entry (get, update), its
    # old and new wake times' index entries (get, update or remove)
    assert d.map_calls <= 8
    assert d.results == []


def test_a_checkpoint_with_another_bucket_count_is_refused():
    text = QUERIES["tumble_lateness"]
    d = BucketDriver(text)
    d.batch([("a", 1, 0)])
    for bucket, (pending, _, keys) in d.buckets.items():
        d.buckets[bucket] = (pending, KEY_BUCKETS * 2, keys)
    with pytest.raises(WqlUnsupportedError) as err:
        d.batch([("a", 1, 100)])
    assert err.value.code == ErrorCode.SNAPSHOT
    assert f"{KEY_BUCKETS * 2} buckets" in err.value.message


NULL_KEYS = """
CREATE SOURCE bids (
    auction BIGINT,
    price   BIGINT,
    ts      TIMESTAMP,
    WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH (format = 'csv', path = '{path}', header = 'true', maxFilesPerTrigger = '1');
CREATE VIEW counts AS
SELECT auction, window_start, COUNT(*) AS n, SUM(price) AS total, MAX(price) AS top
FROM bids GROUP BY auction, TUMBLE(ts, INTERVAL '10' SECOND);
"""


def test_integer_keys_with_nulls_stream_as_in_batch(spark, tmp_path):
    """Spark hands a bucket's rows over as pandas, where one NULL in an integer key
    column makes the column floats with NaN: the NULL key is one key (NULL in the
    output) and the other keys are the integers they are in every micro-batch, as in
    batch (a key seen without and then with a NULL beside it keeps one state)."""
    from tests.spark.stream_helpers import batch_query, stream_query

    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.csv").write_text(
        "auction,price,ts\n1,1,2024-05-01 09:00:01\n2,3,2024-05-01 09:00:03\n"
    )
    (folder / "b.csv").write_text(
        "auction,price,ts\n,2,2024-05-01 09:00:04\n1,5,2024-05-01 09:00:06\n"
        ",4,2024-05-01 09:00:12\n2,,2024-05-01 09:00:13\n3,8,2024-05-01 09:00:25\n"
    )
    text = NULL_KEYS.format(path=folder)
    rows, _ = stream_query(spark, text, "counts", tmp_path / "out", tmp_path / "ck")
    want, _ = batch_query(spark, text, "counts")
    assert rows == want
    assert ("None", "2024-05-01 09:00:00", "1", "2", "2") in rows
    assert ("1", "2024-05-01 09:00:00", "2", "6", "5") in rows
