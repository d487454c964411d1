"""The simulated clock's one use of SimPy internals (wirelessfl.des.clock.Clock.at): an event at an
absolute time lands at exactly that float, in the order of its priority and then of scheduling, and
behaves like any triggered SimPy event (processes yield it, callbacks run, timeouts interleave)."""
import pytest
import simpy

from wirelessfl.des import CHECKPOINT, RANK_DEVICE, RANK_TIMER, Clock, priority


def test_an_event_lands_at_exactly_the_time_asked_where_now_plus_delay_would_not():
    env = Clock(initial_time=0.2)
    target = 0.9
    assert 0.2 + (target - 0.2) != target  # a relative delay would round away from it
    seen = []
    env.at(target).callbacks.append(lambda ev: seen.append(env.now))
    env.run()
    assert seen == [target]


def test_events_at_one_instant_go_by_priority_then_by_the_order_they_were_scheduled():
    env = Clock()
    order = []
    for name, prio in (("timer", priority(RANK_TIMER)), ("device 7", priority(RANK_DEVICE, 7)),
                       ("device 2", priority(RANK_DEVICE, 2)), ("checkpoint", CHECKPOINT),
                       ("device 2 again", priority(RANK_DEVICE, 2))):
        env.at(1.0, prio).callbacks.append(lambda ev, name=name: order.append(name))
    env.timeout(1.0).callbacks.append(lambda ev: order.append("simpy's own"))
    env.run()
    assert order == ["simpy's own", "checkpoint", "device 2", "device 2 again", "device 7", "timer"]


def test_a_process_waits_on_it_like_a_timeout_and_gets_none():
    env = Clock()
    got = []

    def proc():
        value = yield env.at(2.5)
        got.append((env.now, value))
        yield env.timeout(0.5)
        got.append((env.now, None))

    env.process(proc())
    env.run(until=10)
    assert got == [(2.5, None), (3.0, None)]


def test_a_time_before_now_is_refused():
    env = Clock(initial_time=5.0)
    with pytest.raises(ValueError, match="before now"):
        env.at(4.0)


def test_simpy_is_the_major_version_the_clock_was_written_for():
    assert int(simpy.__version__.split(".")[0]) == 4
