"""``wql compile FILE --target spark-sql|pyspark|plan-json``: print what a .wql file compiles to.

* ``spark-sql``: one Spark SQL statement per native query
  (:mod:`wql.compiler.backends.spark_sql`); operator queries are listed as
  comments with the reason, and a note on standard error names each.
* ``pyspark``: a standalone PySpark script
  (:mod:`wql.compiler.backends.pyspark_script`) that finds the data from its
  own location: relative source paths start at the ``.wql`` file's folder
  as seen from the folder of ``-o`` (standard output: the current folder),
  or at the script's ``--base DIR``.
* ``plan-json``: the typed plan as JSON (:mod:`wql.compiler.backends.plan_json`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from wql.commands import add_engine_option, add_stream_option, display_name, read_source
from wql.errors import ErrorCode, WqlError

TARGETS = ("spark-sql", "pyspark", "plan-json")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "compile",
        help="print the Spark SQL, PySpark script or plan JSON a file compiles to",
        description="Compile a .wql file to Spark SQL (native queries), a standalone "
        "PySpark script, or the typed plan as JSON.",
    )
    parser.add_argument("file", metavar="FILE", help="a .wql file ('-' for stdin)")
    parser.add_argument("--target", choices=TARGETS, required=True, help="what to produce")
    add_engine_option(parser)
    add_stream_option(parser)
    parser.add_argument("-o", "--output", metavar="OUT", help="write to OUT instead of stdout")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from wql.compiler import compile_source

    text = read_source(args.file)
    name = display_name(args.file)
    program = compile_source(text, filename=name, engine=args.engine, streaming=args.stream)
    try:
        if args.target == "spark-sql":
            from wql.compiler.backends.spark_sql import operator_queries, spark_sql_script

            output = spark_sql_script(program, name)
            for q in operator_queries(program):
                print(
                    f"wql compile: {q.name} runs on the operator engine; no Spark SQL emitted "
                    "(use --target pyspark for a script that runs it)",
                    file=sys.stderr,
                )
        elif args.target == "pyspark":
            from wql.compiler.backends.pyspark_script import render_script

            # the script finds the .wql file's folder from where it is written: the
            # folder of -o, or the current one (where `> job.py` puts it)
            output = render_script(
                program,
                text,
                None if args.file == "-" else args.file,
                engine=args.engine,
                script_dir=str(Path(args.output).resolve().parent) if args.output else ".",
            )
        else:
            from wql.compiler.backends.plan_json import plan_to_json

            output = json.dumps(plan_to_json(program, name), indent=2) + "\n"
    except WqlError as e:
        raise e.with_source(text, name) from None
    if args.output:
        try:
            Path(args.output).write_text(output, encoding="utf-8")
        except OSError as err:
            raise WqlError(
                f"cannot write output: {(err.strerror or str(err)).lower()}",
                filename=args.output,
                code=ErrorCode.FILE,
            ) from None
    else:
        sys.stdout.write(output)
    return 0
