"""The ``wql`` command line: ``wql check|explain|fmt ...``.

Every subcommand lives in ``wql/commands/<name>.py`` and exposes
``register(subparsers)``; :data:`COMMANDS` lists them in help order.

Exit status: 0 success; 1 for anything the user can fix (a WQL error, an
unreadable file, ``fmt --check`` finding changes) with the error rendered on
standard error; 2 for a bad command line (argparse) or an internal bug, which
prints one line (the traceback only with ``WQL_DEBUG=1``).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from collections.abc import Sequence

from wql.commands import print_error
from wql.errors import WqlError
from wql.limits import recursion_headroom

COMMANDS = ("check", "explain", "fmt", "compile", "run")


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser with every command of :data:`COMMANDS` registered."""
    parser = argparse.ArgumentParser(
        prog="wql",
        description="WQL: a declarative window query language for PySpark "
        "with Apache Flink's window semantics.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        importlib.import_module(f"wql.commands.{name}").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``wql`` command; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        with recursion_headroom():
            return int(args.handler(args))
    except WqlError as err:
        print_error(err)
        return 1
    except KeyboardInterrupt:
        print("wql: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # Output piped into e.g. `head`: not an error of ours.
        sys.stderr.close()
        return 0
    except Exception as err:  # noqa: BLE001 - the last line of defence, by design
        if os.environ.get("WQL_DEBUG") == "1":
            traceback.print_exc()
        else:
            print(
                f"wql: internal error: {type(err).__name__}: {err} "
                "(this is a bug in WQL; set WQL_DEBUG=1 for the traceback)",
                file=sys.stderr,
            )
        return 2


if __name__ == "__main__":
    sys.exit(main())
