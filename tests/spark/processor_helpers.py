"""The streaming processor's micro-batch driver and its references, without Spark's engine.

``Driver`` plays Spark's part for :class:`wql.spark.streaming.WindowProcessor`
exactly as Structured Streaming does for ``transformWithStateInPandas`` (the
rules: ``test_streaming_processor.py``'s module docstring); ``reference_stream``
is ONE ``WindowOperator`` fed the documented streaming semantics,
``reference_batch`` batch replay; the queries both processors are tested on
(``QUERIES``, ``DRAINED``); ``BucketDriver``, the same loop for
:class:`wql.spark.streaming.BucketProcessor`, grouped by key bucket. Shared by
``test_streaming_processor.py``, ``test_stream_buckets.py``,
``test_stream_packed.py`` and ``test_emit.py``.
"""

from __future__ import annotations

import functools
import zlib
from collections import Counter

import pandas as pd
from hypothesis import strategies as st
from pyspark.sql.streaming.stateful_processor import ExpiredTimerInfo, TimerValues

from wql.compiler import compile_source
from wql.compiler.backends.operator import build_operator
from wql.runtime.window_operator import WindowOperator
from wql.spark.layout import sum_counters
from wql.spark.streaming import (
    END_MS,
    BucketProcessor,
    WindowProcessor,
    processor_layout,
    spark_watermark_delay_ms,
    time_mode,
)

BASE = 1_700_000_000_000  # Spark's watermark cannot go below the epoch: real timestamps
END = 2**62  # a watermark past every window ("end of input" for a stream)


def source_text(delay_s: int = 0) -> str:
    return (
        "CREATE SOURCE s (k STRING, v DOUBLE, ts TIMESTAMP, "
        f"WATERMARK FOR ts AS ts - INTERVAL '{delay_s}' SECOND);\n"
    )


class _Value:
    def __init__(self, driver: Driver) -> None:
        self.d = driver

    def exists(self) -> bool:
        return self.d.key in self.d.state

    def get(self):
        return self.d.state.get(self.d.key)

    def update(self, value) -> None:
        assert isinstance(value[0], bytes) and len(value) == 5
        self.d.state[self.d.key] = value

    def clear(self) -> None:
        self.d.state.pop(self.d.key, None)


class Driver:
    """Spark's micro-batch loop for one query's processor (one partition)."""

    def __init__(self, text: str, *, drainable: bool = False) -> None:
        self.query, op = compiled_query(text)
        self.op = op
        self.delay = spark_watermark_delay_ms(self.query)
        #: with an end stream: Spark's watermark once the end marker arrived
        self.end_watermark = END_MS - self.delay if drainable else None
        mode = time_mode(op, drainable=drainable)
        layout = processor_layout(self.query, op, mode, end_watermark=self.end_watermark)
        self.layout = layout
        self.proc = WindowProcessor(layout)
        self.counters: list[str] = []  # the C rows
        self.state: dict = {}
        self.timers: dict = {}
        self.key = None
        self.max_ts: int | None = None
        self.results: list[tuple] = []
        self.late: list[tuple] = []
        self.dropped: Counter = Counter()
        self.proc.init(self)

    # the StatefulProcessorHandle surface the processor uses
    def getValueState(self, name, schema):  # noqa: N802 - Spark's API
        return _Value(self)

    def registerTimer(self, t: int) -> None:  # noqa: N802
        self.timers.setdefault(self.key, set()).add(t)

    def deleteTimer(self, t: int) -> None:  # noqa: N802
        self.timers.get(self.key, set()).discard(t)

    def listTimers(self):  # noqa: N802
        return iter(sorted(self.timers.get(self.key, ())))

    @property
    def watermark(self) -> int:
        if self.max_ts is None:
            return 0
        return max(0, self.max_ts - self.delay)

    def staged(
        self, rows: list[tuple[str, float, int]], watermark: int | None
    ) -> tuple[int, TimerValues, dict[str, list]]:
        """A micro-batch's clock, its timer values and its rows in Spark's positional
        columns: key, values (as the operator plan lists them), ts."""
        wm = self.watermark if watermark is None else watermark
        # ProcessingTime mode: ``watermark`` is the micro-batch's processing time
        processing = self.layout.mode == "ProcessingTime"
        tv = TimerValues(wm, -1) if processing else TimerValues(-1, wm)
        columns = {"_0": [r[0] for r in rows]}
        for i, v in enumerate(self.op.values):
            columns[f"_{i + 1}"] = {
                "v": [float(r[1]) for r in rows],
                "`k`": [r[0] for r in rows],
                "`ts`": pd.to_datetime([BASE + r[2] for r in rows], unit="ms"),
            }[v.sql]
        columns[f"_{len(self.op.values) + 1}"] = [BASE + r[2] for r in rows]
        # the staged NaN bits after every other column (stream_input's nan_columns): a
        # float key or input that is NaN, not NULL (pandas holds both as NaN)
        floats = self.layout.floats
        if floats:
            bits = [0] * len(rows)
            for b, i in enumerate(floats):
                for j, v in enumerate(columns[f"_{i}"]):
                    if isinstance(v, float) and v != v:  # noqa: PLR0124 - NaN
                        bits[j] |= 1 << b
            columns[f"_{len(columns)}"] = bits
        return wm, tv, columns

    def batch(self, rows: list[tuple[str, float, int]], watermark: int | None = None) -> None:
        """One micro-batch of ``(key, value, ts ms after BASE)`` rows."""
        wm, tv, columns = self.staged(rows, watermark)
        frame = pd.DataFrame(columns)
        for k in sorted({r[0] for r in rows}):
            self.key = (k,)
            part = frame[frame["_0"] == k].reset_index(drop=True)
            self._collect(self.proc.handleInputRows((k,), iter([part]), tv))
        due = sorted((t, key) for key, ts in self.timers.items() for t in ts if t < wm)
        for t, key in due:
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

    def end(self) -> None:
        """A no-data batch whose watermark passed every window."""
        self.batch([], END)

    def drain(self) -> None:
        """The no-data batch after the end marker: Spark's watermark is the end's."""
        assert self.end_watermark is not None
        self.batch([], self.end_watermark)

    def _collect(self, frames) -> None:
        import json

        for f in frames:
            for rec in f.to_dict("records"):
                if rec["__wql_kind"] == "R":
                    self.results.append(
                        (
                            rec["__wql_k0"],
                            rel_ms(rec["__wql_ws"]),
                            rel_ms(rec["__wql_we"]),
                            int(rec["__wql_pane"]),
                            rec["__wql_timing"],
                            num(rec["__wql_a0"]),
                        )
                    )
                elif rec["__wql_kind"] == "L":
                    self.late.append(
                        (rec["__wql_l0"], rec["__wql_l1"], int(rec["__wql_late_ts"]) - BASE)
                    )
                else:
                    self.counters.append(rec["__wql_counters"])
                    self.dropped.update(json.loads(rec["__wql_counters"])["dropped"])


#: The processor tests' queries (tests/spark/test_streaming_processor.py,
#: tests/spark/test_stream_buckets.py)
QUERIES = {
    "session_purging_count": source_text()
    + "SELECT k, pane_index, SUM(v) AS total FROM s GROUP BY k, SESSION(ts, INTERVAL '3' SECOND) "
    "TRIGGER PURGING COUNT(3) LATE DATA TO late_s",
    "tumble_lateness": source_text(1)
    + "SELECT k, SUM(v) AS total FROM s GROUP BY k, TUMBLE(ts, INTERVAL '2' SECOND) "
    "ALLOWED LATENESS INTERVAL '1' SECOND LATE DATA TO late_s",
    "hop_every": source_text()
    + "SELECT k, SUM(v) AS total FROM s GROUP BY k, HOP(ts, INTERVAL '1' SECOND, "
    "INTERVAL '3' SECOND) TRIGGER EVERY INTERVAL '500' MILLISECOND LATE DATA TO late_s",
    "hop_count": source_text()
    + "SELECT k, pane_timing, SUM(v) AS total FROM s GROUP BY k, HOP(ts, INTERVAL '1' SECOND, "
    "INTERVAL '3' SECOND) TRIGGER COUNT(2) LATE DATA TO late_s",
    "session_watermark": source_text(2)
    + "SELECT k, SUM(v) AS total FROM s GROUP BY k, SESSION(ts, INTERVAL '2' SECOND) "
    "ALLOWED LATENESS INTERVAL '1' SECOND LATE DATA TO late_s",
}

#: Queries whose rows can wait in windows that never fire (count windows, GLOBAL(),
#: a trigger that never fires) or fire only at the end (EVERY OF EVENT TIME on GLOBAL)
DRAINED = {
    **QUERIES,
    "count_window": source_text()
    + "SELECT k, COUNT(*) AS n, SUM(v) AS total FROM s GROUP BY k, COUNT_WINDOW(3)",
    "global_every_event_time": source_text()
    + "SELECT k, SUM(v) AS total FROM s GROUP BY k, GLOBAL() "
    "TRIGGER EVERY INTERVAL '2' SECOND OF EVENT TIME",
    "sliding_count_evict_time": source_text()
    + "SELECT k, SUM(v) AS total FROM s GROUP BY k, GLOBAL() "
    "TRIGGER COUNT(2) EVICT TIME(INTERVAL '1' SECOND)",
    "tumble_count_never": source_text(1)
    + "SELECT k, SUM(v) AS total FROM s GROUP BY k, TUMBLE(ts, INTERVAL '2' SECOND) "
    "TRIGGER COUNT(4)",
}


def rel_ms(x):
    """A window bound relative to BASE (None for count and global windows)."""
    return None if x is None or x != x else int(x) - BASE


def num(x):
    return None if x is None or x != x else float(x)


def collect_emitted(op: WindowOperator, results: list, late: list) -> None:
    for r in op.drain():
        results.append((r[0][0], rel_ms(r[1]), rel_ms(r[2]), r[4], r[5], num(r[7])))
    for _key, ts, values in op.drain_late():
        late.append((values[0], values[1], ts - BASE))


@functools.cache
def compiled_query(text: str):
    q = compile_source(text, engine="operator").queries[0]
    return q, build_operator(q)


def _values(text: str, k: str, v: float, t: int) -> tuple:
    sample = {"v": float(v), "`k`": k, "`ts`": None}
    return tuple(sample[c.sql] for c in compiled_query(text)[1].values)


def fed_operator(text: str, batches: list[list[tuple]]) -> tuple[WindowOperator, list, list]:
    """One operator fed the documented streaming semantics (watermark per micro-batch)."""
    q, plan = compiled_query(text)
    op = WindowOperator(plan.config)
    delay = q.source.event_time.delay_ms + 1
    results: list = []
    late: list = []
    max_ts = None
    for rows in batches:
        if max_ts is not None and max_ts - delay > 0:
            op.advance_watermark(max_ts - delay)
        for k, v, t in sorted(rows, key=lambda r: r[2]):
            op.process_element((k,), BASE + t, _values(text, k, v, t))
        collect_emitted(op, results, late)
        if rows:
            top = BASE + max(r[2] for r in rows)
            max_ts = top if max_ts is None else max(max_ts, top)
    return op, results, late


def reference_stream(text: str, batches: list[list[tuple]]) -> tuple[Counter, Counter]:
    """One operator, the documented streaming semantics, then a watermark past every window."""
    op, results, late = fed_operator(text, batches)
    op.advance_watermark(END)
    collect_emitted(op, results, late)
    return Counter(results), Counter(late)


def reference_batch(text: str, rows: list[tuple]) -> tuple[Counter, Counter]:
    """Batch replay in the given order: each row sees max(ts before it) - delay - 1."""
    q, plan = compiled_query(text)
    op = WindowOperator(plan.config)
    delay = q.source.event_time.delay_ms
    results: list = []
    late: list = []
    max_ts = None
    for k, v, t in rows:
        if max_ts is not None:
            op.advance_watermark(max_ts - delay - 1)
        op.process_element((k,), BASE + t, _values(text, k, v, t))
        max_ts = BASE + t if max_ts is None else max(max_ts, BASE + t)
    op.end_of_input()
    collect_emitted(op, results, late)
    return Counter(results), Counter(late)


def run_driver(text: str, batches: list[list[tuple]]) -> Driver:
    d = Driver(text)
    for rows in batches:
        d.batch(rows)
    d.end()
    return d


rows_st = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(1, 5), st.integers(0, 20_000)),
    min_size=1,
    max_size=40,
)


def split_batches(rows: list, cuts: list[int]) -> list[list]:
    points = sorted({c % (len(rows) + 1) for c in cuts})
    out, prev = [], 0
    for p in points + [len(rows)]:
        out.append(rows[prev:p])
        prev = p
    return out


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

    def iterator(self):
        """Spark's iterator: the map's entries in one request (the batches of the
        state server's answer are one call here)."""
        self.d.map_calls += 1
        return iter(list(self._map().items()))


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
        self.proc = BucketProcessor(self.layout)
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
        self.input_phase(rows, columns, tv)
        self.timer_phase(wm, tv)
        if rows:
            top = BASE + max(r[2] for r in rows)
            self.max_ts = top if self.max_ts is None else max(self.max_ts, top)

    def input_phase(self, rows: list[tuple], columns: dict[str, list], tv: TimerValues) -> None:
        """One ``handleInputRows`` per bucket with rows, in bucket order."""
        bucket = f"_{len(columns)}"  # after the staged columns (run_streaming)
        columns[bucket] = [zlib.crc32(r[0].encode()) % BUCKETS for r in rows]
        frame = pd.DataFrame(columns)
        for b in sorted(set(columns[bucket])):
            self.key = (b,)
            part = frame[frame[bucket] == b].reset_index(drop=True)
            self._collect(self.proc.handleInputRows((b,), iter([part]), tv))

    def timer_phase(self, wm: int, tv: TimerValues) -> None:
        """``handleExpiredTimer`` per (bucket, timer) strictly below the watermark, in
        time order; a timer an earlier call of the micro-batch deleted does not fire."""
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


def run_with(driver_type: type[Driver], text: str, batches: list[list], *, drainable: bool):
    """``batches`` through a fresh ``driver_type`` driver, then the end of input (drained
    through the end marker when ``drainable``)."""
    d = driver_type(text, drainable=drainable)
    for rows in batches:
        d.batch(rows)
    if drainable:
        d.drain()
    else:
        d.end()
    return d


def assert_as_per_key(
    driver_type: type[Driver], text: str, batches: list[list], *, drainable: bool
) -> None:
    """``driver_type`` gives the per-key processor's results, late rows and counters;
    drained, it leaves no state and no timer behind."""
    per_key = run_with(Driver, text, batches, drainable=drainable)
    other = run_with(driver_type, text, batches, drainable=drainable)
    assert Counter(other.results) == Counter(per_key.results)
    assert Counter(other.late) == Counter(per_key.late)
    assert sum_counters(other.counters) == sum_counters(per_key.counters)
    if drainable:
        # the end of input leaves no key, no index entry and no timer behind
        assert other.held() == 0 and not any(other.timers.values())
