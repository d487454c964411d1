"""Capabilities: what only some parts do, asked with ``provides`` instead of flags."""
import inspect
import re
import warnings
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np
import pytest

from wirelessfl.access import (ACCESS, TDMA, AccessScheme, AddsUploadColumns, AddsUplinkNoise, DrawsBlockFading, Link,
                               ResolvesSlots, SetsTransmitPower, UploadsOnASubBand, block_fading, transmit_power,
                               upload_link, uplink_facts)
from wirelessfl.access.base import ListensWhileContending, TimesEachDevice, WritesRunFiles
from wirelessfl.capabilities import absent, lacks_of, members, provides
from wirelessfl.config import LinkConfig, from_dict
from wirelessfl.devices import ComputeEnergy, ConstantCompute, CpuCompute
from wirelessfl.experiments.run import simulate
from wirelessfl.fields import ConfigError
from wirelessfl.learning.algorithms import (Algorithm, AppliesStaleUpdates, BroadcastsMoreVectors, CostlierSteps,
                                            CountsWork, FedAvg, HearsTheUplink, PersonalisedByDefault, ServerRounds,
                                            Safari, UploadsMoreVectors, can_apply_stale_updates)
from wirelessfl.learning.fedshuffle import FedShuffle
from wirelessfl.learning.flower import FlowerStrategy
from wirelessfl.plugins import registry
from wirelessfl.scheduling import Dispatches, LyapunovScheduler, Scheduler, UniformScheduler, has_dispatch
from wirelessfl.sim.events.engine import EventEngine
from wirelessfl.sim.protocols import (PROTOCOLS, ArmsTimers, BatchesUpdates, DecidesStaleUpdates, FedBuff, HoldsUpdates,
                                      MixesDeviceModels, RoundProtocol, RunsRounds, Sync, event_driven,
                                      mixes_device_models, round_based, updates_per_aggregation)
from wirelessfl.sim.run.runner import Run
from wirelessfl.wireless import Channel, MovingDevices, moving

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "extending.md"


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


ALGORITHM_CAPABILITIES = (AppliesStaleUpdates, ServerRounds, HearsTheUplink, CountsWork, CostlierSteps,
                          UploadsMoreVectors, BroadcastsMoreVectors, PersonalisedByDefault)


def algorithm_capabilities(algorithm) -> set[str]:
    return {c.__name__ for c in ALGORITHM_CAPABILITIES if provides(algorithm, c)}


def test_the_algorithm_contract_is_its_core_and_declares_no_member_of_another_capability():
    assert members(Algorithm) == ("Options", "from_scenario", "round", "aggregation_weights", "check", "setup",
                                  "local_updates", "apply_updates", "state_dict", "runs_in_tiers", "load_state")
    assert not algorithm_capabilities(Algorithm)
    for capability in ALGORITHM_CAPABILITIES[1:]:  # AppliesStaleUpdates' members are the core's
        assert not hasattr(Algorithm, members(capability)[0]), capability.__name__


def test_the_built_in_algorithms_capabilities():
    """Built as a run builds them: the FedShuffle family sets its vectors on each instance (1 and 1,
    or more with momentum and MVR)."""
    built = {}
    for name in registry("algorithm").builtins:
        extra = {"momentum": 0.9} if name == "fedshuffle_mvr" else {}
        scenario = from_dict({"run": {"rounds": 2, "timing_only": True}, "learning": {"algorithm": name, **extra}})
        built[name] = scenario.part("algorithm").from_scenario(scenario, scenario.options("algorithm"))
    shuffled = {"AppliesStaleUpdates", "CountsWork", "UploadsMoreVectors", "BroadcastsMoreVectors"}
    personalised = {"AppliesStaleUpdates", "CostlierSteps", "PersonalisedByDefault"}
    assert {name: algorithm_capabilities(a) for name, a in built.items()} == {
        "fedavg": {"AppliesStaleUpdates"}, "safari": {"ServerRounds"},
        "scaffold": {"AppliesStaleUpdates", "UploadsMoreVectors", "BroadcastsMoreVectors"},
        **{name: shuffled for name in ("fedavg_rr", "fedavg_min", "fedavg_mean", "fednova", "fedshuffle",
                                       "fedshuffle_so", "fedshuffle_mvr")},
        **{name: personalised for name in ("perfedavg_fo", "perfedavg_hf", "perfedavg_exact")}}
    assert not algorithm_capabilities(FlowerStrategy)  # a Flower strategy's round is its own
    assert provides(FedShuffle, CountsWork) and not provides(FedAvg, CountsWork)


OLD_CONTRACT = '''
import numpy as np

from wirelessfl.learning.algorithms import FedAvg, ServerRound


class EveryThird(FedAvg):
    """Written when the contract declared plan_round, server_round, uplink and work_units: every
    third round the server trains alone, and says how many aggregations it heard the uplink of."""

    heard = 0

    def plan_round(self, round_idx, rng):
        return ServerRound(duration_s=0.25) if round_idx % 3 == 2 else None

    def server_round(self, trainer, round_idx):
        return {"heard": self.heard}

    def uplink(self, facts):
        self.heard += 1

    def work_units(self, devices, round_idx):
        return np.full(len(devices), 6)
'''


def test_an_algorithm_written_against_the_older_contract_has_the_capabilities_of_its_members(tmp_path,
                                                                                             one_torch_thread):
    """Its server rounds, the uplink it hears and its devices' work all reach the run."""
    (tmp_path / "everythird.py").write_text(OLD_CONTRACT)
    scenario = from_dict({"seed": 2, "run": {"rounds": 6, "eval_every_rounds": 3},
                          "devices": {"count": 6, "compute_s": 0.5, "step_time_s": 0.01},
                          "scheduler": {"name": "uniform", "m": 3},
                          "learning": {"algorithm": "everythird:EveryThird", "model": "logreg",
                                       "samples_per_device": 40, "eval_train_samples": 100, "local_steps": 3,
                                       "batch_size": 8, "lr": 0.05},
                          "plugin_path": [str(tmp_path)]})
    assert algorithm_capabilities(scenario.part("algorithm")) == {"AppliesStaleUpdates", "ServerRounds",
                                                                  "HearsTheUplink", "CountsWork"}
    rounds = simulate(scenario, tmp_path / "run", progress=False).rounds
    assert rounds.server_round.tolist() == [0, 0, 1, 0, 0, 1]
    server, client = rounds[rounds.server_round == 1], rounds[rounds.server_round == 0]
    assert server.server_s.tolist() == [0.25, 0.25] and server.heard.tolist() == [2, 4]
    assert np.allclose(client.comp_s, 0.5 + 0.01 * 6)  # its 6 steps, not learning.local_steps = 3


def test_an_algorithm_with_half_of_server_rounds_is_refused_in_one_line(tmp_path, capsys):
    """plan_round without server_round would never be called: the run is refused, naming both."""
    from wirelessfl.cli import main

    half = OLD_CONTRACT.replace("    def server_round(self, trainer, round_idx):\n        return {\"heard\": self.heard}\n", "")
    assert "def server_round" not in half
    (tmp_path / "halfrounds.py").write_text(half)
    (tmp_path / "s.toml").write_text(f"""seed = 1
plugin_path = ["{tmp_path}"]
[run]
rounds = 2
timing_only = true
[learning]
algorithm = "halfrounds:EveryThird"
""")
    assert main(["run", str(tmp_path / "s.toml"), "--out", str(tmp_path / "out"), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["wirelessfl: error: learning.algorithm = 'halfrounds:EveryThird': has plan_round of ServerRounds but not "
                   "server_round; write both (docs/extending.md) or neither"]
    assert lacks_of(FedAvg, ServerRounds) == [] and lacks_of(Safari, ServerRounds) == []


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
    ({"protocol": {"name": "sync"}}, (False, False, False, True, False)),
    ({"protocol": {"name": "fedasync", "concurrency": 4}, "scheduler": {"name": "uniform"}},
     (True, True, True, True, False)),
    ({"protocol": {"name": "fedbuff", "concurrency": 4, "buffer": 2}, "scheduler": {"name": "uniform"}},
     (True, True, False, True, False)),
    ({"protocol": {"name": "semi_sync", "late": "drop"}, "link": {"access": "aircomp"}}, (True, False, False, True, True)),
    ({"protocol": {"name": "semi_sync"}}, (True, True, False, True, False)),  # late uploads carried
    ({"scheduler": {"name": "power_of_choice"}, "learning": {"aggregation": "mean"}},
     (False, False, False, False, False)),
])
def test_a_scenarios_facts_are_what_its_parts_declare(tables, facts):
    scenario = from_dict({"run": {"rounds": 2, "timing_only": True}, **tables})
    f = scenario.facts
    assert (f.event_driven, f.stale_updates, f.mixes_device_models, f.inclusion_probabilities, f.over_the_air) == facts


def test_scaffold_refuses_a_protocol_that_mixes_device_models():
    with pytest.raises(ConfigError, match=r"^learning.algorithm = 'scaffold': protocol.name = 'fedasync' mixes"):
        from_dict({"run": {"rounds": 2, "timing_only": True}, "learning": {"algorithm": "scaffold"},
                   "protocol": {"name": "fedasync", "concurrency": 4}, "scheduler": {"name": "uniform"}})


CAPABILITIES = (RunsRounds, ArmsTimers, HoldsUpdates, BatchesUpdates, MixesDeviceModels, DecidesStaleUpdates)


def capabilities(protocol) -> set[str]:
    return {c.__name__ for c in CAPABILITIES if provides(protocol, c)}


def test_the_round_protocols_core_is_four_methods_besides_its_options_and_check():
    assert members(RoundProtocol) == ("Options", "from_scenario", "check", "start", "on_arrival", "on_lost")
    assert not capabilities(RoundProtocol)


def test_the_built_in_protocols_capabilities():
    """Built as a run builds them: semi_sync and fedbuff set per_aggregation on themselves."""
    built = {name: PROTOCOLS.load(name).from_scenario(scenario, scenario.options("protocol"))
             for name, scenario in ((name, from_dict({"run": {"rounds": 2, "timing_only": True},
                                                      "protocol": {"name": name, **extra}}))
                                    for name, extra in (("sync", {}), ("semi_sync", {"first_k": 2}),
                                                        ("fedbuff", {"concurrency": 4, "buffer": 2}),
                                                        ("fedasync", {"concurrency": 4})))}
    assert {name: capabilities(p) for name, p in built.items()} == {
        "sync": set(),
        "semi_sync": {"RunsRounds", "ArmsTimers", "HoldsUpdates", "BatchesUpdates", "DecidesStaleUpdates"},
        "fedbuff": {"HoldsUpdates", "BatchesUpdates"},
        "fedasync": {"MixesDeviceModels"}}
    assert [name for name, p in built.items() if event_driven(p)] == ["semi_sync", "fedbuff", "fedasync"]
    assert [name for name, p in built.items() if round_based(p)] == ["semi_sync"]
    assert {name: updates_per_aggregation(p) for name, p in built.items()} == {
        "sync": 1.0, "semi_sync": 2.0, "fedbuff": 2.0, "fedasync": 1.0}
    assert [name for name, p in built.items() if mixes_device_models(p)] == ["fedasync"]


class OldStyleRounds(RoundProtocol):
    """A plug-in written against the older contract: the flag it set is no longer read, the members
    it overrode are capabilities."""

    round_based = True

    @classmethod
    def from_scenario(cls, scenario, options):
        return cls()

    def start(self, server):
        server.begin_round()

    def on_arrival(self, server, update):
        pass

    def on_round(self, server, round_):
        pass

    def state_dict(self):
        return {}

    def load_state(self, state):
        pass


class Flagged(OldStyleRounds):
    """The older contract's default written out: it has the member, and mixes nothing."""

    keeps_start_model = False


def test_a_protocol_has_the_capabilities_of_the_members_it_writes():
    assert capabilities(OldStyleRounds) == {"RunsRounds", "HoldsUpdates"}
    assert round_based(OldStyleRounds()) and event_driven(OldStyleRounds) and not mixes_device_models(Flagged)
    assert provides(Flagged, MixesDeviceModels) and not mixes_device_models(Flagged())

    class ClosedForm(RoundProtocol):  # says nothing of arrivals: sync's closed form runs it
        @classmethod
        def from_scenario(cls, scenario, options):
            return cls()

    assert not event_driven(ClosedForm) and not event_driven(Sync()) and event_driven(FedBuff)


def test_an_old_style_round_protocol_is_round_based_in_the_scenario_and_the_run(tmp_path):
    """Its rounds are decisions (per-device arrays kept), it applies no stale updates."""
    (tmp_path / "oldrounds.py").write_text(inspect.getsource(OldStyleRounds).replace(
        "class OldStyleRounds(RoundProtocol)", "from wirelessfl.sim.protocols import RoundProtocol\n\n\n"
                                               "class OldStyleRounds(RoundProtocol)"))
    scenario = from_dict({"run": {"rounds": 2, "timing_only": True}, "protocol": {"name": "oldrounds:OldStyleRounds"},
                          "plugin_path": [str(tmp_path)]})
    assert scenario.facts.event_driven and not scenario.facts.stale_updates
    run = Run(scenario, tmp_path / "rounds", progress=False)
    assert run.recorder.arrays is not None and isinstance(run.engine, EventEngine)
    dispatching = from_dict({"run": {"rounds": 2, "timing_only": True}, "scheduler": {"name": "uniform"},
                             "protocol": {"name": "fedbuff", "concurrency": 4, "buffer": 2}})
    assert Run(dispatching, tmp_path / "slots", progress=False).recorder.arrays is None  # no round decisions


def test_the_guide_s_buffering_protocol_holds_and_batches_its_updates():
    code = next(code for lang, code in re.findall(r"```(\w+)\n(.*?)```", GUIDE.read_text(), re.S)
                if lang == "python" and "class EveryK" in code)
    space: dict = {}
    exec(compile(code, "everyk.py", "exec"), space)
    every_k = space["EveryK"](space["EveryKOptions"](k=3))
    assert capabilities(every_k) == {"HoldsUpdates", "BatchesUpdates"} and updates_per_aggregation(every_k) == 3.0


ACCESS_CAPABILITIES = (SetsTransmitPower, AddsUplinkNoise, UploadsOnASubBand, DrawsBlockFading, AddsUploadColumns,
                       ResolvesSlots, ListensWhileContending, TimesEachDevice, WritesRunFiles)


def access_capabilities(scheme) -> set[str]:
    return {c.__name__ for c in ACCESS_CAPABILITIES if provides(scheme, c)}


def test_the_access_scheme_contract_is_its_core_and_declares_no_member_of_a_capability():
    assert {name for name in dir(AccessScheme) if not name.startswith("_")} == {
        "Options", "concurrent", "solo_uploads", "over_the_air", "interferes", "contention",  # the class flags
        "from_scenario", "airtime_s", "schedule", "check", "event_uplink", "on_air_s", "send_packets",
        "report_waits", "round_airtime_s", "upload_s", "pricing", "rates_bps", "share_snrs", "round_info",
        "state_dict", "load_state"}
    assert not access_capabilities(AccessScheme)
    for capability in ACCESS_CAPABILITIES:
        assert not any(hasattr(AccessScheme, name) for name in members(capability)), capability.__name__


def test_the_built_in_access_schemes_capabilities():
    assert {name: access_capabilities(ACCESS.load(name)) for name in ACCESS.builtins} == {
        "tdma": set(), "tdma_slotted": set(), "fdma": set(),
        "dedicated": {"UploadsOnASubBand"}, "ofdma": {"DrawsBlockFading"},
        "aircomp": {"SetsTransmitPower", "AddsUplinkNoise"}, "aloha": {"ResolvesSlots"},
        "wifi": {"ListensWhileContending", "AddsUploadColumns"},
        "ns3_wifi": {"ListensWhileContending", "AddsUploadColumns"},
        "orbit": {"AddsUploadColumns", "TimesEachDevice", "WritesRunFiles"}}


def test_without_a_capability_the_access_helpers_give_the_contract_s_old_defaults():
    link = Link(LinkConfig())
    tdma, power = TDMA(link), np.array([1.0, 2.0])
    assert transmit_power(tdma, np.ones(2), power) is power  # the scheduler's power itself
    assert upload_link(tdma) is link and block_fading(tdma, 3) is None
    assert uplink_facts(tdma, np.arange(2), np.ones(2), power, np.ones(2, dtype=bool)).noise_var == 0.0


HALF_POWER = '''
import numpy as np

from wirelessfl.access import TDMA


class HalfPower(TDMA):
    """Written when the contract declared transmit_power: every device sends at half the scheduler's power."""

    def transmit_power(self, gain, power):
        return np.asarray(power) / 2
'''


@pytest.mark.parametrize("protocol", ["sync", "semi_sync"])
def test_an_access_scheme_written_against_the_older_contract_still_sets_its_devices_power(tmp_path, protocol):
    (tmp_path / "halfpower.py").write_text(HALF_POWER)
    base = {"seed": 3, "run": {"rounds": 3, "timing_only": True}, "devices": {"count": 6},
            "scheduler": {"name": "uniform", "m": 3}, "protocol": {"name": protocol}, "plugin_path": [str(tmp_path)]}
    half = from_dict({**base, "link": {"access": "halfpower:HalfPower"}})
    assert access_capabilities(half.part("access")) == {"SetsTransmitPower"}
    full = simulate(from_dict(base), tmp_path / "full", progress=False).updates
    halved = simulate(half, tmp_path / "half", progress=False).updates
    assert len(full) == len(halved) > 0
    assert np.allclose(halved.power, full.power / 2)
