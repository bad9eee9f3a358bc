"""``wql`` subcommands: one module per command, each exposing ``register(subparsers)``.

``register`` adds the command's argparse sub-parser and sets its handler with
``parser.set_defaults(handler=run)``; ``run(args) -> int`` returns the exit
status. Errors a user can cause are raised as :class:`~wql.errors.WqlError`
(the CLI renders them, exit 1); the helpers here give every command the same
file handling and error printing.
"""

from __future__ import annotations

import sys
from pathlib import Path

from wql.errors import WqlError, use_color

__all__ = ["read_source", "print_error", "display_name"]


def read_source(path: str) -> str:
    """The text of ``path`` (``-`` is standard input); unreadable -> a WqlError without span."""
    if path == "-":
        return sys.stdin.read()
    try:
        # utf-8-sig: a byte-order mark some editors write is not WQL text.
        return Path(path).read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        reason = "no such file"
    except IsADirectoryError:
        reason = "it is a directory"
    except UnicodeDecodeError as err:
        reason = f"not UTF-8 text ({err.reason} at byte {err.start})"
    except OSError as err:
        reason = (err.strerror or str(err)).lower()
    raise WqlError(f"cannot read file: {reason}", filename=path)


def display_name(path: str) -> str:
    """How a file is named in messages (``<stdin>`` for ``-``)."""
    return "<stdin>" if path == "-" else path


def print_error(err: WqlError) -> None:
    """Render an error (with its source line and carets) on standard error."""
    print(err.render(color=use_color(sys.stderr)), file=sys.stderr)
