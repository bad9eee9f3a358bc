"""A pipeline run per key with firing tags equals one global sequential run.

The reference runs a chain of operators the way Flink runs it at
parallelism 1 (``docs/architecture.md``, "Contract: pipelines"): for each
source row, every stage first processes the rows its upstream fired at the
watermark rise before the row, then fires its own timers (rise), then the
row itself goes through stage 0 and what it fires through the next stages;
at end of input the watermark rises to the last watermark, then to
``MAX_TIME``. Rows fired at one step reach the next stage in WQL's order
(rows fired by rows first, in input order; then timer rows by timer time,
key, window end, window start).

The pipeline form runs each stage per key group, lazily (a key's timers fire
only when its next row comes, or at the end), with ``tag_firings``, places
every emitted row with :class:`wql.runtime.pipeline.GlobalClock` and feeds
the next stage in that order with the watermark the clock says. Both must
emit the same rows at the same steps, in the same order.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.runtime.pipeline_reference import N, global_run, next_input, order, watermarks
from wql.runtime import AggregateSpec, OperatorConfig, WindowOperator
from wql.runtime.assigners import (
    CumulateWindows,
    SessionWindows,
    SlidingWindows,
    TumblingWindows,
)
from wql.runtime.config import FIRED_BY_ROW
from wql.runtime.pipeline import GlobalClock, row_step
from wql.runtime.triggers import (
    ContinuousEventTimeTrigger,
    CountTrigger,
    EarlyLateTrigger,
    EventTimeTrigger,
    OnceTrigger,
    PurgingTrigger,
    UntilTrigger,
)


@st.composite
def stages(draw: Any) -> OperatorConfig:
    size = draw(st.integers(2, 30))
    assigner = draw(
        st.sampled_from(
            [
                TumblingWindows(size),
                SlidingWindows(size * 2, size),
                CumulateWindows(size, size * 3),
                SessionWindows(size),
            ]
        )
    )
    trigger = draw(
        st.sampled_from(
            [
                None,
                EventTimeTrigger(),
                CountTrigger(2),
                PurgingTrigger(CountTrigger(2)),
                ContinuousEventTimeTrigger(draw(st.integers(1, 9))),
                EarlyLateTrigger(CountTrigger(1), None),
                EarlyLateTrigger(ContinuousEventTimeTrigger(4), CountTrigger(1)),
                OnceTrigger(CountTrigger(2)),
                UntilTrigger(CountTrigger(1), OnceTrigger(EventTimeTrigger())),
            ]
        )
    )
    return OperatorConfig(
        assigner,
        (AggregateSpec("COUNT_STAR"), AggregateSpec("SUM", 0)),
        trigger=trigger,
        allowed_lateness=draw(st.sampled_from([0, 0, 3, 20])),
        tag_firings=True,
    )


#: (key, event time, value, delay before the row): a source row with its
#: watermark step; the watermark is computed from the event times seen (delay 2).
rows_st = st.lists(
    st.tuples(
        st.sampled_from([("a",), ("b",), ("c",)]),
        st.integers(0, 90),
        st.integers(-3, 9),
    ),
    max_size=40,
)


def _pipeline_run(
    configs: list[OperatorConfig], rekeys: list[str], rows: list, groups: int, fast: bool
) -> list[list]:
    """Per stage: [(step, row)], each stage run per key group with lazily fired timers."""
    wms, final = watermarks(rows)
    clock = GlobalClock.from_replay(range(len(rows)), wms, final)
    # a stage's input: (step, rank within the step, key, event time, values)
    inputs = [(row_step(s), 0, key, ts, (v,)) for s, (key, ts, v) in enumerate(rows)]
    out: list[list] = []
    for k, config in enumerate(configs):
        placed = _run_stage(config, inputs, clock, final, groups, fast)
        out.append([(step, r) for step, _, r in placed])
        if k + 1 < len(configs):
            inputs = [(step, rank, *next_input(r, rekeys[k + 1])) for step, rank, r in placed]
    return out


def _run_stage(
    config: OperatorConfig, inputs: list, clock: GlobalClock, final: int, groups: int, fast: bool
) -> list[tuple[int, int, tuple]]:
    """One stage over its ``inputs``: ``(step, rank, row)`` of every row it emits, in order."""
    by_group: dict[int, list] = defaultdict(list)
    for inp in sorted(inputs, key=lambda x: (x[0], x[1])):
        by_group[sum(map(ord, repr(inp[2]))) % groups].append(inp)
    emitted: list[tuple] = []
    for part in by_group.values():
        op = WindowOperator(config, fast=fast)
        steps: list[int] = []
        ranks: list[int] = []

        def drain(op: WindowOperator = op, steps: list = steps, ranks: list = ranks) -> None:
            for r in op.drain():
                by, time, a = r[-3:]
                step = clock.place(by, time, None if a is None else steps[a])
                rank = ranks[a] if by == FIRED_BY_ROW else 0
                emitted.append((step, order(r, rank, len(emitted)), r[:-3]))

        for step, rank, key, ts, values in part:
            op.advance_watermark(clock.watermark_before(step))
            drain()
            steps.append(step)
            ranks.append(rank)
            op.process_element(key, ts, values)
            drain()
        op.advance_watermark(final)
        op.end_of_input()
        drain()
    emitted.sort(key=lambda e: (e[0], e[1]))
    placed = []
    rank_in_step: dict[int, int] = defaultdict(int)
    for step, _, r in emitted:
        placed.append((step, rank_in_step[step], r))
        rank_in_step[step] += 1
    return placed


@settings(max_examples=150, deadline=None)
@given(
    configs=st.lists(stages(), min_size=2, max_size=3),
    rekeys=st.lists(st.sampled_from(["same", "ab", "all"]), min_size=3, max_size=3),
    rows=rows_st,
    groups=st.integers(1, 3),
    fast=st.booleans(),
)
def test_per_key_pipeline_equals_the_global_run(
    configs: list[OperatorConfig], rekeys: list[str], rows: list, groups: int, fast: bool
) -> None:
    want = global_run(configs, rekeys, rows)
    got = _pipeline_run(configs, rekeys, rows, groups, fast)
    assert [[(s, r[:-3]) for s, r in stage] for stage in want] == got


def test_rows_fired_at_a_rise_come_before_it_downstream() -> None:
    """Minute counts rolled up per 2 minutes: the upstream's ON_TIME rows are not late."""
    up = OperatorConfig(TumblingWindows(60), (AggregateSpec("COUNT_STAR"),), tag_firings=True)
    down = OperatorConfig(
        TumblingWindows(120), (AggregateSpec("SUM", 0),), allowed_lateness=0, tag_firings=True
    )
    rows = [(("a",), t, 1) for t in (0, 10, 59, 61, 119, 130, 200)]
    got = _pipeline_run([up, down], ["same", "same", "same"], rows, 1, True)
    assert [(r[1], r[2], r[N]) for _, r in got[1]] == [(0, 120, 5), (120, 240, 2)]
