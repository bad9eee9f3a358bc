"""The operator's snapshot format: a versioned header + a restricted pickle.

Snapshots hold only plain data (dicts, lists, tuples, sets, numbers,
strings, bytes, ``None``), windows, and the value types a row may carry
(``Decimal``, ``datetime``/``date``/``time``/``timedelta``, NumPy scalars).
Loading uses an unpickler that refuses every other global, so a tampered or
foreign snapshot cannot run code; it raises :class:`SnapshotError`.

>>> from wql.runtime.windows import TimeWindow
>>> loads(dumps({"w": TimeWindow(0, 10)}))
{'w': TimeWindow(start=0, end=10)}
>>> loads(b"junk")
Traceback (most recent call last):
...
wql.runtime.snapshot.SnapshotError: not a WQL runtime snapshot (bad header)
"""

from __future__ import annotations

import io
import pickle
from typing import Any

MAGIC = b"WQLRT"
VERSION = 1

_ALLOWED = {
    ("wql.runtime.windows", "TimeWindow"),
    ("wql.runtime.windows", "GlobalWindow"),
    ("wql.runtime.config", "nan_key"),
    ("builtins", "set"),
    ("builtins", "frozenset"),
    ("builtins", "complex"),
    ("decimal", "Decimal"),
    ("datetime", "datetime"),
    ("datetime", "date"),
    ("datetime", "time"),
    ("datetime", "timedelta"),
    ("datetime", "timezone"),
    ("numpy", "dtype"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "scalar"),
    ("_codecs", "encode"),
}


class SnapshotError(ValueError):
    """The bytes are not a snapshot this runtime can restore."""


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _ALLOWED:
            raise SnapshotError(f"snapshot refers to a disallowed type {module}.{name}")
        return super().find_class(module, name)


def dumps(payload: Any) -> bytes:
    """Serialize ``payload`` (plain data) with the header ``WQLRT`` + version byte."""
    return MAGIC + bytes([VERSION]) + pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)


def loads(data: bytes) -> Any:
    """Inverse of :func:`dumps`; rejects other headers, versions and foreign types."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise SnapshotError("a snapshot is bytes")
    data = bytes(data)
    if not data.startswith(MAGIC) or len(data) <= len(MAGIC):
        raise SnapshotError("not a WQL runtime snapshot (bad header)")
    version = data[len(MAGIC)]
    if version != VERSION:
        raise SnapshotError(
            f"snapshot format version {version} is not supported (expected {VERSION})"
        )
    try:
        return _Unpickler(io.BytesIO(data[len(MAGIC) + 1 :])).load()
    except SnapshotError:
        raise
    except Exception as e:  # a truncated or corrupted pickle: report, never a raw traceback
        raise SnapshotError(f"corrupt snapshot: {e}") from None
