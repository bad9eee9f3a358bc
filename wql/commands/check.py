"""``wql check FILE...``: compile every file and report every error, or ``ok``.

Exit status 0 when every file compiles, 1 when any file has an error (all
errors of all files are printed, on standard error).
"""

from __future__ import annotations

import argparse

from wql.commands import add_engine_option, display_name, print_error, read_source
from wql.errors import WqlError, WqlErrors


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "check",
        help="parse and validate .wql files",
        description="Parse, bind and plan each file; print every error found, or 'ok'.",
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="a .wql file ('-' for stdin)")
    add_engine_option(parser, "check that every query can run on this engine (default: auto)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from wql.compiler import check_source

    failed = False
    for path in args.files:
        name = display_name(path)
        try:
            text = read_source(path)
            errors = check_source(text, filename=name, engine=args.engine)
        except WqlError as err:
            errors = [err]
        if errors:
            failed = True
            print_error(errors[0] if len(errors) == 1 else WqlErrors(errors))
            continue
        print(f"{name}: ok")
    return 1 if failed else 0
