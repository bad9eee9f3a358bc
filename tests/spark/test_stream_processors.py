"""The all-keys stream processor driven as Spark drives it, without Spark's streaming.

``AllKeysProcessor`` with a ``ChainBody`` (a pipeline's stages on the
runtime's ``OperatorChain``) gets the stream tests' bursts one file per
micro-batch, through a handle that keeps its one state and its timers as
Spark's state store does (every call restores the pipeline from the saved
bytes), then the drained stream's end watermark. The rollup's rows are the
hand-derived ones ``wql run --stream --drain`` writes
(tests/spark/test_stream_pipelines.py), and nothing is left in state.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

pytest.importorskip("pyspark")

from pyspark.sql.streaming.stateful_processor import (  # noqa: E402, I001
    ExpiredTimerInfo,
    TimerValues,
)

import wql  # noqa: E402
from tests.spark.stream_helpers import PIPELINES, SOURCE, files  # noqa: E402
from wql.spark import layout as L  # noqa: E402
from wql.spark.stream_chain import AllKeysProcessor, chain_body  # noqa: E402
from wql.spark.streaming import end_watermark  # noqa: E402


class _Handle:
    """The StatefulProcessorHandle surface the processor uses: one value, its timers."""

    def __init__(self) -> None:
        self.value = None
        self.timers: set[int] = set()
        self.saves = 0

    def getValueState(self, name, schema):  # noqa: N802 - Spark's API
        handle = self

        class Value:
            def get(self):
                return handle.value

            def update(self, v) -> None:
                assert isinstance(v[0], bytes) and len(v) == 5
                handle.value, handle.saves = v, handle.saves + 1

            def clear(self) -> None:
                handle.value = None

        return Value()

    def registerTimer(self, t: int) -> None:  # noqa: N802
        self.timers.add(t)

    def deleteTimer(self, t: int) -> None:  # noqa: N802
        self.timers.discard(t)


def _ms(row: dict) -> int:
    return int(pd.Timestamp(row["ts"]).tz_localize("UTC").value // 1_000_000)


def test_the_pipeline_processor_gives_the_hand_derived_rollup():
    text = SOURCE.format(path="unused", options="") + PIPELINES["rollup"]
    program = wql.compile(text, streaming=True).program
    q = next(x for x in program.queries if x.name == "rollup")
    chain = q.engine.stream
    assert [s.name for s in chain.upstream] == ["per_auction"]
    ops, body = chain_body((*chain.upstream, q), chain.links, chain.ops)
    _, output = L.tagged_layout(q, ops[-1])
    first = chain.upstream[0]
    delay = first.source.event_time.delay_ms
    end = end_watermark(first)
    configs = tuple(op.config for op in ops)
    processor = AllKeysProcessor(output, end, configs, body, delay, True)
    handle = _Handle()
    processor.init(handle)
    records: list[dict] = []

    def call(rows: list[dict], wm: int) -> None:
        frames = []
        if rows:
            staged = {"k": [r["auction"] for r in rows], "v": [r["price"] for r in rows]}
            staged["ts"] = [_ms(r) for r in rows]
            frames = [processor.handleInputRows((0,), iter([pd.DataFrame(staged)]), tv(wm))]
        for t in sorted(x for x in handle.timers if x < wm):
            handle.timers.discard(t)  # Spark deletes a timer once it fired
            frames.append(processor.handleExpiredTimer((0,), tv(wm), ExpiredTimerInfo(t)))
        records.extend(rec for out in frames for f in out for rec in f.to_dict("records"))

    def tv(wm: int) -> TimerValues:
        return TimerValues(-1, wm)

    lag = delay + 1  # Spark's watermark: max event time of earlier micro-batches - lag
    max_ts = None
    for f in files():
        call(f, 0 if max_ts is None else max(0, max_ts - lag))
        max_ts = max(_ms(r) for r in f) if max_ts is None else max(max_ts, *map(_ms, f))
    call([], end)  # the drained stream's end marker

    def utc(ms: float) -> str:
        return pd.Timestamp(int(ms), unit="ms").strftime("%Y-%m-%dT%H:%M:%S.000Z")

    rows = sorted(
        [utc(r[L.WINDOW_START]), utc(r[L.WINDOW_END])]
        + [str(int(r[L.result_column(i)])) for i in range(3)]
        for r in records
        if r[L.KIND] == L.RESULT
    )
    assert rows == [
        ["2024-01-01T00:00:00.000Z", "2024-01-01T00:00:20.000Z", "13", "9", "6"],
        ["2024-01-01T00:00:20.000Z", "2024-01-01T00:00:40.000Z", "5", "7", "5"],
        ["2024-01-01T00:00:40.000Z", "2024-01-01T00:01:00.000Z", "2", "5", "2"],
    ]
    counted = [json.loads(r[L.COUNTERS]) for r in records if r[L.KIND] == L.COUNTS]
    assert L.sum_counters(json.dumps(c) for c in counted)["rows_in"] == 13
    # the state was saved between calls and ended with the stream
    assert handle.saves > 1 and handle.value is None and not handle.timers


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_the_pipeline_host_runs_the_operator_plans_built_at_planning(name, monkeypatch):
    """The planner builds every stage's operator plan once (``stream_plan.StreamMemo``)
    and the stream plan carries them; the host tags the views' firings on those plans
    (no second build) and gets the configurations building them tagged gives."""
    from wql.compiler.backends.operator import build_stage
    from wql.spark import stream_chain

    text = SOURCE.format(path="unused", options="") + PIPELINES[name]
    program = wql.compile(text, streaming=True).program
    q = next(x for x in program.queries if x.name == name)
    chain = q.engine.stream
    stages = (*chain.upstream, q)
    assert [op.query.name for op in chain.ops] == [s.name for s in stages]

    def built_again(*args, **kwargs):
        raise AssertionError("the host built a stage's operator plan again")

    monkeypatch.setattr(stream_chain, "build_stage", built_again)
    ops, _ = chain_body(stages, chain.links, chain.ops)
    monkeypatch.undo()
    last = len(stages) - 1
    for i, (s, op) in enumerate(zip(stages, ops, strict=True)):
        assert op.config == build_stage(s, tag_firings=i < last).config, s.name
        assert op.config.tag_firings == (i < last)
