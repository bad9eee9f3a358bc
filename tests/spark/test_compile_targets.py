"""`wql compile` targets: the printed Spark SQL and PySpark script give build_native's rows."""

from __future__ import annotations

import json
import types

import pytest

from tests.spark.native_helpers import actual_rows, at
from wql.cli import main as cli_main
from wql.compiler import compile_source
from wql.compiler.backends import native
from wql.compiler.backends.plan_json import plan_to_json
from wql.compiler.backends.pyspark_script import function_name, render_script
from wql.compiler.backends.spark_sql import spark_sql_script, spark_sql_statements

pytestmark = pytest.mark.spark

WQL = """
CREATE SOURCE clicks (
    user_id STRING,
    url     STRING,
    amount  DOUBLE,
    ts      TIMESTAMP,
    WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH (format = 'csv', path = 'clicks.csv', header = 'true');

CREATE VIEW per_user AS
SELECT user_id, window_start, window_end, COUNT(*) AS clicks, SUM(amount) AS revenue
FROM clicks
WHERE amount > 0
GROUP BY user_id, SESSION(ts, INTERVAL '30' MINUTE)
HAVING COUNT(*) > 1;

CREATE VIEW hops AS
SELECT upper(user_id) AS u, window_time, AVG(amount) * 2 AS avg2, COUNT(DISTINCT url) AS urls
FROM clicks
GROUP BY upper(user_id), HOP(ts, INTERVAL '1' MINUTE, INTERVAL '5' MINUTE, INTERVAL '30' SECOND);

CREATE VIEW growing AS
SELECT window_start, window_end, MAX(amount) AS mx, MIN(ts) AS first_ts, pane_timing
FROM clicks
GROUP BY CUMULATE(ts, INTERVAL '1' MINUTE, INTERVAL '1' HOUR);

CREATE VIEW tumbling AS
SELECT user_id, window_start, COUNT(url) AS c
FROM clicks
GROUP BY user_id, TUMBLE(ts, INTERVAL '10' MINUTE);

CREATE VIEW counted AS
SELECT user_id, COUNT(*) AS c FROM clicks
GROUP BY user_id, TUMBLE(ts, INTERVAL '1' MINUTE)
TRIGGER COUNT(3);
"""

NATIVE_QUERIES = ("per_user", "hops", "growing", "tumbling")

MINUTE = 60_000
CLICKS = [
    ("u1", "/a", 1.5, 0),
    ("u1", "/b", 2.5, 1 * MINUTE + 7),
    ("u1", "/a", -1.0, 7 * MINUTE),
    ("u1", "/c", 4.0, 50 * MINUTE),
    ("u1", "/a", 0.5, 70 * MINUTE),
    ("u2", "/b", 2.0, 3 * MINUTE),
    ("u2", None, 3.0, 3 * MINUTE + 500),
    ("u2", "/c", 0.25, 3 * MINUTE + 900),
    ("u2", "/d", 0.75, 3 * MINUTE + 901),
    ("u2", "/b", 1.0, None),
    ("u3", "/z", 8.0, -2 * MINUTE),
]


@pytest.fixture(scope="module")
def program():
    return compile_source(WQL, "clicks.wql")


@pytest.fixture(scope="module")
def clicks(spark):
    df = spark.createDataFrame(
        [(u, url, amt, None if ts is None else at(ts)) for u, url, amt, ts in CLICKS],
        "user_id STRING, url STRING, amount DOUBLE, ts TIMESTAMP",
    )
    df.createOrReplaceTempView("clicks")
    return df


def test_engines_are_as_expected(program):
    engines = {q.name: q.engine.engine for q in program.queries}
    assert engines == {**dict.fromkeys(NATIVE_QUERIES, "native"), "counted": "operator"}


def test_spark_sql_statements_run_unchanged_and_match_build_native(spark, program, clicks):
    ran = 0
    for q, sql in spark_sql_statements(program):
        if sql is None:
            assert q.name == "counted"
            continue
        via_sql = spark.sql(sql)
        via_df = native.build_native(q, clicks)
        assert via_sql.schema == via_df.schema
        assert actual_rows(via_sql) == actual_rows(via_df)
        assert actual_rows(via_df), f"{q.name} produced no rows: the test data is too thin"
        ran += 1
    assert ran == len(NATIVE_QUERIES)


def test_printed_sql_file_runs_statement_by_statement(spark, program, clicks):
    script = spark_sql_script(program, "clicks.wql")
    statements = [s for s in script.split(";\n") if "SELECT" in s]
    assert len(statements) == len(NATIVE_QUERIES)
    for stmt, name in zip(statements, NATIVE_QUERIES, strict=True):
        assert f"-- {name} (native engine)" in stmt
        expected = native.build_native(program.query(name), clicks)
        assert actual_rows(spark.sql(stmt)) == actual_rows(expected)
    # the operator query is listed with its reason, not silently dropped
    assert "-- counted runs on the operator engine" in script
    assert "TRIGGER COUNT(3) at line" in script


def _load_script(source: str) -> types.ModuleType:
    module = types.ModuleType("wql_generated")
    exec(compile(source, "wql_generated.py", "exec"), module.__dict__)  # noqa: S102 - our own output
    return module


def test_pyspark_script_functions_match_build_native(spark, program, clicks):
    module = _load_script(render_script(program, WQL, "clicks.wql"))
    assert list(module.QUERIES) == [q.name for q in program.queries]
    for name in NATIVE_QUERIES:
        got = module.QUERIES[name](spark, {"clicks": clicks})
        expected = native.build_native(program.query(name), clicks)
        assert got.schema == expected.schema
        assert actual_rows(got) == actual_rows(expected)


def test_pyspark_script_operator_query_runs_through_the_wql_api(spark, program, clicks):
    import wql

    module = _load_script(render_script(program, WQL, "clicks.wql"))
    got = module.QUERIES["counted"](spark, {"clicks": clicks})
    expected = wql.compile(WQL).apply(spark, clicks=clicks)["counted"]
    assert got.schema == expected.schema
    # COUNT(3) fires once, in u2's fourth minute, and replaces the watermark firing
    assert [(r.user_id, r.c) for r in got.collect()] == [("u2", 3)]
    assert actual_rows(got) == actual_rows(expected)


def test_pyspark_script_main_reads_declared_sources_and_writes(spark, program, tmp_path, capsys):
    csv = tmp_path / "clicks.csv"
    lines = ["user_id,url,amount,ts"]
    for u, url, amt, ts in CLICKS:
        stamp = "" if ts is None else at(ts).strftime("%Y-%m-%d %H:%M:%S.%f")
        lines.append(f"{u},{url or ''},{amt},{stamp}")
    csv.write_text("\n".join(lines) + "\n")
    module = _load_script(render_script(program, WQL, str(tmp_path / "clicks.wql")))
    out = tmp_path / "out"
    assert module.main(["--output", str(out), "--query", "tumbling"]) == 0
    written = spark.read.option("header", "true").csv(str(out / "tumbling"))
    assert written.columns == ["user_id", "window_start", "c"]
    rows = sorted((r.user_id, r.c) for r in written.collect())
    # u1: [0,10m) 3 urls, [50m,60m) 1, [70m,80m) 1; u2: [0,10m) 3 urls (one NULL); u3: [-10m,0) 1
    assert rows == [("u1", "1"), ("u1", "1"), ("u1", "3"), ("u2", "3"), ("u3", "1")]
    # the row without an event time is reported, not lost
    assert "tumbling: 1 row(s) not windowed (null event time)" in capsys.readouterr().err


def test_pyspark_script_matches_csv_columns_by_header_name(spark, program, tmp_path):
    # the file's columns come in another order than the CREATE SOURCE declares them
    csv = tmp_path / "clicks.csv"
    lines = ["ts,amount,url,user_id"]
    for u, url, amt, ts in CLICKS:
        if ts is None:
            continue
        lines.append(f"{at(ts).strftime('%Y-%m-%d %H:%M:%S.%f')},{amt},{url or ''},{u}")
    csv.write_text("\n".join(lines) + "\n")
    module = _load_script(render_script(program, WQL, str(tmp_path / "clicks.wql")))
    out = tmp_path / "out"
    assert module.main(["--output", str(out), "--query", "tumbling"]) == 0
    written = spark.read.option("header", "true").csv(str(out / "tumbling"))
    rows = sorted((r.user_id, r.c) for r in written.collect())
    assert rows == [("u1", "1"), ("u1", "1"), ("u1", "3"), ("u2", "3"), ("u3", "1")]


def test_pyspark_script_names_a_header_column_that_is_missing(spark, program, tmp_path):
    (tmp_path / "clicks.csv").write_text("user_id,url,ts\nu1,/a,2024-01-01 00:00:00\n")
    module = _load_script(render_script(program, WQL, str(tmp_path / "clicks.wql")))
    with pytest.raises(SystemExit, match="has no column amount"):
        module.main(["--output", str(tmp_path / "out"), "--query", "tumbling"])


def test_function_names_are_python_identifiers():
    assert function_name("per_user") == "per_user"
    assert function_name("class") == "query_class"
    assert function_name("my view") == "query_my_view"


def test_plan_json_has_every_query_with_spans(program):
    data = json.loads(json.dumps(plan_to_json(program, "clicks.wql")))
    assert data["node"] == "Program" and data["file"] == "clicks.wql"
    queries = {q["name"]: q for q in data["queries"]}
    assert list(queries) == [q.name for q in program.queries]
    hop = queries["hops"]["window"]
    assert (hop["node"], hop["kind"], hop["slide_ms"], hop["size_ms"], hop["offset_ms"]) == (
        "Hop",
        "HOP",
        60_000,
        300_000,
        30_000,
    )
    assert hop["span"]["line"] == 20 and hop["span"]["column"] > 1
    assert queries["counted"]["engine"]["engine"] == "operator"
    assert queries["counted"]["effective_trigger"] == {
        "node": "CountTrigger",
        "n": 3,
        "span": queries["counted"]["effective_trigger"]["span"],
    }
    assert queries["per_user"]["aggregates"][1]["type"] == "DOUBLE"


def test_cli_compile_targets(tmp_path, capsys):
    wql_file = tmp_path / "clicks.wql"
    wql_file.write_text(WQL)
    out = tmp_path / "out.sql"
    assert cli_main(["compile", str(wql_file), "--target", "spark-sql", "-o", str(out)]) == 0
    assert "-- per_user (native engine)" in out.read_text()
    assert "counted runs on the operator engine" in capsys.readouterr().err
    assert cli_main(["compile", str(wql_file), "--target", "plan-json"]) == 0
    assert json.loads(capsys.readouterr().out)["wql_plan_version"] == 1


def test_cli_forcing_native_on_an_operator_query_is_a_positioned_error(tmp_path, capsys):
    wql_file = tmp_path / "clicks.wql"
    wql_file.write_text(WQL)
    code = cli_main(["compile", str(wql_file), "--target", "spark-sql", "--engine", "native"])
    assert code == 1
    err = capsys.readouterr().err
    assert "cannot run on the native engine" in err and "TRIGGER COUNT(3)" in err


@pytest.mark.slow
def test_pyspark_script_runs_as_its_own_process(spark, program, clicks, tmp_path):
    """The real thing once: a fresh interpreter, its own SparkSession, Python workers.

    Operator queries need Python workers that can import wql; in-process
    tests share the fixture's session and would not notice if they could not.
    """
    import os
    import subprocess
    import sys

    csv = tmp_path / "clicks.csv"
    lines = ["user_id,url,amount,ts"]
    for u, url, amt, ts in CLICKS:
        stamp = "" if ts is None else at(ts).strftime("%Y-%m-%d %H:%M:%S.%f")
        lines.append(f"{u},{url or ''},{amt},{stamp}")
    csv.write_text("\n".join(lines) + "\n")
    script = tmp_path / "job.py"
    script.write_text(render_script(program, WQL, str(tmp_path / "clicks.wql")))
    out = tmp_path / "out"
    args = [sys.executable, str(script), "--output", str(out), "--format", "parquet"]
    args += ["--query", "tumbling", "--query", "counted"]
    # as a user runs it: without the PYSPARK_PYTHON the test session exported
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}
    done = subprocess.run(args, capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "tumbling: 1 row(s) not windowed (null event time)" in done.stderr
    written = spark.read.parquet(str(out / "tumbling"))
    expected = native.build_native(program.query("tumbling"), clicks)
    assert written.schema.simpleString() == expected.schema.simpleString()
    assert actual_rows(written) == actual_rows(expected)
    counted = [(r.user_id, r.c) for r in spark.read.parquet(str(out / "counted")).collect()]
    assert counted == [("u2", 3)]


@pytest.mark.slow
def test_cli_pyspark_script_moves_with_its_data_and_runs_quietly(tmp_path):
    """`wql compile --target pyspark -o`: no absolute path in the script; the script finds
    the data relative to itself after the whole folder moves, and its standard error holds
    its own report alone (no Spark start-up notices, warnings or stage bars)."""
    import os
    import shutil
    import subprocess
    import sys

    project = tmp_path / "project"
    (project / "queries").mkdir(parents=True)
    (project / "jobs").mkdir()
    native_only = WQL.split("CREATE VIEW counted")[0]
    (project / "queries" / "clicks.wql").write_text(native_only)
    lines = ["user_id,url,amount,ts"]
    for u, url, amt, ts in CLICKS:
        stamp = "" if ts is None else at(ts).strftime("%Y-%m-%d %H:%M:%S.%f")
        lines.append(f"{u},{url or ''},{amt},{stamp}")
    (project / "queries" / "clicks.csv").write_text("\n".join(lines) + "\n")
    script = project / "jobs" / "job.py"
    wql_file = str(project / "queries" / "clicks.wql")
    assert cli_main(["compile", wql_file, "--target", "pyspark", "-o", str(script)]) == 0
    text = script.read_text()
    assert str(tmp_path) not in text and "'../queries'" in text
    moved = tmp_path / "elsewhere"
    shutil.move(project, moved)
    out = tmp_path / "out"
    args = [sys.executable, str(moved / "jobs" / "job.py"), "--output", str(out)]
    args += ["--query", "tumbling", "--format", "parquet"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}
    done = subprocess.run(
        args, capture_output=True, text=True, timeout=600, cwd=out.parent, env=env
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr.splitlines() == ["tumbling: 1 row(s) not windowed (null event time)"]
    assert done.stdout == ""
    assert sorted(p.name for p in (out / "tumbling").glob("*.parquet"))


def test_cli_pyspark_script_to_stdout_finds_the_wql_folder_from_the_current_one(
    tmp_path, monkeypatch, capsys
):
    # `wql compile q.wql --target pyspark > job.py` writes job.py in the current folder
    (tmp_path / "queries").mkdir()
    (tmp_path / "queries" / "clicks.wql").write_text(WQL)
    monkeypatch.chdir(tmp_path)
    assert cli_main(["compile", "queries/clicks.wql", "--target", "pyspark"]) == 0
    text = capsys.readouterr().out
    assert str(tmp_path) not in text and "'queries'" in text
    # the operator queries' session is WQL's, quiet unless --verbose
    assert 'default_session(app_name="wql-compiled", quiet=quiet)' in text
    assert "make_session(quiet=not args.verbose)" in text
