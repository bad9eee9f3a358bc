"""``wql`` subcommands: one module per command, each exposing ``register(subparsers)``.

``register`` adds the command's argparse sub-parser and sets its handler with
``parser.set_defaults(handler=run)``; ``run(args) -> int`` returns the exit
status. Errors a user can cause are raised as :class:`~wql.errors.WqlError`
(the CLI renders them, exit 1); the helpers here give every command the same
file handling and error printing.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from typing import Any

from wql.compiler import read_file
from wql.compiler.planner import ENGINES
from wql.errors import ErrorCode, WqlError, use_color

__all__ = [
    "add_engine_option",
    "add_stream_option",
    "display_name",
    "first_line",
    "print_error",
    "read_source",
    "spark_failures",
]


def add_engine_option(
    parser: argparse.ArgumentParser,
    help_text: str = "force an engine (default: auto, the compiler chooses per query)",
) -> None:
    """``--engine auto|native|operator`` (the planner's :data:`~wql.compiler.planner.ENGINES`)."""
    parser.add_argument("--engine", choices=ENGINES, default="auto", help=help_text)


def add_stream_option(
    parser: argparse.ArgumentParser,
    help_text: str = "plan for streaming sources (what `wql run --stream` runs)",
) -> None:
    """``--stream``: the queries read streams, so each engine is chosen for a stream
    (:func:`wql.compiler.planner.choose_engines` with ``streaming=True``)."""
    parser.add_argument("--stream", action="store_true", help=help_text)


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


def first_line(e: Any) -> str:
    """The first non-blank line of an exception's text (Spark's run to pages)."""
    lines = [ln for ln in str(e).strip().splitlines() if ln.strip()]
    return lines[0] if lines else type(e).__name__


@contextlib.contextmanager
def spark_failures(doing: str, filename: str | None = None) -> Iterator[None]:
    """Report what Spark raises while ``doing`` as a WqlError: a line, never a traceback."""
    try:
        yield
    except WqlError:
        raise
    except Exception as e:  # noqa: BLE001 - Spark failures are reported, never a traceback
        raise WqlError(
            f"Spark failed while {doing}: {first_line(e)}", filename=filename, code=ErrorCode.SPARK
        ) from None
