"""``wql fmt FILE... [--check | --write] [--form wql|tvf]``: canonical formatting of .wql files.

Without options the formatted text is printed (one file), or each file's
text under a ``==> FILE <==`` header (several files). ``--check`` prints the
files that would change and exits 1 if there are any; ``--write`` rewrites
them in place. ``--form`` prints every windowed query in WQL's form or as
Flink SQL's window table function (``FROM TABLE(TUMBLE(TABLE t,
DESCRIPTOR(ts), ...))``); by default each keeps the form it was written in.
Formatting only parses: a file with semantic errors can still
be formatted; a file with syntax errors is reported and left alone (exit 1).

A Markdown file (``.md``) is checked, printed or rewritten as its ```` ```sql ````
code blocks: each is WQL, formatted on its own, the text around them kept
(``wql fmt --check README.md docs/*.md`` is what CI runs on the docs). Errors
in a block point at its line and column in the Markdown file.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from wql.commands import display_name, print_error, read_source
from wql.errors import WqlError
from wql.grammar.ast import QueryForm
from wql.grammar.formatter import format_script
from wql.grammar.parser import parse


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "fmt",
        help="format .wql files canonically",
        description="Reformat .wql files: upper-case keywords, one clause per line, comments kept.",
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="a .wql file ('-' for stdin)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--check", action="store_true", help="list files that would change; exit 1 if any"
    )
    mode.add_argument("--write", action="store_true", help="rewrite files in place")
    parser.add_argument(
        "--form",
        choices=[f.value for f in QueryForm],
        help="print every query's window in WQL's form (GROUP BY k, TUMBLE(ts, ...)) or as "
        "Flink SQL's window table function (FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), ...))); "
        "default: as written",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    form = QueryForm(args.form) if getattr(args, "form", None) else None
    failed = False
    changed: list[str] = []
    for path in args.files:
        name = display_name(path)
        try:
            text = read_source(path)
            if path.lower().endswith(".md"):
                formatted = format_markdown(text, name, form)
            else:
                formatted = format_script(parse(text, filename=name), form)
        except WqlError as err:
            failed = True
            print_error(err)
            continue
        if args.check:
            if formatted != text:
                changed.append(name)
                print(f"would reformat {name}")
        elif args.write:
            if path == "-":
                sys.stdout.write(formatted)
            elif formatted != text:
                Path(path).write_text(formatted, encoding="utf-8")
                changed.append(name)
                print(f"reformatted {name}")
        else:
            if len(args.files) > 1:
                print(f"==> {name} <==")
            sys.stdout.write(formatted)
    if args.check and not failed and not changed:
        count = len(args.files)
        print(f"{count} file{'s' if count != 1 else ''} already formatted")
    return 1 if failed or (args.check and changed) else 0


#: A Markdown code block of WQL: its body is group 1.
SQL_BLOCK = re.compile(r"^```sql\n(.*?)^```$", re.DOTALL | re.MULTILINE)


def format_markdown(text: str, filename: str, form: QueryForm | None = None) -> str:
    """``text`` (Markdown) with every ```` ```sql ```` block formatted as WQL.

    Each block is parsed in a copy of the file blanked outside it (line breaks
    kept), so a syntax error's line and column are those of the Markdown file.
    """
    out: list[str] = []
    done = 0
    for m in SQL_BLOCK.finditer(text):
        start, end = m.span(1)
        masked = re.sub(r"[^\n]", " ", text[:start]) + text[start:end]
        out += [text[done:start], format_script(parse(masked, filename=filename), form)]
        done = end
    out.append(text[done:])
    return "".join(out)
