"""Nexmark benchmark: the window parts of Nexmark q5, q7, q11, q12 on WQL.

One command (from the repository root)::

    .venv/bin/python bench/nexmark.py [--events N] [--rate R] [--repeat R] [--warmup W]
                                      [--only SCENARIO,...] [--keep DIR]
                                      [--engine auto|operator] [--master MASTER]
                                      [--stages]

**Data.** A deterministic, seeded NumPy port of the Nexmark generator (the
Beam/Flink ``GeneratorConfig`` defaults): event ``n`` is a Person, an Auction
or a Bid by ``n mod 50`` in the ratio 1:3:46; ids are the generator's
(``lastBase0PersonId`` / ``lastBase0AuctionId``, first ids 1000); a bid goes
to the hot auction (the first of the last 100 auctions) with probability 1/2
(``hotAuctionRatio`` 2) and comes from the hot bidder (the second of the last
100 people) with probability 3/4 (``hotBiddersRatio`` 4), otherwise to one of
the last 100 auctions (+10 lead) and from one of the last 1 000 active people
(+10 lead); price ``round(10^(6u) * 100)``; channel one of four hot channels
or ``channel-<n>`` with its URL; ``extra`` padding. Event time is
``base + n / rate`` (default 10 000 events/s, the generator's
``firstEventRate``), and 2 % of the events are generated out of order: their
``dateTime`` is set back by up to 3 s (inside the watermark delay), and 0.1 %
by 4–8 s (late for a window the watermark has passed). The watermark is
``dateTime - 4 s``. Rows are replayed in generation order (``arrival_order =
'seq'``, the event number); ``p_time`` is the generation time without the
delays and serves as processing time for q12 (``processing_time = 'p_time'``).
The three tables are written to Parquet (4 files each); the queries read
``bid``.

**Scenarios.** Every WQL scenario runs on the engine WQL chooses for it
(``--engine auto``, the default: what ``wql run`` runs; the table says which)
or on the operator engine (``--engine operator``, forced); the
baseline is the same query hand-written in PySpark on the same DataFrame in
the same run, or, where Spark has no equivalent, WQL's own TUMBLE run (on the
same ``--engine``) on the same data (``tumble_auction`` / ``tumble_bidder``,
said in the table):

- ``q5``: HOP 2 s / 10 s, COUNT per auction; baseline ``F.window(10 s, 2 s)``.
- ``q7``: TUMBLE 10 s, MAX(price), no key; baseline ``F.window(10 s)``.
- ``q11``: SESSION 10 s per bidder, COUNT; baseline ``F.session_window``.
- ``q12``: TUMBLE 10 s over processing time (``PROCTIME()``) per bidder, COUNT;
  baseline ``F.window`` on ``p_time``.
- ``q11_early_late``: q11 + ``ALLOWED LATENESS 5 s`` + ``TRIGGER WATERMARK WITH
  EARLY COUNT(10) LATE COUNT(1)`` + ``LATE DATA TO`` with pane columns;
  baseline ``tumble_bidder`` (WQL TUMBLE 10 s per bidder).
- ``q11_dynamic_gap``: q11 with ``GAP`` 10 s when price > 10 000, else 5 s;
  baseline ``F.session_window`` with the same gap column.
- ``q5_cumulate``: CUMULATE 2 s / 10 s, COUNT per auction; baseline
  ``tumble_auction`` (WQL TUMBLE 10 s per auction).
- ``hop60``: HOP 1 s / 60 s (60 windows per row), COUNT per auction; baseline
  ``tumble60`` (WQL TUMBLE 60 s per auction).

The hand-written baselines see every row (Spark's batch windows have no
watermark), WQL drops or diverts the late ones, and q12's last
processing-time window per bidder does not fire at end of input (docs/runtime.md,
decision 8), so row counts may differ by those rows; both are printed. For
``CHECKED`` scenarios the WQL rows must equal the hand-written ones (q12: but
for the windows still open at end of input), checked outside the clock.

**Measurement.** Each timed run starts from the ``bid`` DataFrame, includes
``apply()`` (the replay and operator jobs, or the native query) and is forced with the ``noop``
sink; the operator cache is released outside the clock. ``--warmup`` runs
(default 0; one small query warms the session first) and ``--repeat`` timed
runs (default 1) per scenario, median reported. While a run is timed a
sampler thread reads ``/proc`` every 0.1 s for the whole process tree (this
process, the JVM, Spark's Python workers): peak resident memory of the tree
and of the Python workers alone (where the operator runs), and CPU seconds
of the tree (less distorted by a shared machine's load than wall time).
Per-core rates divide the Nexmark event count (all three event types, as
Flink's Nexmark reports) by the wall time and the cores. The last lines are
exactly one ``RATIO <scenario> <wql_s> <baseline_s> <ratio>`` per scenario.

**Stages and memory** (``--stages``, and always with ``--master``, e.g.
``--master 'local-cluster[2,1,2048]' --events 20000000``: two executor JVMs
of one core and 2 GiB). The session writes Spark's event log (with the
executors' per-stage memory peaks and process-tree metrics) to a temporary
folder, each timed run's jobs under a job group of its own; after the runs a
second table says per run (the last timed one of each scenario): its Spark
jobs and executed stages, the stages that ran in **one task** (by name, with
the rows each read: a stage that cannot spread over the cluster), the bytes
its tasks returned to the driver (collects and counts; per input row, to see
whether anything per row goes there) and, per executor, the peak JVM heap and
the peak resident memory of the executor's JVM and of its Python workers.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import wql  # noqa: E402
from wql.spark.session import default_session  # noqa: E402

SEED = 20261124
FILES = 4
BASE_MS = 1_700_000_000_000
PROPORTIONS = (1, 3, 46)  # person, auction, bid
TOTAL = sum(PROPORTIONS)
FIRST_PERSON_ID = 1000
FIRST_AUCTION_ID = 1000
FIRST_CATEGORY_ID = 10
NUM_CATEGORIES = 5
NUM_ACTIVE_PEOPLE = 1000
NUM_IN_FLIGHT_AUCTIONS = 100
PERSON_ID_LEAD = 10
AUCTION_ID_LEAD = 10
HOT_AUCTION_RATIO = 100
HOT_BIDDER_RATIO = 100
HOT_AUCTION_PROB = 2  # hotAuctionRatio: 1 - 1/2 of bids go to the hot auction
HOT_BIDDERS_PROB = 4  # hotBiddersRatio: 1 - 1/4 of bids come from the hot bidder
HOT_CHANNELS = ("Google", "Facebook", "Baidu", "Apple")
CHANNELS = 10_000
OUT_OF_ORDER = 0.02  # share of events set back by up to 3 s (inside the watermark delay)
OUT_OF_ORDER_MAX_MS = 3_000
LATE = 0.001  # share of events set back by 4-8 s
LATE_MS = (4_000, 8_000)
WATERMARK_S = 4

# -- generator -----------------------------------------------------------------


def last_base0_person_id(n: np.ndarray) -> np.ndarray:
    """Id (from 0) of the last person generated at or before event ``n``."""
    return n // TOTAL


def last_base0_auction_id(n: np.ndarray) -> np.ndarray:
    """Id (from 0) of the last auction generated at or before event ``n`` (Beam's rule)."""
    epoch, offset = n // TOTAL, n % TOTAL
    p, a = PROPORTIONS[0], PROPORTIONS[1]
    before = offset < p
    epoch = np.where(before, epoch - 1, epoch)
    offset = np.where(before, a - 1, np.where(offset >= p + a, a - 1, offset - p))
    return epoch * a + offset


def next_base0_person_id(n: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    people = last_base0_person_id(n) + 1
    active = np.minimum(people, NUM_ACTIVE_PEOPLE)
    pick = (rng.random(len(n)) * (active + PERSON_ID_LEAD)).astype(np.int64)
    return people - active + pick


def next_base0_auction_id(n: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    last = last_base0_auction_id(n)
    low = np.maximum(last - NUM_IN_FLIGHT_AUCTIONS, 0)
    pick = (rng.random(len(n)) * (last - low + 1 + AUCTION_ID_LEAD)).astype(np.int64)
    return low + pick


def strings(prefix: str, count: int) -> pa.Array:
    return pa.array([f"{prefix}{i}" for i in range(count)])


def dictionary(indices: np.ndarray, values: pa.Array) -> pa.DictionaryArray:
    """A string column as indices into a small value table (cheap to build, plain in Spark)."""
    return pa.DictionaryArray.from_arrays(pa.array(indices.astype(np.int32)), values)


@dataclass(frozen=True)
class Generated:
    events: int
    persons: int
    auctions: int
    bids: int
    out_of_order: int
    late_shifted: int
    span_s: float


def generate(folder: Path, events: int, rate: int, seed: int = SEED) -> Generated:
    """Write ``person``, ``auction`` and ``bid`` Parquet tables for ``events`` Nexmark events."""
    made, gen = tables(events, rate, seed)
    for name, table in made.items():
        out = folder / name
        out.mkdir(parents=True, exist_ok=True)
        for i, part in enumerate(np.array_split(np.arange(table.num_rows), FILES)):
            pq.write_table(table.take(pa.array(part)), out / f"part-{i:02d}.parquet")
    return gen


def tables(events: int, rate: int, seed: int = SEED) -> tuple[dict[str, pa.Table], Generated]:
    """The ``person``, ``auction`` and ``bid`` tables of ``events`` Nexmark events."""
    made: dict[str, pa.Table] = {}
    rng = np.random.default_rng(seed)
    n = np.arange(events, dtype=np.int64)
    gen_ms = BASE_MS + (n * 1000) // rate  # generation (processing) time
    shift = np.zeros(events, dtype=np.int64)
    u = rng.random(events)
    ooo = u < OUT_OF_ORDER
    late = u > 1.0 - LATE
    shift[ooo] = rng.integers(0, OUT_OF_ORDER_MAX_MS + 1, int(ooo.sum()))
    shift[late] = rng.integers(LATE_MS[0], LATE_MS[1] + 1, int(late.sum()))
    event_ms = gen_ms - shift
    kind = n % TOTAL
    is_person = kind < PROPORTIONS[0]
    is_auction = (kind >= PROPORTIONS[0]) & (kind < PROPORTIONS[0] + PROPORTIONS[1])
    is_bid = ~(is_person | is_auction)
    ts_type = pa.timestamp("ms", tz="UTC")
    extra = strings("x" * 32, 64)

    def write(name: str, table: pa.Table) -> None:
        made[name] = table

    # persons
    pn = n[is_person]
    k = len(pn)
    write(
        "person",
        pa.table(
            {
                "id": pa.array(last_base0_person_id(pn) + FIRST_PERSON_ID),
                "name": dictionary(rng.integers(0, 1000, k), strings("person-", 1000)),
                "emailAddress": dictionary(rng.integers(0, 1000, k), strings("mail@", 1000)),
                "creditCard": dictionary(rng.integers(0, 1000, k), strings("4000-", 1000)),
                "city": dictionary(rng.integers(0, 10, k), strings("city-", 10)),
                "state": dictionary(rng.integers(0, 6, k), strings("ST", 6)),
                "dateTime": pa.array(event_ms[is_person], ts_type),
                "extra": dictionary(rng.integers(0, 64, k), extra),
                "seq": pa.array(pn),
            }
        ),
    )
    # auctions
    an = n[is_auction]
    k = len(an)
    initial = np.round(10.0 ** (rng.random(k) * 6.0) * 100.0).astype(np.int64)
    write(
        "auction",
        pa.table(
            {
                "id": pa.array(last_base0_auction_id(an) + FIRST_AUCTION_ID),
                "itemName": dictionary(rng.integers(0, 1000, k), strings("item-", 1000)),
                "description": dictionary(rng.integers(0, 1000, k), strings("desc-", 1000)),
                "initialBid": pa.array(initial),
                "reserve": pa.array(initial + np.round(10.0 ** (rng.random(k) * 6.0) * 100.0)),
                "dateTime": pa.array(event_ms[is_auction], ts_type),
                "expires": pa.array(event_ms[is_auction] + rng.integers(1, 20_000, k), ts_type),
                "seller": pa.array(
                    np.where(
                        rng.integers(0, 4, k) > 0,
                        (last_base0_person_id(an) // HOT_BIDDER_RATIO) * HOT_BIDDER_RATIO,
                        next_base0_person_id(an, rng),
                    )
                    + FIRST_PERSON_ID
                ),
                "category": pa.array(FIRST_CATEGORY_ID + rng.integers(0, NUM_CATEGORIES, k)),
                "extra": dictionary(rng.integers(0, 64, k), extra),
                "seq": pa.array(an),
            }
        ),
    )
    # bids
    bn = n[is_bid]
    k = len(bn)
    auction = np.where(
        rng.integers(0, HOT_AUCTION_PROB, k) > 0,
        (last_base0_auction_id(bn) // HOT_AUCTION_RATIO) * HOT_AUCTION_RATIO,
        next_base0_auction_id(bn, rng),
    )
    bidder = np.where(
        rng.integers(0, HOT_BIDDERS_PROB, k) > 0,
        (last_base0_person_id(bn) // HOT_BIDDER_RATIO) * HOT_BIDDER_RATIO + 1,
        next_base0_person_id(bn, rng),
    )
    price = np.round(10.0 ** (rng.random(k) * 6.0) * 100.0).astype(np.int64)
    hot = rng.integers(0, 2, k) > 0
    channel = np.where(hot, rng.integers(0, len(HOT_CHANNELS), k), 4 + rng.integers(0, CHANNELS, k))
    channel_names = pa.array(list(HOT_CHANNELS) + [f"channel-{i}" for i in range(CHANNELS)])
    urls = pa.array(
        [f"https://www.nexmark.com/{c.lower()}/item.htm?query=1" for c in HOT_CHANNELS]
        + [f"https://www.nexmark.com/item.htm?query=1&channel_id={i}" for i in range(CHANNELS)]
    )
    write(
        "bid",
        pa.table(
            {
                "auction": pa.array(auction + FIRST_AUCTION_ID),
                "bidder": pa.array(bidder + FIRST_PERSON_ID),
                "price": pa.array(price),
                "channel": dictionary(channel, channel_names),
                "url": dictionary(channel, urls),
                "dateTime": pa.array(event_ms[is_bid], ts_type),
                "extra": dictionary(rng.integers(0, 64, k), extra),
                "seq": pa.array(bn),
                "p_time": pa.array(gen_ms[is_bid], ts_type),
            }
        ),
    )
    return made, Generated(
        events,
        int(is_person.sum()),
        int(is_auction.sum()),
        int(is_bid.sum()),
        int(ooo.sum()),
        int(late.sum()),
        events / rate,
    )


# -- queries -------------------------------------------------------------------

SOURCE = f"""
CREATE SOURCE bid (auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING,
    dateTime TIMESTAMP, extra STRING, seq BIGINT, p_time TIMESTAMP,
    WATERMARK FOR dateTime AS dateTime - INTERVAL '{WATERMARK_S}' SECOND)
WITH (arrival_order = 'seq', processing_time = 'p_time');
"""

WQL = {
    "q5": """SELECT auction, window_start, window_end, COUNT(*) AS num FROM bid
GROUP BY auction, HOP(dateTime, INTERVAL '2' SECOND, INTERVAL '10' SECOND);""",
    "q7": """SELECT window_start, window_end, MAX(price) AS maxprice FROM bid
GROUP BY TUMBLE(dateTime, INTERVAL '10' SECOND);""",
    "q11": """SELECT bidder, window_start, window_end, COUNT(*) AS bid_count FROM bid
GROUP BY bidder, SESSION(dateTime, INTERVAL '10' SECOND);""",
    "q12": """SELECT bidder, window_start, window_end, COUNT(*) AS bid_count FROM bid
GROUP BY bidder, TUMBLE(PROCTIME(), INTERVAL '10' SECOND);""",
    "q11_early_late": """SELECT bidder, window_start, window_end, pane_index, pane_timing,
    COUNT(*) AS bid_count FROM bid
GROUP BY bidder, SESSION(dateTime, INTERVAL '10' SECOND)
ALLOWED LATENESS INTERVAL '5' SECOND
TRIGGER WATERMARK WITH EARLY COUNT(10) LATE COUNT(1)
LATE DATA TO late_bids;""",
    "q11_dynamic_gap": """SELECT bidder, window_start, window_end, COUNT(*) AS bid_count FROM bid
GROUP BY bidder, SESSION(dateTime,
    GAP CASE WHEN price > 10000 THEN INTERVAL '10' SECOND ELSE INTERVAL '5' SECOND END);""",
    "q5_cumulate": """SELECT auction, window_start, window_end, COUNT(*) AS num FROM bid
GROUP BY auction, CUMULATE(dateTime, INTERVAL '2' SECOND, INTERVAL '10' SECOND);""",
    "hop60": """SELECT auction, window_start, window_end, COUNT(*) AS num FROM bid
GROUP BY auction, HOP(dateTime, INTERVAL '1' SECOND, INTERVAL '60' SECOND);""",
    # WQL baselines for the scenarios Spark cannot express
    "tumble_auction": """SELECT auction, window_start, window_end, COUNT(*) AS num FROM bid
GROUP BY auction, TUMBLE(dateTime, INTERVAL '10' SECOND);""",
    "tumble_bidder": """SELECT bidder, window_start, window_end, COUNT(*) AS bid_count FROM bid
GROUP BY bidder, TUMBLE(dateTime, INTERVAL '10' SECOND);""",
    "tumble60": """SELECT auction, window_start, window_end, COUNT(*) AS num FROM bid
GROUP BY auction, TUMBLE(dateTime, INTERVAL '60' SECOND);""",
}


def by_hand(name: str, bid: Any) -> Any:
    """The scenario ``name`` hand-written in PySpark (the baseline)."""
    from pyspark.sql import functions as F

    def windowed(key: str | None, w: Any, agg: Any) -> Any:
        keys = [key] if key else []
        out = bid.groupBy(*keys, w.alias("w")).agg(agg)
        cols = [*keys, F.col("w.start").alias("window_start"), F.col("w.end").alias("window_end")]
        return out.select(*cols, out.columns[-1])

    count = F.count(F.lit(1))
    if name == "q5":
        return windowed(
            "auction", F.window("dateTime", "10 seconds", "2 seconds"), count.alias("num")
        )
    if name == "q7":
        return windowed(None, F.window("dateTime", "10 seconds"), F.max("price").alias("maxprice"))
    if name == "q11":
        return windowed(
            "bidder", F.session_window("dateTime", "10 seconds"), count.alias("bid_count")
        )
    if name == "q12":
        return windowed("bidder", F.window("p_time", "10 seconds"), count.alias("bid_count"))
    if name == "q11_dynamic_gap":
        gap = F.when(F.col("price") > 10000, F.lit("10 seconds")).otherwise(F.lit("5 seconds"))
        return windowed("bidder", F.session_window("dateTime", gap), count.alias("bid_count"))
    raise KeyError(name)


#: Scenarios whose WQL rows must equal the hand-written ones (checked outside the
#: clock). q12 except the windows still open at end of input: a processing-time
#: window whose end the clock has not passed when input ends never fires (Flink
#: quiesces processing time; docs/runtime.md, "Decisions", 7 and 8); every other
#: window must be there with the same count. Not q5/q7: the hand-written forms
#: have no watermark, so they also count the late bids the operator drops.
CHECKED = ("q11", "q12", "q11_dynamic_gap")


def check(name: str, wql_rows: list[tuple], hand: Any, bid: Any) -> str:
    """Compare ``name``'s WQL rows with its hand-written rows; raise if they differ."""
    from pyspark.sql import functions as F

    rows = sorted(tuple(r) for r in hand.collect())
    excluded = 0
    if name == "q12":
        # The processing clock ends at the last bid's p_time: a window fires once the
        # clock passed its max timestamp (window_end - 1 ms), i.e. window_end <= that.
        clock_end = bid.agg(F.max("p_time")).collect()[0][0]
        kept = [r for r in rows if r[2] <= clock_end]
        excluded = len(rows) - len(kept)
        rows = kept
    got = sorted(wql_rows)
    if got != rows:
        want, have = set(rows), set(got)
        raise AssertionError(
            f"{name}: WQL {len(got)} rows, by hand {len(rows)}; "
            f"missing {[r for r in rows if r not in have][:5]}, "
            f"extra {[r for r in got if r not in want][:5]}"
        )
    note = f"; {excluded} windows still open at end of input left out" if excluded else ""
    return f"check {name}: WQL rows = hand-written rows ({len(rows):,}{note})"


@dataclass(frozen=True)
class Scenario:
    name: str
    baseline: str  # "spark" or the name of a WQL scenario


SCENARIOS = (
    Scenario("q5", "spark"),
    Scenario("q7", "spark"),
    Scenario("q11", "spark"),
    Scenario("q12", "spark"),
    Scenario("q11_early_late", "tumble_bidder"),
    Scenario("q11_dynamic_gap", "spark"),
    Scenario("q5_cumulate", "tumble_auction"),
    Scenario("hop60", "tumble60"),
)

# -- measurement ---------------------------------------------------------------


def _tree(root: int) -> list[int]:
    """``root`` and every descendant process (Linux ``/proc``)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, ()))
    return out


def _usage(pid: int) -> tuple[float, int] | None:
    """CPU seconds (user + system) and resident bytes of ``pid``."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks
    rss = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
    return cpu, rss


def _is_python(pid: int) -> bool:
    """Whether ``pid`` is a Python process (Spark's Python daemon and workers)."""
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().startswith("python")
    except OSError:
        return False


class Sampler:
    """Peak resident memory and CPU seconds of this process tree while active."""

    def __init__(self, interval: float = 0.1) -> None:
        self.interval = interval
        self.available = os.path.isdir("/proc")
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._cpu_start: dict[int, float] = {}
        self._cpu_last: dict[int, float] = {}
        self.peak_rss = 0
        self.peak_workers_rss = 0

    def _sample(self) -> None:
        rss = workers = 0
        me = os.getpid()
        for pid in _tree(me):
            got = _usage(pid)
            if got is None:
                continue
            cpu, r = got
            rss += r
            if pid != me and _is_python(pid):
                workers += r
            self._cpu_start.setdefault(pid, cpu)
            self._cpu_last[pid] = cpu
        self.peak_rss = max(self.peak_rss, rss)
        self.peak_workers_rss = max(self.peak_workers_rss, workers)

    def __enter__(self) -> Sampler:
        if self.available:
            # processes alive now count from their current CPU time; newcomers from 0
            for pid in _tree(os.getpid()):
                got = _usage(pid)
                if got is not None:
                    self._cpu_start[pid] = got[0]
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def __exit__(self, *exc: object) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._sample()

    @property
    def cpu(self) -> float:
        if not self.available:
            return float("nan")
        return sum(self._cpu_last[p] - self._cpu_start.get(p, 0.0) for p in self._cpu_last)


@dataclass
class Timing:
    name: str
    runs: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    peak_rss: int = 0
    peak_workers_rss: int = 0
    rows_out: int = 0
    late_rows: int = 0
    dropped: int = 0
    rows: list[tuple] | None = None  # the last run's result rows, when asked for

    @property
    def median(self) -> float:
        return statistics.median(self.runs)


def noop(df: Any) -> None:
    df.write.format("noop").mode("overwrite").save()


def wql_run(compiled: wql.Compiled, bid: Any, spark: Any) -> Callable[[], Any]:
    """A timed run of ``compiled``: apply and force; returns the results for the counters."""

    def run() -> Any:
        results = compiled.apply(spark, bid=bid)
        noop(results.df)
        return results

    return run


def hand_run(name: str, bid: Any) -> Callable[[], Any]:
    """A timed run of the hand-written baseline of ``name``."""

    def run() -> None:
        noop(by_hand(name, bid))

    return run


def measure(
    name: str,
    run: Callable[[], Any],
    warmup: int,
    repeat: int,
    keep_rows: bool = False,
    group: Callable[[str], None] | None = None,
) -> Timing:
    """Time ``run`` ``repeat`` times; WQL results are counted and released outside the clock.

    ``keep_rows``: collect the last run's result rows (outside the clock) for :func:`check`.
    ``group``: sets the Spark job group of what follows: ``name`` for each timed run (the
    last one's jobs are what :func:`stage_report` reads), another name outside the clock.
    """
    timing = Timing(name)
    for i in range(warmup + repeat):
        if group is not None:
            group(name)
        with Sampler() as sampler:
            started = time.perf_counter()
            results = run()
            elapsed = time.perf_counter() - started
        if i >= warmup:
            timing.runs.append(elapsed)
            timing.cpu.append(sampler.cpu)
            timing.peak_rss = max(timing.peak_rss, sampler.peak_rss)
            timing.peak_workers_rss = max(timing.peak_workers_rss, sampler.peak_workers_rss)
        if group is not None:
            group(f"{name}, outside the clock")
        if results is not None:
            try:
                counters = results.counters
                timing.rows_out = counters["rows_out"]
                timing.late_rows = counters.get("late_rows", 0)
                timing.dropped = sum(counters.get("dropped", {}).values())
                if keep_rows:
                    timing.rows = [tuple(r) for r in results.df.collect()]
            finally:
                results.release()
    print(f"  {name}: " + ", ".join(f"{s:.2f}" for s in timing.runs) + " s", file=sys.stderr)
    return timing


#: the event log's memory peaks reported per executor (Spark's ``ExecutorMetricType`` names)
PEAKS = ("JVMHeapMemory", "ProcessTreeJVMRSSMemory", "ProcessTreePythonRSSMemory")


@dataclass
class GroupStages:
    """What one job group's jobs did, read from Spark's event log."""

    jobs: set[int] = field(default_factory=set)
    #: executed stages (with a job of the group)
    stages: set[int] = field(default_factory=set)
    result_bytes: int = 0
    #: executor id -> metric name -> peak bytes over the group's stages
    peaks: dict[str, dict[str, int]] = field(default_factory=dict)


def read_event_log(
    folder: Path,
) -> tuple[dict[str, GroupStages], dict[int, tuple[str, int]], Counter[int]]:
    """Per job group its :class:`GroupStages`, per executed stage (name, tasks), and per
    stage the rows its tasks read (from files and from shuffles)."""
    groups: dict[str, GroupStages] = {}
    stage_group: dict[int, str] = {}
    executed: dict[int, tuple[str, int]] = {}
    rows_in: Counter[int] = Counter()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        with path.open() as f:
            for line in f:
                e = json.loads(line)
                kind = e.get("Event")
                if kind == "SparkListenerJobStart":
                    name = (e.get("Properties") or {}).get("spark.jobGroup.id")
                    if name is None:
                        continue
                    g = groups.setdefault(name, GroupStages())
                    g.jobs.add(e["Job ID"])
                    for info in e["Stage Infos"]:
                        stage_group[info["Stage ID"]] = name
                elif kind == "SparkListenerStageCompleted":
                    info = e["Stage Info"]
                    executed[info["Stage ID"]] = (info["Stage Name"], info["Number of Tasks"])
                    name = stage_group.get(info["Stage ID"])
                    if name is not None:
                        groups[name].stages.add(info["Stage ID"])
                elif kind == "SparkListenerTaskEnd":
                    name = stage_group.get(e["Stage ID"])
                    if name is not None:
                        metrics = e.get("Task Metrics") or {}
                        groups[name].result_bytes += int(metrics.get("Result Size", 0))
                        read = metrics.get("Input Metrics") or {}
                        shuffled = metrics.get("Shuffle Read Metrics") or {}
                        rows_in[e["Stage ID"]] += int(read.get("Records Read", 0)) + int(
                            shuffled.get("Total Records Read", 0)
                        )
                        executor = e["Task Info"]["Executor ID"]
                        _peak(groups[name], executor, e.get("Task Executor Metrics") or {})
                elif kind == "SparkListenerStageExecutorMetrics":
                    name = stage_group.get(e["Stage ID"])
                    if name is not None and e["Executor ID"] != "driver":
                        _peak(groups[name], e["Executor ID"], e["Executor Metrics"])
    return groups, executed, rows_in


def _peak(group: GroupStages, executor: str, metrics: dict[str, Any]) -> None:
    peaks = group.peaks.setdefault(executor, {})
    for metric in PEAKS:
        peaks[metric] = max(peaks.get(metric, 0), int(metrics.get(metric, 0)))


def stage_report(folder: Path, names: list[str], rows: int) -> None:
    """The second table (see the module doc): per run in ``names`` its stages, the ones in
    one task, the bytes returned to the driver and the executors' memory peaks."""
    groups, executed, rows_in = read_event_log(folder)
    print()
    print(
        "| run | Spark jobs | stages run | stages in one task | task results to the driver "
        "| peak per executor: JVM heap / JVM RSS / Python RSS (MiB) |"
    )
    print("|---|---:|---:|---|---:|---|")
    for name in names:
        g = groups.get(name)
        if g is None:
            print(f"| {name} | 0 | 0 | - | - | - |")
            continue
        alone = [
            f"{executed[s][0].split(' at ')[0]} ({rows_in[s]:,} rows in)"
            for s in sorted(g.stages)
            if executed[s][1] == 1
        ]
        peaks = "; ".join(
            f"{ex}: " + " / ".join(f"{p.get(m, 0) / 2**20:,.0f}" for m in PEAKS)
            for ex, p in sorted(g.peaks.items())
        )
        print(
            f"| {name} | {len(g.jobs)} | {len(g.stages)} | "
            f"{len(alone)}{': ' + ', '.join(alone) if alone else ''} | "
            f"{g.result_bytes / 2**20:,.1f} MiB ({g.result_bytes / rows:.2f} B per row) "
            f"| {peaks or '-'} |"
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--rate", type=int, default=10_000, help="events per second of event time")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=0)
    ap.add_argument("--only", default=None, help="comma-separated scenario names")
    ap.add_argument("--keep", type=Path, default=None, help="write the data here and keep it")
    ap.add_argument(
        "--engine",
        choices=("auto", "operator"),
        default="auto",
        help="the engine of the WQL scenarios: WQL's choice (default) or the operator, forced",
    )
    ap.add_argument(
        "--master",
        default=None,
        help="Spark master (default local[*]), e.g. 'local-cluster[2,1,2048]'; implies --stages",
    )
    ap.add_argument(
        "--stages",
        action="store_true",
        help="report each run's stages, one-task stages, bytes to the driver, executor memory",
    )
    args = ap.parse_args(argv)
    if min(args.events, args.rate, args.repeat) < 1 or args.warmup < 0:
        ap.error("--events, --rate, --repeat must be >= 1, --warmup >= 0")
    known = {s.name: s for s in SCENARIOS}
    chosen = list(SCENARIOS)
    if args.only:
        names = [x.strip() for x in args.only.split(",") if x.strip()]
        unknown = [x for x in names if x not in known]
        if unknown:
            ap.error(f"unknown scenario(s) {unknown}; known: {', '.join(known)}")
        chosen = [known[x] for x in names]

    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    stages = args.stages or args.master is not None
    events_dir = Path(tempfile.mkdtemp(prefix="wql-nexmark-events-")) if stages else None
    conf = (
        {
            "spark.eventLog.enabled": "true",
            "spark.eventLog.dir": events_dir.as_uri() if events_dir else "",
            "spark.eventLog.logStageExecutorMetrics": "true",
            # one plain JSON-lines file (Spark 4 rolls and compresses by default)
            "spark.eventLog.rolling.enabled": "false",
            "spark.eventLog.compress": "false",
            "spark.executor.processTreeMetrics.enabled": "true",
            # the executors' memory read every 100 ms (default: at heartbeats, 10 s, so
            # stages shorter than that showed no peak); tasks report their peaks too
            "spark.executor.metrics.pollingInterval": "100ms",
        }
        if stages
        else {}
    )
    spark = default_session(args.master, app_name="wql-nexmark", extra_conf=conf)
    group = None
    if stages:

        def group(name: str) -> None:
            spark.sparkContext.setJobGroup(name, name)

    if args.master and not args.master.startswith("local["):
        wait_for_executors(spark, args.master)
    cores = spark.sparkContext.defaultParallelism
    master = spark.sparkContext.master
    with tempfile.TemporaryDirectory(prefix="wql-nexmark-") as tmp:
        folder = args.keep or Path(tmp)
        started = time.perf_counter()
        gen = generate(folder, args.events, args.rate)
        print(
            f"generated {gen.events:,} events ({gen.persons:,} person, {gen.auctions:,} auction, "
            f"{gen.bids:,} bid; {gen.out_of_order:,} out of order, {gen.late_shifted:,} set back "
            f"4-8 s; {gen.span_s:,.0f} s of event time) in {time.perf_counter() - started:.1f} s",
            file=sys.stderr,
        )
        bid = spark.read.parquet(str(folder / "bid"))
        assert bid.count() == gen.bids
        compiled = {
            name: wql.compile(SOURCE + text, engine=args.engine) for name, text in WQL.items()
        }
        # warm the session (JVM, Python workers) outside every clock
        noop(by_hand("q7", bid))
        wql_run(compiled["q7"], bid.limit(10_000), spark)().release()

        print(f"timing ({args.warmup} warm-up + {args.repeat} runs each)...", file=sys.stderr)
        timings: dict[str, Timing] = {}
        engines: dict[str, str] = {}
        hand: dict[str, Timing] = {}
        checks: list[str] = []
        for s in chosen:
            for name in (s.name,) if s.baseline == "spark" else (s.baseline, s.name):
                if name in timings:
                    continue
                engines[name] = compiled[name].engine["query_1"]
                timings[name] = measure(
                    f"{name} (WQL {engines[name]})",
                    wql_run(compiled[name], bid, spark),
                    args.warmup,
                    args.repeat,
                    keep_rows=name in CHECKED,
                    group=group,
                )
            if s.baseline == "spark":
                t = measure(
                    f"{s.name} (PySpark by hand)",
                    hand_run(s.name, bid),
                    args.warmup,
                    args.repeat,
                    group=group,
                )
                t.rows_out = by_hand(s.name, bid).count()
                hand[s.name] = t
            if group is not None:
                group("checks")
            if s.name in CHECKED:
                rows = timings[s.name].rows
                assert rows is not None
                checks.append(check(s.name, rows, by_hand(s.name, bid), bid))

    print()
    print(
        f"Nexmark: {gen.events:,} events ({gen.bids:,} bids), rate {args.rate:,}/s of event time, "
        f"watermark dateTime - {WATERMARK_S} s; {master} with {cores} cores; median of "
        f"{args.repeat} after {args.warmup} warm-up; load average at start "
        f"{load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}"
    )
    print()
    header = (
        "scenario",
        "engine",
        "wall s",
        "CPU s (tree)",
        "events/s per core",
        "peak RSS MiB (tree)",
        "peak RSS MiB (Python workers)",
        "rows out",
        "late rows",
        "dropped",
    )
    print("| " + " | ".join(header) + " |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")

    def line(name: str, engine: str, t: Timing) -> None:
        cpu = statistics.median(t.cpu)
        print(
            f"| {name} | {engine} | {t.median:.2f} | {cpu:.2f} | "
            f"{gen.events / t.median / cores:,.0f} | {t.peak_rss / 2**20:,.0f} | "
            f"{t.peak_workers_rss / 2**20:,.0f} | "
            f"{t.rows_out:,} | {t.late_rows:,} | {t.dropped:,} |"
        )

    for name, t in timings.items():
        line(name, f"WQL {engines[name]}", t)
        if name in hand:
            line(name, "PySpark by hand", hand[name])
    print()
    for c in checks:
        print(c)
    ratios = []
    for s in chosen:
        wql_s = timings[s.name].median
        if s.baseline == "spark":
            base_s, what = hand[s.name].median, "PySpark by hand"
        else:
            base_s = timings[s.baseline].median
            what = f"WQL {engines[s.baseline]} {s.baseline} (no Spark form)"
        ratios.append((s.name, wql_s, base_s))
        print(f"{s.name}: baseline {what}")
    spark.stop()  # the event log is complete once the session stops
    if events_dir is not None:
        runs = [f"{name} (WQL {engines[name]})" for name in timings]
        runs += [f"{name} (PySpark by hand)" for name in hand]
        stage_report(events_dir, runs, gen.bids)
        shutil.rmtree(events_dir, ignore_errors=True)
        print()
    for name, wql_s, base_s in ratios:
        print(f"RATIO {name} {wql_s:.3f} {base_s:.3f} {wql_s / base_s:.3f}")
    return 0


def wait_for_executors(spark: Any, master: str) -> None:
    """On ``local-cluster[N,...]`` wait (at most 120 s) until N executors registered."""
    if not master.startswith("local-cluster["):
        return
    want = int(master[len("local-cluster[") :].split(",")[0])
    deadline = time.monotonic() + 120
    while int(spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size()) - 1 < want:
        if time.monotonic() > deadline:
            raise SystemExit(f"{master}: fewer than {want} executors registered after 120 s")
        time.sleep(0.5)


if __name__ == "__main__":
    raise SystemExit(main())
