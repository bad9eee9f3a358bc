"""Sources read from and outputs written to tables of Spark's catalog (docs/running.md,
"Tables"): a real local warehouse (the session's temporary spark.sql.warehouse.dir),
each test's tables in a database of its own, dropped after it."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest

import wql
from tests.spark.examples_helpers import rows_as_text
from wql.errors import ErrorCode, WqlError

T0 = dt.datetime(2024, 1, 1)

EVENTS = [
    ("a", 1, T0 + dt.timedelta(seconds=1)),
    ("a", 2, T0 + dt.timedelta(seconds=4)),
    ("b", 5, T0 + dt.timedelta(seconds=7)),
    ("a", 7, T0 + dt.timedelta(seconds=12)),
]


@pytest.fixture
def db(spark, tmp_path):
    """A database of this test's own in the warehouse, dropped with its tables after it."""
    name = f"wql_test_{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE DATABASE {name} LOCATION '{tmp_path / name}'")
    try:
        yield name
    finally:
        spark.sql(f"DROP DATABASE IF EXISTS {name} CASCADE")


def events_table(spark, db: str, schema: str = "k STRING, v BIGINT, ts TIMESTAMP") -> str:
    spark.sql(f"CREATE TABLE {db}.events ({schema}) USING parquet")
    spark.createDataFrame(EVENTS, "k string, v bigint, ts timestamp").write.insertInto(
        f"{db}.events"
    )
    return f"{db}.events"


def text(table: str) -> str:
    return (
        "CREATE SOURCE events (k STRING, v BIGINT, ts TIMESTAMP, "
        "WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)\n"
        f"WITH (table = '{table}');\n"
        "CREATE VIEW totals AS SELECT k, window_start, SUM(v) AS total FROM events "
        "GROUP BY k, TUMBLE(ts, INTERVAL '10' SECOND);\n"
    )


WANT = [
    ("a", "2024-01-01 00:00:00", "3"),
    ("a", "2024-01-01 00:00:10", "7"),
    ("b", "2024-01-01 00:00:00", "5"),
]


@pytest.mark.parametrize("engine", ["native", "operator"])
def test_a_source_reads_a_catalog_table_and_outputs_go_to_tables(spark, db, engine):
    table = events_table(spark, db)
    results = wql.compile(text(table), engine).apply(spark)
    try:
        assert rows_as_text(results["totals"])[1] == WANT
        assert results.write_tables(f"{db}.out_") == {"totals": f"{db}.out_totals"}
        assert rows_as_text(spark.table(f"{db}.out_totals"))[1] == WANT
        # written again: replaced, not appended
        results.write_tables(f"{db}.out_")
        assert spark.table(f"{db}.out_totals").count() == len(WANT)
    finally:
        results.release()


def test_the_declared_schema_is_checked_against_the_tables(spark, db):
    events_table(spark, db, "k STRING, v STRING, ts TIMESTAMP")
    source = text(f"{db}.events")
    with pytest.raises(WqlError) as e:
        wql.compile(source).apply(spark)
    assert e.value.code is ErrorCode.SCHEMA
    assert "column 'v'" in str(e.value) and "STRING" in str(e.value)
    # at the column's declaration
    assert (e.value.span.line, e.value.span.column) == (1, source.index("v BIGINT") + 1)

    spark.sql(f"CREATE TABLE {db}.narrow (k STRING, ts TIMESTAMP) USING parquet")
    with pytest.raises(WqlError, match=r"column 'v' of source 'events' is not in table") as e:
        wql.compile(text(f"{db}.narrow")).apply(spark)
    assert e.value.code is ErrorCode.SCHEMA


def test_a_missing_table_and_a_table_with_a_path_are_positioned_errors(spark, db):
    with pytest.raises(WqlError, match=r"no table '.*\.nothing' in Spark's catalog") as e:
        wql.compile(text(f"{db}.nothing")).apply(spark)
    assert e.value.code is ErrorCode.SOURCE_DATA and e.value.span.line == 1
    both = text(f"{db}.events").replace("WITH (table", "WITH (path = 'x.csv', table")
    with pytest.raises(WqlError, match="names both a table and a path") as e:
        wql.compile(both)
    assert (e.value.span.line, e.value.span.column) == (2, both.splitlines()[1].index("table") + 1)


def test_wql_run_writes_every_output_to_a_table(spark, db, tmp_path, capsys):
    from wql.cli import main

    events_table(spark, db)
    path = tmp_path / "totals.wql"
    path.write_text(text(f"{db}.events"))
    assert main(["run", str(path), "--output-table", f"{db}.run_"]) == 0
    assert "totals [native] | rows in 4 | out 3" in capsys.readouterr().err
    assert rows_as_text(spark.table(f"{db}.run_totals"))[1] == WANT


def test_a_stream_reads_a_table_and_writes_each_output_with_to_table(spark, db, tmp_path, capsys):
    from wql.cli import main

    table = events_table(spark, db)
    path = tmp_path / "totals.wql"
    path.write_text(text(table))
    args = ["run", str(path), "--stream", "--drain", "--checkpoint", str(tmp_path / "ck")]
    assert main([*args, "--output-table", f"{db}.stream_"]) == 0
    assert "rows in 4 | out 3 | late 0 | fired 4 | dropped 0" in capsys.readouterr().err
    # the table is the drained stream's output, equal to the batch run's
    assert rows_as_text(spark.table(f"{db}.stream_totals"))[1] == WANT
