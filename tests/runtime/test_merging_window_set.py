"""Flink's MergingWindowSetTest, ported (plus WQL's two decisions on Flink's open points)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wql.runtime import MergingWindowSet, TimeWindow
from wql.runtime.assigners import merge_time_windows

W = TimeWindow


class Recorder:
    """Flink's TestingMergeFunction: at most one merge per addWindow."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.target = self.sources = self.state_window = self.merged_state_windows = None

    @property
    def merged(self) -> bool:
        return self.target is not None

    def __call__(self, target, sources, state_window, merged_state_windows) -> None:
        assert self.target is None, "more than one merge for adding a window"
        self.target, self.sources = target, list(sources)
        self.state_window, self.merged_state_windows = state_window, list(merged_state_windows)


def add(s: MergingWindowSet, f: Recorder, w: TimeWindow) -> TimeWindow:
    f.reset()
    return s.add_window(w, f)


@pytest.fixture(params=[False, True], ids=["general", "eager"])
def session_set(request):
    """Both the general addWindow algorithm and the eager shortcut for sessions."""
    return lambda: MergingWindowSet(merge_time_windows, {}, eager=request.param)


def test_incremental_merging(session_set):
    s, f = session_set(), Recorder()
    assert add(s, f, W(0, 4)) == W(0, 4) and not f.merged
    assert s.get_state_window(W(0, 4)) == W(0, 4)
    assert add(s, f, W(0, 4)) == W(0, 4) and not f.merged

    assert add(s, f, W(3, 5)) == W(0, 5)
    assert (f.target, f.state_window, f.sources, f.merged_state_windows) == (
        W(0, 5),
        W(0, 4),
        [W(0, 4)],
        [],
    )
    assert add(s, f, W(4, 6)) == W(0, 6)
    assert (f.target, f.state_window, f.sources, f.merged_state_windows) == (
        W(0, 6),
        W(0, 4),
        [W(0, 5)],
        [],
    )
    assert s.get_state_window(W(0, 6)) == W(0, 4)

    for inside in (W(1, 4), W(0, 4), W(3, 5), W(4, 6)):
        assert add(s, f, inside) == W(0, 6) and not f.merged
    assert s.get_state_window(W(0, 6)) == W(0, 4)

    assert add(s, f, W(11, 14)) == W(11, 14) and not f.merged
    assert s.get_state_window(W(11, 14)) == W(11, 14)
    assert add(s, f, W(10, 13)) == W(10, 14)
    assert (f.target, f.state_window, f.sources, f.merged_state_windows) == (
        W(10, 14),
        W(11, 14),
        [W(11, 14)],
        [],
    )
    assert add(s, f, W(12, 15)) == W(10, 15)
    assert (f.target, f.state_window, f.sources) == (W(10, 15), W(11, 14), [W(10, 14)])
    assert add(s, f, W(11, 14)) == W(10, 15) and not f.merged
    assert s.get_state_window(W(0, 6)) == W(0, 4)
    assert s.get_state_window(W(10, 15)) == W(11, 14)

    s.retire_window(W(0, 6))
    assert s.get_state_window(W(0, 6)) is None
    assert s.get_state_window(W(10, 15)) == W(11, 14)
    with pytest.raises(KeyError):
        s.retire_window(W(0, 6))


def test_late_merging(session_set):
    s, f = session_set(), Recorder()
    for w in (W(0, 3), W(5, 8), W(10, 13)):
        assert add(s, f, w) == w and not f.merged
        assert s.get_state_window(w) == w
    assert add(s, f, W(8, 10)) == W(5, 13)
    assert f.target == W(5, 13)
    assert sorted(f.sources) == [W(5, 8), W(10, 13)]
    assert f.state_window == W(5, 8)  # WQL: earliest merged window (Flink: either)
    assert f.merged_state_windows == [W(10, 13)]
    assert f.target not in f.merged_state_windows
    assert s.get_state_window(W(0, 3)) == W(0, 3)
    for inside in (W(5, 8), W(8, 10), W(10, 13)):
        assert add(s, f, inside) == W(5, 13) and not f.merged
    assert add(s, f, W(3, 5)) == W(0, 13)
    assert sorted(f.sources) == [W(0, 3), W(5, 13)]
    assert f.state_window == W(0, 3)
    assert f.merged_state_windows == [W(5, 8)]
    assert s.mapping == {W(0, 13): W(0, 3)}


def test_merge_large_window_covering_single_window(session_set):
    s, f = session_set(), Recorder()
    assert add(s, f, W(1, 2)) == W(1, 2)
    assert add(s, f, W(0, 3)) == W(0, 3) and f.merged
    assert s.get_state_window(W(0, 3)) == W(1, 2)


def test_adding_identical_windows(session_set):
    s, f = session_set(), Recorder()
    assert add(s, f, W(1, 2)) == W(1, 2) and not f.merged
    assert add(s, f, W(1, 2)) == W(1, 2) and not f.merged
    assert s.get_state_window(W(1, 2)) == W(1, 2)


def test_identical_window_keeps_its_merged_state_window(session_set):
    # Flink would remap (0,4) -> (0,4) here and orphan the contents kept under
    # (0,3); only dynamic gaps can produce it. WQL keeps the state window.
    s, f = session_set(), Recorder()
    add(s, f, W(0, 3))
    add(s, f, W(1, 4))
    assert s.mapping == {W(0, 4): W(0, 3)}
    assert add(s, f, W(0, 4)) == W(0, 4) and not f.merged
    assert s.mapping == {W(0, 4): W(0, 3)}


def test_merge_large_window_covering_multiple_windows(session_set):
    s, f = session_set(), Recorder()
    for w in (W(1, 3), W(5, 8), W(10, 13)):
        add(s, f, w)
    assert add(s, f, W(0, 13)) == W(0, 13) and f.merged
    assert f.state_window == W(1, 3)
    assert sorted(f.merged_state_windows) == [W(5, 8), W(10, 13)]
    assert s.get_state_window(W(0, 13)) == W(1, 3)


def _non_eager(windows, callback):
    """Flink's NonEagerlyMergingWindowAssigner(3000): merges lazily, even non-overlapping."""
    windows = list(windows)
    earliest = min(windows, key=lambda w: w.start)
    associated = [w for w in windows if earliest.start <= w.start < earliest.end]
    if len(associated) > 1:
        callback(associated, W(earliest.start, earliest.end + 1))


def test_non_eager_merging_keeps_every_window_mapped():
    s, f = MergingWindowSet(_non_eager, {}), Recorder()
    for w in (W(0, 2), W(2, 5), W(1, 2), W(10, 12)):
        result = add(s, f, w)
        assert s.get_state_window(result) is not None


def test_restore_from_state():
    s = MergingWindowSet(merge_time_windows, {W(17, 42): W(42, 17), W(1, 2): W(3, 4)})
    assert s.get_state_window(W(17, 42)) == W(42, 17)
    assert s.get_state_window(W(1, 2)) == W(3, 4)


def test_persisted_mapping_is_the_owned_dict():
    mapping: dict = {}
    s = MergingWindowSet(merge_time_windows, mapping)
    s.add_window(W(1, 2), Recorder())
    s.add_window(W(17, 42), Recorder())
    assert mapping == {W(1, 2): W(1, 2), W(17, 42): W(17, 42)}


class _Calls:
    def __init__(self, sink: list) -> None:
        self.sink = sink

    def __call__(self, *args) -> None:
        self.sink.append(args)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 60), st.integers(1, 12), st.booleans()), max_size=25))
def test_eager_shortcut_equals_general_algorithm(steps):
    """Random adds (dynamic gaps) and retirements: same results, callbacks and mappings."""
    general = MergingWindowSet(merge_time_windows, {})
    eager = MergingWindowSet(merge_time_windows, {}, eager=True)
    for start, length, retire in steps:
        calls_g: list = []
        calls_e: list = []
        w = W(start, start + length)
        rg = general.add_window(w, _Calls(calls_g))
        re = eager.add_window(w, _Calls(calls_e))
        assert rg == re and calls_g == calls_e and general.mapping == eager.mapping
        if retire:
            general.retire_window(rg)
            eager.retire_window(re)
        # in-flight windows never intersect each other
        ws = sorted(general.mapping)
        assert all(not a.intersects(b) for a, b in zip(ws, ws[1:], strict=False))
