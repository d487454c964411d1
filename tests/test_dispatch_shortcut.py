"""A dispatch rule's shortcut for one freed slot (DispatchesOne): the same device, power and random
draws as its ``dispatch``, and taken only where it stands for the rule the scheduler has."""
import numpy as np
import pytest

from wirelessfl.capabilities import provides
from wirelessfl.scheduling import Dispatch, DispatchesOne, DispatchState, UniformScheduler
from wirelessfl.sim.events.dispatcher import shortcut


def _state(rng, n, busy, available, slots, per_aggregation):
    return DispatchState(time_s=0.0, version=3, slots=slots, busy=busy, num_busy=int(busy.sum()),
                         available=available, last_applied=np.zeros(n, dtype=np.int64), mean_gains=np.ones(n),
                         model_bits=1e5, bandwidth_hz=1e6, noise_power=1.0, per_aggregation=per_aggregation,
                         interval_s=1.0, rng=rng)


def test_uniform_dispatch_one_agrees_with_dispatch_and_answers_none_without_drawing():
    cases = np.random.default_rng(11)
    answered = declined = 0
    for trial in range(300):
        n = int(cases.integers(1, 40))
        busy = cases.random(n) < cases.choice([0.0, 0.3, 0.9])
        available = None if cases.random() < 0.5 else cases.random(n) < 0.8
        slots, per_aggregation = int(cases.integers(1, 4)), float(cases.choice([1, 3, 10]))
        sched = UniformScheduler(n, 1, cases.uniform(0.5, 2, n), cases.uniform(1, 40, n))
        seed = int(cases.integers(2 ** 32))
        one_rng, rng = np.random.default_rng(seed), np.random.default_rng(seed)
        one = sched.dispatch_one(_state(one_rng, n, busy, available, slots, per_aggregation))
        full = sched.dispatch(_state(rng, n, busy, available, slots, per_aggregation))
        if one is None:  # nothing drawn: dispatch then starts the same devices as it would have
            declined += 1
            assert one_rng.bit_generator.state == np.random.default_rng(seed).bit_generator.state, trial
            continue
        answered += 1
        device, power, info = one
        assert full.devices.tolist() == [device], trial
        assert full.power.tolist() == [power], trial  # the same float, not a close one
        assert info == full.info
        assert one_rng.bit_generator.state == rng.bit_generator.state, trial  # the same draws
        idle = ~busy if available is None else ~busy & available
        assert idle[device]
    assert answered > 50 and declined > 50  # both branches seen


class Override(UniformScheduler):
    """A rule of its own: the lowest idle device."""

    def dispatch(self, state):
        device = int(np.flatnonzero(~state.busy)[0])
        return Dispatch(np.array([device]), self.p_max[[device]])


class OverrideBoth(Override):
    def dispatch_one(self, state):
        return int(np.flatnonzero(~state.busy)[0]), float(self.p_max[0]), {}


@pytest.mark.parametrize("cls, taken", [(UniformScheduler, True), (Override, False), (OverrideBoth, True)])
def test_the_engine_takes_the_shortcut_only_from_the_class_whose_rule_it_is(cls, taken):
    sched = cls(5, 1, np.ones(5), np.full(5, 10.0))
    assert provides(sched, DispatchesOne)
    found = shortcut(sched)
    assert (found is not None) == taken
    if taken:
        assert found.__func__ is type(sched).dispatch_one


class Counting(UniformScheduler):
    """Uniform dispatch whose info is one dict, changed in place: the dispatches so far, and an
    array (not a column) every other time."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.info = {"method": "counting", "dispatches": 0}

    def dispatch(self, state):
        self.info["dispatches"] += 1
        if self.info["dispatches"] % 2:
            self.info["spread"] = np.arange(3.0)
        else:
            self.info.pop("spread", None)
        choice = super().dispatch(state)
        return Dispatch(choice.devices, choice.power, info=self.info)


def test_a_dispatch_rule_s_info_changed_in_place_is_recorded_as_it_was_at_each_aggregation(tmp_path, monkeypatch):
    from wirelessfl.config import from_dict
    from wirelessfl.experiments.run import simulate

    scenario = from_dict({"seed": 2, "run": {"rounds": 60, "timing_only": True},
                          "devices": {"count": 12, "compute": "shifted_exponential"},
                          "protocol": {"name": "fedbuff", "concurrency": 4, "buffer": 1},
                          "scheduler": {"name": "uniform"}})
    sched = Counting.from_scenario(scenario, scenario.scheduler.options)
    assert shortcut(sched) is None  # its own rule: asked every time
    monkeypatch.setattr(UniformScheduler, "from_scenario", classmethod(lambda cls, *args: sched))
    res = simulate(scenario, tmp_path / "run", progress=False)
    # a row carries the latest dispatch's info: one call started the first four, then one per aggregation
    assert res.rounds["dispatches"].tolist() == list(range(1, 61))


class Garbled(UniformScheduler):
    def dispatch_one(self, state):
        return ("zero", 1.0, {})


class NoInfo(UniformScheduler):
    def dispatch_one(self, state):
        return (0, 1.0, None)


class Busy(UniformScheduler):
    """One freed slot: a device still in flight (the first of them)."""

    def dispatch_one(self, state):
        return None if state.slots != 1 else (int(np.flatnonzero(state.busy)[0]), 1.0, {})


class Outside(UniformScheduler):
    def dispatch_one(self, state):
        return state.busy.size, 1.0, {}


@pytest.mark.parametrize("cls, says", [(Garbled, "returned ('zero', 1.0, {}): (device, power, info)"),
                                       (NoInfo, "returned (0, 1.0, None): (device, power, info)"),
                                       (Busy, "returned ["), (Outside, "returned [12]: at most")])
def test_a_shortcut_s_wrong_answer_is_one_line_naming_it(tmp_path, monkeypatch, cls, says):
    from wirelessfl.config import from_dict
    from wirelessfl.experiments.run import simulate

    scenario = from_dict({"seed": 2, "run": {"rounds": 20, "timing_only": True},
                          "devices": {"count": 12, "compute": "shifted_exponential"},
                          "protocol": {"name": "fedbuff", "concurrency": 3, "buffer": 1},
                          "scheduler": {"name": "uniform"}})
    sched = cls.from_scenario(scenario, scenario.scheduler.options)
    monkeypatch.setattr(UniformScheduler, "from_scenario", classmethod(lambda klass, *args: sched))
    with pytest.raises(ValueError) as failure:
        simulate(scenario, tmp_path / "run", progress=False)
    error = str(failure.value)
    assert error.startswith(f"scheduler.name: {cls.__name__}.dispatch_one {says}"), error
    assert "\n" not in error
    assert cls in (Garbled, NoInfo) or "distinct idle, available devices of 0 to 11" in error
