"""Partitioned stream pipelines: a chain whose stages keep the first stage's keys runs
grouped by them (docs/streaming.md, "Partitioned pipelines"), against batch replay.

The streams are the burst files of the stream pipeline tests
(``tests/spark/stream_helpers.py``), so the watermark rises at the same
places as in batch replay; each auction is a Spark group of its own, spread
over the session's shuffle partitions. A drained stream's rows and counters
equal the batch pipeline's, and a restart between micro-batches loses and
doubles nothing. The pipelines of KEYED run together, in one stream over the
burst files that their tests share (the ``drained`` fixture), stopped in the
middle and restarted from its checkpoint.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import wql
from tests.spark.partitioned_helpers import COUNTED, KEYED, NAMES, every_pipeline
from tests.spark.stream_helpers import (
    batch_queries,
    files,
    stream_queries,
    write_files,
)
from wql.spark.streaming import STATE_NAME

pytestmark = pytest.mark.spark


def test_key_preserving_chains_are_planned_partitioned_by_the_first_stages_keys():
    compiled = wql.compile(every_pipeline(Path("in")), streaming=True)
    for name in KEYED:
        plan = compiled.program.query(name).engine.stream
        assert plan.partition == (0,), name
        assert plan.partition_text == ("auction",), name
        reasons = [r.message for r in compiled.program.query(name).engine.reasons]
        assert any("partitioned by auction" in r for r in reasons), name
    for name, keys in (
        ("keyed_left", "b.auction = c.auction"),
        ("keyed_full", "h.auction = l.item"),
    ):
        plan = compiled.program.query(name).engine.stream
        assert plan.partition_text == (keys,), name
        reasons = [r.message for r in compiled.program.query(name).engine.reasons]
        assert any(f"join processor, partitioned by {keys}" in r for r in reasons), name


@pytest.fixture(scope="module")
def drained(spark, tmp_path_factory):
    """Every keyed pipeline streamed together over the burst files (one stream for the
    module), stopped after files 0-5 and resumed from the same checkpoint with the rest
    and the end of input, drained; and in batch. Returns the rows of the first run,
    the state rows (key, partition) of ``auction_rollup`` at the stop, the streamed
    rows and counters, the batch rows and counters."""
    base = tmp_path_factory.mktemp("partitioned")
    folder, out, ck = base / "in", base / "out", base / "ck"
    names = NAMES
    write_files(folder, range(6))
    first, sinks = stream_queries(spark, every_pipeline(folder), names, out, ck, drain=False)
    state = (
        spark.read.format("statestore")
        .option("stateVarName", STATE_NAME)
        .load(str(sinks.operators["auction_rollup"]))
        .selectExpr("key.*", "partition_id")
        .collect()
    )
    write_files(folder, range(6, len(files())))
    streamed, sinks = stream_queries(spark, every_pipeline(folder), names, out, ck)
    counters = sinks.counters(spark)
    expected, batch_counters = batch_queries(spark, every_pipeline(folder, stream=False), names)
    return first, state, streamed, counters, expected, batch_counters


@pytest.mark.parametrize("name", NAMES)
def test_a_drained_partitioned_pipeline_or_join_equals_the_batch_run(drained, name):
    _, _, streamed, stream_counters, batch, batch_counters = drained
    assert sum(batch[name].values()) >= 3
    assert streamed[name] == batch[name]
    for key in COUNTED:
        assert stream_counters[name][key] == batch_counters[name][key], key


def test_a_restart_between_micro_batches_gives_the_uninterrupted_rows(drained):
    # the module's stream stopped after files 0-5 and resumed from its checkpoint: each
    # auction's pipeline state is a state row of its own, in its own partition
    first, state, resumed, stream_counters, batch, batch_counters = drained
    names = NAMES
    assert sorted(r[0] for r in state) == ["a", "b", "c"]
    assert len({r.partition_id for r in state}) > 1, "every auction in one partition"
    # append mode: what the first run wrote is final, a part of the result
    assert (
        0 < sum(sum(first[n].values()) for n in names) < sum(sum(batch[n].values()) for n in names)
    )
    for name in names:
        assert not first[name] - batch[name], name
        assert resumed[name] == batch[name], name
        got = stream_counters[name]
        for key in COUNTED:
            assert got[key] == batch_counters[name][key], (name, key)
