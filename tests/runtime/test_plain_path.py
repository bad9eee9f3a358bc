"""Every fast path of ``WindowOperator`` equals ``WindowOperator(config, fast=False)``.

``fast=False`` is the plain Flink port: the assigner's ``assign_windows``
and the trigger's own ``on_element`` / ``on_merge`` / ``on_event_time`` for
every row, no specialised per-row method, no slicing, no vectorized batches.
Each fast path is fed the same out-of-order rows, watermarks, lateness and
late output as the plain path:

- ``per-row``: the default operator's per-row path (inlined tumbling /
  sliding / cumulate assignment, inlined default trigger and cleanup timers,
  ``_session_element`` for static sessions);
- ``sliced``: ``slicing=True`` (HOP / CUMULATE, ``wql.runtime.slicing``);
- ``batch``: ``process_batch`` on batches of random sizes (the vectorized
  path where it applies, the per-row loop where it declines).

Per-row paths must agree after every row on emitted rows (in order), late
rows, counters and the snapshot's content (timers with their registration
numbers included). The batch path agrees on emitted rows as a multiset
(its documented ordering contract: rows fired inside a batch come in
window-time order), late rows, counters and each key's timers and open
windows after every batch.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wql.runtime import AggregateSpec, OperatorConfig, RowBatch, WindowOperator
from wql.runtime import snapshot as snap
from wql.runtime.assigners import (
    CumulateWindows,
    SessionWindows,
    SlidingWindows,
    TumblingWindows,
)

AGGS = (
    AggregateSpec("COUNT_STAR"),
    AggregateSpec("SUM", 0),
    AggregateSpec("MIN", 0),
    AggregateSpec("FIRST_VALUE", 0),
    AggregateSpec("COLLECT_LIST", 0),
)

ASSIGNERS = {
    "tumble": st.builds(TumblingWindows, st.integers(1, 30)),
    "hop": st.builds(SlidingWindows, st.integers(1, 40), st.integers(1, 12)),
    "cumulate": st.integers(1, 8).flatmap(
        lambda step: st.builds(
            CumulateWindows, st.just(step), st.integers(1, 5).map(lambda k: k * step)
        )
    ),
    "session": st.builds(SessionWindows, st.integers(1, 25)),
}

rows_st = st.lists(
    st.tuples(
        st.sampled_from([("a",), ("b",), ("c",)]),
        st.one_of(st.none(), st.integers(-40, 120)),  # None: missing timestamp
        st.one_of(st.none(), st.integers(-5, 9)),
        st.integers(0, 12),  # watermark step before the row
    ),
    max_size=50,
)


def _same_per_row(fast: WindowOperator, plain: WindowOperator) -> None:
    assert fast.drain() == plain.drain()
    assert fast.drain_late() == plain.drain_late()
    assert fast.counters == plain.counters
    assert snap.loads(fast.snapshot()) == snap.loads(plain.snapshot())


@pytest.mark.parametrize(
    ("path", "assigner"),
    [
        ("per-row", "tumble"),
        ("per-row", "hop"),
        ("per-row", "cumulate"),
        ("per-row", "session"),
        ("sliced", "hop"),
        ("sliced", "cumulate"),
        ("batch", "tumble"),
        ("batch", "hop"),
        ("batch", "cumulate"),
        ("batch", "session"),
    ],
)
@settings(max_examples=80, deadline=None)
@given(data=st.data(), rows=rows_st, lateness=st.sampled_from([0, 1, 7, 40]))
def test_fast_path_equals_plain_path(path, assigner, data, rows, lateness) -> None:
    late_output = data.draw(st.booleans())
    config = OperatorConfig(
        data.draw(ASSIGNERS[assigner]), AGGS, allowed_lateness=lateness, late_output=late_output
    )
    fast = WindowOperator(config, slicing=path == "sliced")
    plain = WindowOperator(config, fast=False)
    if path == "sliced":
        assert fast._slicer is not None
    wm = -60
    if path != "batch":
        for key, ts, v, step in rows:
            wm += step
            for op in (fast, plain):
                op.advance_watermark(wm)
                op.process_element(key, ts, (v,))
            _same_per_row(fast, plain)
        for op in (fast, plain):
            op.end_of_input()
        _same_per_row(fast, plain)
        return
    cuts = sorted(set(data.draw(st.lists(st.integers(0, len(rows)), max_size=3))))
    wms, acc = [], wm
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
            columns=([r[2] for r in part],),
            watermark_before=wms[a:b],
            timestamp_valid=[r[1] is not None for r in part],
        )
        fast.process_batch(batch)
        for i, (key, ts, v, _) in enumerate(part):
            plain.advance_watermark(wms[a + i])
            plain.process_element(key, ts, (v,))
        fast_out.update(map(repr, fast.drain()))
        plain_out.update(map(repr, plain.drain()))
        assert fast_out == plain_out
        assert Counter(map(repr, fast.drain_late())) == Counter(map(repr, plain.drain_late()))
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
