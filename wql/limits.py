"""The size and depth limits every WQL text is held to (``docs/language.md``, "Limits").

Each limit is checked while the text is read, before any recursive step
(the AST builder, the binder, the formatter, sqlglot's parser and printer)
can exhaust Python's stack; exceeding one is a positioned
:class:`~wql.errors.WqlSyntaxError` that names the limit. The limits are far
above what a real query needs.

sqlglot parses and prints expressions recursively, and one level of WQL
nesting costs it about twenty Python frames; :func:`recursion_headroom`
makes room for the deepest expression the limits allow.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

#: Characters in one ``.wql`` text.
MAX_TEXT_CHARS = 8_000_000
#: Triggers nested in triggers (``PURGING``, ``ANY``, ``ALL``, ``TIMEOUT``, ``WITH EARLY/LATE``).
MAX_TRIGGER_DEPTH = 32
#: Levels of parentheses, calls, CASE, CAST, subscripts and unary operators in one expression.
MAX_EXPRESSION_DEPTH = 100
#: Binary operators (and arguments) on the path from an expression to its deepest operand.
MAX_OPERATOR_CHAIN = 1_000
#: Characters of one numeric literal (a DOUBLE written out in full has up to 309 digits).
MAX_LITERAL_DIGITS = 1_000
#: Errors reported for one text; past them the text is not read further.
MAX_ERRORS = 100

# Python frames sqlglot and the binder use per level of the limits above
# (measured: about 23 frames per level of nesting, chains are iterative; plus a margin).
_FRAMES_PER_LEVEL = 30
_FRAMES_PER_OPERATOR = 2
HEADROOM = _FRAMES_PER_LEVEL * MAX_EXPRESSION_DEPTH + _FRAMES_PER_OPERATOR * MAX_OPERATOR_CHAIN


_lock = threading.Lock()
_active = 0  # recursion_headroom blocks running now, in any thread
_restore_to: int | None = None


@contextmanager
def recursion_headroom(frames: int = HEADROOM) -> Iterator[None]:
    """Let the code inside use ``frames`` more Python frames than the current depth.

    Raises the interpreter's (process-wide) recursion limit when needed; the
    previous limit comes back when the last such block, in any thread,
    ends. The limits above keep what runs inside from needing more.
    """
    global _active, _restore_to
    depth = 0
    frame: FrameType | None = sys._getframe()
    while frame is not None:
        depth += 1
        frame = frame.f_back
    with _lock:
        current = sys.getrecursionlimit()
        if _active == 0:
            _restore_to = current
        _active += 1
        if depth + frames > current:
            sys.setrecursionlimit(depth + frames)
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if _active == 0 and _restore_to is not None:
                sys.setrecursionlimit(max(_restore_to, 100))
                _restore_to = None
