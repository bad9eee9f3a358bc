"""Helpers for the streaming CLI tests: ``wql run --stream`` on the test session's settings."""

from __future__ import annotations

from pathlib import Path


def stream_cli_argv(spark, query: Path, out: Path, ck: Path, *flags: str) -> list[str]:
    """The arguments of ``wql run QUERY --stream [FLAGS] --checkpoint CK --output OUT``.

    On ``local[2]`` with the test session's shuffle partitions, so the CLI's
    session (the same JVM) plans as the tests' does.
    """
    partitions = spark.conf.get("spark.sql.shuffle.partitions")
    argv = ["run", str(query), "--stream", *flags, "--checkpoint", str(ck)]
    argv += ["--output", str(out), "--master", "local[2]"]
    return [*argv, "--conf", f"spark.sql.shuffle.partitions={partitions}"]
