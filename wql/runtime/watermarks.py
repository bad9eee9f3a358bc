"""The bounded-out-of-orderness watermark, written once.

Flink's ``BoundedOutOfOrdernessWatermarks`` emits ``max_ts - delay - 1``
after every row: the largest event time seen, less the declared delay, less
one millisecond, so that a row at ``max_ts - delay`` is not yet late (spec
§3). Every host computes it here:

* batch replay, per row (NumPy arrays in the tasks, Spark columns in the
  window strategies) and once after the last row (the final watermark);
* a stream's processor, for the rise after the last row of a drained stream;
* Spark's ``withWatermark`` subtracts its delay from the largest event time,
  so a stream declares :func:`watermark_lag` there and Spark's watermark is
  WQL's.

>>> bounded_watermark(10_000, 2_000)
7999
>>> bounded_watermark(MIN_TIME, 2_000) == MIN_TIME
True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from wql.runtime.windows import MIN_TIME

__all__ = ["bounded_watermark", "watermark_lag"]


def watermark_lag(delay_ms: int) -> int:
    """How far the watermark stays behind the largest event time: ``delay + 1`` ms."""
    return delay_ms + 1


def _pick(cond: Any, yes: Any, no: Any) -> Any:
    return yes if cond else no


def bounded_watermark(
    max_ts: Any, delay_ms: int, where: Callable[[Any, Any, Any], Any] = _pick
) -> Any:
    """``max_ts - delay_ms - 1``, where "nothing seen yet" (``MIN_TIME``) stays ``MIN_TIME``.

    ``max_ts`` is an int, or a vector of them with ``where`` its elementwise
    choice (``numpy.where``; a Spark column's ``when``/``otherwise``): the
    clamp keeps a value near ``MIN_TIME`` from wrapping around.
    """
    lag = watermark_lag(delay_ms)
    return where(max_ts < MIN_TIME + lag, MIN_TIME, max_ts - lag)
