"""Every fast path of ``WindowOperator`` equals ``WindowOperator(config, fast=False)``.

``fast=False`` is the plain Flink port: the assigner's ``assign_windows``
and the trigger's own ``on_element`` / ``on_merge`` / ``on_event_time`` for
every row, no fast per-row path, no slices, no vectorized batches. Each
fast path is fed the same out-of-order rows, clocks, lateness and late
output as the plain path:

- ``per-row``: the default operator's per-row path (``wql.runtime.fastpath``):
  ``WindowPath`` (inlined TUMBLE/HOP/CUMULATE assignment, inlined default
  trigger and cleanup timers; assignment only under another trigger or on
  processing time) and ``SessionPath`` (static and dynamic gaps);
- ``batch``: ``process_batch`` on batches of random sizes (the vectorized
  path where it applies, however short: ``vectorized.MIN_BATCH = 0`` in the
  batch paths; the per-row loop where it declines);
- ``columnar``: ``process_batch`` on HOP / CUMULATE at lateness 0 with the
  aggregates of ``wql.runtime.columnar`` (the (key, slice) columns, fired
  per watermark step), which may hand its state to the per-window path
  after a random batch (a whole snapshot restored into a new operator, or
  every key's snapshot restored);
- ``batch-cut``: the same with every part of a cut batch planned however
  short (``vectorized.MIN_PART = 1``): rows behind the watermark, late
  firings and bridging rows go through the loop alone, the rows between
  them through the NumPy path.

Per-row paths must agree after every row on emitted rows (in order; with
``tag_firings``, each ending with what fired it), late rows, counters and
the snapshot's content (timers with their registration
numbers included); the fast operator may be restored from its whole
snapshot mid-stream, or every key from its own snapshot before each of its
rows (the streaming host's round trip), and must go on exactly the same.
The batch path agrees on emitted rows as a multiset (its documented
ordering contract: rows fired inside a batch come in window-time order),
late rows, counters and each key's timers and open windows after every
batch.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.runtime.strategies import ALL_AGGS, CONFIGS, rows_st
from wql.runtime import (
    AggregateSpec,
    OperatorConfig,
    RowBatch,
    WindowOperator,
    vectorized,
)
from wql.runtime import snapshot as snap
from wql.runtime.assigners import (
    SessionWindows,
)
from wql.runtime.columnar import ColumnarWindows

#: The columnar HOP/CUMULATE store's kinds (over an integer column).
COLUMNAR_AGGS = (
    AggregateSpec("COUNT_STAR"),
    AggregateSpec("COUNT", 0),
    AggregateSpec("SUM", 0),
    AggregateSpec("AVG", 0),
    AggregateSpec("MIN", 0),
    AggregateSpec("MAX", 0),
)
#: Numeric arguments only: the vectorized path declines string columns.
NUMERIC_AGGS = (
    AggregateSpec("COUNT_STAR"),
    AggregateSpec("SUM", 0),
    AggregateSpec("MIN", 0),
    AggregateSpec("FIRST_VALUE", 0),
    AggregateSpec("COLLECT_LIST", 0),
)


def _same(fast: WindowOperator, plain: WindowOperator) -> None:
    assert fast.drain() == plain.drain()
    assert fast.drain_late() == plain.drain_late()
    assert fast.counters == plain.counters
    assert fast.open_windows() == plain.open_windows()
    assert fast.state_size() == plain.state_size()
    # sets (COUNT DISTINCT) may pickle in another order: compare the loaded data
    assert snap.loads(fast.snapshot()) == snap.loads(plain.snapshot())


@pytest.mark.parametrize(
    ("path", "name"),
    [
        *(("per-row", name) for name in CONFIGS if name != "count-window"),
        *(("batch", name) for name in ("tumble", "hop", "cumulate", "session")),
        ("batch", "dynamic-session"),
        ("batch", "count-window"),
        *(("batch-cut", name) for name in ("tumble", "hop", "session", "dynamic-session")),
        *(("columnar", name) for name in ("hop", "hop-any-size", "cumulate")),
        *(
            (path, name)
            for path in ("batch", "batch-cut")
            for name in ("session-count-evict", "session-purging-count", "dynamic-session-count")
        ),
    ],
)
@settings(max_examples=60, deadline=None)
@given(data=st.data(), rows=rows_st, lateness=st.sampled_from([0, 1, 7, 40, 2**63]))
def test_fast_path_equals_plain_path(path: str, name: str, data: Any, rows: list, lateness: int):
    assigner_st, trigger, expected, *evictor = CONFIGS[name]
    aggs = {"columnar": COLUMNAR_AGGS, "batch": NUMERIC_AGGS, "batch-cut": NUMERIC_AGGS}
    config = OperatorConfig(
        data.draw(assigner_st),
        aggs.get(path, ALL_AGGS),
        trigger=trigger,
        evictor=evictor[0] if evictor else None,
        allowed_lateness=0 if path == "columnar" else lateness,
        late_output=data.draw(st.booleans()),
        # a pipeline stage: every emitted row ends with what fired it
        tag_firings=data.draw(st.booleans()),
    )
    fast = WindowOperator(config)
    plain = WindowOperator(config, fast=False)
    want = expected
    if path == "columnar" and ColumnarWindows.applies(config):  # HOP: unless size < slide
        want = "ColumnarWindows"
    assert (None if fast._path is None else type(fast._path).__name__) == want
    assert plain._path is None
    if path in ("batch", "batch-cut", "columnar"):
        min_part, min_batch = vectorized.MIN_PART, vectorized.MIN_BATCH
        vectorized.MIN_PART = 1 if path == "batch-cut" else min_part
        vectorized.MIN_BATCH = 0  # the batch forms plan batches of any length
        if path in ("batch-cut", "columnar"):
            # mostly ahead of the watermark (so that most of a batch is planned), about
            # one row in five at or behind it: those go through the loop alone; values
            # and gaps without nulls (the NumPy path's columns)
            clock = -60
            for i, (key, ts, v, s, gap, step) in enumerate(rows):
                clock += step
                ts = None if ts is None else clock + ts % 40 - 7
                rows[i] = (key, ts, v or 0, s, gap or 0, step)
        try:
            _batches(fast, plain, data, rows, config)
        finally:
            vectorized.MIN_PART, vectorized.MIN_BATCH = min_part, min_batch
        return
    restore_at = data.draw(st.one_of(st.none(), st.integers(0, len(rows))))
    per_key = data.draw(st.booleans())
    float_at = data.draw(st.one_of(st.none(), st.integers(0, len(rows))))
    clock = -60
    for i, (key, ts, v, s, gap, step) in enumerate(rows):
        if i == restore_at:
            fast = WindowOperator.restore(config, fast.snapshot())
        if per_key:
            saved, plain_saved = fast.snapshot_key(key), plain.snapshot_key(key)
            assert snap.loads(saved) == snap.loads(plain_saved)
            fast.restore_key(key, saved)
            plain.restore_key(key, plain_saved)
        if i == float_at and v is not None:
            v = v + 0.5  # a float among integers
        clock += step
        for op in (fast, plain):
            op.advance_watermark(clock)
            op.advance_processing_time(clock)
            op.process_element(key, ts, (v, s, gap))
        _same(fast, plain)
    for op in (fast, plain):
        op.end_of_input()
        op.process_element(("a",), 5, (1, "x", 3))  # after end of input every window is late
    _same(fast, plain)
    assert fast.active_keys() == plain.active_keys()


def _batches(
    fast: WindowOperator, plain: WindowOperator, data: Any, rows: list, config: OperatorConfig
) -> None:
    cuts = sorted(set(data.draw(st.lists(st.integers(0, len(rows)), max_size=3))))
    settle = data.draw(st.sampled_from([None, "snapshot", "keys"]))
    settle_after = data.draw(st.integers(0, 3))
    wms, acc = [], -60
    for *_, step in rows:
        acc += step
        wms.append(acc)
    # emitted rows hold lists (COLLECT_LIST): counted by their repr
    fast_out: Counter = Counter()
    plain_out: Counter = Counter()
    for a, b in zip([0, *cuts], [*cuts, len(rows)], strict=True):
        if a >= b:
            continue
        part = rows[a:b]
        batch = RowBatch(
            keys=[r[0] for r in part],
            timestamps=[0 if r[1] is None else r[1] for r in part],
            columns=([r[2] for r in part], [r[3] for r in part], [r[4] for r in part]),
            watermark_before=wms[a:b],
            timestamp_valid=[r[1] is not None for r in part],
        )
        fast.process_batch(batch)
        for i, (key, ts, v, s, gap, _) in enumerate(part):
            plain.advance_watermark(wms[a + i])
            plain.process_element(key, ts, (v, s, gap))
        fast_out.update(map(repr, fast.drain()))
        plain_out.update(map(repr, plain.drain()))
        assert fast_out == plain_out
        assert Counter(map(repr, fast.drain_late())) == Counter(map(repr, plain.drain_late()))
        if settle_after == 0 and settle == "snapshot":
            fast = WindowOperator.restore(config, fast.snapshot())
        elif settle_after == 0 and settle == "keys":
            for key in fast.active_keys():
                fast.restore_key(key, fast.snapshot_key(key))
        settle_after -= 1
        assert fast.counters == plain.counters
        assert fast.open_windows() == plain.open_windows()
        for key in ("a",), ("b",), ("c",):
            assert fast.timers(key) == plain.timers(key)
    for op in (fast, plain):
        op.end_of_input()
    fast_out.update(map(repr, fast.drain()))
    plain_out.update(map(repr, plain.drain()))
    assert fast_out == plain_out
    assert fast.counters == plain.counters


def test_a_row_bridging_sessions_merges_three() -> None:
    config = OperatorConfig(SessionWindows(10), NUMERIC_AGGS)
    fast, plain = WindowOperator(config), WindowOperator(config, fast=False)
    for op in (fast, plain):
        for ts in (0, 20, 10, 40, 30):  # 10 and 30 each bridge two sessions (touching)
            op.process_element(("k",), ts, (ts,))
    _same(fast, plain)
    assert fast.open_windows() == 1
    for op in (fast, plain):
        op.end_of_input()
    out = fast.drain()
    assert [(r[1], r[2], r[7], r[8], r[9]) for r in out] == [(0, 50, 5, 100, 0)]
    plain.drain()
    _same(fast, plain)


@pytest.mark.parametrize("restored", [False, True])
def test_columnar_hop_after_a_restore_fires_only_the_windows_still_open(restored: bool):
    """A restored operator sets its watermark after making its columnar path: a row
    behind that watermark joins only the windows still open, as on the per-row path
    (a HOP of 9 over slides of 1: of the nine windows of ts -67, only [-66, -58)
    ends after the watermark -60)."""
    from wql.runtime.assigners import SlidingWindows

    config = OperatorConfig(SlidingWindows(size=9, slide=1, offset=0), COLUMNAR_AGGS)

    def batch(ts: int | None) -> RowBatch:
        return RowBatch(
            keys=[("a",)],
            timestamps=[0 if ts is None else ts],
            columns=([0], [None], [0]),
            watermark_before=[-60],
            timestamp_valid=[ts is not None],
        )

    fast, plain = WindowOperator(config), WindowOperator(config, fast=False)
    plain.advance_watermark(-60)
    for ts in (None, -67):
        fast.process_batch(batch(ts))
        plain.process_element(("a",), ts, (0, None, 0))
        if restored and ts is None:
            fast = WindowOperator.restore(config, fast.snapshot())
    assert type(fast._path).__name__ == "ColumnarWindows"
    assert fast.open_windows() == plain.open_windows() == 1
    for op in (fast, plain):
        op.advance_watermark(100)
    fired, want = fast.drain(), plain.drain()
    assert fired == want and len(want) == 1
    assert fast.counters == plain.counters
