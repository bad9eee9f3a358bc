"""Compile time of large and hostile texts: linear in the size, bounded by the limits.

    .venv/bin/python bench/compile_large.py [--size BYTES] [--statements N]
        [--views N ...] [--part texts|pipelines|spark-sql ...]

Prints CPU seconds (``time.process_time``: the machine is shared, wall time
is not the code's) of ``parse``, ``fmt`` (parse + format), ``compile``
(``compile_source``) and ``check`` (``check_source``) for

- a text of ``--size`` characters (default 1 MB) of small valid queries,
- the same with one mistake in a last query (error reporting),
- a 1 MB unterminated block comment after one query,
- a 1 MB expression (stopped by the operator-chain limit),

and, as the baseline measured in the same run, ``parse`` of ``--statements``
statements (default 2000) clean and with one mistake at the end: reporting
the mistake costs at most one more parse of each statement (it used to cost
one parse of the whole file per statement).

``pipelines``: ``compile`` and ``explain`` (``compile_source`` + the explain
text, as ``wql explain`` does) of ``--views`` chained views (default 200, 400,
800; each reads the one before, the first reads the source), batch and
``--stream``, against the baseline of as many views that each read the source
(no pipeline), each run cold (the binding caches emptied first, as in a fresh
``wql explain``): linear when the time per view stays flat as N doubles and
the chain costs about what the flat file does.

``spark-sql``: ``to_spark_sql`` per native query of the example and fixture
files (ms per query, the mean over five rounds after one warm-up), against
``compile_source`` of the same files per native query as the baseline.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import time
from collections.abc import Callable
from pathlib import Path

from wql.compiler import check_source, compile_source
from wql.compiler.backends.native import to_spark_sql
from wql.compiler.explain import explain
from wql.compiler.expressions import clear_caches
from wql.errors import WqlError
from wql.grammar.formatter import format_script
from wql.grammar.parser import parse

SOURCE = (
    "CREATE SOURCE s (k STRING, v BIGINT, d DOUBLE, ts TIMESTAMP, "
    "WATERMARK FOR ts AS ts - INTERVAL '1' SECOND);\n"
)
QUERY = (
    "CREATE VIEW q{i} AS SELECT k, window_start, COUNT(*) AS n, SUM(v) AS total FROM s "
    "WHERE v > {i} GROUP BY k, TUMBLE(ts, INTERVAL '1' MINUTE);\n"
)
MISTAKE = "SELECT k FROM s GROUP BY k, TUMBLE(ts INTERVAL '1' MINUTE);\n"
FIRST_VIEW = (
    "CREATE VIEW v0 AS SELECT k, window_time AS t, COUNT(*) AS n FROM s "
    "GROUP BY k, TUMBLE(ts, INTERVAL '1' MINUTE);\n"
)
CHAINED_VIEW = (
    "CREATE VIEW v{i} AS SELECT k, window_time AS t, SUM(n) AS n FROM v{up} "
    "GROUP BY k, TUMBLE(t, INTERVAL '1' MINUTE);\n"
)
FLAT_VIEW = (
    "CREATE VIEW v{i} AS SELECT k, window_time AS t, SUM(v) AS n FROM s WHERE v > {i} "
    "GROUP BY k, TUMBLE(ts, INTERVAL '1' MINUTE);\n"
)
ROOT = Path(__file__).resolve().parent.parent


def queries(size: int) -> tuple[str, int]:
    """A text of at least ``size`` characters of distinct valid queries, and their number."""
    parts, n, i = [SOURCE], len(SOURCE), 0
    while n < size:
        part = QUERY.format(i=i)
        parts.append(part)
        n += len(part)
        i += 1
    return "".join(parts), i


def cpu(fn: Callable[[str], object], text: str) -> float:
    started = time.process_time()
    # the hostile texts are errors: what is timed is finding them
    with contextlib.suppress(WqlError):
        fn(text)
    return time.process_time() - started


def pipeline(views: int, chained: bool) -> str:
    """A source and ``views`` views, each reading the one before (``chained``) or the source."""
    if chained:
        rest = (CHAINED_VIEW.format(i=i, up=i - 1) for i in range(1, views))
        return SOURCE + FIRST_VIEW + "".join(rest)
    return SOURCE + "".join(FLAT_VIEW.format(i=i) for i in range(views))


def pipelines(counts: list[int]) -> None:
    print(
        "\n| views | input | batch compile | batch explain | stream compile | stream explain "
        "| ms per view (stream explain) |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|")
    for n in counts:
        for chained in (False, True):
            text = pipeline(n, chained)
            row = []
            for streaming in (False, True):
                clear_caches()
                row.append(cpu(lambda t, s=streaming: compile_source(t, streaming=s), text))
                clear_caches()
                row.append(
                    cpu(lambda t, s=streaming: explain(compile_source(t, streaming=s)), text)
                )
            what = "chain" if chained else "flat (baseline)"
            print(
                f"| {n} | {what} | "
                + " | ".join(f"{x:.2f}" for x in row)
                + f" | {row[-1] / n * 1000:.2f} |"
            )


def spark_sql(rounds: int = 5) -> None:
    texts = []
    for path in sorted(
        glob.glob(str(ROOT / "examples/**/*.wql"), recursive=True)
        + glob.glob(str(ROOT / "tests/fixtures/**/*.wql"), recursive=True)
    ):
        text = Path(path).read_text()
        with contextlib.suppress(WqlError):
            program = compile_source(text)
            native = [q for q in program.queries if q.engine and q.engine.engine == "native"]
            if native:
                texts.append((text, native))
    queries = [q for _, qs in texts for q in qs]

    def sql() -> None:
        for q in queries:
            to_spark_sql(q)

    def compile_all() -> None:
        for text, _ in texts:
            compile_source(text)

    times = {}
    for name, fn in (("to_spark_sql", sql), ("compile_source (baseline)", compile_all)):
        fn()  # warm-up: imports, sqlglot's dialect, the compiler's caches
        started = time.process_time()
        for _ in range(rounds):
            fn()
        times[name] = (time.process_time() - started) / rounds / len(queries) * 1000
    print(f"\n{len(queries)} native queries in {len(texts)} files (ms per native query):")
    for name, ms in times.items():
        print(f"  {name}: {ms:.2f}")
    ratio = times["to_spark_sql"] / times["compile_source (baseline)"]
    print(f"  to_spark_sql / compile_source: {ratio:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--statements", type=int, default=2000)
    parser.add_argument("--views", type=int, nargs="+", default=[200, 400, 800])
    parts = ("texts", "pipelines", "spark-sql")
    parser.add_argument("--part", choices=parts, nargs="+", default=list(parts))
    args = parser.parse_args()
    if "texts" in args.part:
        texts(args.size, args.statements)
    if "pipelines" in args.part:
        pipelines(args.views)
    if "spark-sql" in args.part:
        spark_sql()


def texts(size: int, statements: int) -> None:
    valid, count = queries(size)
    cases = {
        f"valid ({count} queries, {len(valid)} chars)": valid,
        "the same + one mistake in a last query": valid + MISTAKE,
        "1 MB unterminated block comment": SOURCE + QUERY.format(i=0) + "/*" + "x " * 500_000,
        "1 MB expression (over the chain limit)": SOURCE
        + "SELECT k, COUNT(*) FROM s WHERE "
        + " + ".join(["v"] * 250_000)
        + " > 0 GROUP BY k, TUMBLE(ts, INTERVAL '1' MINUTE);\n",
    }
    steps: dict[str, Callable[[str], object]] = {
        "parse": parse,
        "fmt": lambda t: format_script(parse(t)),
        "compile": compile_source,
        "check": check_source,
    }
    print("| text | " + " | ".join(steps) + " |")
    print("|---|" + "---:|" * len(steps))
    for name, text in cases.items():
        print(f"| {name} | " + " | ".join(f"{cpu(fn, text):.1f}" for fn in steps.values()) + " |")

    clean = SOURCE + "".join(QUERY.format(i=i) for i in range(statements))
    base = cpu(parse, clean)
    wrong = cpu(parse, clean + MISTAKE)
    print(
        f"\n{statements} statements: parse {base:.2f} s clean, {wrong:.2f} s with one "
        f"mistake at the end ({wrong / base:.1f}x)"
    )


if __name__ == "__main__":
    main()
