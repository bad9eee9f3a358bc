"""``''`` inside a string literal is one quote, in every clause, engine and compile target.

The rows are chosen so that reading ``'it''s'`` any other way (Spark's own
reading concatenates ``'it'`` and ``'s'`` into ``its``) keeps or drops a
different row. Expected rows are written out by hand.
"""

from __future__ import annotations

import json
import types

import pytest

import wql
from tests.spark.native_helpers import at
from wql.compiler.backends.plan_json import plan_to_json
from wql.compiler.backends.pyspark_script import render_script

pytestmark = pytest.mark.spark

TEXT = """
CREATE SOURCE s (note STRING, ts TIMESTAMP, WATERMARK FOR ts AS ts);
CREATE VIEW not_its AS
SELECT note, COUNT(*) AS n FROM s
WHERE note <> 'it''s'
GROUP BY note, TUMBLE(ts, INTERVAL '1' SECOND);
CREATE VIEW quoted AS
SELECT concat('<', note, '''') AS q, COUNT(*) AS n FROM s
WHERE note = 'it''s' OR note = ''''
GROUP BY concat('<', note, ''''), TUMBLE(ts, INTERVAL '1' SECOND);
"""

# note, event time (ms)
ROWS = [("it's", 0), ("its", 100), ("'", 200), ("x", 300)]

EXPECTED = {
    # every note but it's, one row each in the window [0, 1000)
    "not_its": [("'", 1), ("its", 1), ("x", 1)],
    # only it's and ' pass; the key wraps the note in < and '
    "quoted": [("<''", 1), ("<it's'", 1)],
}


@pytest.fixture(scope="module")
def notes(spark):
    df = spark.createDataFrame([(n, at(t)) for n, t in ROWS], "note STRING, ts TIMESTAMP")
    df.createOrReplaceTempView("s")
    return df


def _rows(df) -> list[tuple]:
    return sorted(tuple(r) for r in df.collect())


@pytest.mark.parametrize("engine", ["native", "operator"])
def test_doubled_quote_is_one_quote_on_both_engines(spark, notes, engine):
    results = wql.compile(TEXT, engine).apply(spark, s=notes)
    try:
        for name, expected in EXPECTED.items():
            assert results.queries[list(EXPECTED).index(name)].engine == engine
            assert _rows(results[name]) == expected, name
    finally:
        results.release()


def test_spark_sql_target_reads_the_quote(spark, notes):
    compiled = wql.compile(TEXT)
    for name, expected in EXPECTED.items():
        sql = compiled.to_spark_sql(name)
        assert "'it\\'s'" in sql
        assert _rows(spark.sql(sql)) == expected, name


def test_pyspark_target_reads_the_quote(spark, notes):
    compiled = wql.compile(TEXT)
    source = render_script(compiled.program, TEXT, "notes.wql")
    module = types.ModuleType("wql_generated_strings")
    exec(compile(source, "wql_generated_strings.py", "exec"), module.__dict__)  # noqa: S102
    for name, expected in EXPECTED.items():
        assert _rows(module.QUERIES[name](spark, {"s": notes})) == expected, name


def test_plan_json_target_carries_the_quote():
    plan = json.loads(json.dumps(plan_to_json(wql.compile(TEXT).program)))
    filters = [q["filter"]["sql"] for q in plan["queries"]]
    assert filters == ["note <> 'it\\'s'", "note = 'it\\'s' OR note = '\\''"]


def test_with_options_read_doubled_quotes_the_same_way(tmp_path, spark):
    # The source's path itself contains a quote: `it''s` in WITH is `it's`.
    (tmp_path / "it's.csv").write_text(
        "note,ts\nit's,1970-01-01 00:00:00\nits,1970-01-01 00:00:00.1\n"
    )
    text = (
        "CREATE SOURCE s (note STRING, ts TIMESTAMP, WATERMARK FOR ts AS ts) "
        "WITH (format = 'csv', path = 'it''s.csv', header = 'true');\n"
        "SELECT note, COUNT(*) AS n FROM s WHERE note <> 'it''s' "
        "GROUP BY note, TUMBLE(ts, INTERVAL '1' SECOND)"
    )
    for engine in ("native", "operator"):
        results = wql.compile(text, engine, base_dir=tmp_path).apply(spark)
        try:
            assert _rows(results.df) == [("its", 1)], engine
        finally:
            results.release()
