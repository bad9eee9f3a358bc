"""``wql explain FILE [--stream]``: print the compiled plan of every query and the engine chosen.

``--stream`` shows the choice for streaming sources (``wql run --stream``,
or a streaming DataFrame passed to ``apply``), which can differ from the
batch one (docs/native.md, "Streaming").
"""

from __future__ import annotations

import argparse

from wql.commands import add_engine_option, add_stream_option, display_name, read_source


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "explain",
        help="show the plan and engine choice of each query",
        description="Compile a .wql file; print each query's plan and why its engine was chosen.",
    )
    parser.add_argument("file", metavar="FILE", help="a .wql file ('-' for stdin)")
    add_engine_option(parser)
    add_stream_option(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from wql.compiler import compile_source
    from wql.compiler.explain import explain

    text = read_source(args.file)
    program = compile_source(
        text, filename=display_name(args.file), engine=args.engine, streaming=args.stream
    )
    output = explain(program)
    print(output, end="" if output.endswith("\n") else "\n")
    return 0
