"""devices.harvest as a part: a law of one's own (docs/energy.md's ramp: joules growing with the
step's time, by import path with its options) under sync and under fedbuff, its steps' times checked (the first at t = 0;
then each round's start under sync, every availability_period_s under fedbuff) and each device's
harvested_j against the sum by hand; a law with draws and a state of its own resumes exactly; one-line
errors for an answer outside the contract."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from wirelessfl.config import ConfigError, from_dict
from wirelessfl.experiments.run import simulate
from wirelessfl.plugins import PartError

DOCS = Path(__file__).resolve().parents[1] / "docs" / "energy.md"


def docs_law() -> str:
    """docs/energy.md's Ramp, as a user copies it."""
    blocks = re.findall(r"```(\w+)\n(.*?)```", DOCS.read_text(), re.S)
    return next(code for lang, code in blocks if lang == "python" and "class Ramp" in code)


LOGGED = '''

STEPS = []


class LoggedRamp(Ramp):
    """The docs' ramp, every step it is asked for written down."""

    def harvest(self, step, time_s, rng):
        STEPS.append((step, time_s))
        return super().harvest(step, time_s, rng)


class Negative:
    @classmethod
    def from_scenario(cls, scenario, options):
        return cls()

    def harvest(self, step, time_s, rng):
        return np.full(6, -1.0)
'''


def battery_run(folder: Path, protocol: dict, harvest: str = "ramp:LoggedRamp", **run) -> dict:
    (folder / "ramp.py").write_text(docs_law() + LOGGED)
    return {"seed": 1, "plugin_path": [str(folder)], "run": {"timing_only": True, **run},
            "devices": {"count": 6, "compute": "shifted_exponential", "delay_mean_s": 0.3,
                        "availability": "battery", "battery_capacity_j": 1e6, "battery_initial_j": 100.0,
                        "availability_period_s": 0.5, "harvest": harvest,
                        "harvest_options": {"base_j": 0.5, "per_s_j": 0.25}},
            "link": {"model_bits": 1e5, "bandwidth_hz": 1e6},
            "protocol": protocol, "scheduler": {"name": "uniform", "m": 3}}


def steps_of_the_run(folder: Path, data: dict):
    sys.modules.pop("ramp", None)
    res = simulate(from_dict(data), folder / "run", progress=False)
    return res, list(sys.modules["ramp"].STEPS)


def harvested_by_hand(times) -> np.ndarray:
    return np.arange(1, 7) * sum(0.5 + 0.25 * t for t in times)


def test_under_sync_a_step_at_every_round_s_start_the_first_at_t_0(tmp_path):
    res, steps = steps_of_the_run(tmp_path, battery_run(tmp_path, {"name": "sync"}, rounds=8))
    starts = res.rounds["t_start"].tolist()
    assert starts[0] == 0.0 and len(set(starts)) == 8
    assert steps == [(k, t) for k, t in enumerate(starts)]
    np.testing.assert_allclose(res.devices["harvested_j"], harvested_by_hand(starts), rtol=1e-12)


def test_under_fedbuff_a_step_every_availability_period_the_first_at_t_0(tmp_path):
    res, steps = steps_of_the_run(tmp_path, battery_run(tmp_path, {"name": "fedbuff", "concurrency": 3, "buffer": 2},
                                                        time_budget_s=4.2))
    assert [k for k, _ in steps] == list(range(len(steps)))
    assert [t for _, t in steps] == [0.5 * k for k in range(9)]  # 0, 0.5, ..., 4.0: the budget ends at 4.2
    np.testing.assert_allclose(res.devices["harvested_j"], harvested_by_hand([0.5 * k for k in range(9)]),
                               rtol=1e-12)


def test_a_law_giving_negative_joules_stops_in_one_line_naming_it(tmp_path):
    with pytest.raises(PartError, match=r"^Negative\.harvest: step 0: joules must be finite and >= 0; device 0 got "
                                        r"-1\.0$"):
        simulate(from_dict(battery_run(tmp_path, {"name": "sync"}, harvest="ramp:Negative", rounds=2)),
                 tmp_path / "run", progress=False)


def test_an_unknown_option_of_the_law_is_refused_in_one_line(tmp_path):
    data = battery_run(tmp_path, {"name": "sync"}, rounds=2)
    data["devices"]["harvest_options"]["sun"] = 1
    with pytest.raises(ConfigError, match=r"^devices\.harvest_options\.sun: ") as err:
        from_dict(data)
    assert "\n" not in str(err.value)


def test_a_law_of_one_s_own_without_batteries_is_refused_in_one_line(tmp_path):
    data = battery_run(tmp_path, {"name": "sync"}, rounds=2)
    data["devices"]["availability"] = "chain"
    with pytest.raises(ConfigError, match=r"^devices\.harvest = 'ramp:LoggedRamp': energy arrives only at batteries; "
                                          r"set devices\.availability = 'battery'$"):
        from_dict(data)


STATEFUL = '''

class Gusts(Ramp):
    """The docs' ramp, plus a gust of 3 J to each device with probability 0.3 (from the stream handed
    in), and more after every gust: it remembers how many it gave (its state)."""

    def __init__(self, *args):
        super().__init__(*args)
        self.gusts = 0

    def harvest(self, step, time_s, rng):
        gust = rng.random(len(self.weights)) < 0.3
        self.gusts += int(gust.sum())
        return super().harvest(step, time_s, rng) + gust * (3.0 + 0.01 * self.gusts)

    def state_dict(self):
        return {"gusts": self.gusts}

    def load_state(self, state):
        self.gusts = int(state["gusts"])
'''


def test_a_law_with_draws_and_state_resumes_to_the_same_records(tmp_path, interrupted_and_resumed):
    import pandas as pd

    data = battery_run(tmp_path, {"name": "fedbuff", "concurrency": 3, "buffer": 2}, harvest="ramp:Gusts",
                       time_budget_s=12.0, checkpoint_every=3)
    (tmp_path / "ramp.py").write_text(docs_law() + STATEFUL)
    sys.modules.pop("ramp", None)
    data["devices"].update(battery_capacity_j=40.0, battery_initial_j=10.0)
    full, resumed = interrupted_and_resumed(from_dict(data), after=7)
    pd.testing.assert_frame_equal(full.rounds, resumed.rounds)
    pd.testing.assert_frame_equal(full.updates, resumed.updates)
    pd.testing.assert_frame_equal(full.devices, resumed.devices)
    assert (full.devices["harvested_j"] > 0).all()
