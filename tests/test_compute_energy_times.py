"""A computation model's energy_j is given the times just drawn (``times_s``): a model of one's own
whose energy is P_comp x its random time, checked against updates.csv's own times under sync and
fedbuff (also with a step time added by the work scaling, which the base's energy must not see);
a model written for the older energy_j(devices, round_idx) still runs."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from wirelessfl.config import from_dict
from wirelessfl.experiments.run import simulate

MODELS = '''
import numpy as np

from wirelessfl.devices import ComputeModel


class Busy(ComputeModel):
    """0.2 s plus Exp(0.3 s), drawing 2 W while it computes."""

    @classmethod
    def from_scenario(cls, scenario, options):
        return cls()

    def compute_times(self, devices, rng, round_idx=0):
        return 0.2 + rng.exponential(0.3, len(devices))

    def energy_j(self, devices, round_idx=0, times_s=None):
        return 2.0 * np.asarray(times_s, dtype=float)


class OldStyle(ComputeModel):
    """The older contract: energy_j(devices, round_idx), 1.5 J a round."""

    @classmethod
    def from_scenario(cls, scenario, options):
        return cls()

    def compute_times(self, devices, rng, round_idx=0):
        return 0.2 + rng.exponential(0.3, len(devices))

    def energy_j(self, devices, round_idx=0):
        return np.full(len(devices), 1.5)
'''


def run(folder: Path, compute: str, protocol: dict, step_time_s: float = 0.0):
    (folder / "busy.py").write_text(MODELS)
    run_table = {"timing_only": True, **({"rounds": 6} if protocol["name"] == "sync" else {"time_budget_s": 5.0})}
    return simulate(from_dict({
        "seed": 7, "plugin_path": [str(folder)], "run": run_table,
        "devices": {"count": 8, "compute": compute, "step_time_s": step_time_s},
        "link": {"model_bits": 1e5, "bandwidth_hz": 1e6},
        "protocol": protocol, "scheduler": {"name": "uniform", "m": 3}}), folder / "run", progress=False)


PROTOCOLS = [{"name": "sync"}, {"name": "fedbuff", "concurrency": 3, "buffer": 2}]


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=lambda p: p["name"])
def test_energy_follows_the_random_time_just_drawn(tmp_path, protocol):
    up = run(tmp_path, "busy:Busy", protocol).updates
    done = up[up["compute_end_s"].notna() & (up["outcome"] != "in_flight")]
    computed = done["compute_end_s"] - done["dispatch_s"]  # no downlink time: computing from the dispatch
    assert len(done) >= 10 and computed.std() > 0.05  # random times, so a fixed energy would fail
    np.testing.assert_allclose(done["compute_energy_j"], 2.0 * computed, rtol=1e-9)


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=lambda p: p["name"])
def test_the_work_scaling_s_step_time_is_not_in_the_base_s_energy(tmp_path, protocol):
    # FedAvg's 10 local steps (the default) at 0.05 s each: time = base + 0.5, energy = 2 W x base
    up = run(tmp_path, "busy:Busy", protocol, step_time_s=0.05).updates
    done = up[up["compute_end_s"].notna() & (up["outcome"] != "in_flight")]
    computed = done["compute_end_s"] - done["dispatch_s"]
    assert len(done) >= 10
    np.testing.assert_allclose(done["compute_energy_j"], 2.0 * (computed - 0.5), rtol=1e-9)


def test_a_model_written_for_the_older_contract_still_runs(tmp_path):
    up = run(tmp_path, "busy:OldStyle", {"name": "sync"}).updates
    assert len(up) >= 6 and (up["compute_energy_j"] == 1.5).all()
