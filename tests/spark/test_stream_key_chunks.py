"""Key chunks: a bucket's keys kept several per state entry equal the per-key processor.

With ``spark.wql.stream.keyChunk = n`` a new key bucket keeps its keys' states in
chunks of about ``n`` keys, by a stable hash (docs/streaming.md, "Key chunks").
``processor_helpers.BucketDriver`` plays Spark's part as in test_stream_buckets.py;
here its buckets use chunks of one key (so that eight keys in two buckets make
the chunk count double several times), read whole in one micro-batch and entry
by entry in the next, or switch to chunks after a restart.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("pyspark")

from tests.spark.processor_helpers import (  # noqa: E402
    DRAINED,
    QUERIES,
    BucketDriver,
    assert_as_per_key,
    source_text,
    split_batches,
)
from tests.spark.test_stream_buckets import AlternateReads, many_keys_st  # noqa: E402
from wql.errors import ErrorCode, WqlUnsupportedError  # noqa: E402
from wql.spark.streaming import (  # noqa: E402
    KEY_CHUNK,
    KEY_CHUNK_CONF,
    KEYS_NAME,
    MAX_KEY_CHUNK,
    key_chunk,
)


class Chunked(AlternateReads):
    """Chunks of one key; reads its buckets whole in one micro-batch and entry by entry
    in the next."""

    def __init__(self, text: str, *, drainable: bool = False) -> None:
        super().__init__(text, drainable=drainable)
        self.proc.layout = replace(self.proc.layout, chunk_keys=1)


class Spreading(AlternateReads):
    """Chunks of one key, at most two chunks: a bucket's chunk count doubles past two
    keys, its keys spread to an entry each past four and gather back into chunks when
    a whole read leaves it one."""

    def __init__(self, text: str, *, drainable: bool = False) -> None:
        super().__init__(text, drainable=drainable)
        self.proc.layout = replace(self.proc.layout, chunk_keys=1)
        self.proc.store.max_chunks = 2


class ChunkedAfterRestart(BucketDriver):
    """One entry per key for the first two micro-batches, then chunks of two (a restart
    with the conf set): buckets that hold keys keep their layout, a bucket that empties
    takes chunks."""

    def __init__(self, text: str, *, drainable: bool = False) -> None:
        super().__init__(text, drainable=drainable)
        self.calls = 0

    def batch(self, rows: list[tuple[str, float, int]], watermark: int | None = None) -> None:
        self.calls += 1
        if self.calls == 3:
            self.proc.layout = replace(self.proc.layout, chunk_keys=2)
        super().batch(rows, watermark)


@pytest.mark.parametrize("name", sorted(QUERIES))
@settings(max_examples=10, deadline=None)
@given(rows=many_keys_st, cuts=st.lists(st.integers(0, 60), max_size=8))
def test_chunks_equal_the_per_key_processor(name, rows, cuts):
    assert_as_per_key(Chunked, QUERIES[name], split_batches(rows, cuts), drainable=False)


@pytest.mark.parametrize("name", sorted(DRAINED))
@settings(max_examples=10, deadline=None)
@given(rows=many_keys_st, cuts=st.lists(st.integers(0, 60), max_size=8))
def test_drained_chunks_equal_the_per_key_processor(name, rows, cuts):
    """... and leave no chunk and no chunk count behind once drained."""
    assert_as_per_key(Chunked, DRAINED[name], split_batches(rows, cuts), drainable=True)


@pytest.mark.parametrize("name", sorted(DRAINED))
@settings(max_examples=10, deadline=None)
@given(rows=many_keys_st, cuts=st.lists(st.integers(0, 60), min_size=3, max_size=8))
def test_buckets_spreading_and_gathering_equal_the_per_key_processor(name, rows, cuts):
    assert_as_per_key(Spreading, DRAINED[name], split_batches(rows, cuts), drainable=True)


@pytest.mark.parametrize("name", sorted(DRAINED))
@settings(max_examples=10, deadline=None)
@given(rows=many_keys_st, cuts=st.lists(st.integers(0, 60), min_size=3, max_size=8))
def test_a_restart_with_chunks_runs_on(name, rows, cuts):
    assert_as_per_key(ChunkedAfterRestart, DRAINED[name], split_batches(rows, cuts), drainable=True)


def test_a_call_writes_the_chunks_of_its_keys():
    """200 open sessions in chunks of eight: the map holds chunks, not an entry per key;
    a micro-batch running every key writes ~one entry per eight keys, and one running
    a single key reads and writes only that key's chunk."""
    text = source_text() + (
        "SELECT k, SUM(v) AS total FROM s GROUP BY k, SESSION(ts, INTERVAL '30' SECOND)"
    )
    d = BucketDriver(text)
    d.proc.layout = replace(d.proc.layout, chunk_keys=8)
    keys = [f"k{i}" for i in range(200)]
    d.batch([(k, 1, i) for i, k in enumerate(keys)])
    entries = [kb for per in d.maps[KEYS_NAME].values() for kb in per]
    assert len(entries) <= 2 * 200 // 8
    assert all(kb[0][0] == 1 for kb in entries)  # chunks, no entry per key (0x80 first)
    sizes = [len(per) for per in d.maps[KEYS_NAME].values()]
    held = [keys for _, _, keys in d.buckets.values()]
    for chunks, n in zip(sizes, held, strict=True):
        assert n <= 2 * 8 * chunks  # at most twice the chunk size per chunk, on average
    d.map_calls = 0
    d.batch([(k, 1, 1000 + i) for i, k in enumerate(keys)])
    # per bucket: its value, its map and index read whole, its chunks and index entries
    assert d.map_calls <= 2 * 6 + 2 * 200 // 8
    d.map_calls = 0
    d.batch([("k7", 1, 2000), ("k7", 1, 2001)])
    # the bucket's value (get, update), the key's chunk (get, update), its old and new
    # wake times' index entries (get, update or remove): as with an entry per key
    assert d.map_calls <= 8
    assert d.results == []


def layouts(d: BucketDriver) -> list[str]:
    """Each bucket's layout as its map holds it: "chunks" or "per key"."""
    return sorted(
        "chunks" if all(kb[0][0] == 1 for kb in per) else "per key"
        for per in d.maps[KEYS_NAME].values()
        if per
    )


def test_a_bucket_of_many_keys_spreads_them_and_gathers_them_when_few_are_left():
    """Chunks of two, at most four chunks: 60 open sessions in two buckets (~30 keys
    each, more than 2 * 2 * 4) are kept an entry per key; when all but a few have ended,
    a micro-batch that runs the bucket's keys (a whole read) gathers them into chunks
    again; 60 keys again spread them. (The rows equal the per-key processor's:
    test_buckets_spreading_and_gathering_equal_the_per_key_processor.)"""
    text = source_text() + (
        "SELECT k, SUM(v) AS total FROM s GROUP BY k, SESSION(ts, INTERVAL '30' SECOND)"
    )
    d = BucketDriver(text)
    d.proc.layout = replace(d.proc.layout, chunk_keys=2)
    d.proc.store.max_chunks = 4
    keys = [f"k{i}" for i in range(60)]
    d.batch([(k, 1, i) for i, k in enumerate(keys)])
    assert layouts(d) == ["per key", "per key"]
    assert sum(len(per) for per in d.maps[KEYS_NAME].values()) == 60
    # k56..k59 go on; the watermark their rows raise ends every first session in the
    # next micro-batch's timer calls, which leave two keys in each bucket
    for t in (100_000, 100_100):
        d.batch([(k, 1, t + i) for i, k in enumerate(keys[56:])])
    assert layouts(d) == ["per key", "per key"]
    assert len(d.results) == 60
    assert [keys for _, _, keys in d.buckets.values()] == [2, 2]
    # a call running both keys of its bucket reads it whole and gathers them
    d.batch([(k, 1, 100_200 + i) for i, k in enumerate(keys[56:])])
    assert layouts(d) == ["chunks", "chunks"]
    assert sum(len(per) for per in d.maps[KEYS_NAME].values()) == 2
    d.batch([(k, 1, 100_300 + i) for i, k in enumerate(keys)])
    assert layouts(d) == ["per key", "per key"]
    assert sum(len(per) for per in d.maps[KEYS_NAME].values()) == 60


def test_a_stream_with_chunks_restarts_and_equals_batch(spark, tmp_path):
    """A keyed stream with ``spark.wql.stream.keyChunk`` set, stopped with its keys'
    state in chunks, restarted (its buckets' stamps carry the layout beside the bucket
    count, which the restart checks) and drained: batch's rows."""
    from tests.spark.stream_helpers import batch_query, stream_query
    from tests.spark.test_stream_buckets import NULL_KEYS

    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.csv").write_text(
        "auction,price,ts\n1,1,2024-05-01 09:00:01\n2,3,2024-05-01 09:00:03\n"
        "3,2,2024-05-01 09:00:04\n4,6,2024-05-01 09:00:05\n"
    )
    text = NULL_KEYS.format(path=folder)
    spark.conf.set(KEY_CHUNK_CONF, "2")
    try:
        stream_query(spark, text, "counts", tmp_path / "out", tmp_path / "ck", drain=False)
        (folder / "b.csv").write_text(
            "auction,price,ts\n,2,2024-05-01 09:00:04\n1,5,2024-05-01 09:00:16\n"
            "5,4,2024-05-01 09:00:12\n2,,2024-05-01 09:00:13\n3,8,2024-05-01 09:00:25\n"
        )
        rows, _ = stream_query(spark, text, "counts", tmp_path / "out", tmp_path / "ck")
    finally:
        spark.conf.unset(KEY_CHUNK_CONF)
    want, _ = batch_query(spark, text, "counts")
    assert rows == want


@pytest.mark.parametrize("value", ["-1", "some", "2.5", str(MAX_KEY_CHUNK + 1)])
def test_a_bad_chunk_size_is_named(spark, value):
    spark.conf.set(KEY_CHUNK_CONF, value)
    try:
        with pytest.raises(WqlUnsupportedError) as err:
            key_chunk(spark)
    finally:
        spark.conf.unset(KEY_CHUNK_CONF)
    assert err.value.code == ErrorCode.USAGE
    assert KEY_CHUNK_CONF in err.value.message and repr(value) in err.value.message
    assert key_chunk(spark) == KEY_CHUNK
