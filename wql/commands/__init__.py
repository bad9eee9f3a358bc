"""``wql`` subcommands: one module per command, each exposing ``register(subparsers)``.

``register`` adds the command's argparse sub-parser and sets its handler with
``parser.set_defaults(handler=run)``; ``run(args) -> int`` returns the exit
status. Errors a user can cause are raised as :class:`~wql.errors.WqlError`
(the CLI renders them, exit 1); the helpers here give every command the same
file handling and error printing.
"""

from __future__ import annotations

import sys

from wql.compiler import read_file
from wql.errors import WqlError, use_color

__all__ = ["read_source", "print_error", "display_name"]


def read_source(path: str) -> str:
    """The text of ``path`` (``-`` is standard input); unreadable -> a WqlError without span.

    Files are read by :func:`wql.compiler.read_file`, as the embedding API reads them.
    """
    if path == "-":
        return sys.stdin.read()
    return read_file(path)


def display_name(path: str) -> str:
    """How a file is named in messages (``<stdin>`` for ``-``)."""
    return "<stdin>" if path == "-" else path


def print_error(err: WqlError) -> None:
    """Render an error (with its source line and carets) on standard error."""
    print(err.render(color=use_color(sys.stderr)), file=sys.stderr)
