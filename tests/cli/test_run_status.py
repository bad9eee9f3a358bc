"""What ``wql run`` writes on standard error besides the summaries (``Status``)."""

from __future__ import annotations

import io

from wql.commands.report import StreamProgress, summary_line
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


def test_batch_and_stream_summaries_have_the_same_fields():
    counters = {"rows_in": 9, "rows_out": 3, "late_rows": 1, "rows_fired": 7, "dropped": {}}
    counters["dropped"] = {"in no firing": 1}
    batch = summary_line("f.wql", "q", "operator", counters, 1.3)
    stream = summary_line("f.wql", "q", "operator", counters, 1.3, ("stream", "drained"))
    fields = "rows in 9 | out 3 | late 1 | fired 7 | dropped 1 (in no firing) | 1.3 s"
    assert batch == f"f.wql: q [operator] | {fields}"
    assert stream == f"f.wql: q [operator, stream, drained] | {fields}"
    filtered = summary_line("f.wql", "q", "native", {"rows_in": 4, "rows_filtered": 2}, 0.1)
    assert filtered == (
        "f.wql: q [native] | rows in 4 | out 0 | late 0 | filtered 2 | dropped 0 | 0.1 s"
    )


def _micro_batches(progress: StreamProgress, tmp_path) -> None:
    data = f"FileStreamSource[file:{tmp_path / 'in'}]"
    end = f"FileStreamSource[file:{tmp_path / 'ck' / 'q' / 'end'}]"
    tagged = f"FileStreamSource[file:{tmp_path / 'out' / '_wql_tagged' / 'q'}]"
    progress.progress("wql_q_operator", 0, [(data, 3), (end, 0)])
    progress.progress("wql_q_operator", 1, [(data, 2), (end, 1)])
    # a result stage reads the tagged sink: no source rows, no micro-batch of its own
    progress.progress("wql_q", 0, [(tagged, 9)])


def test_a_stream_status_line_says_the_micro_batch_and_the_rows_read(tmp_path):
    tmp_path = tmp_path.resolve()
    out = Terminal()
    status = Status(stream=out)
    progress = StreamProgress(None, status, internal=(str(tmp_path / "ck"), str(tmp_path / "out")))
    status.step("f.wql: streaming q -> out")
    assert progress.detail() == ""
    _micro_batches(progress, tmp_path)
    renders = out.getvalue().split(ERASE)[1:]
    step = "wql run: f.wql: streaming q -> out"
    assert renders[1].startswith(f"{step} | micro-batch 0 | 3 rows read |")
    assert renders[-1].startswith(f"{step} | micro-batch 1 | 5 rows read |")
    assert renders[-1].endswith(" s")
    # several queries: the micro-batch of each
    progress.progress("wql_r_operator", 0, [(f"FileStreamSource[file:{tmp_path / 'in2'}]", 4)])
    assert progress.detail() == "micro-batches q 1, r 0 | 9 rows read"


def test_a_stream_status_line_is_not_written_to_a_log(tmp_path):
    out = io.StringIO()
    status = Status(stream=out)
    progress = StreamProgress(None, status, internal=(str(tmp_path / "ck"), str(tmp_path / "out")))
    status.step("f.wql: streaming q -> out")
    _micro_batches(progress, tmp_path)
    status.done("done")
    assert out.getvalue() == ""
