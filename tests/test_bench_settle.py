"""The benchmarks' interleaved timer: on several threads, untimed calls of the same function fill
`settle` seconds before every timed call (numpy's BLAS workers spin after each call and would be
charged to the next call), measured the same way at every thread count."""
import nki_lite.tools.bench as bench


class FakeClock:
    """A perf_counter whose time only the test's functions advance."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_settle_fills_the_gap_with_untimed_calls_of_the_same_function(monkeypatch):
    clock, events = FakeClock(), []
    monkeypatch.setattr(bench.time, "perf_counter", clock)

    def call(name):
        def f():
            events.append(name)
            clock.now += 0.3
        return f
    ta, tb = bench.interleaved(call("a"), call("b"), reps=2, settle=1.0)
    # warm-ups, then per timed call: 4 untimed calls of the same function (1.2 s >= 1 s), then the timed one
    assert events == ["a", "b"] + ["a"] * 5 + ["b"] * 5 + ["a"] * 5 + ["b"] * 5
    assert abs(ta - 0.3) < 1e-9 and abs(tb - 0.3) < 1e-9


def test_no_settle_means_one_timed_call_each(monkeypatch):
    events = []
    ta, tb = bench.interleaved(lambda: events.append("a"), lambda: events.append("b"), reps=3)
    assert events == ["a", "b"] * 4 and ta >= 0 and tb >= 0


def test_settle_at_every_thread_count_on_a_multi_core_machine(monkeypatch):
    monkeypatch.setattr(bench.os, "cpu_count", lambda: 2)
    assert bench.settle_seconds(1) == bench.SETTLE_SECONDS > 0     # one- and all-thread runs alike
    assert bench.settle_seconds(0) == bench.SETTLE_SECONDS
    assert bench.settle_seconds(2) == bench.SETTLE_SECONDS
    monkeypatch.setattr(bench.os, "cpu_count", lambda: 1)
    assert bench.settle_seconds(0) == 0.0
