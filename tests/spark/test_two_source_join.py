"""Window joins of two sources on Spark (docs/language.md, "Window joins of two sources").

Each source has its own watermark from its own rows; the join's is the
minimum of the two (Flink's two-input operator); the rows of both sources
interleave by their shared ``arrival_order`` (ties: the left side's source
first, then input order) or by event time. The expected rows are derived by
hand (each case's comments) and, for random inputs, by a brute-force
reference written here from that definition alone: one loop over the
combined order, a dict of window buffers. The sources are CSV files.
"""

from __future__ import annotations

import datetime as dt
import random
from collections import Counter

import pytest

import wql
from tests.spark.examples_helpers import rows_as_text
from wql.errors import WqlError

pytestmark = pytest.mark.spark

T0 = dt.datetime(2024, 1, 1)


def stamp(ms: int) -> str:
    t = T0 + dt.timedelta(milliseconds=ms)
    return t.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def write(path, rows) -> str:
    """A CSV of (user, event time in ms, arrival) rows (an empty event time: NULL)."""
    lines = ["user_id,ts,arrival"]
    lines += [f"{u},{'' if ms is None else stamp(ms)},{arr}" for u, ms, arr in rows]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def source(name: str, path: str, delay_s: int, arrival: bool) -> str:
    options = f"format = 'csv', path = '{path}', header = 'true'"
    if arrival:
        options += ", arrival_order = 'arrival'"
    return (
        f"CREATE SOURCE {name} (user_id STRING, ts TIMESTAMP, arrival BIGINT,\n"
        f"    WATERMARK FOR ts AS ts - INTERVAL '{delay_s}' SECOND) WITH ({options});\n"
    )


def window(kind: str, table: str) -> str:
    if kind == "tumble":
        return f"TABLE(TUMBLE(TABLE {table}, DESCRIPTOR(ts), INTERVAL '10' SECOND))"
    return f"TABLE(HOP(TABLE {table}, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '10' SECOND))"


def join_text(tmp_path, clicks, imps, *, arrival=True, delays=(0, 0), kind="tumble", how="JOIN"):
    return (
        source("clicks", write(tmp_path / "clicks.csv", clicks), delays[0], arrival)
        + source("imps", write(tmp_path / "imps.csv", imps), delays[1], arrival)
        + f"""
CREATE VIEW joined AS
SELECT c.user_id AS cu, i.user_id AS iu, c.window_start, c.ts AS clicked, i.ts AS shown
FROM {window(kind, "clicks")} AS c
{how} {window(kind, "imps")} AS i
    ON c.window_start = i.window_start AND c.window_end = i.window_end
   AND c.user_id = i.user_id;
"""
    )


def run(spark, text: str, engine: str = "auto"):
    results = wql.compile(text, engine).apply(spark)
    try:
        r = next(q for q in results.queries if q.name == "joined")
        return rows_as_text(results["joined"])[1], r.counters, r.engine
    finally:
        results.release()


# user, event time (ms), arrival
CLICKS = [
    ("u1", 1_000, 1),
    ("u1", 25_000, 3),
    ("u1", 5_000, 6),  # late: the join's watermark is 14 999 (imps), [0, 10) has joined
    ("u2", 12_000, 8),  # in time: its own watermark (24 999) is past 19 999, the join's is not
    ("u1", 40_000, 11),
]
IMPS = [
    ("u1", 2_000, 2),
    ("u1", 8_000, 4),
    ("u2", 15_000, 5),
    ("u1", 3_000, 7),  # late: 9 999 <= 14 999
    ("u2", 13_000, 9),
    ("u1", 9_000, 10),  # late
    ("u1", 41_000, 11),  # a tie of arrival with the click at 40 s: the click first
]


def test_two_sources_in_arrival_order_by_hand(spark, tmp_path, partitions):
    # delay 0: a source's watermark is max(its ts before) - 1; the join's the minimum.
    # arrival 1 c u1@1s: MIN / MIN          arrival 6 c u1@5s: 24 999 / 14 999 -> late
    # arrival 2 i u1@2s: 999 / MIN          arrival 7 i u1@3s: 24 999 / 14 999 -> late
    # arrival 3 c u1@25s: 999 / 1 999       arrival 8 c u2@12s: 14 999 < 19 999 -> in time
    # arrival 4 i u1@8s: 24 999 / 1 999     arrival 9 i u2@13s, 10 i u1@9s (late)
    # arrival 5 i u2@15s: 24 999 / 7 999    arrival 11 c u1@40s, then i u1@41s: in time
    want = [
        ("u1", "u1", "2024-01-01 00:00:00", "2024-01-01 00:00:01", "2024-01-01 00:00:02"),
        ("u1", "u1", "2024-01-01 00:00:00", "2024-01-01 00:00:01", "2024-01-01 00:00:08"),
        ("u1", "u1", "2024-01-01 00:00:40", "2024-01-01 00:00:40", "2024-01-01 00:00:41"),
        ("u2", "u2", "2024-01-01 00:00:10", "2024-01-01 00:00:12", "2024-01-01 00:00:13"),
        ("u2", "u2", "2024-01-01 00:00:10", "2024-01-01 00:00:12", "2024-01-01 00:00:15"),
    ]
    rows, c, engine = run(spark, join_text(tmp_path, CLICKS, IMPS))
    assert engine == "operator"  # a window table in arrival order can have late rows
    assert rows == want
    assert (c["rows_in"], c["rows_fired"], c["dropped"]) == (12, 9, {"late": 3})
    # per side, as Flink's left/rightNumLateRecordsDropped
    assert c["sides"] == {
        "c": {"rows_in": 5, "dropped": {"late": 1}},
        "i": {"rows_in": 7, "dropped": {"late": 2}},
    }
    with pytest.raises(WqlError) as e:
        run(spark, join_text(tmp_path, CLICKS, IMPS), "native")
    assert e.value.code.name == "NOT_NATIVE"


def test_two_sources_in_event_time_order_on_both_engines(spark, tmp_path):
    # No arrival order: both sources replay in event time, so a source's watermark is
    # below every row's event time and so is the minimum: no row is late, on either
    # engine. [0, 10): c u1@1 with i u1@2 and u1@8 (c u1@5 too); [10, 20): c u2@12 with
    # i u2@15 and u2@13; [20, 30): c u1@25 alone; [40, 50): c u1@40 with i u1@41.
    rows_native, c_native, e_native = run(spark, join_text(tmp_path, CLICKS, IMPS, arrival=False))
    rows_op, c_op, _ = run(spark, join_text(tmp_path, CLICKS, IMPS, arrival=False), "operator")
    assert e_native == "native"
    pairs = Counter((r[0], r[3][-2:], r[4][-2:]) for r in rows_native)
    assert pairs == Counter(
        {
            ("u1", "01", "02"): 1, ("u1", "01", "08"): 1, ("u1", "01", "03"): 1,
            ("u1", "01", "09"): 1, ("u1", "05", "02"): 1, ("u1", "05", "08"): 1,
            ("u1", "05", "03"): 1, ("u1", "05", "09"): 1, ("u2", "12", "15"): 1,
            ("u2", "12", "13"): 1, ("u1", "40", "41"): 1,
        }
    )  # fmt: skip
    assert rows_op == rows_native
    assert (c_op["rows_in"], c_op["rows_fired"], c_op["dropped"]) == (12, 12, {})


def test_an_input_without_rows_holds_the_join_watermark(spark, tmp_path):
    # Until imps has a row, the join's watermark is MIN_TIME (Flink: Long.MIN_VALUE
    # until both inputs sent one), so clicks far out of order are all in time; with
    # one imps row first (arrival 0, at 0.5 s) its watermark (499) holds the minimum.
    clicks = [("u1", 30_000, 1), ("u1", 2_000, 2), ("u1", 3_000, 3)]
    imps = [("u1", 4_000, 4)]
    rows, c, _ = run(spark, join_text(tmp_path, clicks, imps))
    assert len(rows) == 2 and c["dropped"] == {}
    rows, c, _ = run(spark, join_text(tmp_path, clicks, [("u9", 500, 0), *imps]))
    assert len(rows) == 2 and c["dropped"] == {}
    # with the imps row at 30 s first, its watermark is 29 999: both clicks are late
    rows, c, _ = run(spark, join_text(tmp_path, clicks, [("u9", 30_000, 0), *imps]))
    assert rows == [] and c["sides"]["c"]["dropped"] == {"late": 2}


# --------------------------------------------------------------------------- reference


def windows_of(ts: int, kind: str) -> list[tuple[int, int]]:
    size, slide = 10_000, (10_000 if kind == "tumble" else 5_000)
    last = ts - ts % slide
    return [(s, s + size) for s in range(last, ts - size, -slide)]


def reference(clicks, imps, delays, kind, how):
    """The join by its definition: one pass over the combined order (arrival, source,
    input order) with each source's watermark and their minimum, window buffers
    joined at the end (every window joins once; end of input joins the rest)."""
    rows = [(arr, 0, i, u, ts) for i, (u, ts, arr) in enumerate(clicks) if ts is not None]
    rows += [(arr, 1, i, u, ts) for i, (u, ts, arr) in enumerate(imps) if ts is not None]
    seen = [None, None]
    buffers: dict[tuple[int, int], tuple[list, list]] = {}
    late = [0, 0]
    for _arr, src, _i, u, ts in sorted(rows):
        marks = [
            -(2**63) if s is None else s - d * 1000 - 1 for s, d in zip(seen, delays, strict=True)
        ]
        wm = min(marks)
        taken = [w for w in windows_of(ts, kind) if w[1] - 1 > wm]
        for w in taken:
            buffers.setdefault(w, ([], []))[src].append((u, ts))
        if not taken:
            late[src] += 1
        seen[src] = ts if seen[src] is None else max(seen[src], ts)
    out = []
    for (start, _end), (left, right) in buffers.items():
        for lu, lts in left:
            match = [(ru, rts) for ru, rts in right if ru == lu]
            out += [(lu, lu, start, lts, rts) for _, rts in match]
            if not match and how == "LEFT JOIN":
                out.append((lu, None, start, lts, None))
    return out, late


def as_text(rows):
    def t(ms):
        return (
            ""
            if ms is None
            else (T0 + dt.timedelta(milliseconds=ms)).strftime("%Y-%m-%d %H:%M:%S")
            + (f".{ms % 1000:03d}" if ms % 1000 else "")
        )

    return sorted((cu, iu or "", t(ws), t(c), t(i)) for cu, iu, ws, c, i in rows)


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_two_sources_against_a_brute_force_reference(spark, tmp_path, seed):
    rnd = random.Random(seed)
    kind = rnd.choice(["tumble", "hop"])
    how = rnd.choice(["JOIN", "LEFT JOIN"])
    delays = (rnd.randint(0, 3), rnd.randint(0, 3))

    def rows(n):
        # event times out of arrival order, a few far behind, ties of arrival, a NULL
        return [
            (
                rnd.choice(["a", "b", "c"]),
                None if rnd.random() < 0.03 else rnd.randint(0, 60) * 1000 + rnd.choice([0, 500]),
                rnd.randint(0, 40),
            )
            for _ in range(n)
        ]

    clicks, imps = rows(40), rows(40)
    want, late = reference(clicks, imps, delays, kind, how)
    got, c, _ = run(spark, join_text(tmp_path, clicks, imps, delays=delays, kind=kind, how=how))
    assert got == as_text(want)
    nulls = [sum(ts is None for _, ts, _ in s) for s in (clicks, imps)]
    for name, n_late, n_null in zip("ci", late, nulls, strict=True):
        want_dropped = {"late": n_late, "null event time": n_null}
        assert c["sides"][name]["dropped"] == {k: v for k, v in want_dropped.items() if v}
    assert c["rows_in"] == 80 and c["rows_fired"] == 80 - sum(late) - sum(nulls)


# --------------------------------------------------------------------------- a view side


def view_text(tmp_path, clicks, imps, delays=(0, 0)):
    # the left side is the window table over imps: a tie of arrival puts imps first
    return (
        source("clicks", write(tmp_path / "clicks.csv", clicks), delays[0], True)
        + source("imps", write(tmp_path / "imps.csv", imps), delays[1], True)
        + f"""
CREATE VIEW per_user AS
SELECT user_id, window_start, window_end, COUNT(*) AS n
FROM clicks
GROUP BY user_id, TUMBLE(ts, INTERVAL '10' SECOND);

CREATE VIEW joined AS
SELECT i.user_id, i.ts AS shown, v.n, i.window_start
FROM {window("tumble", "imps")} AS i
JOIN per_user AS v
    ON i.window_start = v.window_start AND i.window_end = v.window_end
   AND i.user_id = v.user_id;
"""
    )


def test_a_view_over_one_source_joined_with_a_window_table_over_another(spark, tmp_path):
    # The view fires on the clicks' own watermark: u1@5 (24 999) and u2@12 (24 999) are
    # late for it; it gives (u1, [0, 10), 1), (u1, [20, 30), 1), (u1, [40, 50), 1).
    # The imps rows see min(imps, clicks): u1@3 and u1@9 see 14 999, late; u2@13 and
    # u2@15 are in time but the view has no u2 row; u1@41 (arrival 11, before the click
    # at 40 s) is in time. The view's rows are never late for the join.
    rows, c, engine = run(spark, view_text(tmp_path, CLICKS, IMPS))
    assert engine == "operator"
    assert rows == [
        ("u1", "2024-01-01 00:00:02", "1", "2024-01-01 00:00:00"),
        ("u1", "2024-01-01 00:00:08", "1", "2024-01-01 00:00:00"),
        ("u1", "2024-01-01 00:00:41", "1", "2024-01-01 00:00:40"),
    ]
    assert c["sides"] == {
        "i": {"rows_in": 7, "dropped": {"late": 2}},
        "v": {"rows_in": 3, "dropped": {}},
    }


def view_reference(clicks, imps, delays):
    """The view by Flink's WindowOperator on the clicks alone (a row is late for it when
    its window's end - 1 <= the clicks' watermark), then the join as :func:`reference`
    with the view's rows never late."""
    counts: Counter = Counter()
    seen = None
    ordered = sorted((arr, i, u, ts) for i, (u, ts, arr) in enumerate(clicks) if ts is not None)
    for _arr, _i, u, ts in ordered:
        wm = -(2**63) if seen is None else seen - delays[0] * 1000 - 1
        ((start, end),) = windows_of(ts, "tumble")
        if end - 1 > wm:
            counts[(u, start)] += 1
        seen = ts if seen is None else max(seen, ts)
    marks_seen = [None, None]  # imps (left), clicks
    rows = [(arr, 0, i, u, ts) for i, (u, ts, arr) in enumerate(imps) if ts is not None]
    rows += [(arr, 1, i, u, ts) for i, (u, ts, arr) in enumerate(clicks) if ts is not None]
    out, late = [], 0
    for _arr, src, _i, u, ts in sorted(rows):
        d = (delays[1], delays[0])
        wm = min(
            -(2**63) if s is None else s - dd * 1000 - 1
            for s, dd in zip(marks_seen, d, strict=True)
        )
        if src == 0:
            ((start, end),) = windows_of(ts, "tumble")
            if end - 1 > wm:
                if counts[(u, start)]:
                    out.append((u, ts, counts[(u, start)], start))
            else:
                late += 1
        marks_seen[src] = ts if marks_seen[src] is None else max(marks_seen[src], ts)
    return out, late, len(counts)


@pytest.mark.parametrize("seed", [5, 6])
def test_a_view_side_against_a_brute_force_reference(spark, tmp_path, seed):
    rnd = random.Random(seed)
    delays = (rnd.randint(0, 3), rnd.randint(0, 3))

    def rows(n):
        return [
            (rnd.choice(["a", "b"]), rnd.randint(0, 50) * 1000, rnd.randint(0, 30))
            for _ in range(n)
        ]

    clicks, imps = rows(30), rows(30)
    want, late, view_rows = view_reference(clicks, imps, delays)

    def t(ms):
        return (T0 + dt.timedelta(milliseconds=ms)).strftime("%Y-%m-%d %H:%M:%S")

    got, c, _ = run(spark, view_text(tmp_path, clicks, imps, delays))
    assert got == sorted((u, t(ts), str(n), t(s)) for u, ts, n, s in want)
    assert c["sides"]["i"]["dropped"] == ({"late": late} if late else {})
    assert c["sides"]["v"] == {"rows_in": view_rows, "dropped": {}}


def test_malformed_rows_of_either_source_are_counted(spark, tmp_path):
    # a row of the second source whose event time is not a timestamp: read as NULL
    # (Spark's PERMISSIVE mode), counted malformed and dropped without event time
    text = join_text(tmp_path, CLICKS, IMPS, arrival=False)
    with (tmp_path / "imps.csv").open("a") as f:
        f.write("u1,not a time,12\n")
    rows, c, _ = run(spark, text, "operator")
    assert len(rows) == 11
    assert c["malformed"] == 1
    assert c["sides"]["i"] == {"rows_in": 8, "dropped": {"null event time": 1}}
