r"""Escaping of user text copied into generated code, one function per target context.

Everything WQL writes into a generated PySpark script or Spark SQL file
that came from the user -- the ``.wql`` file's name, source, column and query
names, paths, option keys and values, string literals -- goes through one of
these functions, so that no name can end a comment, close a string or start
a statement. Python literals are ``repr`` (always a valid literal, whatever
the text); the functions here cover the other contexts:

>>> sql_identifier("a`b")
'`a``b`'
>>> print(sql_comment("q\\n;DROP TABLE t; --"))
q\\n;DROP TABLE t; --
"""

from __future__ import annotations

__all__ = ["python_docstring", "printable", "sql_identifier", "sql_comment"]


def _escape_unprintable(text: str, also: str = "") -> str:
    """``text`` with backslashes, the characters in ``also`` and every unprintable
    character (line breaks, NUL, other controls, lone surrogates) as backslash escapes."""
    out: list[str] = []
    for ch in text:
        if ch == "\\":
            out.append("\\\\")
        elif ch in also:
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch.isprintable() or ch == " ":
            out.append(ch)
        else:
            code = ord(ch)
            if code < 0x100:
                out.append(f"\\x{code:02x}")
            elif code < 0x10000:
                out.append(f"\\u{code:04x}")
            else:
                out.append(f"\\U{code:08x}")
    return "".join(out)


def python_docstring(*lines: str) -> str:
    """A triple-quoted Python string literal holding ``lines``, one per line.

    Every character that could end the literal or break the file -- quotes,
    backslashes, line breaks inside a line, NUL, other controls -- is escaped.
    """
    return '"""' + "\n".join(_escape_unprintable(line, '"') for line in lines) + '"""'


def printable(text: str) -> str:
    """``text`` on one line, its unprintable characters shown as backslash escapes.

    For names quoted inside generated prose (a docstring's first line, a
    ``#`` comment): the reader sees ``a\\nb``, and the line stays one line.
    """
    return _escape_unprintable(text)


def sql_identifier(name: str) -> str:
    """A Spark SQL identifier, back-quoted with back-quotes doubled (any name is valid)."""
    return "`" + name.replace("`", "``") + "`"


def sql_comment(text: str) -> str:
    """``text`` made safe to follow ``--`` on one line of Spark SQL.

    Line breaks and other unprintable characters become backslash escapes,
    so the comment cannot end early; and the result never ends in a
    backslash, since Spark's lexer continues a ``--`` comment past a line
    break that follows one.
    """
    escaped = _escape_unprintable(text)
    return escaped + " " if escaped.endswith("\\") else escaped
