"""Capabilities: what only some parts do, asked with ``provides`` instead of flags."""
import warnings
from typing import Protocol, runtime_checkable

import numpy as np
import pytest

from wirelessfl.capabilities import absent, members, provides
from wirelessfl.config import from_dict
from wirelessfl.devices import ComputeEnergy, ConstantCompute, CpuCompute
from wirelessfl.fields import ConfigError
from wirelessfl.learning.algorithms import (Algorithm, AppliesStaleUpdates, CountsWork, FedAvg, Safari, ServerRounds,
                                            can_apply_stale_updates)
from wirelessfl.learning.fedshuffle import FedShuffle
from wirelessfl.scheduling import Dispatches, LyapunovScheduler, Scheduler, UniformScheduler, has_dispatch
from wirelessfl.wireless import Channel, MovingDevices, moving


@runtime_checkable
class Flies(Protocol):
    def fly(self) -> str: ...


class Base:
    @absent
    def fly(self) -> str:
        raise NotImplementedError


class Bird(Base):
    def fly(self) -> str:
        return "flap"


class Sparrow(Bird):  # inherits a real fly
    pass


@runtime_checkable
class Loud(Protocol):
    """A property, not members: only a part that names it has it."""


class Parrot(Bird, Loud):
    pass


def test_a_contract_stub_is_not_a_capability_an_inherited_implementation_is():
    assert isinstance(Base(), Flies)  # what Python's own check sees: the member is there
    assert not provides(Base(), Flies) and not provides(Base, Flies)  # but it is the contract's stub
    assert provides(Bird, Flies) and provides(Sparrow(), Flies)
    assert not provides(object(), Flies)
    assert members(Flies) == ("fly",) and members(Loud) == ()
    assert provides(Parrot, Loud) and not provides(Bird, Loud)


def test_an_attribute_a_part_sets_on_itself_counts():
    @runtime_checkable
    class Named(Protocol):
        name: str

    class Part:
        def __init__(self):
            self.name = "x"

    assert provides(Part(), Named) and not provides(Part, Named)


def test_the_built_in_algorithms_capabilities():
    assert provides(FedAvg, AppliesStaleUpdates) and not provides(FedAvg, ServerRounds)
    assert provides(Safari, ServerRounds) and not provides(Safari, AppliesStaleUpdates)
    assert provides(FedShuffle, CountsWork) and not provides(FedAvg, CountsWork)
    assert not provides(Algorithm, AppliesStaleUpdates)


class OwnAsync(Algorithm):
    """A plug-in that applies stale updates without any flag."""

    def round(self, trainer, selected, q, num_devices, round_idx):
        return {}

    def local_updates(self, trainer, devices, round_idx):
        return None

    def apply_updates(self, trainer, updates):
        return {}


class SaysNo(FedAvg):
    asynchronous = False  # the deprecated flag: honoured, with a warning


def test_an_algorithm_applies_stale_updates_by_implementing_them_and_the_old_flag_still_says_no():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert can_apply_stale_updates(OwnAsync) and can_apply_stale_updates(FedAvg())
    with pytest.warns(DeprecationWarning, match=r"SaysNo.asynchronous is deprecated"):
        assert not can_apply_stale_updates(SaysNo)


def test_an_algorithm_without_the_capability_is_refused_by_the_event_protocols():
    base = {"run": {"rounds": 3, "timing_only": True}, "scheduler": {"name": "uniform"},
            "protocol": {"name": "fedbuff", "concurrency": 4, "buffer": 2}}
    from_dict({**base, "learning": {"algorithm": "fedavg"}})
    with pytest.raises(ConfigError, match=r"^learning.algorithm = 'safari': cannot apply updates computed from an "
                                          r"older model, which protocol.name = 'fedbuff' does"):
        from_dict({**base, "learning": {"algorithm": "safari"}})


def test_a_scheduler_dispatches_when_it_has_its_own_rule():
    assert has_dispatch(UniformScheduler) and has_dispatch(LyapunovScheduler) and not has_dispatch(Scheduler)

    class RoundsOnly(Scheduler):
        def decide(self, state):
            return None

    class Greedy(RoundsOnly):
        def dispatch(self, state):
            return None

    assert not provides(RoundsOnly, Dispatches) and provides(Greedy(), Dispatches)


def test_a_computation_model_has_an_energy_when_it_says_what_a_computation_costs():
    assert provides(CpuCompute, ComputeEnergy) and not provides(ConstantCompute, ComputeEnergy)


def test_a_channel_moves_its_devices_when_it_has_a_mobility():
    class Still(Channel):
        def draw(self, rng):
            return np.ones(3)

    class Roadside(Still):
        def __init__(self, mobility):
            self.mobility, self.path_loss = mobility, object()

    assert not moving(Still()) and not provides(Still(), MovingDevices)
    assert moving(Roadside(mobility=object())) and not moving(Roadside(mobility=None))


@pytest.mark.parametrize("tables, facts", [
    ({"protocol": {"name": "sync"}}, (False, False, True, False)),
    ({"protocol": {"name": "fedasync", "concurrency": 4}, "scheduler": {"name": "uniform"}}, (True, True, True, False)),
    ({"protocol": {"name": "fedbuff", "concurrency": 4, "buffer": 2}, "scheduler": {"name": "uniform"}},
     (True, False, True, False)),
    ({"protocol": {"name": "semi_sync", "late": "drop"}, "link": {"access": "aircomp"}}, (False, False, True, True)),
    ({"scheduler": {"name": "power_of_choice"}, "learning": {"aggregation": "mean"}}, (False, False, False, False)),
])
def test_a_scenarios_facts_are_what_its_parts_declare(tables, facts):
    scenario = from_dict({"run": {"rounds": 2, "timing_only": True}, **tables})
    f = scenario.facts
    assert (f.stale_updates, f.mixes_device_models, f.inclusion_probabilities, f.over_the_air) == facts


def test_scaffold_refuses_a_protocol_that_mixes_device_models():
    with pytest.raises(ConfigError, match=r"^learning.algorithm = 'scaffold': protocol.name = 'fedasync' mixes"):
        from_dict({"run": {"rounds": 2, "timing_only": True}, "learning": {"algorithm": "scaffold"},
                   "protocol": {"name": "fedasync", "concurrency": 4}, "scheduler": {"name": "uniform"}})
