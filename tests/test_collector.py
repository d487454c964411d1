"""The garbage collector's pace during a run (wirelessfl.des.collector)."""
import gc
import weakref

import pytest

from wirelessfl.des.collector import YOUNG, paced_collector


@pytest.fixture
def default_collector():
    """Python's collector as a plain program has it, restored after the test."""
    before, enabled, frozen = gc.get_threshold(), gc.isenabled(), gc.get_freeze_count()
    gc.unfreeze()
    gc.enable()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*before)
    if not enabled:
        gc.disable()
    if frozen:
        gc.freeze()


class Node:
    pass


def cycle() -> weakref.ref:
    """A two-object cycle nobody refers to, and a weak reference to tell when it is collected."""
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def test_paced_inside_and_restored_after(default_collector):
    with paced_collector():
        assert gc.get_threshold() == (YOUNG, 10, 10)
        assert gc.get_freeze_count() > 0  # what existed before the run is not walked again
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() == 0


def test_restored_when_the_run_fails(default_collector):
    with pytest.raises(RuntimeError):
        with paced_collector():
            raise RuntimeError("a part failed")
    assert gc.get_threshold() == (700, 10, 10) and gc.get_freeze_count() == 0


def test_cycles_are_still_collected_without_being_asked(default_collector):
    with paced_collector(young=1000):
        dead = cycle()
        keep = [[] for _ in range(3000)]  # net allocations past the young generation's size
        assert dead() is None
    del keep


def test_a_collector_turned_off_stays_off_and_what_others_froze_stays_frozen(default_collector):
    gc.disable()
    with paced_collector():
        assert not gc.isenabled() and gc.get_threshold() == (700, 10, 10)
    gc.enable()
    gc.freeze()
    frozen = gc.get_freeze_count()
    with paced_collector():
        assert gc.get_threshold()[0] == YOUNG
    assert gc.get_freeze_count() == frozen  # not thawed by the run


def test_a_run_paces_the_collector_and_gives_it_back(default_collector, monkeypatch):
    from wirelessfl.config import from_dict
    from wirelessfl.experiments.run import simulate
    from wirelessfl.sim.records.recorder import Recorder

    seen = []
    on_round = Recorder.on_round
    monkeypatch.setattr(Recorder, "on_round", lambda self, rec: (seen.append(gc.get_threshold()[0]), on_round(self, rec)))
    res = simulate(from_dict({"run": {"rounds": 20, "timing_only": True}, "scheduler": {"name": "uniform"},
                              "devices": {"count": 20}, "protocol": {"name": "fedbuff", "concurrency": 5, "buffer": 2}}),
                   None, progress=False)
    assert res.summary["rounds"] == 20 and seen == [YOUNG] * 20
    assert gc.get_threshold() == (700, 10, 10) and gc.get_freeze_count() == 0
