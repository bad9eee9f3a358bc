"""What ``wql run`` writes on standard error besides the summaries (``Status``)."""

from __future__ import annotations

import io

from wql.commands.run import Status

ERASE = "\r\033[K"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_not_a_terminal_gets_only_the_lines_that_stay():
    out = io.StringIO()
    status = Status(stream=out)
    status.step("starting Spark")
    status.stage("stage 3: 1/4 tasks")
    status.line("f.wql: q [operator] | rows in 3 | out 1 | late 0 | dropped 0 | 0.4 s")
    status.done("done in 9.0 s")
    assert (
        out.getvalue() == "f.wql: q [operator] | rows in 3 | out 1 | late 0 | dropped 0 | 0.4 s\n"
    )


def test_a_terminal_gets_one_status_line_rewritten_in_place_and_erased():
    out = Terminal()
    status = Status(stream=out)
    status.step("f.wql: running q")
    status.stage("stage 3: 1/4 tasks")
    status.line("summary")
    status.done("done")
    text = out.getvalue()
    first, second, after = text.split(ERASE)[1:4]
    assert first.startswith("wql run: f.wql: running q | ") and first.endswith(" s")
    assert second.startswith("wql run: f.wql: running q | stage 3: 1/4 tasks | ")
    # the summary starts on an erased line, then the status line comes back
    assert after == "summary\n"
    assert text.endswith(ERASE) and "\n" not in text.replace("summary\n", "")


def test_verbose_prints_every_step_as_a_line():
    out = Terminal()
    status = Status(verbose=True, stream=out)
    status.step("starting Spark")
    status.stage("stage 3: 1/4 tasks")
    status.stage("")
    status.done("done in 9.0 s")
    assert out.getvalue() == (
        "wql run: starting Spark\nwql run: stage 3: 1/4 tasks\nwql run: done in 9.0 s\n"
    )
