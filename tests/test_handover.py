"""Handover of moving devices between cells (network.handover_*): the hysteresis rule replayed from
the mobility model by hand against handovers.csv, what becomes of an upload at its device's handover
(restarted, lost, completed), refusals in one line, and an exact resume."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from wirelessfl import rng as rngs
from wirelessfl.config import from_dict
from wirelessfl.experiments.run import simulate
from wirelessfl.fields import ConfigError
from wirelessfl.mobility import Mobility
from wirelessfl.network import build_sites, place_devices


def scenario(protocol: str = "sync", mode: str = "restart", rounds: int = 30, **extra) -> dict:
    options = {"fedbuff": {"concurrency": 8, "buffer": 2}, "semi_sync": {}, "sync": {}}[protocol]
    data = {"seed": 2, "run": {"rounds": rounds, "timing_only": True},
            "devices": {"count": 21, "compute": "shifted_exponential", "delay_mean_s": 0.2,
                        "mobility": "random_waypoint", "speed_mps": 30.0},
            "channel": {"path_loss": True, "reference_gain_db": -30.0},
            "network": {"cells": 3, "reuse": 3, "inter_site_m": 200.0, "handover_upload": mode,
                        "handover_hysteresis_db": 3.0},
            "link": {"model_bits": 1e6, "noise_power": 1e-12, "bandwidth_hz": 1e5},
            "protocol": {"name": protocol, **options}, "scheduler": {"name": "uniform", "m": 6}}
    for key, value in extra.items():
        data.setdefault(key, {}).update(value)
    return data


def test_handovers_follow_the_hysteresis_rule_replayed_by_hand(tmp_path):
    """Under sync the devices are where the mobility model puts them at each round's start; a device
    hands over when another site is more than 3 dB stronger, i.e. (path loss exponent 3) when its
    site is more than 10^(3 / 30) times farther than the nearest."""
    data = scenario()
    res = simulate(from_dict(data), tmp_path / "run", progress=False)
    s = from_dict(data)
    sites = build_sites(s.network)
    start = place_devices(21, sites, "per_cell", rngs.stream(s.seed, "cell"))
    radius = float(np.hypot(*sites.positions_m.T).max()) + sites.radius_m
    mobility = Mobility(start, radius, 30.0, "random_waypoint", s.seed)
    ratio = 10 ** (3.0 / 30.0)
    serving = np.argmin(np.hypot(*(start[:, None, :] - sites.positions_m[None]).transpose(2, 0, 1)), axis=1)
    expected = []
    for t in res.rounds["t_start"].tolist()[1:]:  # round 0 starts where the devices were placed
        d = np.hypot(*(mobility.positions(t)[:, None, :] - sites.positions_m[None]).transpose(2, 0, 1))
        best = d.argmin(axis=1)
        for n in range(21):
            if best[n] != serving[n] and d[n, serving[n]] > ratio * d[n, best[n]]:
                expected.append((t, n, int(serving[n]), int(best[n]), *mobility.positions(t)[n]))
                serving[n] = best[n]
    got = pd.read_csv(tmp_path / "run" / "handovers.csv")
    assert len(expected) > 10 and res.summary["handovers"] == len(got)
    assert [(round(t, 9), n, a, b) for t, n, a, b, _, _ in got.itertuples(index=False)] == \
        [(round(t, 9), n, a, b) for t, n, a, b, _, _ in expected]
    assert got[["x_m", "y_m"]].to_numpy() == pytest.approx(np.array([e[4:] for e in expected]), rel=1e-5)
    assert res.devices["cell"].tolist() == serving.tolist()  # where they ended


def test_an_upload_at_its_devices_handover_is_lost_or_restarted_or_completed(tmp_path):
    runs = {mode: simulate(from_dict(scenario("fedbuff", mode)), tmp_path / mode, progress=False)
            for mode in ("lose", "restart", "complete")}
    lost = runs["lose"].updates
    lost = lost[lost["outcome"] == "handover"]
    moves = pd.read_csv(tmp_path / "lose" / "handovers.csv")
    assert len(lost) > 0 and runs["lose"].summary["outcomes"]["handover"] == len(lost)
    for row in lost.itertuples():  # lost when its device handed over
        assert ((moves["device"] == row.device) & (np.isclose(moves["time_s"], row.lost_s))).any()
    for mode in ("restart", "complete"):
        assert runs[mode].summary["outcomes"]["handover"] == 0
    # a restarted upload also paid for the transmission the handover cut
    up = runs["restart"].updates.dropna(subset=["tx_end_s"])
    assert (up["energy_j"] >= up["power"] * up["airtime_s"] * (1 - 1e-9)).all()
    assert (up["energy_j"] > up["power"] * up["airtime_s"] * 1.001).any()
    done = runs["complete"].updates.dropna(subset=["tx_end_s"])
    assert done["energy_j"].to_numpy() == pytest.approx((done["power"] * done["airtime_s"]).to_numpy())


@pytest.mark.parametrize("protocol", ["sync", "fedbuff"])
def test_a_run_with_handovers_resumes_exactly(tmp_path, interrupted_and_resumed, protocol):
    data = scenario(protocol, rounds=40)
    data["run"]["checkpoint_every"] = 3
    full, resumed = interrupted_and_resumed(from_dict(data), after=14)
    assert resumed.summary["handovers"] == full.summary["handovers"] > 0
    for name in ("rounds.csv", "updates.csv", "devices.csv", "handovers.csv"):
        assert (tmp_path / "full" / name).read_text() == (tmp_path / "cut" / name).read_text(), name


@pytest.mark.parametrize("extra, message", [
    ({"hierarchy": {"tiers": "edge"}}, r"^devices.mobility = 'random_waypoint' with network.cells = 3: edge servers"),
    ({"devices": {"availability": "battery", "compute": "cpu", "delay_mean_s": None}},
     r"^devices.mobility = 'random_waypoint' with network.cells = 3: batteries"),
    ({"network": {"handover_upload": "teleport"}}, r"^network.handover_upload = 'teleport'"),
    ({"network": {"handover_hysteresis_db": -1}}, r"^network.handover_hysteresis_db = -1"),
])
def test_what_handover_does_not_do_is_refused_in_one_line(extra, message):
    from fakes import changed

    with pytest.raises(ConfigError, match=message):
        from_dict(changed(scenario(), extra))


def test_the_map_draws_the_tracks_and_a_cross_at_every_handover(tmp_path, monkeypatch):
    from wirelessfl.experiments import network_plots

    figures = []
    monkeypatch.setattr(network_plots, "_save", lambda fig, out, name, **how: figures.append(fig))
    res = simulate(from_dict(scenario(rounds=10)), tmp_path / "run", progress=False)
    network_plots.plot_network({"moving": res}, tmp_path)
    ax = figures[0].axes[0]
    moves = pd.read_csv(tmp_path / "run" / "handovers.csv")
    (crosses,) = [c for c in ax.collections if c.get_label().startswith("handovers")]
    assert np.allclose(crosses.get_offsets(), moves[["x_m", "y_m"]].to_numpy())
    positions = res.decisions["positions"]
    tracks = [line for line in ax.lines if len(line.get_xdata()) == len(positions)]
    assert len(tracks) == positions.shape[1]
    assert np.allclose(tracks[0].get_xdata(), positions[:, 0, 0])
