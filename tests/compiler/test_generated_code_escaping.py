"""User text copied into generated code is escaped for its target (no code injection).

File names, source, column and query names, paths, option keys and values and
string literals full of quotes, back-quotes, triple quotes, line breaks, NUL,
semicolons, comment markers and unicode: the PySpark script still parses as
Python (and holds only the definitions WQL writes), every line of the Spark
SQL file outside its statements is a comment, and the plan JSON reads back.
Running the generated code on Spark is in ``tests/spark/test_generated_code_runs.py``.
"""

from __future__ import annotations

import ast
import json

import pytest

from wql.compiler import compile_source
from wql.compiler.backends.escaping import python_docstring, sql_comment, sql_identifier
from wql.compiler.backends.plan_json import plan_to_json
from wql.compiler.backends.pyspark_script import render_script
from wql.compiler.backends.spark_sql import spark_sql_script, spark_sql_statements
from wql.errors import ErrorCode, WqlError

HOSTILE = [
    'a""";__import__("os").system("touch pwned");"""x',
    "a'''b",
    "back`tick",
    "two``ticks",
    "new\nline; DROP TABLE t; --",
    "carriage\rreturn",
    "nul\x00byte",
    "semi;colon",
    "dash--dash",
    "/* block */",
    "ends with backslash\\",
    "unicode é ✓ \u2028 line separator",
    "'\"`;\n--/*",
]


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _string(value: str) -> str:
    """A WQL string literal with value ``value``."""
    body = value.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n").replace("\r", "\\r")
    return "'" + body.replace("\x00", "\\0") + "'"


def _program_text(name: str) -> str:
    s, c, t, v = (_quoted(x) for x in (name + " src", name + " col", name + " ts", name + " view"))
    return f"""
CREATE SOURCE {s} ({c} STRING, {t} TIMESTAMP, WATERMARK FOR {t} AS {t} - INTERVAL '1' SECOND)
WITH (format = 'csv', path = {_string(name + ".csv")}, header = 'true',
      {_string(name + " key")} = {_string(name + " value")});
CREATE VIEW {v} AS
SELECT {c}, COUNT(*) AS {_quoted(name + " n")}, {_string(name)} AS lit
FROM {s} WHERE {c} <> {_string(name)}
GROUP BY {c}, TUMBLE({t}, INTERVAL '1' MINUTE);
CREATE VIEW {_quoted(name + " op")} AS
SELECT {c}, COUNT(*) AS n FROM {s}
GROUP BY {c}, TUMBLE({t}, INTERVAL '1' MINUTE) TRIGGER COUNT(2);
"""


# What a generated script may define at its top level: nothing else runs on import.
SCRIPT_NAMES = {
    "BASE_DIR", "WQL_TEXT", "WQL_ENGINE", "run_with_wql", "read_csv_by_header",
    "read_sources", "QUERIES", "NOT_WINDOWED", "make_session", "report_not_windowed", "main",
}  # fmt: skip


def _top_level(tree: ast.Module) -> tuple[list[str], list[type]]:
    names: list[str] = []
    kinds: list[type] = []
    for node in tree.body:
        kinds.append(type(node))
        if isinstance(node, ast.FunctionDef):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
    return names, kinds


@pytest.mark.parametrize("name", HOSTILE, ids=range(len(HOSTILE)))
def test_pyspark_script_parses_and_defines_only_its_own_names(name):
    text = _program_text(name)
    program = compile_source(text, name + ".wql")
    script = render_script(program, text, name + ".wql", base_dir=name + " base")
    tree = ast.parse(script)
    names, kinds = _top_level(tree)
    query_functions = {n for n in names if n.startswith("query_")}
    assert set(names) - query_functions <= SCRIPT_NAMES
    assert len(query_functions) == len(program.queries)
    # a docstring, imports, assignments, functions and the `if __name__` guard: no stray call
    allowed = {ast.Expr, ast.ImportFrom, ast.Import, ast.Assign, ast.FunctionDef, ast.If}
    assert set(kinds) <= allowed
    assert [type(n) for n in tree.body].count(ast.Expr) == 1  # the module docstring only
    docstring = ast.get_docstring(tree)
    assert docstring is not None
    assert docstring.splitlines()[0].endswith(".wql.")
    # the user's texts come back exactly as Python values
    values = {
        t.id: ast.literal_eval(n.value)
        for n in tree.body
        if isinstance(n, ast.Assign)
        for t in n.targets
        if isinstance(t, ast.Name) and t.id in ("BASE_DIR", "WQL_TEXT")
    }
    assert values == {"BASE_DIR": name + " base", "WQL_TEXT": text}


# `spark-sql -f` drops every line that starts with `--`, inside back-quotes too, and
# Spark SQL has no escape for a line break in a name: the file refuses such names
LINE_BREAK = [n for n in HOSTILE if "\n" in n or "\r" in n]
ONE_LINE = [n for n in HOSTILE if n not in LINE_BREAK]


@pytest.mark.parametrize("name", ONE_LINE, ids=range(len(ONE_LINE)))
def test_spark_sql_file_is_its_statements_and_one_line_comments(name):
    text = _program_text(name)
    program = compile_source(text, name + ".wql")
    script = spark_sql_script(program, name + ".wql")
    statements = [sql + ";" for _, sql in spark_sql_statements(program) if sql is not None]
    assert len(statements) == 1
    rest = script
    for statement in statements:
        assert statement in rest
        rest = rest.replace(statement, "", 1)
    for line in rest.split("\n"):
        # Spark's `--` comment ends at \n or \r, and continues past a
        # backslash-newline: every comment is one line without either
        assert line == "" or line.startswith("--"), repr(line)
        assert "\r" not in line and not line.endswith("\\")


@pytest.mark.parametrize(
    "name", [*LINE_BREAK, "x\n-- y", "x\n--`; DROP TABLE t; --"], ids=lambda n: repr(n)[:20]
)
def test_spark_sql_file_refuses_a_name_with_a_line_break_at_its_declaration(name):
    text = _program_text(name)
    program = compile_source(text, name + ".wql")
    with pytest.raises(WqlError) as info:
        spark_sql_script(program, name + ".wql")
    err = info.value.with_source(text, name + ".wql")
    assert err.code is ErrorCode.UNSUPPORTED
    assert "line break" in err.message and "spark-sql -f" in err.message
    # at the first such name a statement holds: the source column, where it is declared
    at = text.index(_quoted(name + " col"))
    assert err.span is not None and err.span.start == at
    # the same program, run by spark.sql (no line filter), still has its statement
    assert [sql for _, sql in spark_sql_statements(program) if sql is not None]


def test_spark_sql_cli_refuses_the_name_with_one_error(tmp_path, capsys):
    from wql.cli import main

    path = tmp_path / "q.wql"
    path.write_text(_program_text("x\n-- y"))
    assert main(["compile", str(path), "--target", "spark-sql"]) == 1
    err = capsys.readouterr().err
    assert err.count("line break") == 1 and "q.wql:3:12" in err
    # the PySpark script holds any name (Python literals escape line breaks)
    assert main(["compile", str(path), "--target", "pyspark"]) == 0


@pytest.mark.parametrize("name", HOSTILE, ids=range(len(HOSTILE)))
def test_plan_json_reads_back_the_names(name):
    text = _program_text(name)
    program = compile_source(text, name + ".wql")
    data = json.loads(json.dumps(plan_to_json(program, name + ".wql")))
    assert data["file"] == name + ".wql"
    assert [q["name"] for q in data["queries"]] == [name + " view", name + " op"]
    assert data["sources"][0]["name"] == name + " src"


def test_escaping_functions():
    assert ast.literal_eval(python_docstring('x"""y', "a\\", "\x00\r")) == 'x"""y\na\\\n\x00\r'
    assert sql_identifier("a`b") == "`a``b`"
    assert sql_comment("a\nb\rc") == "a\\nb\\x0dc"
    assert not sql_comment("ends\\").endswith("\\")


def test_query_functions_are_distinct_and_leave_the_scripts_names_alone():
    names = ["a b", "a-b", "query_a_b", "F", "main", "read_sources", "class"]
    views = "".join(
        f"CREATE VIEW {_quoted(n)} AS SELECT k, COUNT(*) AS c FROM s "
        "GROUP BY k, TUMBLE(ts, INTERVAL '1' MINUTE);\n"
        for n in names
    )
    text = (
        "CREATE SOURCE s (k STRING, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND);\n"
        + views
    )
    program = compile_source(text)
    tree = ast.parse(render_script(program, text, "q.wql"))
    functions = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
    assert len(functions) == len(set(functions))  # none replaces another
    (queries,) = [
        n.value for n in tree.body if isinstance(n, ast.Assign) and n.targets[0].id == "QUERIES"
    ]
    assert isinstance(queries, ast.Dict)
    mapped = {ast.literal_eval(k): v.id for k, v in zip(queries.keys, queries.values, strict=True)}
    assert list(mapped) == names
    assert len(set(mapped.values())) == len(names)
    assert not set(mapped.values()) & {"F", "main", "read_sources", "os", "sys"}
