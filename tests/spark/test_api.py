"""The embedding API (wql.compile(...).apply(...)) and `wql run`."""

from __future__ import annotations

import csv
import datetime as dt

import pytest

import wql
from tests.spark.examples_helpers import EXAMPLES
from wql.cli import main
from wql.errors import WqlError, WqlSemanticError, WqlUnsupportedError

pytestmark = pytest.mark.spark

T0 = dt.datetime(2024, 5, 1, 9, 0, 0)
TEXT = """
CREATE SOURCE clicks (user_id STRING, amount DOUBLE, ts TIMESTAMP,
    WATERMARK FOR ts AS ts - INTERVAL '5' SECOND);
CREATE VIEW per_minute AS
SELECT user_id, window_start, COUNT(*) AS clicks, SUM(amount) AS revenue
FROM clicks GROUP BY user_id, TUMBLE(ts, INTERVAL '1' MINUTE);
"""


def clicks(spark, extra=()):
    rows = [("alice", 1.0, T0), ("alice", 2.0, T0 + dt.timedelta(seconds=30)), ("bob", 5.0, T0)]
    return spark.createDataFrame([*rows, *extra], "user_id string, amount double, ts timestamp")


def test_three_line_embedding(spark):
    results = wql.compile(TEXT).apply(spark, clicks=clicks(spark))
    assert sorted(tuple(r) for r in results.df.collect()) == [
        ("alice", T0, 2, 3.0),
        ("bob", T0, 1, 5.0),
    ]
    assert list(results) == ["per_minute"] and results["per_minute"] is results.df
    assert results.late is None
    assert results.counters["rows_out"] == 2 and results.counters["engine"] == "native"


def test_plan_side_of_the_api():
    q = wql.compile(TEXT)
    assert q.queries == ("per_minute",) and q.engine == {"per_minute": "native"}
    assert "per_minute" in q.explain()
    assert "GROUP BY" in q.to_spark_sql("per_minute").upper()
    operator = wql.compile(TEXT, engine="operator")
    with pytest.raises(WqlUnsupportedError, match="no Spark SQL form"):
        operator.to_spark_sql("per_minute")
    with pytest.raises(WqlSemanticError, match="unknown engine"):
        wql.compile(TEXT, engine="flink")


def test_undeclared_source_takes_its_schema_from_the_dataframe(spark):
    text = (
        "SELECT user_id, COUNT(*) AS clicks FROM clicks "
        "WATERMARK FOR ts AS ts - INTERVAL '1' SECOND "
        "GROUP BY user_id, TUMBLE(ts, INTERVAL '1' MINUTE) TRIGGER COUNT(2)"
    )
    compiled = wql.compile(text)
    with pytest.raises(WqlSemanticError, match="not declared"):
        compiled.explain()
    results = compiled.apply(spark, clicks=clicks(spark))
    try:
        assert results.query("query_1").engine == "operator"
        assert [tuple(r) for r in results.df.collect()] == [("alice", 2)]
    finally:
        results.release()


def test_the_text_is_parsed_once(spark, monkeypatch):
    # an undeclared source: the text is planned again for each apply() (with the
    # DataFrame's schema), from the one AST parsed when it was compiled
    import wql.grammar.parser as parser

    calls = []
    parse = parser.parse
    monkeypatch.setattr(parser, "parse", lambda *a, **kw: calls.append(a) or parse(*a, **kw))
    compiled = wql.compile(
        "SELECT user_id, COUNT(*) AS clicks FROM clicks WATERMARK FOR ts AS ts - INTERVAL '1' "
        "SECOND GROUP BY user_id, TUMBLE(ts, INTERVAL '1' MINUTE)"
    )
    for _ in range(2):
        assert compiled.apply(spark, clicks=clicks(spark)).query("query_1").engine == "native"
    wql.compile(TEXT).explain()
    assert len(calls) == 2


def test_dataframe_must_match_the_declaration(spark):
    bad_type = spark.createDataFrame(
        [("a", "x", T0)], "user_id string, amount string, ts timestamp"
    )
    with pytest.raises(WqlSemanticError, match="declared DOUBLE but the DataFrame has STRING") as e:
        wql.compile(TEXT).apply(spark, clicks=bad_type)
    assert e.value.span is not None and e.value.line == 2
    missing = spark.createDataFrame([("a", T0)], "user_id string, ts timestamp")
    with pytest.raises(WqlSemanticError, match="no column 'amount'"):
        wql.compile(TEXT).apply(spark, clicks=missing)
    # a smaller integer type widens without loss; extra columns are ignored
    ints = spark.createDataFrame(
        [("a", 3, T0, "x")], "user_id string, amount int, ts timestamp, z string"
    )
    assert wql.compile(TEXT).apply(spark, clicks=ints).df.collect()[0]["revenue"] == 3.0


def test_multi_query_results_are_named_and_late_outputs_included(spark):
    results = wql.compile_file(EXAMPLES / "iot_late_data.wql").apply(spark)
    try:
        assert set(results) == {"per_minute", "late_readings"}
        assert results.query("per_minute").late_name == "late_readings"
        assert results["late_readings"].count() == 1
    finally:
        results.release()
    both = wql.compile_file(EXAMPLES / "count_windows.wql")
    with pytest.raises(WqlSemanticError, match="no query named 'nope'"):
        both.only("nope")
    one = both.only("last_four").apply(spark)
    try:
        assert list(one) == ["last_four"] and one.df.count() == 4
    finally:
        one.release()
    every = both.apply(spark)
    try:
        with pytest.raises(WqlSemanticError, match="2 queries"):
            every.df  # noqa: B018 - the property raises
    finally:
        every.release()


def test_source_errors_are_positioned(tmp_path, spark):
    (tmp_path / "q.wql").write_text(
        "CREATE SOURCE s (a STRING, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)\n"
        "WITH (format = 'csv', path = 'missing.csv', header = 'true');\n"
        "SELECT a, COUNT(*) AS n FROM s GROUP BY a, TUMBLE(ts, INTERVAL '1' MINUTE);\n"
    )
    with pytest.raises(WqlError, match="no such file") as e:
        wql.compile_file(tmp_path / "q.wql").apply(spark)
    assert e.value.line == 1 and "missing.csv" in e.value.render()
    (tmp_path / "missing.csv").write_text("b,ts\nx,2024-05-01 00:00:00\n")
    with pytest.raises(WqlError, match="header .* has no column 'a'"):
        wql.compile_file(tmp_path / "q.wql").apply(spark)


def test_wql_run_writes_every_output_and_a_summary(spark, tmp_path, capsys):
    out = tmp_path / "out"
    files = [str(EXAMPLES / "iot_late_data.wql"), str(EXAMPLES / "fraud_detection.wql")]
    assert main(["run", *files, "--output", str(out), "--format", "csv"]) == 0
    err = capsys.readouterr().err
    assert "per_minute [operator] | rows in 10 | out 7 | late 1" in err
    assert "suspicious [operator] | rows in 10 | out 2" in err
    # every summary line accounts for every row: in = fired + late + filtered + dropped
    lines = [line for line in err.splitlines() if "| rows in " in line]
    assert len(lines) == 2
    for line in lines:
        parts = {p.split(" ", 1)[0]: p.split(" ", 1)[1] for p in line.split(" | ")[1:]}
        dropped = sum(int(n.split(" ")[0]) for n in parts["dropped"].split(", "))
        counted = int(parts["fired"]) + int(parts["late"]) + int(parts.get("filtered", 0))
        assert int(parts["rows"].removeprefix("in ")) == counted + dropped, line
    late = list(out.glob("iot_late_data/late_readings/*.csv"))
    rows = [r for p in late for r in csv.DictReader(p.open())]
    assert [(r["device"], r["seq"]) for r in rows] == [("d1", "9")]
    assert list(out.glob("fraud_detection/suspicious/*.csv"))


def test_wql_run_reports_errors_without_traceback(tmp_path, capsys):
    bad = tmp_path / "bad.wql"
    bad.write_text("SELECT a FROM nowhere GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE)")
    assert main(["run", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "unknown source 'nowhere'" in err and "Traceback" not in err
    assert main(["run", str(bad), "--conf", "novalue"]) == 1
    assert "KEY=VALUE" in capsys.readouterr().err


def _readme_python_blocks() -> list[str]:
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    return re.findall(r"```python\n(.*?)```", readme, re.DOTALL)


def test_the_readme_embedding_runs_as_pasted(spark, monkeypatch, capsys):
    """The README's Python blocks, run in order from the repository's folder as written:
    apply() reads the declared source itself, then the same with a DataFrame the README
    builds with the declared schema; both give the example's expected sessions."""
    from tests.spark.examples_helpers import ROOT, expected_outputs, rows_as_text

    blocks = _readme_python_blocks()
    assert len(blocks) == 2 and "compiled.apply(spark)" in blocks[0]
    monkeypatch.chdir(ROOT)
    namespace: dict = {"spark": spark}
    expected = expected_outputs("clickstream_sessions")["sessions"]
    for block in blocks:
        exec(compile(block, "README.md", "exec"), namespace)  # noqa: S102 - the README's code
        results = namespace["results"]
        assert rows_as_text(results.df) == expected
        rows = (ROOT / "examples" / "data" / "clicks.csv").read_text().splitlines()[1:]
        assert results.counters["rows_in"] == len(rows)
        results.release()
    assert "clicks_df" in namespace


def test_a_dataframe_read_as_text_is_refused_with_the_schema_to_read_it_with(
    spark, tmp_path, monkeypatch
):
    text_df = spark.read.csv(str(EXAMPLES / "data" / "clicks.csv"), header=True)
    compiled = wql.compile_file(EXAMPLES / "clickstream_sessions.wql")
    with pytest.raises(WqlSemanticError, match="declared DOUBLE but the DataFrame has STRING") as e:
        compiled.apply(spark, clicks=text_df)
    assert e.value.hint is not None
    assert "schema='user_id string, url string, amount double, ts timestamp'" in e.value.hint
    assert "apply() reads it from its WITH clause" in e.value.hint
    # wql.compile(text) reads a relative path from the current folder and says so
    monkeypatch.chdir(tmp_path)
    with pytest.raises(WqlSemanticError, match="no such file") as e:
        wql.compile((EXAMPLES / "clickstream_sessions.wql").read_text()).apply(spark)
    assert e.value.hint is not None and "wql.compile_file(path)" in e.value.hint
