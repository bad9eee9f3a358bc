"""Compile time of large and hostile texts: linear in the size, bounded by the limits.

    .venv/bin/python bench/compile_large.py [--size BYTES] [--statements N]

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
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Callable

from wql.compiler import check_source, compile_source
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--statements", type=int, default=2000)
    args = parser.parse_args()

    valid, count = queries(args.size)
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

    clean = SOURCE + "".join(QUERY.format(i=i) for i in range(args.statements))
    base = cpu(parse, clean)
    wrong = cpu(parse, clean + MISTAKE)
    print(
        f"\n{args.statements} statements: parse {base:.2f} s clean, {wrong:.2f} s with one "
        f"mistake at the end ({wrong / base:.1f}x)"
    )


if __name__ == "__main__":
    main()
