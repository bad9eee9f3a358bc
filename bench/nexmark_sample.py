"""Write the small Nexmark sample the examples read: ``examples/data/nexmark_events.csv``.

One command (from the repository root)::

    .venv/bin/python bench/nexmark_sample.py [--events 400] [--rate 5] [--out PATH]

The events are :func:`nexmark.tables`' (the seeded generator of
``bench/nexmark.py``), in one table as Flink's Nexmark ``datagen`` source
has them: ``event_type`` 0 (a person), 1 (an auction) or 2 (a bid), the
event's own columns filled and the others empty, ``date_time`` and ``seq``
(the event number) for all. The Nexmark queries of ``examples/nexmark/``
read it as one source, so their window joins join relations of one source
(one watermark), as in Flink's Nexmark. The defaults give 400 events over
80 s of event time (8 persons, 24 auctions, 368 bids); a few are out of
order within the 4 s watermark delay.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from nexmark import ROOT, tables  # noqa: E402

COLUMNS = (
    "event_type",
    "person_id",
    "name",
    "city",
    "state",
    "auction_id",
    "item_name",
    "initial_bid",
    "reserve",
    "seller",
    "category",
    "auction",
    "bidder",
    "price",
    "channel",
    "date_time",
    "seq",
)

#: (event type, table, {sample column: the table's column})
LAYOUT = (
    (0, "person", {"person_id": "id", "name": "name", "city": "city", "state": "state"}),
    (
        1,
        "auction",
        {
            "auction_id": "id",
            "item_name": "itemName",
            "initial_bid": "initialBid",
            "reserve": "reserve",
            "seller": "seller",
            "category": "category",
        },
    ),
    (2, "bid", {"auction": "auction", "bidder": "bidder", "price": "price", "channel": "channel"}),
)


def timestamp(value: dt.datetime) -> str:
    """UTC, milliseconds: ``2023-11-14 22:13:20.200``."""
    return value.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _plain(value: object) -> object:
    """A whole float (the generator's ``reserve``) as an integer, for a BIGINT column."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def rows(events: int, rate: int) -> list[dict[str, object]]:
    made, _ = tables(events, rate)
    out: list[dict[str, object]] = []
    for event_type, name, columns in LAYOUT:
        table = made[name].to_pylist()
        for r in table:
            row: dict[str, object] = {c: "" for c in COLUMNS}
            row["event_type"] = event_type
            row.update({mine: _plain(r[theirs]) for mine, theirs in columns.items()})
            row["date_time"] = timestamp(r["dateTime"])
            row["seq"] = r["seq"]
            out.append(row)
    return sorted(out, key=lambda r: int(r["seq"]))  # type: ignore[call-overload]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=400)
    ap.add_argument("--rate", type=int, default=5, help="events per second of event time")
    ap.add_argument("--out", type=Path, default=ROOT / "examples" / "data" / "nexmark_events.csv")
    args = ap.parse_args(argv)
    with args.out.open("w", newline="") as f:
        writer = csv.DictWriter(f, COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows(args.events, args.rate))
    print(f"wrote {args.events} events to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
