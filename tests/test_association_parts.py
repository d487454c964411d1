"""network.association as a part: a rule of one's own (docs/networks.md's range expansion: strongest
mean gain, shadowing included, with the other sites' gains raised by a bias) chosen by import path with its options,
checked by hand against devices.csv's recorded gains to every site; those gains against the path
loss from the recorded positions; handover asking the same rule, with the hysteresis, replayed by
hand; one-line errors for an answer outside the contract."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from fakes import cli

from wirelessfl import rng as rngs
from wirelessfl.config import from_dict
from wirelessfl.experiments.run import simulate
from wirelessfl.mobility import Mobility
from wirelessfl.network import build_sites, place_devices

DOCS = Path(__file__).resolve().parents[1] / "docs" / "networks.md"


def docs_rule() -> str:
    """docs/networks.md's RangeExpansion, as a user copies it."""
    blocks = re.findall(r"```(\w+)\n(.*?)```", DOCS.read_text(), re.S)
    return next(code for lang, code in blocks if lang == "python" and "class RangeExpansion" in code)


OUTSIDE = '''

class Outside:
    """Answers a cell that does not exist."""

    @classmethod
    def from_scenario(cls, scenario, options):
        return cls()

    def associate(self, positions_m, sites_m, mean_gain):
        return np.full(len(positions_m), len(sites_m))
'''


def cells(folder: Path, association: str, **extra) -> dict:
    (folder / "rules.py").write_text(docs_rule() + OUTSIDE)
    data = {"seed": 4, "plugin_path": [str(folder)], "run": {"rounds": 3, "timing_only": True},
            "devices": {"count": 40, "compute": "constant"},
            "channel": {"path_loss": True, "reference_gain_db": -30.0, "shadowing_db": 8.0},
            "network": {"cells": 3, "reuse": 3, "inter_site_m": 200.0, "placement": "uniform",
                        "association": association},
            "link": {"model_bits": 1e5, "noise_power": 1e-12, "bandwidth_hz": 1e6},
            "scheduler": {"name": "uniform", "m": 6}}
    for key, value in extra.items():
        data.setdefault(key, {}).update(value)
    return data


def test_a_range_expansion_rule_by_hand_against_the_recorded_gains(tmp_path):
    data = cells(tmp_path, "rules:RangeExpansion", network={"association_options": {"bias_db": 10.0}})
    simulate(from_dict(data), tmp_path / "run", progress=False)
    devices = pd.read_csv(tmp_path / "run" / "devices.csv")
    gains = devices[["gain_site_0", "gain_site_1", "gain_site_2"]].to_numpy()
    by_hand = np.argmax(gains * np.array([1.0, 10.0, 10.0]), axis=1)
    assert devices["cell"].tolist() == by_hand.tolist()
    assert (by_hand != np.argmax(gains, axis=1)).sum() >= 2  # the bias moved some devices off their strongest site
    # 8 dB shadowing: the gains are not the distances' order (some strongest sites are not the nearest)
    sites = np.array([c["site_m"] for c in json.loads((tmp_path / "run" / "summary.json").read_text())["cells"]])
    d = np.hypot(devices["x_m"].to_numpy()[:, None] - sites[None, :, 0],
                 devices["y_m"].to_numpy()[:, None] - sites[None, :, 1])
    assert (np.argmax(gains, axis=1) != np.argmin(d, axis=1)).any()


def test_the_recorded_gains_are_the_path_loss_from_the_recorded_positions(tmp_path):
    data = cells(tmp_path, "strongest", channel={"shadowing_db": 0.0})
    simulate(from_dict(data), tmp_path / "run", progress=False)
    devices = pd.read_csv(tmp_path / "run" / "devices.csv")
    sites = np.array([c["site_m"] for c in json.loads((tmp_path / "run" / "summary.json").read_text())["cells"]])
    d = np.hypot(devices["x_m"].to_numpy()[:, None] - sites[None, :, 0],
                 devices["y_m"].to_numpy()[:, None] - sites[None, :, 1])
    expected = 1e-3 * np.maximum(d, 1.0) ** -3.0  # -30 dB at 1 m, exponent 3
    recorded = devices[[f"gain_site_{c}" for c in range(3)]].to_numpy()
    np.testing.assert_allclose(recorded, expected, rtol=1e-9)
    assert devices["cell"].tolist() == np.argmin(d, axis=1).tolist()  # no shadowing: strongest is nearest


def test_one_cell_runs_record_no_site_gains(tmp_path):
    data = cells(tmp_path, "nearest", network={"cells": 1, "reuse": 1})
    simulate(from_dict(data), tmp_path / "run", progress=False)
    assert not any(c.startswith("gain_site_") for c in pd.read_csv(tmp_path / "run" / "devices.csv").columns)


def test_handover_asks_the_same_rule_with_the_hysteresis_replayed_by_hand(tmp_path):
    """Moving devices, no shadowing: at each round's start the rule's site for a device (range
    expansion, 6 dB) replaces its serving site when its mean gain beats the serving site's by 3 dB."""
    data = cells(tmp_path, "rules:RangeExpansion", channel={"shadowing_db": 0.0},
                 network={"association_options": {"bias_db": 6.0}, "handover_hysteresis_db": 3.0,
                          "placement": "per_cell"},
                 devices={"count": 21, "mobility": "random_waypoint", "speed_mps": 30.0,
                          "compute": "shifted_exponential", "delay_mean_s": 0.2},
                 run={"rounds": 30})
    res = simulate(from_dict(data), tmp_path / "run", progress=False)
    s = from_dict(data)
    sites = build_sites(s.network)
    start = place_devices(21, sites, "per_cell", rngs.stream(s.seed, "cell"))
    radius = float(np.hypot(*sites.positions_m.T).max()) + sites.radius_m
    mobility = Mobility(start, radius, 30.0, "random_waypoint", s.seed)
    bias, ratio = np.array([1.0, 10 ** 0.6, 10 ** 0.6]), 10 ** 0.3

    def gains_at(positions):
        d = np.hypot(*(positions[:, None, :] - sites.positions_m[None]).transpose(2, 0, 1))
        return 1e-3 * np.maximum(d, 1.0) ** -3.0

    serving = np.argmax(gains_at(start) * bias, axis=1)
    expected = []
    for t in res.rounds["t_start"].tolist()[1:]:
        g = gains_at(mobility.positions(t))
        pick = np.argmax(g * bias, axis=1)
        for n in range(21):
            if pick[n] != serving[n] and g[n, pick[n]] > ratio * g[n, serving[n]]:
                expected.append((round(t, 9), n, int(serving[n]), int(pick[n])))
                serving[n] = pick[n]
    got = pd.read_csv(tmp_path / "run" / "handovers.csv")
    assert len(expected) > 5
    assert [(round(t, 9), n, a, b) for t, n, a, b in got[["time_s", "device", "from_cell", "to_cell"]]
            .itertuples(index=False)] == expected
    assert res.devices["cell"].tolist() == serving.tolist()


def test_an_answer_outside_the_cells_is_refused_in_one_line(tmp_path):
    from wirelessfl.plugins import PartError

    with pytest.raises(PartError, match=r"^Outside\.associate: device 0 got cell 3; cells are 0\.\.2$"):
        simulate(from_dict(cells(tmp_path, "rules:Outside")), tmp_path / "run", progress=False)


def test_an_unknown_association_is_refused_in_one_line_from_the_cli(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text('[run]\nrounds = 1\ntiming_only = true\n[network]\ncells = 3\nassociation = "farthest"\n')
    out = cli("run", path, "--out", tmp_path / "o", "--no-progress")
    assert out.returncode == 2
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("wirelessfl: error: network.association = 'farthest': unknown association; "
                           "choose from 'nearest', 'strongest'")
    assert "Traceback" not in out.stderr
