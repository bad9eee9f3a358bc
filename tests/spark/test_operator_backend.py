"""backends/operator.py: every spec construct maps to the runtime configuration (no Spark)."""

from __future__ import annotations

import pytest

from wql.compiler import compile_source
from wql.compiler import plan as P
from wql.compiler.backends.operator import build_operator
from wql.runtime import assigners as A
from wql.runtime import evictors as E
from wql.runtime import triggers as TR
from wql.runtime.aggregates import AggregateSpec

SOURCE = """CREATE SOURCE s (k STRING, v DOUBLE, n INT, ts TIMESTAMP, pt TIMESTAMP,
    WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (processing_time = 'pt');
"""


def op(query: str, engine: str = "operator"):
    program = compile_source(SOURCE + query, engine=engine)
    return build_operator(program.queries[0])


@pytest.mark.parametrize(
    ("window", "assigner"),
    [
        ("TUMBLE(ts, INTERVAL '3' SECOND)", A.TumblingWindows(3000, 0)),
        ("TUMBLE(ts, INTERVAL '3' SECOND, INTERVAL '1' SECOND)", A.TumblingWindows(3000, 1000)),
        ("HOP(ts, INTERVAL '1' SECOND, INTERVAL '3' SECOND)", A.SlidingWindows(3000, 1000, 0)),
        (
            "HOP(ts, INTERVAL '2' SECOND, INTERVAL '6' SECOND, INTERVAL '1' SECOND)",
            A.SlidingWindows(6000, 2000, 1000),
        ),
        (
            "CUMULATE(ts, INTERVAL '1' HOUR, INTERVAL '1' DAY)",
            A.CumulateWindows(3_600_000, 86_400_000),
        ),
        ("SESSION(ts, INTERVAL '30' MINUTE)", A.SessionWindows(1_800_000)),
        ("TUMBLE(PROCTIME(), INTERVAL '1' MINUTE)", A.TumblingWindows(60_000, event_time=False)),
        ("SESSION(PROCTIME(), INTERVAL '1' MINUTE)", A.SessionWindows(60_000, event_time=False)),
        ("GLOBAL()", A.GlobalWindows()),
    ],
)
def test_windows_map_to_assigners(window, assigner):
    trigger = " TRIGGER COUNT(2)" if window == "GLOBAL()" else ""
    o = op(f"SELECT k, COUNT(*) AS c FROM s GROUP BY k, {window}{trigger}")
    assert o.config.assigner == assigner


def test_dynamic_gap_is_a_bigint_value_column():
    o = op("SELECT k, COUNT(*) AS c FROM s GROUP BY k, SESSION(ts, GAP n * INTERVAL '1' SECOND)")
    assert isinstance(o.config.assigner, A.DynamicSessionWindows)
    gap = o.values[o.config.assigner.gap_index]
    assert "BIGINT" in gap.sql.upper() and gap.type.kind == "BIGINT"


def test_count_windows_expand_like_flink():
    tumbling = op("SELECT k, COUNT(*) AS c FROM s GROUP BY k, COUNT_WINDOW(5)")
    assert tumbling.config.assigner == A.GlobalWindows()
    assert tumbling.config.trigger == TR.PurgingTrigger(TR.CountTrigger(5))
    assert tumbling.config.evictor is None
    sliding = op("SELECT k, COUNT(*) AS c FROM s GROUP BY k, COUNT_WINDOW(5, 2)")
    assert sliding.config.trigger == TR.CountTrigger(2)
    assert sliding.config.evictor == E.CountEvictor(5)


@pytest.mark.parametrize(
    ("clause", "trigger"),
    [
        ("", TR.EventTimeTrigger()),
        ("TRIGGER WATERMARK", TR.EventTimeTrigger()),
        ("TRIGGER PROCESSING TIME", TR.ProcessingTimeTrigger()),
        ("TRIGGER COUNT(100)", TR.CountTrigger(100)),
        ("TRIGGER EVERY INTERVAL '2' SECOND", TR.ContinuousEventTimeTrigger(2000)),
        (
            "TRIGGER EVERY INTERVAL '2' SECOND OF PROCESSING TIME",
            TR.ContinuousProcessingTimeTrigger(2000),
        ),
        ("TRIGGER PURGING COUNT(4)", TR.PurgingTrigger(TR.CountTrigger(4))),
        (
            "TRIGGER TIMEOUT(COUNT(3), INTERVAL '1' MINUTE)",
            TR.ProcessingTimeoutTrigger(TR.CountTrigger(3), 60_000),
        ),
        (
            "TRIGGER ANY(COUNT(3), WATERMARK)",
            TR.AnyTrigger((TR.CountTrigger(3), TR.EventTimeTrigger())),
        ),
        (
            "TRIGGER ALL(COUNT(3), EVERY INTERVAL '1' SECOND)",
            TR.AllTrigger((TR.CountTrigger(3), TR.ContinuousEventTimeTrigger(1000))),
        ),
        (
            "TRIGGER WATERMARK WITH EARLY COUNT(2) LATE COUNT(1)",
            TR.EarlyLateTrigger(TR.CountTrigger(2), TR.CountTrigger(1)),
        ),
        ("TRIGGER WATERMARK WITH EARLY COUNT(2)", TR.EarlyLateTrigger(TR.CountTrigger(2), None)),
    ],
)
def test_triggers_map_to_runtime_triggers(clause, trigger):
    o = op(f"SELECT k, COUNT(*) AS c FROM s GROUP BY k, TUMBLE(ts, INTERVAL '3' SECOND) {clause}")
    assert o.config.effective_trigger == trigger


def test_delta_trigger_and_evictors_read_pre_evaluated_doubles():
    o = op(
        "SELECT k, SUM(v) AS t FROM s GROUP BY k, TUMBLE(ts, INTERVAL '3' SECOND) "
        "TRIGGER DELTA(v * 2, 10) EVICT DELTA(v, 5) AFTER"
    )
    trig, ev = o.config.trigger, o.config.evictor
    assert isinstance(trig, TR.DeltaTrigger) and trig.threshold == 10.0
    assert isinstance(ev, E.DeltaEvictor) and ev.threshold == 5.0 and ev.after
    assert o.values[trig.value_index].type.kind == "DOUBLE"
    assert "v * 2" in o.values[trig.value_index].sql
    assert o.values[ev.value_index].sql == "CAST((v) AS DOUBLE)"


@pytest.mark.parametrize(
    ("clause", "evictor"),
    [
        ("EVICT COUNT(10)", E.CountEvictor(10)),
        ("EVICT COUNT(10) AFTER", E.CountEvictor(10, after=True)),
        ("EVICT TIME(INTERVAL '2' SECOND)", E.TimeEvictor(2000)),
        ("EVICT TIME(INTERVAL '2' SECOND) BEFORE", E.TimeEvictor(2000)),
    ],
)
def test_evictors_map(clause, evictor):
    o = op(f"SELECT k, COUNT(*) AS c FROM s GROUP BY k, TUMBLE(ts, INTERVAL '4' SECOND) {clause}")
    assert o.config.evictor == evictor


def test_aggregates_share_value_indices_and_keep_kinds():
    o = op(
        "SELECT k, COUNT(*) AS a, COUNT(v) AS b, SUM(v) AS c, MIN(v) AS d, MAX(v) AS e, "
        "AVG(v) AS f, COUNT(DISTINCT v) AS g, FIRST_VALUE(k) AS h, LAST_VALUE(k) AS i, "
        "COLLECT_LIST(n) AS j FROM s GROUP BY k, TUMBLE(ts, INTERVAL '3' SECOND)"
    )
    v = [x.sql for x in o.values].index("v")
    k = [x.sql for x in o.values].index("k")
    n = [x.sql for x in o.values].index("n")
    assert o.config.aggregates == (
        AggregateSpec("COUNT_STAR"),
        AggregateSpec("COUNT", v),
        AggregateSpec("SUM", v),
        AggregateSpec("MIN", v),
        AggregateSpec("MAX", v),
        AggregateSpec("AVG", v),
        AggregateSpec("COUNT_DISTINCT", v),
        AggregateSpec("FIRST_VALUE", k),
        AggregateSpec("LAST_VALUE", k),
        AggregateSpec("COLLECT_LIST", n),
    )
    assert len(o.values) == 3


def test_lateness_and_late_output_carry_every_source_column():
    o = op(
        "SELECT k, SUM(v) AS t FROM s GROUP BY k, TUMBLE(ts, INTERVAL '2' SECOND) "
        "ALLOWED LATENESS INTERVAL '500' MILLISECOND LATE DATA TO late_s"
    )
    assert o.config.allowed_lateness == 500 and o.config.late_output
    assert [name for name, _ in o.late_columns] == ["k", "v", "n", "ts", "pt"]
    assert o.config.late_columns == tuple(i for _, i in o.late_columns)
    # SUM(v)'s argument and the late column v share one value
    assert o.values[o.config.aggregates[0].arg].sql == "v"
    assert o.config.aggregates[0].arg in o.config.late_columns


def test_keys_are_the_plan_keys_in_group_by_order():
    o = op("SELECT n, k, COUNT(*) AS c FROM s GROUP BY n, k, TUMBLE(ts, INTERVAL '3' SECOND)")
    assert [key.name for key in o.keys] == ["n", "k"]
    windowall = op("SELECT COUNT(*) AS c FROM s GROUP BY TUMBLE(ts, INTERVAL '3' SECOND)")
    assert windowall.keys == ()


@pytest.mark.parametrize(
    ("query", "domains"),
    [
        ("TUMBLE(ts, INTERVAL '3' SECOND)", {P.TimeDomain.EVENT}),
        ("TUMBLE(PROCTIME(), INTERVAL '3' SECOND)", {P.TimeDomain.PROCESSING}),
        ("COUNT_WINDOW(3)", set()),
        (
            "TUMBLE(ts, INTERVAL '3' SECOND) TRIGGER EVERY INTERVAL '1' SECOND OF PROCESSING TIME",
            {P.TimeDomain.EVENT, P.TimeDomain.PROCESSING},
        ),
        (
            "TUMBLE(ts, INTERVAL '3' SECOND) TRIGGER TIMEOUT(COUNT(2), INTERVAL '1' SECOND)",
            {P.TimeDomain.EVENT, P.TimeDomain.PROCESSING},
        ),
        (
            "TUMBLE(ts, INTERVAL '3' SECOND) TRIGGER COUNT(2)",
            {P.TimeDomain.EVENT},
        ),
    ],
)
def test_time_domains_tell_the_host_which_clocks_matter(query, domains):
    o = op(f"SELECT k, COUNT(*) AS c FROM s GROUP BY k, {query}")
    assert set(o.domains) == domains
    assert o.mixes_time_domains == (len(domains) > 1)
