"""Key buckets: :class:`wql.spark.streaming.BucketProcessor` equals the per-key processor.

A keyed single query on a stream is grouped by its key's bucket
(docs/streaming.md, "Key buckets"). ``processor_helpers.BucketDriver`` plays Spark's part for
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

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("pyspark")

from tests.spark.processor_helpers import (  # noqa: E402
    DRAINED,
    QUERIES,
    BucketDriver,
    assert_as_per_key,
    rows_st,
    source_text,
    split_batches,
)
from wql.errors import ErrorCode, WqlUnsupportedError  # noqa: E402
from wql.spark.streaming import (  # noqa: E402
    DUE_NAME,
    KEY_BUCKETS,
    KEY_BUCKETS_CONF,
    KEYS_NAME,
    MAX_KEY_BUCKETS,
    BucketProcessor,
    key_buckets,
)


@pytest.mark.parametrize("name", sorted(QUERIES))
@settings(max_examples=25, deadline=None)
@given(rows=rows_st, cuts=st.lists(st.integers(0, 40), max_size=6))
def test_buckets_equal_the_per_key_processor(name, rows, cuts):
    assert_as_per_key(BucketDriver, QUERIES[name], split_batches(rows, cuts), drainable=False)


@pytest.mark.parametrize("name", sorted(DRAINED))
@settings(max_examples=20, deadline=None)
@given(rows=rows_st, cuts=st.lists(st.integers(0, 40), max_size=6))
def test_drained_buckets_equal_the_per_key_processor(name, rows, cuts):
    assert_as_per_key(BucketDriver, DRAINED[name], split_batches(rows, cuts), drainable=True)


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


def test_the_bucket_count_is_a_session_conf(spark, tmp_path):
    """``spark.wql.stream.keyBuckets`` sets a keyed stream's bucket count: the rows are
    those of batch at any count, and a restart at another count is refused, naming the
    count to restart with."""
    from tests.spark.stream_helpers import batch_query, stream_query

    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.csv").write_text(
        "auction,price,ts\n1,1,2024-05-01 09:00:01\n2,3,2024-05-01 09:00:03\n"
        "3,2,2024-05-01 09:00:04\n1,5,2024-05-01 09:00:16\n"
    )
    text = NULL_KEYS.format(path=folder)
    spark.conf.set(KEY_BUCKETS_CONF, "3")
    try:
        rows, _ = stream_query(spark, text, "counts", tmp_path / "out", tmp_path / "ck")
        # not drained: its checkpoint runs on
        stream_query(spark, text, "counts", tmp_path / "out2", tmp_path / "ck2", drain=False)
    finally:
        spark.conf.unset(KEY_BUCKETS_CONF)
    want, _ = batch_query(spark, text, "counts")
    assert rows == want
    (folder / "b.csv").write_text("auction,price,ts\n2,4,2024-05-01 09:00:31\n")
    with pytest.raises(WqlUnsupportedError) as err:
        stream_query(spark, text, "counts", tmp_path / "out2", tmp_path / "ck2")
    assert err.value.code == ErrorCode.SNAPSHOT
    assert f"keeps its keys in 3 buckets; this stream groups them into {KEY_BUCKETS}" in str(
        err.value
    )
    assert f"{KEY_BUCKETS_CONF} = 3" in (err.value.hint or "")


@pytest.mark.parametrize("value", ["0", "-2", "many", "1.5", str(MAX_KEY_BUCKETS + 1)])
def test_a_bad_bucket_count_is_named(spark, value):
    spark.conf.set(KEY_BUCKETS_CONF, value)
    try:
        with pytest.raises(WqlUnsupportedError) as err:
            key_buckets(spark)
    finally:
        spark.conf.unset(KEY_BUCKETS_CONF)
    assert err.value.code == ErrorCode.USAGE
    assert KEY_BUCKETS_CONF in err.value.message and repr(value) in err.value.message
    assert key_buckets(spark) == KEY_BUCKETS


class SmallGroups(BucketDriver):
    """:class:`BucketDriver` whose processor puts at most two moved keys in a group, so
    that groups lose their earliest key, point to each other and fire in parts."""

    def __init__(self, text: str, *, drainable: bool = False) -> None:
        super().__init__(text, drainable=drainable)
        self.proc.group_keys = 2


many_keys_st = st.lists(
    st.tuples(st.sampled_from("abcdefgh"), st.integers(1, 5), st.integers(0, 20_000)),
    min_size=1,
    max_size=60,
)


@pytest.mark.parametrize("name", sorted(DRAINED))
@settings(max_examples=25, deadline=None)
@given(rows=many_keys_st, cuts=st.lists(st.integers(0, 60), max_size=8))
def test_index_groups_equal_the_per_key_processor(name, rows, cuts):
    """Eight keys in two buckets, groups of two: a key leaves its group while the others
    wait, a group's earliest wake moves forward and back, a timer runs the due keys
    of several groups; the same results, late rows and counters as the per-key processor."""
    batches = split_batches(rows, cuts)
    if name in QUERIES:
        # rows waiting in windows that never fire are counted once drained (the others)
        assert_as_per_key(SmallGroups, QUERIES[name], batches, drainable=False)
    assert_as_per_key(SmallGroups, DRAINED[name], batches, drainable=True)


class OneKeyGroupsFirst(BucketDriver):
    """Groups of one key for the first ``switch`` micro-batches: the index as it was
    written before groups (one entry per wake time, plain keys, each key's state naming
    its wake time), then the processor as it runs now on that state (a restart)."""

    switch = 2

    def __init__(self, text: str, *, drainable: bool = False) -> None:
        super().__init__(text, drainable=drainable)
        self.proc.group_keys = 1
        self.proc.lazy_leave = False
        self.calls = 0

    def batch(self, rows: list[tuple[str, float, int]], watermark: int | None = None) -> None:
        self.calls += 1
        if self.calls > self.switch:
            self.proc.group_keys = BucketProcessor.group_keys
            self.proc.lazy_leave = BucketProcessor.lazy_leave
        super().batch(rows, watermark)
        if self.calls <= self.switch:
            self.assert_layout_before_groups()

    def assert_layout_before_groups(self) -> None:
        for bucket, entries in self.maps.get(DUE_NAME, {}).items():
            for (t,), (keys,) in entries.items():
                # every element a plain key (a pickle: 0x80 first) waking at the entry's time
                assert keys and all(kb[0] == 0x80 for kb in keys)
                for kb in keys:
                    assert self.maps[KEYS_NAME][bucket][(kb,)][3] == t


@pytest.mark.parametrize("name", sorted(DRAINED))
@settings(max_examples=15, deadline=None)
@given(rows=many_keys_st, cuts=st.lists(st.integers(0, 60), min_size=3, max_size=8))
def test_an_index_written_before_groups_runs_on(name, rows, cuts):
    """A checkpoint written before index groups (one entry per wake time) resumes with
    groups: the same results, late rows and counters as the per-key processor."""
    assert_as_per_key(OneKeyGroupsFirst, DRAINED[name], split_batches(rows, cuts), drainable=True)


def sixteen_moved_sessions() -> tuple[BucketDriver, list[str]]:
    """Sixteen session keys in two buckets after two micro-batches, each of which ran
    every key and moved its wake time (the streaming bench's pattern)."""
    text = source_text() + (
        "SELECT k, SUM(v) AS total FROM s GROUP BY k, SESSION(ts, INTERVAL '30' SECOND)"
    )
    d = BucketDriver(text)
    keys = [f"k{i}" for i in range(16)]
    d.batch([(k, 1, i) for i, k in enumerate(keys)])
    d.batch([(k, 1, 1000 + i) for i, k in enumerate(keys)])
    return d, keys


def test_the_keys_a_call_moves_share_one_entry_and_timer():
    """Sixteen sessions in two buckets, each key's wake moved by every micro-batch (the
    streaming bench's pattern): per bucket one index entry and one Spark timer, and a
    micro-batch reads and writes one old and one new entry per bucket, not two per key.
    A micro-batch that leaves the keys' wake times alone writes no index entry."""
    d, keys = sixteen_moved_sessions()
    assert len(d.buckets) == 2
    assert sum(len(m) for m in d.maps[DUE_NAME].values()) == 2
    assert sum(len(ts) for ts in d.timers.values()) == 2
    d.map_calls = 0
    d.batch([(k, 1, 2000 + i) for i, k in enumerate(keys)])
    # per bucket its value (get, update); per key its entry (get, update); per bucket
    # its old group's entry (get, remove) and the new one's (get, update)
    assert d.map_calls <= 2 * 2 + 16 * 2 + 2 * 4
    assert sum(len(ts) for ts in d.timers.values()) == 2
    # a tumbling window: a row in the same window leaves the key's wake time
    d2 = BucketDriver(QUERIES["tumble_lateness"])
    d2.batch([(k, 1, 10) for k in keys])
    index = {b: dict(m) for b, m in d2.maps[DUE_NAME].items()}
    timers = {b: set(ts) for b, ts in d2.timers.items()}
    d2.map_calls = 0
    d2.batch([(k, 2, 20) for k in keys])
    assert {b: dict(m) for b, m in d2.maps[DUE_NAME].items()} == index
    assert {b: set(ts) for b, ts in d2.timers.items()} == timers
    # per bucket its value (get, update) and its group's entry (get); per key its state
    assert d2.map_calls <= 2 * 3 + 16 * 2
    assert d.results == [] and d2.results == []


class AlternateReads(BucketDriver):
    """Reads its buckets whole in one micro-batch and entry by entry in the next."""

    def batch(self, rows: list[tuple[str, float, int]], watermark: int | None = None) -> None:
        self.proc.read_whole = 0 if self.proc.read_whole else 1_000_000
        super().batch(rows, watermark)


@pytest.mark.parametrize("name", sorted(DRAINED))
@settings(max_examples=15, deadline=None)
@given(rows=many_keys_st, cuts=st.lists(st.integers(0, 60), min_size=3, max_size=8))
def test_whole_and_entry_reads_equal_the_per_key_processor(name, rows, cuts):
    """Whichever way a call reads its bucket (whole, or entry by entry), the results,
    late rows and counters are the per-key processor's."""
    assert_as_per_key(AlternateReads, DRAINED[name], split_batches(rows, cuts), drainable=True)


def test_a_call_running_its_whole_bucket_reads_it_whole():
    """Sixteen sessions in two buckets, every key in every micro-batch: per bucket one
    request reads its key map and one its timer index, instead of one per key and one
    per index entry; a micro-batch running one key of 200 still reads entry by entry
    (test_a_micro_batch_reads_only_the_keys_it_runs)."""
    d, keys = sixteen_moved_sessions()
    d.map_calls = 0
    d.batch([(k, 1, 2000 + i) for i, k in enumerate(keys)])
    # per bucket: its value (get, update), its key map and index read (one request
    # each), its old group's entry removed and the new one written; per key its entry
    # written
    assert d.map_calls == 2 * 6 + 16
    assert d.results == []


class LazyLeaving(BucketDriver):
    """Never reads a bucket whole and forms groups of two: every key that moves leaves
    its old group lazily, so entries keep stale elements until their timers reach them."""

    def __init__(self, text: str, *, drainable: bool = False) -> None:
        super().__init__(text, drainable=drainable)
        self.proc.group_keys = 2
        self.proc.read_whole = 0


@pytest.mark.parametrize("name", sorted(DRAINED))
@settings(max_examples=25, deadline=None)
@given(rows=many_keys_st, cuts=st.lists(st.integers(0, 60), max_size=8))
def test_lazy_leaving_equals_the_per_key_processor(name, rows, cuts):
    """Keys that leave their groups lazily run exactly when the per-key processor runs
    them, and a stale element runs nothing: the same results, late rows and counters,
    and drained, nothing left."""
    batches = split_batches(rows, cuts)
    if name in QUERIES:
        assert_as_per_key(LazyLeaving, QUERIES[name], batches, drainable=False)
    assert_as_per_key(LazyLeaving, DRAINED[name], batches, drainable=True)


def test_a_key_leaving_lazily_reads_no_old_entry():
    """200 open sessions, then one key's rows: the call reads and writes the key's state,
    the bucket's value and the key's new group, not the group it left; the old group's
    timer later finds the stale element, drops it, and runs the others."""
    text = source_text() + (
        "SELECT k, SUM(v) AS total FROM s GROUP BY k, SESSION(ts, INTERVAL '30' SECOND)"
    )
    d = BucketDriver(text)
    d.batch([(f"k{i}", 1, i) for i in range(200)])
    d.map_calls = 0
    d.batch([("k7", 1, 1000), ("k7", 1, 1001)])
    # the bucket's value (get, update), the key's state (get, update), its new group's
    # entry (get, update)
    assert d.map_calls <= 6
    d.batch([("k0", 1, 100_000)])
    d.batch([])  # the watermark the last micro-batch raised fires the sessions
    assert sorted(r[0] for r in d.results) == sorted(f"k{i}" for i in range(200))
    assert [r[1:3] + r[-1:] for r in d.results if r[0] == "k7"] == [(7, 31_001, 3.0)]


class OneByOne(BucketDriver):
    """Runs an input call's keys one by one (``together`` off): the path that timer
    calls and the end of input take, for input calls too."""

    def __init__(self, text: str, *, drainable: bool = False) -> None:
        super().__init__(text, drainable=drainable)
        self.proc.together = False


@pytest.mark.parametrize("name", sorted(DRAINED))
@settings(max_examples=15, deadline=None)
@given(rows=many_keys_st, cuts=st.lists(st.integers(0, 60), max_size=8))
def test_keys_one_by_one_equal_the_per_key_processor(name, rows, cuts):
    """The other drivers run an input call's keys together; one by one gives the same
    results, late rows and counters."""
    assert_as_per_key(OneByOne, DRAINED[name], split_batches(rows, cuts), drainable=True)
