"""The ``wql`` command line, run as a real subprocess (exit codes, streams, files)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from wql import cli

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "queries"

GOOD = """CREATE SOURCE clicks (user_id STRING, amount DOUBLE, ts TIMESTAMP,
    WATERMARK FOR ts AS ts - INTERVAL '5' SECOND);
SELECT user_id, COUNT(*) AS n FROM clicks
GROUP BY user_id, TUMBLE(ts, INTERVAL '1' MINUTE);
"""

TWO_SYNTAX_ERRORS = """CREATE SOURCE clicks (user_id STRING, ts TIMESTAMP,
    WATERMARK FOR ts AS ts - INTERVAL '5' SECOND);
SELECT user_id FROM clicks GROUP BY user_id, TUMBLE(ts INTERVAL '1' MINUTE);
SELECT FROM clicks GROUP BY GLOBAL() TRIGGER COUNT(1);
"""


def wql(*args: str, stdin: str | None = None, env: dict[str, str] | None = None):
    environment = {**os.environ, "NO_COLOR": "1", **(env or {})}
    environment.pop("WQL_DEBUG", None)
    if env and "WQL_DEBUG" in env:
        environment["WQL_DEBUG"] = env["WQL_DEBUG"]
    return subprocess.run(
        [sys.executable, "-m", "wql.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=environment,
        timeout=120,
    )


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_check_ok_and_missing_file(tmp_path: Path) -> None:
    good = write(tmp_path, "good.wql", GOOD)
    result = wql("check", str(good), str(tmp_path / "missing.wql"))
    assert result.returncode == 1
    assert result.stdout == f"{good}: ok\n"
    assert f"{tmp_path / 'missing.wql'}: error: cannot read file: no such file" in result.stderr
    assert "Traceback" not in result.stderr


def test_check_reports_every_syntax_error_with_carets(tmp_path: Path) -> None:
    bad = write(tmp_path, "bad.wql", TWO_SYNTAX_ERRORS)
    result = wql("check", str(bad))
    assert result.returncode == 1
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert f"{bad}:3:56: error: unexpected INTERVAL" in lines
    assert (
        "   3 | SELECT user_id FROM clicks GROUP BY user_id, TUMBLE(ts INTERVAL '1' MINUTE);"
        in lines
    )
    assert "     |                                                        ^^^^^^^^" in lines
    assert f"{bad}:4:8: error: unexpected FROM" in lines
    assert "\033[" not in result.stderr  # no colour when not on a terminal


def test_check_reports_semantic_errors_positioned(tmp_path: Path) -> None:
    text = GOOD.replace("COUNT(*) AS n", "COUNT(*) AS n, no_such_column")
    bad = write(tmp_path, "semantic.wql", text)
    result = wql("check", str(bad))
    assert result.returncode == 1
    assert f"{bad}:3:" in result.stderr and "no_such_column" in result.stderr
    assert "^" in result.stderr


def test_check_reads_stdin() -> None:
    result = wql("check", "-", stdin=GOOD)
    assert (result.returncode, result.stdout) == (0, "<stdin>: ok\n")


def test_explain_prints_plan_and_engine(tmp_path: Path) -> None:
    good = write(tmp_path, "good.wql", GOOD)
    result = wql("explain", str(good))
    assert result.returncode == 0, result.stderr
    assert "query_1" in result.stdout and "engine" in result.stdout
    assert "TUMBLE" in result.stdout


def test_explain_forced_native_on_an_operator_query_fails(tmp_path: Path) -> None:
    text = GOOD.rstrip().rstrip(";") + "\nTRIGGER COUNT(100);\n"
    path = write(tmp_path, "count.wql", text)
    result = wql("explain", str(path), "--engine", "native")
    assert result.returncode == 1
    assert f"{path}:5:" in result.stderr and "TRIGGER" in result.stderr


def test_fmt_prints_check_and_write(tmp_path: Path) -> None:
    messy = (
        "-- keep me\n"
        "select a,count(*) n from t group by a, tumble(ts, interval '5 seconds') -- end\n"
    )
    path = write(tmp_path, "messy.wql", messy)
    tidy = (
        "-- keep me\n"
        "SELECT\n"
        "    a,\n"
        "    COUNT(*) AS n\n"
        "FROM t\n"
        "GROUP BY a, TUMBLE(ts, INTERVAL '5' SECOND);  -- end\n"
    )
    printed = wql("fmt", str(path))
    assert (printed.returncode, printed.stdout) == (0, tidy)
    assert path.read_text(encoding="utf-8") == messy  # printing does not write

    checked = wql("fmt", "--check", str(path))
    assert checked.returncode == 1
    assert checked.stdout == f"would reformat {path}\n"

    written = wql("fmt", "--write", str(path))
    assert written.returncode == 0
    assert written.stdout == f"reformatted {path}\n"
    assert path.read_text(encoding="utf-8") == tidy

    again = wql("fmt", "--check", str(path))
    assert (again.returncode, again.stdout) == (0, "1 file already formatted\n")


def test_fmt_leaves_a_file_with_syntax_errors_alone(tmp_path: Path) -> None:
    path = write(tmp_path, "bad.wql", TWO_SYNTAX_ERRORS)
    result = wql("fmt", "--write", str(path))
    assert result.returncode == 1
    assert "unexpected INTERVAL" in result.stderr and "unexpected FROM" in result.stderr
    assert path.read_text(encoding="utf-8") == TWO_SYNTAX_ERRORS


def test_fmt_check_on_fixture_copies(tmp_path: Path) -> None:
    # The fixtures are hand-written (not canonical); formatting them twice is stable.
    for source in sorted(FIXTURES.glob("*.wql")):
        copy = write(tmp_path, source.name, source.read_text(encoding="utf-8"))
        assert wql("fmt", "--write", str(copy)).returncode == 0
    result = wql("fmt", "--check", *(str(p) for p in sorted(tmp_path.glob("*.wql"))))
    assert result.returncode == 0, result.stdout


def test_console_script_is_installed(tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("wql")
    if not script.exists():
        pytest.skip("the wql console script is not installed in this environment")
    good = write(tmp_path, "good.wql", GOOD)
    result = subprocess.run([str(script), "check", str(good)], capture_output=True, text=True)
    assert (result.returncode, result.stdout) == (0, f"{good}: ok\n")


def test_bad_command_line_exits_2() -> None:
    result = wql("fmt", "--check", "--write", "x.wql")
    assert result.returncode == 2
    assert "not allowed with argument" in result.stderr


# ----------------------------------------------------------------- in process


def test_internal_error_is_one_line_and_exit_2(monkeypatch, capsys, tmp_path: Path) -> None:
    import wql.commands.check as check

    def broken(args):
        raise RuntimeError("boom")

    monkeypatch.setattr(check, "run", broken)
    monkeypatch.delenv("WQL_DEBUG", raising=False)
    assert cli.main(["check", str(tmp_path / "x.wql")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("wql: internal error: RuntimeError: boom")
    assert "WQL_DEBUG=1" in err

    monkeypatch.setenv("WQL_DEBUG", "1")
    assert cli.main(["check", str(tmp_path / "x.wql")]) == 2
    assert "Traceback" in capsys.readouterr().err


def test_main_returns_status_without_exiting(capsys, tmp_path: Path) -> None:
    path = write(tmp_path, "good.wql", GOOD)
    assert cli.main(["fmt", "--check", str(path)]) == 1
    assert capsys.readouterr().out == f"would reformat {path}\n"
    assert set(cli.COMMANDS) >= {"check", "explain", "fmt"}


def test_colour_only_on_a_terminal(tmp_path: Path) -> None:
    pty = pytest.importorskip("pty")
    bad = write(tmp_path, "bad.wql", TWO_SYNTAX_ERRORS)
    master, slave = pty.openpty()
    environment = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "WQL_DEBUG")}
    try:
        result = subprocess.run(
            [sys.executable, "-m", "wql.cli", "check", str(bad)],
            stdout=subprocess.PIPE,
            stderr=slave,
            cwd=ROOT,
            env=environment,
            timeout=120,
        )
        os.close(slave)
        slave = -1
        chunks = []
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(master)
        if slave >= 0:
            os.close(slave)
    stderr = b"".join(chunks).decode()
    assert result.returncode == 1
    assert "\033[31m" in stderr and "unexpected INTERVAL" in stderr


def test_byte_order_mark_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "bom.wql"
    path.write_bytes(b"\xef\xbb\xbf" + GOOD.encode())
    result = wql("check", str(path))
    assert (result.returncode, result.stdout) == (0, f"{path}: ok\n")
