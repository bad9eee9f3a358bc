"""Whether a query's output depends on *when* the watermark advanced (batch replay).

The batch host replays a source in its replay order and gives every row the
global watermark it would see in a stream (docs/running.md, "Batch
replay"). Computing that global clock costs Spark jobs over every row. For
many plans it is wasted work: the output is the same for *every* watermark
sequence that leaves no row late, so each key partition may advance the
watermark on its own rows alone. This module decides which plans those are;
the argument, from Flink's ``WindowOperator``, is in docs/running.md
("Plans that do not depend on the watermark sequence"). In short, in
event-time replay order every row ``r`` sees a watermark
``w(r) <= ts(r) - delay - 1``, for the global clock and for a partition's
own clock alike, and then:

* no row is late (its window ends after ``ts(r) > w(r)``), so no late
  firing, late output or lateness drop happens under either clock;
* a window ``W`` fires or is cleaned up only once the watermark passed its
  last instant, so every later row has ``ts > max_timestamp(W)`` and is not
  in ``W``: each firing of a watermark timer sees all of its key's rows of
  ``W`` whichever clock fired it, and a cleanup drops nothing a later row
  would have used;
* element firings (COUNT, DELTA, EARLY COUNT), evictors, PURGING,
  ANY/ALL of those and the pane columns (``pane_timing`` of an element
  firing is EARLY because the window holds the row; ``is_last`` is the
  cleanup timer's) read only the key's rows and the timers' own times;
* triggers that finish (ONCE, UNTIL, SEQUENCE of the above): a window
  closes at one of those firings, and a closed window only refuses its
  key's later rows of that window, which no clock leaving no row late
  sends before the firing.

What breaks it, and so makes a plan depend on the watermark sequence:

* ``arrival_order`` with event time: rows come in another order than event
  time and can be late, and whether they are depends on other keys' rows;
* processing time anywhere (a processing-time window, EVERY ... OF
  PROCESSING TIME, TIMEOUT), and an idle timeout with a processing-time
  column: another clock, global across keys;
* ``EVERY ... OF EVENT TIME`` (continuous event-time triggers, also as an
  EARLY trigger): what a firing at a boundary holds depends on how many of
  the key's rows arrived before the watermark crossed it;
* SESSION windows with a zero watermark delay: Flink merges a session with
  a row at its end (``TimeWindow.intersects`` is inclusive), and with no
  delay a tie of another key can fire and clear the session just before
  that row (with a delay of 1 ms or more, a row after the firing lies past
  the session's end);
* a query over a view (its watermark is forwarded from the view's
  firings) and window ranks (not analysed here).
"""

from __future__ import annotations

from wql.compiler import plan as P


def watermark_dependence(q: P.Stage) -> P.Reason | None:
    """Why ``q``'s batch output depends on the watermark sequence, or ``None`` when it cannot.

    ``None`` means: replayed in event-time order (or with no event time at
    all), every clock that leaves no row late gives ``q`` the same result
    rows, late rows and counters, so the batch host may let each key
    partition advance the watermark on its own rows (module docstring).
    """
    if not isinstance(q, P.Query):
        return P.Reason("only window aggregations are analysed", q.span)
    src = q.source
    if src.view is not None:
        return P.Reason(
            "a view's rows carry the watermark the view's firings forward", src.span, "FROM"
        )
    et = src.event_time
    if et is not None and src.arrival_order is not None:
        return P.Reason(
            f"rows replay in arrival order ({src.arrival_order}), so they can be late, and "
            "whether a row is late depends on other keys' rows",
            src.span,
            "arrival_order",
        )
    if et is not None and et.idle_ms is not None and src.processing_time is not None:
        return P.Reason(
            "the watermark advances with processing time after an idle spell",
            et.idle_span or et.span,
            "IDLE AFTER",
        )
    if q.window.domain is P.TimeDomain.PROCESSING:
        return P.Reason("a processing-time window fires on a global clock", q.window.span)
    for node in P.walk_trigger(q.effective_trigger):
        if P.TimeDomain.PROCESSING in P.trigger_domains(node) and not node.children:
            return P.Reason("processing time is a global clock", node.span, "TRIGGER")
        if isinstance(node, P.TimeoutTrigger):
            return P.Reason("TIMEOUT runs on processing time, a global clock", node.span)
        if isinstance(node, P.EveryTrigger) and node.domain is P.TimeDomain.EVENT:
            if node.after_first_row:
                return P.Reason(
                    "a firing after a pane's first row holds the rows that arrived before "
                    "the watermark crossed its time",
                    node.span,
                    "AFTER ... OF EVENT TIME",
                )
            return P.Reason(
                "a firing at each boundary holds the rows that arrived before the watermark "
                "crossed it",
                node.span,
                "EVERY ... OF EVENT TIME",
            )
    if q.window.merging and et is not None and et.delay_ms == 0:
        return P.Reason(
            "with no watermark delay another key's row at a session's end can fire and "
            "clear it before a row of its own key at that instant merges into it",
            et.span,
            "WATERMARK",
        )
    return None


def depends_on_watermark_sequence(q: P.Stage) -> bool:
    """Whether ``q``'s batch output depends on when the watermark advanced."""
    return watermark_dependence(q) is not None
