"""The benchmarks' interleaved timer: idle pauses before every timed call on several threads
(numpy's BLAS workers spin after each call and would be charged to the next call), none on one."""
import nki_lite.tools.bench as bench


def test_settle_sleeps_before_every_timed_call_and_not_before_warm_up(monkeypatch):
    events = []
    monkeypatch.setattr(bench.time, "sleep", lambda s: events.append(("sleep", s)))
    bench.interleaved(lambda: events.append("a"), lambda: events.append("b"), reps=2, settle=0.5)
    assert events == ["a", "b"] + [("sleep", 0.5), "a", ("sleep", 0.5), "b"] * 2


def test_no_settle_means_no_sleep(monkeypatch):
    monkeypatch.setattr(bench.time, "sleep", lambda s: (_ for _ in ()).throw(AssertionError("slept")))
    ta, tb = bench.interleaved(lambda: None, lambda: None, reps=3)
    assert ta >= 0 and tb >= 0


def test_settle_only_when_several_threads_can_run(monkeypatch):
    monkeypatch.setattr(bench.os, "cpu_count", lambda: 2)
    assert bench.settle_seconds(1) == 0.0
    assert bench.settle_seconds(0) == bench.SETTLE_SECONDS > 0
    assert bench.settle_seconds(2) == bench.SETTLE_SECONDS
    monkeypatch.setattr(bench.os, "cpu_count", lambda: 1)
    assert bench.settle_seconds(0) == 0.0
