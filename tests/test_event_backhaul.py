"""The backhaul to a server in the cloud under the event protocols (wirelessfl.network.SiteLinks):
each site's links up and down as queues, by hand; every update's way up and every model's way down
in a run replayed from its own records; semi_sync behind a latency alone ending each round when
sync does, less the model's way back; refusals; an exact resume with updates on the backhaul."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from test_networks import scenario
from wirelessfl.config import from_dict
from wirelessfl.experiments.run import simulate
from wirelessfl.fields import ConfigError
from wirelessfl.network import Backhaul
from wirelessfl.network.backhaul import SiteLinks

BITS = 1e6  # the model's, as test_networks' scenario sets it
RATE, LATENCY = 5e6, 0.05  # a model takes 0.2 s to send, then 0.05 s on its way


def backhauled(protocol: str, **extra) -> dict:
    return scenario(protocol, hierarchy={"backhaul_rate_bps": RATE, "backhaul_latency_s": LATENCY}, **extra)


def test_each_sites_up_link_sends_one_transfer_at_a_time():
    links = SiteLinks(Backhaul(1e6, 0.5), sites=2)
    assert links.forward(0, 1.0, 1e6) == pytest.approx(1.0 + 1.0 + 0.5)  # sent by 2.0, there 0.5 s later
    assert links.forward(0, 1.5, 1e6) == pytest.approx(2.0 + 1.0 + 0.5)  # waits until 2.0 for the link
    assert links.forward(1, 1.5, 1e6) == pytest.approx(1.5 + 1.0 + 0.5)  # another site's link is free
    assert links.forward(0, 9.0, 1e6) == pytest.approx(9.0 + 1.0 + 0.5)  # the link idle again


def test_a_site_receives_each_model_version_once():
    links = SiteLinks(Backhaul(1e6, 0.5), sites=2)
    assert links.model_at_site(0, 3.0, 0, 1e6) == 3.0  # every site holds the initial model
    assert links.model_at_site(0, 3.0, 1, 1e6) == pytest.approx(4.5)  # version 1 sent down now
    assert links.model_at_site(0, 4.0, 1, 1e6) == pytest.approx(4.5)  # a second device waits for the same
    assert links.model_at_site(0, 5.0, 1, 1e6) == 5.0  # the site has it
    assert links.model_at_site(0, 3.5, 2, 1e6) == pytest.approx(4.0 + 1.0 + 0.5)  # behind version 1's transfer
    state = links.state_dict()
    again = SiteLinks(Backhaul(1e6, 0.5), sites=2)
    again.load_state(state)
    assert again.model_at_site(0, 5.0, 2, 1e6) == pytest.approx(5.5) and again.forward(1, 0.0, 1e6) == 1.5


def replay_up(up: pd.DataFrame) -> np.ndarray:
    """When each upload that reached its site reaches the cloud: per site, first come first served."""
    free, out = {}, np.full(len(up), np.nan)
    for i in np.argsort(up["tx_end_s"].to_numpy(), kind="stable"):
        row = up.iloc[i]
        if row["outcome"] not in ("applied", "stale", "in_flight") or np.isnan(row["backhaul_up_s"]):
            continue
        start = max(row["tx_end_s"], free.get(row["cell"], 0.0))
        free[row["cell"]] = start + BITS / RATE
        out[i] = free[row["cell"]] + LATENCY
    return out


def replay_down(up: pd.DataFrame) -> np.ndarray:
    """When the model each device started from was at its site: per site each version sent once,
    in the order devices asked for it."""
    free, version, there, out = {}, {}, {}, np.empty(len(up))
    for i in np.argsort(up["update"].to_numpy(), kind="stable"):
        row = up.iloc[i]
        c, v, t = row["cell"], row["version_started"], row["dispatch_s"]
        if version.get(c, 0) != v:
            start = max(t, free.get(c, 0.0))
            free[c] = start + BITS / RATE
            version[c], there[c] = v, free[c] + LATENCY
        out[i] = max(t, there.get(c, 0.0))
    return out


@pytest.mark.parametrize("protocol", ["fedbuff", "fedasync"])
def test_every_update_and_model_crosses_the_backhaul_as_the_queues_say(tmp_path, protocol):
    res = simulate(from_dict(backhauled(protocol, rounds=30)), tmp_path / "run", progress=False)
    up, rounds = res.updates, res.rounds
    arrived = up["tx_end_s"] + up["backhaul_up_s"]
    assert np.allclose(arrived, replay_up(up), equal_nan=True, rtol=0, atol=1e-9)
    assert (up["backhaul_up_s"].dropna() >= BITS / RATE + LATENCY - 1e-12).all()
    assert (up["backhaul_up_s"].dropna() > BITS / RATE + LATENCY + 1e-6).any()  # some waited for their site's link
    assert np.allclose(up["dispatch_s"] + up["backhaul_down_s"], replay_down(up), rtol=0, atol=1e-9)
    assert (up["backhaul_down_s"] > 0).any() and (up["backhaul_down_s"] == 0).any()
    started = up["compute_end_s"] - up["dispatch_s"] - up["backhaul_down_s"]  # the computation from the site's model
    assert (started > 0).all()
    # each aggregation happens as its last update reaches the cloud
    applied = up[up["outcome"] == "applied"].assign(at_cloud=arrived)
    last = applied.groupby("version_applied")["at_cloud"].max()
    assert np.allclose(rounds.set_index("round").loc[last.index, "t_end"], last, rtol=0, atol=1e-12)


@pytest.mark.parametrize("cells", [1, 3])
def test_semi_sync_behind_a_latency_ends_each_round_when_sync_does_less_the_model_back(cells):
    """Without a per-bit cost a site's uploads reach the cloud the latency after each one ends, as
    sync's one transfer of them does; sync's round then also waits for the model's way back, which
    semi_sync's next round waits for as it begins."""
    ends = {}
    for protocol in ("sync", "semi_sync"):
        data = scenario(protocol, rounds=8, network={"cells": cells, "reuse": 3},
                        hierarchy={"backhaul_latency_s": LATENCY})
        ends[protocol] = simulate(from_dict(data), None, progress=False).rounds["t_end"].to_numpy()
    assert ends["semi_sync"] + LATENCY == pytest.approx(ends["sync"], abs=1e-12)


def test_semi_sync_waits_for_the_uploads_on_the_backhaul(tmp_path):
    res = simulate(from_dict(backhauled("semi_sync", rounds=6)), tmp_path / "run", progress=False)
    up, rounds = res.updates, res.rounds
    for r, row in rounds.iterrows():
        mine = up[up["version_started"] == row["round"]]
        assert (mine["outcome"] == "applied").all()
        assert row["t_end"] == pytest.approx((mine["tx_end_s"] + mine["backhaul_up_s"]).max(), abs=1e-12)
        if r > 0:  # the model came down to every site as the round began
            assert mine["backhaul_down_s"].to_numpy() == pytest.approx(BITS / RATE + LATENCY)


def test_a_scheduler_that_probes_is_refused_behind_a_timed_backhaul():
    data = backhauled("semi_sync")
    data["scheduler"] = {"name": "power_of_choice", "kappa": 3}
    with pytest.raises(ConfigError, match=r"^hierarchy.backhaul_rate_bps / backhaul_latency_s with scheduler.name = "
                                          r"'power_of_choice' under protocol.name = 'semi_sync'"):
        from_dict(data)


def test_without_a_backhaul_updates_csv_has_no_backhaul_columns(tmp_path):
    res = simulate(from_dict(scenario("fedbuff", rounds=4)), tmp_path / "run", progress=False)
    assert "backhaul_up_s" not in res.updates and "backhaul_down_s" not in res.updates


@pytest.mark.parametrize("protocol", ["fedbuff", "semi_sync"])
def test_a_run_with_updates_on_the_backhaul_resumes_exactly(tmp_path, interrupted_and_resumed, protocol):
    data = backhauled(protocol, rounds=40)
    data["run"]["checkpoint_every"] = 1
    full, resumed = interrupted_and_resumed(from_dict(data), after=14)
    assert resumed.summary["status"] == "complete"
    for name in ("rounds.csv", "updates.csv", "devices.csv"):
        assert (tmp_path / "full" / name).read_text() == (tmp_path / "cut" / name).read_text(), name
    # the checkpoints it resumed from held updates on the backhaul (and models on their way down)
    up, t = full.updates, full.rounds["t_end"].to_numpy()
    on_backhaul = (up["tx_end_s"].to_numpy()[:, None] < t) & (t < (up["tx_end_s"] + up["backhaul_up_s"]).to_numpy()[:, None])
    assert on_backhaul.any(axis=0)[10:16].any()


@pytest.mark.parametrize("protocol", ["fedbuff", "semi_sync"])
def test_a_battery_draws_nothing_while_its_model_is_on_the_backhaul(tmp_path, protocol):
    """Every joule accounted for, with reception from when the model was at the device's site."""
    from test_battery import battery_scenario

    data = battery_scenario(protocol, battery_capacity_j=20.0, harvest_j=3.0)
    data["hierarchy"] = {"backhaul_rate_bps": 2e7, "backhaul_latency_s": LATENCY}
    res = simulate(from_dict(data), tmp_path / "run", progress=False)
    up = res.updates
    assert (up["backhaul_down_s"] > 0).any()
    at_site = up["dispatch_s"] + up["backhaul_down_s"]
    receiving = np.clip(np.minimum(0.2, up["lost_s"].fillna(np.inf) - at_site), 0.0, None)
    spent = (up["energy_j"] + up["compute_energy_j"] + 0.5 * receiving).groupby(up["device"]).sum()
    dev = res.devices
    np.testing.assert_allclose(dev["battery_j"], 20.0 + dev["harvested_j"] - spent.reindex(range(16), fill_value=0.0),
                               atol=1e-9)


def test_a_checkpoint_from_before_the_backhaul_phase_resumes_exactly(tmp_path, monkeypatch):
    """Checkpoints written before FORWARDING existed had no backhaul times and numbered ARRIVED and
    FINISHED one lower: such a checkpoint still resumes to the whole run's records, and its held and
    finished updates come back in their phases."""
    from fakes import interrupted
    from wirelessfl.des import ARRIVED, FINISHED, FORWARDING, ON_AIR
    from wirelessfl.experiments.run import resume
    from wirelessfl.sim.run.checkpoint import load_checkpoint, save_checkpoint
    from wirelessfl.sim.events.flights import Flights

    data = scenario("fedbuff", rounds=30)
    data["run"]["checkpoint_every"] = 4
    simulate(from_dict(data), tmp_path / "full", progress=False)
    interrupted(from_dict(data), tmp_path / "cut", monkeypatch, 14)
    path = tmp_path / "cut" / "checkpoint.pt"
    state = load_checkpoint(path)
    rows = state["engine"]["updates"]
    assert rows
    for row in rows:
        del row["at_cloud_s"], row["model_at_site_s"]
        row["phase"] -= row["phase"] > FORWARDING
    save_checkpoint(path, state)
    resume(tmp_path / "cut", progress=False)
    for name in ("rounds.csv", "updates.csv", "devices.csv"):
        assert (tmp_path / "full" / name).read_text() == (tmp_path / "cut" / name).read_text(), name
    flights = Flights(4)
    old = {"updates": [dict(rows[0], seq=1, device=0, phase=ON_AIR), dict(rows[0], seq=2, device=1, phase=5),
                       dict(rows[0], seq=3, device=2, phase=6)], "starts": [], "untrained": []}
    back = flights.restore(old)
    assert [back[seq].phase for seq in (1, 2, 3)] == [ON_AIR, ARRIVED, FINISHED]
    assert list(flights.flying) == [1] and list(flights.held) == [2]
