"""The sqlglot bridge: canonical SQL, types, positions, and SQL that Spark runs."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from wql.compiler import compile_source
from wql.compiler import types as T
from wql.compiler.expressions import (
    Relation,
    bind_scalar,
    interval_to_millis_sql,
    parse_expr,
    quote_name,
)
from wql.compiler.plan import Column
from wql.errors import Span, WqlSemanticError, WqlSyntaxError

REL = Relation(
    "source t",
    (
        Column("k", T.STRING),
        Column("n", T.INT),
        Column("big", T.BIGINT),
        Column("v", T.DOUBLE),
        Column("d", T.DECIMAL(10, 2)),
        Column("ok", T.BOOLEAN),
        Column("ts", T.TIMESTAMP),
        Column("day", T.DATE),
        Column("select", T.STRING),
    ),
)


def bound(text: str, *, prefix: str = ""):
    source = prefix + text
    pe = parse_expr(text, Span.from_offsets(source, len(prefix), len(source)), source)
    return bind_scalar(pe, REL, clause="WHERE", table_names=("t",))


@pytest.mark.parametrize(
    "text,sql,typ",
    [
        ("v * 2 > 10", "v * 2 > 10", T.BOOLEAN),
        ("n + 1", "n + 1", T.INT),
        ("N + BIG", "n + big", T.BIGINT),
        ("lower(k)", "LOWER(k)", T.STRING),
        ("t.v", "v", T.DOUBLE),
        ("`select` || 'x'", "`select` || 'x'", T.STRING),
        ("CASE WHEN ok THEN v ELSE 0 END", "CASE WHEN ok THEN v ELSE 0 END", T.DOUBLE),
        ("CAST(n AS STRING)", "CAST(n AS STRING)", T.STRING),
        ("ts + INTERVAL '5' SECOND", "ts + INTERVAL '5' SECOND", T.TIMESTAMP),
        ("k IN ('a', 'b') AND NOT ok", "k IN ('a', 'b') AND NOT ok", T.BOOLEAN),
        ("v BETWEEN 1 AND 2", "v BETWEEN 1 AND 2", T.BOOLEAN),
        ("k LIKE 'a%'", "k LIKE 'a%'", T.BOOLEAN),
        ("to_date(ts)", "TO_DATE(ts)", T.DATE),
    ],
)
def test_canonical_sql_and_type(text, sql, typ):
    e = bound(text)
    assert e.sql == sql
    assert e.type == typ


def test_columns_are_resolved_case_insensitively_in_first_use_order():
    assert bound("V + N + v").columns == ("v", "n")


def test_unknown_column_position_is_mapped_into_the_file():
    prefix = "SELECT x\nFROM t WHERE "
    with pytest.raises(WqlSemanticError) as info:
        bound("v > 1 AND vv < 2", prefix=prefix)
    err = info.value
    assert (err.line, err.column) == (2, 24)
    assert (err.span.end_line, err.span.end_column) == (2, 26)
    assert err.hint == "did you mean 'v'?"


def test_backquoted_unknown_column_span_covers_the_quotes():
    text = "`no such` > 1"
    with pytest.raises(WqlSemanticError) as info:
        bound(text)
    assert (info.value.column, info.value.span.end_column) == (1, 10)


def test_sqlglot_syntax_error_is_positioned():
    prefix = "-- line 1\nWHERE "
    text = "foo(1, 2"
    source = prefix + text
    with pytest.raises(WqlSyntaxError) as info:
        parse_expr(text, Span.from_offsets(source, len(prefix), len(source)), source)
    assert info.value.line == 2
    assert info.value.column >= 7


def test_subqueries_and_stars_are_rejected():
    with pytest.raises(WqlSemanticError, match="subqueries"):
        bound("v IN (SELECT 1)")
    with pytest.raises(WqlSemanticError, match=r"\* is only allowed in COUNT"):
        bound("sum(*)")


def test_quote_name_quotes_only_when_needed():
    assert quote_name("user_id") == "user_id"
    assert quote_name("select") == "`select`"
    assert quote_name("my col") == "`my col`"
    assert quote_name("a`b") == "`a``b`"


def test_types_roundtrip_through_spark_types():
    for t in (
        T.STRING,
        T.INT,
        T.BIGINT,
        T.DOUBLE,
        T.BOOLEAN,
        T.TIMESTAMP,
        T.DATE,
        T.DECIMAL(38, 6),
    ):
        assert T.from_spark(T.to_spark(t)) == t
    assert T.from_spark(T.to_spark(T.array_of(T.DOUBLE))) == T.array_of(T.DOUBLE)
    assert T.parse_type_name("decimal") == T.DECIMAL(10, 0)
    with pytest.raises(WqlSemanticError, match="unknown type"):
        T.parse_type_name("VARCHAR2")
    with pytest.raises(WqlSemanticError, match="DECIMAL"):
        T.parse_type_name("DECIMAL(40, 2)")


def test_from_spark_rejects_maps_with_the_column_name():
    from pyspark.sql import types as S

    from wql.errors import WqlUnsupportedError

    with pytest.raises(WqlUnsupportedError, match="column 'm'"):
        T.from_spark(S.MapType(S.StringType(), S.IntegerType()), column="m")


def test_caller_schema_makes_the_declaration_optional():
    from pyspark.sql import types as S

    schema = S.StructType(
        [
            S.StructField("user", S.StringType()),
            S.StructField("ts", S.TimestampType()),
            S.StructField("amount", S.DecimalType(12, 2)),
        ]
    )
    program = compile_source(
        "SELECT user, SUM(amount) AS total "
        "FROM clicks WATERMARK FOR ts AS ts - INTERVAL '1' SECOND "
        "GROUP BY user, TUMBLE(ts, INTERVAL '1' MINUTE);",
        schemas={"clicks": schema},
    )
    (q,) = program.queries
    assert q.source.event_time.column == "ts"
    assert q.aggregates[0].type == T.DECIMAL(22, 2)
    (src,) = program.sources
    assert not src.declared and [c.name for c in src.columns] == ["user", "ts", "amount"]
    # pairs with type names work too
    program = compile_source(
        "SELECT k, COUNT(*) AS n FROM s GROUP BY k, COUNT_WINDOW(2);",
        schemas={"s": [("k", "STRING"), ("v", T.DOUBLE)]},
    )
    assert program.queries[0].output_schema[1].type == T.BIGINT


def test_aggregate_result_types_follow_spark():
    text = (
        "CREATE SOURCE s (k STRING, n INT, v DOUBLE, d DECIMAL(10, 2), ts TIMESTAMP, "
        "WATERMARK FOR ts AS ts);\n"
        "SELECT SUM(n) AS a, AVG(n) AS b, SUM(d) AS c, AVG(d) AS e, MIN(k) AS f, "
        "COUNT(v) AS g, COLLECT_LIST(d) AS h, LAST_VALUE(ts) AS i "
        "FROM s GROUP BY TUMBLE(ts, INTERVAL '1' SECOND);"
    )
    (q,) = compile_source(text, engine="operator").queries
    assert [c.type.ddl for c in q.output_schema] == [
        "BIGINT",
        "DOUBLE",
        "DECIMAL(20,2)",
        "DECIMAL(14,6)",
        "STRING",
        "BIGINT",
        "ARRAY<DECIMAL(10,2)>",
        "TIMESTAMP",
    ]


# ---------------------------------------------------------------------------
# Printed SQL runs on Spark (the shared session)

QUERY = """
CREATE SOURCE ev (
    k STRING, n INT, v DOUBLE, d DECIMAL(10, 2), vip BOOLEAN, ts TIMESTAMP, `select` STRING,
    WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
);
CREATE VIEW a AS
SELECT upper(k) AS uk, window_start, window_end, window_time, pane_index,
       SUM(v) / COUNT(*) AS mean, MAX(d) AS top, COUNT(DISTINCT `select`) AS sel,
       CASE WHEN MIN(n) > 1 THEN 'many' ELSE 'few' END AS label, COUNT(*)
FROM ev
WHERE v > 0 AND k IS NOT NULL AND ts >= TIMESTAMP '2020-01-01 00:00:00'
GROUP BY upper(k), TUMBLE(ts, INTERVAL '1' MINUTE)
HAVING SUM(v) > 1 AND MAX(d) < 100;
CREATE VIEW b AS
SELECT k, COUNT(*) AS n
FROM ev
GROUP BY k, SESSION(ts, GAP CASE WHEN vip THEN INTERVAL '1' MINUTE ELSE INTERVAL '10 seconds' END)
TRIGGER COUNT(2)
EVICT DELTA(n + 1, 3) AFTER;
CREATE VIEW c AS
SELECT k, FIRST_VALUE(v) AS f, COLLECT_LIST(n) AS l FROM ev
GROUP BY k, SESSION(ts, GAP n * INTERVAL '1' SECOND);
CREATE VIEW e AS
SELECT k, COUNT(*) AS n FROM ev GROUP BY k, TUMBLE(ts, INTERVAL '1' MINUTE)
TRIGGER DELTA(v * 2, 1.5);
"""


def _source_df(spark, q):
    from pyspark.sql import types as S

    schema = S.StructType([S.StructField(c.name, T.to_spark(c.type)) for c in q.source.columns])
    row = ("Ab", 3, 2.5, Decimal("12.50"), True, dt.datetime(2021, 5, 1, 12, 0, 0), "x")
    return spark.createDataFrame([row], schema)


@pytest.mark.spark
def test_pre_aggregation_sql_runs_on_spark(spark):
    program = compile_source(QUERY, engine="operator")
    a, b, c, e = program.queries
    df = _source_df(spark, a)
    exprs = (
        [a.filter.sql] + [k.expr.sql for k in a.keys] + [x.arg.sql for x in a.aggregates if x.arg]
    )
    exprs += [b.window.gap_ms.sql, e.effective_trigger.expr.sql, b.evictor.expr.sql]
    exprs += [c.window.gap_ms.sql]
    row = df.selectExpr(*exprs).collect()[0]
    assert row[0] is True
    assert row[1] == "AB"
    assert row[-4] == 60_000  # vip -> one minute, in ms
    assert row[-3] == 5.0 and row[-2] == 4
    assert row[-1] == 3000
    # plan types agree with what Spark infers
    types = df.selectExpr(*exprs).schema
    plan_types = (
        [a.filter.type] + [k.type for k in a.keys] + [x.arg.type for x in a.aggregates if x.arg]
    )
    for field, t in zip(types.fields, plan_types, strict=False):
        assert T.from_spark(field.dataType) == t, field


@pytest.mark.spark
def test_post_aggregation_sql_runs_on_spark(spark):
    from pyspark.sql import types as S

    a = compile_source(QUERY, engine="operator").queries[0]
    post = a.post_aggregation_schema
    schema = S.StructType([S.StructField(c.name, T.to_spark(c.type)) for c in post])
    values = {
        "__key_0": "AB",
        "window_start": dt.datetime(2021, 5, 1, 12, 0),
        "window_end": dt.datetime(2021, 5, 1, 12, 1),
        "window_time": dt.datetime(2021, 5, 1, 12, 0, 59, 999000),
        "pane_index": 0,
        "pane_timing": "ON_TIME",
    }
    aggs = {"SUM": 5.0, "COUNT_STAR": 2, "MAX": Decimal("12.50"), "COUNT_DISTINCT": 1, "MIN": 3}
    for agg in a.aggregates:
        values[agg.name] = aggs[agg.kind.value]
    df = spark.createDataFrame([tuple(values[c.name] for c in post)], schema)
    out = df.where(a.having.sql).selectExpr(*(f"{o.expr.sql} AS `{o.name}`" for o in a.output))
    assert out.columns == [o.name for o in a.output]
    (row,) = out.collect()
    assert row["uk"] == "AB" and row["mean"] == 2.5 and row["label"] == "many" and row["_c9"] == 2
    for field, o in zip(out.schema.fields, a.output_schema, strict=True):
        assert T.from_spark(field.dataType) == o.type, field


@pytest.mark.spark
def test_interval_to_millis_on_spark(spark):
    cases = {
        "INTERVAL '5' SECOND": 5_000,
        "INTERVAL '250' MILLISECOND": 250,
        "INTERVAL '1 minute 30 seconds'": 90_000,
        "INTERVAL '2' DAY": 172_800_000,
    }
    exprs = [interval_to_millis_sql(k) for k in cases]
    row = spark.range(1).selectExpr(*exprs).collect()[0]
    assert list(row) == list(cases.values())


def test_having_may_use_select_aliases_like_spark():
    text = (
        "CREATE SOURCE s (k STRING, v DOUBLE, ts TIMESTAMP, WATERMARK FOR ts AS ts);\n"
        "SELECT k AS key, SUM(v) AS total, COUNT(*) AS c FROM s "
        "GROUP BY k, TUMBLE(ts, INTERVAL '1' SECOND) HAVING total > 10 AND c >= 2 AND key <> 'x';"
    )
    (q,) = compile_source(text).queries
    assert q.having.sql == "(__agg_0) > 10 AND (__agg_1) >= 2 AND (k) <> 'x'"
    assert len(q.aggregates) == 2
    with pytest.raises(WqlSemanticError) as info:
        compile_source(text.replace("HAVING total", "HAVING totl"))
    assert info.value.hint == "did you mean 'total'?"


@pytest.mark.parametrize(
    "text,value",
    [
        ("'it''s'", "it's"),  # SQL standard: a doubled quote is one quote
        ("''''", "'"),
        ("''", ""),
        ("'a''''b'", "a''b"),
        ("'it\\'s'", "it's"),  # Spark's backslash escape reads the same
        ("\"it''s\"", "it''s"),  # in a double-quoted string a single quote is plain text
    ],
)
def test_doubled_quote_in_a_string_is_one_quote(text, value):
    from sqlglot import exp

    b = bound(f"k = {text}")
    assert b.type == T.BOOLEAN
    tree = parse_expr(b.sql, Span.from_offsets(b.sql, 0, len(b.sql)), b.sql).node
    assert [lit.this for lit in tree.find_all(exp.Literal) if lit.is_string] == [value]
    # printed for Spark with backslash escapes, never as two adjacent literals
    assert "CONCAT" not in b.sql


def test_doubled_quote_prints_as_a_backslash_escape_for_spark():
    assert bound("k <> 'it''s'").sql == "k <> 'it\\'s'"
    assert bound("k = ''''").sql == "k = '\\''"
