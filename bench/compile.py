"""Compile-time benchmark: every .wql under examples/ and tests/fixtures/.

    .venv/bin/python bench/compile.py [--repeat N] [--warmup N] [PATH ...]

For each file it times, after warm-up, N runs of

- ``lark``: a plain Lark LALR parse of the text with the same grammar and
  lexer but Lark's defaults (a parse tree, no positions, no AST) -- the
  baseline: the least any Lark-based front end must spend,
- ``parse``: text -> AST (``wql.grammar.parser.parse``: Lark + transformer),
- ``compile``: text -> plan (``wql.compiler.compile_source``: parse, bind with
  sqlglot, plan), falling back to ``parse`` only -- and saying so -- when the
  compiler cannot be imported,
- ``cold``: the same with the compiler's per-expression caches emptied first
  (``wql.compiler.expressions.clear_caches``): what a file whose expression
  texts the process has not seen before costs (``compile`` re-binds the same
  texts, so after the warm-up its expressions come from those caches, as in
  an editor re-running ``wql check``),

and prints the median and p95 per file and over all runs of all files, plus
the ratio of each stage to the baseline measured in the same run, and the
``compile`` time per query (a file's time divided by its queries). The
target verdict is on the ``compile`` median per file (stricter than per
query: two files hold 9 and 10 queries). Files that
do not compile (e.g. deliberately broken fixtures) are listed and skipped.
"""

from __future__ import annotations

import argparse
import functools
import gc
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lark import Lark  # noqa: E402

from wql.errors import WqlError  # noqa: E402
from wql.grammar.parser import GRAMMAR_PATH, _WordsAlwaysLexed, lark_parser, parse  # noqa: E402

TARGET_P50_MS = 2.0


def find_files(paths: list[str]) -> list[Path]:
    roots = [Path(p) for p in paths] or [ROOT / "examples", ROOT / "tests" / "fixtures"]
    files: list[Path] = []
    for root in roots:
        if root.is_file():
            files.append(root)
        elif root.is_dir():
            files.extend(sorted(root.rglob("*.wql")))
    return files


def timed(fn: Callable[[], object], repeat: int, warmup: int) -> list[float]:
    """Milliseconds of ``repeat`` calls after ``warmup`` untimed ones."""
    for _ in range(warmup):
        fn()
    gc.collect()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter_ns()
        fn()
        samples.append((time.perf_counter_ns() - start) / 1e6)
    return samples


def p95(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def main(argv: list[str] | None = None) -> int:
    args = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    args.add_argument(
        "paths", nargs="*", help="files or folders (default: examples/, tests/fixtures/)"
    )
    args.add_argument("--repeat", type=int, default=50, help="timed runs per file (default 50)")
    args.add_argument("--warmup", type=int, default=5, help="untimed runs first (default 5)")
    opts = args.parse_args(argv)

    compile_source: Callable[..., object] | None
    try:
        from wql.compiler import compile_source
        from wql.compiler.expressions import clear_caches
    except ImportError as err:
        compile_source = None
        print(f"note: wql.compiler is not importable ({err}); timing parse only")

    build_start = time.perf_counter()
    lark_parser()
    print(f"parser build (once per process): {(time.perf_counter() - build_start) * 1000:.0f} ms")
    lark = Lark(
        GRAMMAR_PATH.read_text(encoding="utf-8"),
        parser="lalr",
        lexer="contextual",
        postlex=_WordsAlwaysLexed(),
        cache=True,
    )

    files = find_files(opts.paths)
    if not files:
        print("no .wql files found")
        return 1

    stages: list[tuple[str, Callable[[str, str], object]]] = [
        ("lark", lambda text, name: lark.parse(text)),
        ("parse", lambda text, name: parse(text, name)),
    ]
    if compile_source is not None:

        def cold(text: str, name: str) -> object:
            clear_caches()
            return compile_source(text, filename=name)

        stages.append(("compile", lambda text, name: compile_source(text, filename=name)))
        stages.append(("cold", cold))
    names = [s for s, _ in stages]

    pooled: dict[str, list[float]] = {s: [] for s in names}
    per_query: list[float] = []
    skipped: list[tuple[Path, str]] = []
    # The stage the target is about (and whose minimum gets a column).
    final = "compile" if compile_source is not None else "parse"
    header = (
        f"{'file':<52} {'bytes':>6} "
        + " ".join(f"{s + ' p50':>12} {s + ' p95':>12}" for s in names)
        + f" {final + ' min':>12}"
    )
    print(f"\n{opts.repeat} timed runs per file after {opts.warmup} warm-up runs; times in ms")
    print(header)
    print("-" * len(header))
    for path in files:
        text = path.read_text(encoding="utf-8")
        name = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
        try:
            for _, fn in stages:
                result = fn(text, name)
        except WqlError as err:
            skipped.append((path, err.message))
            continue
        # The target is per query: a file's time is shared by its queries.
        found = getattr(result, "queries", ()) or getattr(result, "statements", ())
        queries = max(1, len(tuple(found)))
        row = f"{name[-52:]:<52} {len(text):>6} "
        final_min = 0.0
        for stage, fn in stages:
            samples = timed(functools.partial(fn, text, name), opts.repeat, opts.warmup)
            pooled[stage].extend(samples)
            row += f"{statistics.median(samples):>12.3f} {p95(samples):>12.3f} "
            if stage == final:
                final_min = min(samples)
                per_query.extend(x / queries for x in samples)
        # The minimum: what the file costs when nothing else competes for the CPU.
        row += f"{final_min:>12.3f}"
        print(row)

    if not pooled["lark"]:
        print("every file failed to compile")
        return 1
    print("-" * len(header))
    overall = (
        f"{'all files':<52} {'':>6} "
        + " ".join(f"{statistics.median(pooled[s]):>12.3f} {p95(pooled[s]):>12.3f}" for s in names)
        + f" {min(pooled[final]):>12.3f}"
    )
    print(overall)
    base = statistics.median(pooled["lark"])
    print("\nratio to the raw Lark parse (median over all runs; min in parentheses):")
    for stage in names[1:]:
        ratio = statistics.median(pooled[stage]) / base
        best = min(pooled[stage]) / min(pooled["lark"])
        print(f"  {stage:<8} {ratio:6.2f}x  ({best:.2f}x)")
    # On a busy machine medians carry other processes' noise; the minimum
    # shows what the code itself costs.
    print("min over all runs: " + ", ".join(f"{s} {min(pooled[s]):.3f} ms" for s in names))
    print(
        f"{final} per query (a file's time / its queries): median "
        f"{statistics.median(per_query):.3f} ms, p95 {p95(per_query):.3f} ms, "
        f"min {min(per_query):.3f} ms"
    )
    p50 = statistics.median(pooled[final])
    verdict = "met" if p50 < TARGET_P50_MS else "missed"
    try:
        load = f"; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    except OSError:
        load = ""
    print(f"machine: Python {sys.version.split()[0]}{load}")
    print(f"\ntarget: {final} p50 < {TARGET_P50_MS} ms warm -> {p50:.3f} ms ({verdict})")
    for path, message in skipped:
        print(f"skipped {path}: {message}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
