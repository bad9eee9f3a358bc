"""Generated code with hostile names runs on Spark: right rows, and nothing else executes.

The names (file, source, columns, queries, path, options, a string literal)
carry quotes, back-quotes, triple quotes, line breaks, semicolons, comment
markers and unicode. The file name would run ``touch pwned`` if it were
pasted into the script unescaped; the test runs in an empty folder and
checks that no such file appears. Expected rows are derived by hand below.
"""

from __future__ import annotations

import types

import pytest

from tests.spark.native_helpers import at
from wql.compiler import compile_source
from wql.compiler.backends.pyspark_script import render_script
from wql.compiler.backends.spark_sql import spark_sql_script, spark_sql_statements
from wql.errors import WqlError

pytestmark = pytest.mark.spark

PWN = '";__import__("os").system("touch pwned");"'
FILE = f'x""{PWN}""\n;--`*é.wql'  # no "/": it is a name in a folder
SOURCE = f"src\n;{PWN}--/*"
KEY = "k`e\"y;--'/*é"
TS = 't"""s'
VIEW = f"view\n;SELECT 1; --{PWN}"
OP = "op`\r\n--"
LIT = 'it\'s;\n--"""`'
PATH = "da\"ta ;--'é.csv"


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _s(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n") + "'"


WQL = f"""
CREATE SOURCE {_q(SOURCE)} ({_q(KEY)} STRING, {_q(TS)} TIMESTAMP,
    WATERMARK FOR {_q(TS)} AS {_q(TS)} - INTERVAL '1' SECOND)
WITH (format = 'csv', path = {_s(PATH)}, header = 'true', escape = '"',
     {_s(PWN)} = {_s(PWN)});

CREATE VIEW {_q(VIEW)} AS
SELECT {_q(KEY)}, COUNT(*) AS {_q(VIEW)}, {_s(LIT)} AS lit
FROM {_q(SOURCE)} WHERE {_q(KEY)} <> {_s(LIT)}
GROUP BY {_q(KEY)}, TUMBLE({_q(TS)}, INTERVAL '1' MINUTE);

CREATE VIEW {_q(OP)} AS
SELECT {_q(KEY)}, COUNT(*) AS n FROM {_q(SOURCE)}
GROUP BY {_q(KEY)}, TUMBLE({_q(TS)}, INTERVAL '1' MINUTE) TRIGGER COUNT(2);
"""

SECOND = 1000
# key, event time: 'a' twice in [0, 1 min), 'b' once in [1 min, 2 min), and a row
# whose key equals the literal, which the WHERE of the native query removes
ROWS = [("a", 0), ("a", 30 * SECOND), ("b", 70 * SECOND), (LIT, 10 * SECOND)]
# native query: one row per key and minute, with the literal
NATIVE = sorted([("a", 2, LIT), ("b", 1, LIT)])
# operator query: COUNT(2) fires when a window has two rows: only 'a' in the first minute
OPERATOR = [("a", 2)]


@pytest.fixture
def events(spark, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # where `touch pwned` would leave its file
    df = spark.createDataFrame(
        [(k, at(ts)) for k, ts in ROWS], f"{_q(KEY)} STRING, {_q(TS)} TIMESTAMP"
    )
    df.createOrReplaceTempView(_q(SOURCE))
    yield df
    assert not (tmp_path / "pwned").exists()


def test_spark_sql_statement_parses_as_one_statement_and_gives_the_rows(spark, events, tmp_path):
    program = compile_source(WQL, FILE)
    # the file for `spark-sql -f` refuses names with line breaks (that CLI drops lines
    # starting with `--` even inside back-quotes); spark.sql reads the statement as it is
    with pytest.raises(WqlError, match="line break"):
        spark_sql_script(program, FILE)
    (sql,) = [s for _, s in spark_sql_statements(program) if s is not None]
    # spark.sql parses exactly one statement: a second one would be a parse error
    rows = spark.sql(sql).collect()
    assert sorted((r[KEY], r[VIEW], r["lit"]) for r in rows) == NATIVE


def _load(source: str) -> types.ModuleType:
    module = types.ModuleType("generated")
    exec(compile(source, "generated.py", "exec"), module.__dict__)  # noqa: S102 - under test
    return module


def test_pyspark_script_functions_give_the_rows(spark, events, tmp_path):
    program = compile_source(WQL, FILE)
    module = _load(render_script(program, WQL, str(tmp_path / FILE)))
    assert list(module.QUERIES) == [VIEW, OP]
    native = module.QUERIES[VIEW](spark, {SOURCE: events}).collect()
    assert sorted((r[KEY], r[VIEW], r["lit"]) for r in native) == NATIVE
    operator = module.QUERIES[OP](spark, {SOURCE: events}).collect()
    assert [(r[KEY], r["n"]) for r in operator] == OPERATOR


def test_pyspark_script_main_reads_the_hostile_path_and_header(spark, events, tmp_path):
    # the CSV's header names the columns in another order than the declaration
    (tmp_path / PATH).write_text(
        '"t""""""s","k`e""y;--\'/*é"\n'
        + "".join(f"{at(ts).strftime('%Y-%m-%d %H:%M:%S')},{k}\n" for k, ts in ROWS[:3]),
        encoding="utf-8",
    )
    program = compile_source(WQL, FILE)
    module = _load(render_script(program, WQL, str(tmp_path / FILE)))
    out = tmp_path / "out"
    assert module.main(["--output", str(out), "--query", VIEW, "--format", "parquet"]) == 0
    written = spark.read.parquet(str(out / VIEW)).collect()
    assert sorted((r[KEY], r[VIEW], r["lit"]) for r in written) == NATIVE
