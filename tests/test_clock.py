"""The simulated clock's one use of SimPy internals (wirelessfl.des.clock.Clock.at): an event at an
absolute time lands at exactly that float, in the order of its priority and then of scheduling, and
behaves like any triggered SimPy event (processes yield it, callbacks run, timeouts interleave).
The band and the inbox of wirelessfl.des keep the order of events of the SimPy Resource and Store
they stand for."""
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


# --- Band and Inbox: SimPy's Resource and Store, event for event ----------------------------------


def _contend(make_band, seed: int) -> list:
    """A random contention for one transmitter on a coarse time grid (ties everywhere): devices ask
    at grid times (some through Clock.at with an engine priority, some by timeout), hold it for a
    whole number of ticks, and are interrupted at random, waiting or holding; bystander events at
    the same instants log themselves. Returns the log of everything, in order."""
    import numpy as np

    rng = np.random.default_rng(seed)
    env = Clock()
    band = make_band(env)
    log = []

    def device(i, hold):
        try:
            with band.request() as turn:
                yield turn
                log.append((env.now, "granted", i))
                yield env.timeout(hold)
                log.append((env.now, "done", i))
        except simpy.Interrupt:
            log.append((env.now, "interrupted", i))

    def starter(i, at, hold, by_priority):
        yield (env.at(at, priority(RANK_DEVICE, i)) if by_priority else env.timeout(at))
        log.append((env.now, "asks", i))
        proc = env.process(device(i, hold))
        cut = rng.integers(0, 12)
        if cut < 6:
            def interrupter():
                yield env.timeout(float(cut))
                if proc.is_alive:
                    proc.interrupt("cut")
            env.process(interrupter())

    for i in range(40):
        at = float(rng.integers(0, 20))
        env.process(starter(i, at, float(rng.integers(0, 4)), bool(rng.integers(2))))
        env.timeout(float(rng.integers(0, 25))).callbacks.append(lambda ev, i=i: log.append((env.now, "bystander", i)))
    env.run()
    return log


def test_band_grants_releases_and_withdraws_in_the_order_of_a_simpy_resource_of_one():
    from wirelessfl.des import Band

    for seed in range(25):
        ours, simpys = _contend(Band, seed), _contend(lambda env: simpy.Resource(env, capacity=1), seed)
        assert ours == simpys, seed
        assert sum(1 for _, what, _ in ours if what == "granted") > 10  # a contention, not an empty band


def _deliveries(make_inbox, seed: int) -> list:
    """Items put by several processes, at grid times (ties everywhere) and at times of their own as
    the engine's devices (where an inbox hands over at once), each taken by a taker that may itself
    start more puts and bystander events at the same instant. Returns the log, in order."""
    import numpy as np

    rng = np.random.default_rng(seed)
    env = Clock()
    log = []

    def take(item):
        log.append((env.now, "taken", item))
        if item % 3 == 0 and item < 1000:  # a taker that reacts at once: another put, a bystander
            env.process(sender(item + 1000, 0.0))
            env.event().succeed().callbacks.append(lambda ev: log.append((env.now, "after", item)))

    put = make_inbox(env, take)

    def sender(item, at, by_priority=False):
        yield env.at(at, priority(RANK_DEVICE, item)) if by_priority else env.timeout(at)
        log.append((env.now, "put", item))
        yield from put(item)
        log.append((env.now, "sent", item))

    for i in range(60):  # half on the grid, half as the engine's devices arrive (alone at their instant, often)
        env.process(sender(i, float(rng.integers(0, 10)) + (rng.random() if i % 2 else 0.0), bool(i % 2)))
        env.timeout(float(rng.integers(0, 10))).callbacks.append(lambda ev, i=i: log.append((env.now, "bystander", i)))
    env.run()
    return log


def _simpy_store(env, take):
    store = simpy.Store(env)

    def server():
        while True:
            take((yield store.get()))

    env.process(server())

    def put(item):
        yield store.put(item)
    return put


def _our_inbox(env, take):
    from wirelessfl.des import Inbox

    inbox = Inbox(env, take)

    def put(item):
        inbox.put(item)
        return
        yield  # a generator, as the store's put is waited on
    return put


def test_inbox_hands_items_over_in_the_order_of_a_simpy_store_read_by_a_server_process():
    for seed in range(25):
        ours, simpys = _deliveries(_our_inbox, seed), _deliveries(_simpy_store, seed)
        taken = [entry for entry in ours if entry[1] == "taken"]
        # (a sender waits on the store's put, not on the inbox's: when it goes on is not compared)
        assert [e for e in ours if e[1] != "sent"] == [e for e in simpys if e[1] != "sent"], seed
        assert len(taken) > 60  # every item, and the takers' own


def test_run_until_says_whether_the_event_fired_or_nothing_was_left_to_happen():
    env = Clock()
    fired = env.at(2.0)
    later = simpy.Event(env)  # nothing will ever trigger it
    assert env.run_until(fired) is True and env.now == 2.0
    assert env.run_until(fired) is True  # already processed
    env.at(5.0)
    assert env.run_until(later) is False and env.now == 5.0  # the schedule ran dry first
