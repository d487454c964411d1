"""Batteries (devices.availability = "battery", wirelessfl.battery): a charge trajectory and a cut
round by hand, the harvest laws, energy conservation in every protocol (what a device ends with is
what it started with plus what it harvested less what the records say it spent), emptied devices
kept out, and an exact resume."""
from __future__ import annotations

import math
import textwrap

import numpy as np
import pandas as pd
import pytest

from wirelessfl.battery import Battery
from wirelessfl.config import from_dict
from wirelessfl.experiments.run import simulate
from wirelessfl.fields import ConfigError


def test_a_charge_trajectory_by_hand():
    b = Battery(2, capacity_j=10.0, initial_j=6.0, threshold=0.2)
    assert b.set_rate(0, 0.5, now=1.0) == pytest.approx(1.0 + 6.0 / 0.5)   # receiving: empties at 13 s
    assert b.charge_at(0, 3.0) == pytest.approx(5.0)
    assert b.set_rate(0, 2.0, now=3.0) == pytest.approx(3.0 + 5.0 / 2.0)   # computing from 3 s at 2 W
    assert b.set_rate(0, 2.0, now=4.0) == pytest.approx(5.5)  # the same rate again: the same line
    b.idle(0, now=4.5)  # 5 - 2 x 1.5 = 2 J left: at the threshold (0.2 x 10), still available
    assert b.charge[0] == pytest.approx(2.0) and b.available[0]
    b.set_rate(0, 1.0, now=5.0)
    b.idle(0, now=5.5)  # 1.5 J: below the threshold, unavailable at once
    assert b.charge[0] == pytest.approx(1.5) and not b.available[0]
    assert b.empties_at(0) == math.inf
    b.empty(1, now=2.0)
    assert b.charge[1] == 0 and not b.available[1] and b.emptied.tolist() == [0, 1]


def test_harvest_is_cut_at_the_capacity_and_decides_availability_at_a_step():
    b = Battery(3, capacity_j=5.0, initial_j=0.0, threshold=0.5, harvest="bernoulli", harvest_j=3.0, harvest_p=1.0)
    assert b.step(np.random.default_rng(0)).tolist() == [True, True, True]   # 3 J >= 2.5 J
    b.step(np.random.default_rng(0))
    assert b.charge.tolist() == [5.0, 5.0, 5.0] and b.harvested_j.tolist() == [5.0, 5.0, 5.0]


@pytest.mark.parametrize("law", ["bernoulli", "poisson"])
def test_harvest_laws_have_their_means(law):
    b = Battery(20_000, capacity_j=1e9, initial_j=0.0, threshold=0.0, harvest=law, harvest_j=2.0, harvest_p=0.3,
                harvest_mean=0.7)
    rng = np.random.default_rng(1)
    b.step(rng)
    mean, var = (0.6, 4 * 0.3 * 0.7) if law == "bernoulli" else (1.4, 4 * 0.7)
    assert abs(b.charge.mean() - mean) < 4 * math.sqrt(var / b.num_devices)


def test_a_sync_round_is_cut_where_the_battery_runs_out():
    b = Battery(4, capacity_j=10.0, initial_j=10.0, threshold=0.0, rx_power_w=1.0)
    b.charge[:] = [10.0, 3.0, 6.0, 7.0]
    # downlink 1 s at 1 W; computing 4 s for 4 J; then 2 s on the air at 1 W
    comp, comp_j, air, emptied = b.closed_round(np.arange(4), 1.0, np.full(4, 4.0), np.full(4, 4.0),
                                                np.full(4, 2.0), np.full(4, 1.0))
    # 10 J: all of it (7 J); 3 J: half of the computation, no upload; 6 J: 1 s of its 2 on the air;
    # 7 J: exactly enough
    assert comp.tolist() == [4.0, 2.0, 4.0, 4.0] and comp_j.tolist() == [4.0, 2.0, 4.0, 4.0]
    assert air.tolist() == [2.0, 0.0, 1.0, 2.0]
    assert emptied.tolist() == [False, True, True, False]
    b.spend(np.arange(4), 1.0 + comp_j + air * 1.0, emptied)
    assert b.charge.tolist() == [3.0, 0.0, 0.0, 0.0]


PROTOCOLS = {"sync": {}, "semi_sync": {"first_k": 3}, "fedbuff": {"concurrency": 6, "buffer": 2},
             "fedasync": {"concurrency": 6}}


def battery_scenario(protocol: str, rounds: int = 30, **devices) -> dict:
    return {"seed": 4, "run": {"rounds": rounds, "timing_only": True},
            "devices": {"count": 16, "compute": "cpu", "availability": "battery", "battery_capacity_j": 2.0,
                        "harvest": "bernoulli", "harvest_j": 0.3, "harvest_p": 0.3, "rx_power_w": 0.5, **devices},
            "channel": {"profile": "linear"},
            "link": {"model_bits": 2e6, "downlink_s": 0.2},
            "protocol": {"name": protocol, **PROTOCOLS[protocol]}, "scheduler": {"name": "uniform", "m": 5}}


def conserved(run_dir, res, capacity: float) -> pd.DataFrame:
    """Assert final charge = initial + harvested - (reception + computation + transmission) per device,
    the spending read from updates.csv; returns updates.csv."""
    up = pd.read_csv(run_dir / "updates.csv")
    # reception: 0.5 W for the 0.2 s broadcast, or until the task stopped (a run that ended mid-broadcast)
    stopped = up["lost_s"].fillna(np.inf) - up["dispatch_s"]
    rx = 0.5 * np.minimum(0.2, stopped)
    spent = (up["energy_j"] + up["compute_energy_j"] + rx).groupby(up["device"]).sum().reindex(range(16),
                                                                                                 fill_value=0.0)
    dev = res.devices
    np.testing.assert_allclose(dev["battery_j"], capacity + dev["harvested_j"] - spent, atol=1e-9)
    assert (dev["battery_j"] >= 0).all() and (dev["battery_j"] <= capacity).all()
    return up


@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
def test_every_joule_is_accounted_for(tmp_path, protocol):
    """The batteries and the records agree, and some devices ran out."""
    res = simulate(from_dict(battery_scenario(protocol)), tmp_path / "run", progress=False)
    up = conserved(tmp_path / "run", res, 2.0)
    assert (up["outcome"] == "battery").sum() > 0 and res.summary["outcomes"]["battery"] > 0
    assert res.devices["battery_lost"].sum() == (up["outcome"] == "battery").sum()
    emptied = up[up["outcome"] == "battery"]
    assert emptied["lost_s"].notna().all() and (emptied["version_applied"].isna()).all()


@pytest.mark.parametrize("protocol", ["sync", "fedbuff", "semi_sync"])
@pytest.mark.parametrize("link", [{"packet_bits": 200000, "rate_bps": 2e6, "errors": "waterfall", "max_attempts": 3},
                                  {"access": "tdma_slotted"}, {"access": "fdma"}, {"access": "ofdma"}])
def test_every_joule_is_accounted_for_on_every_uplink(tmp_path, protocol, link):
    """Packets with retransmissions, slots, a shared band and resource blocks: the same identity."""
    data = battery_scenario(protocol, battery_capacity_j=20.0, harvest_j=3.0)
    data["link"].update(link)
    conserved(tmp_path / "run", simulate(from_dict(data), tmp_path / "run", progress=False), 20.0)


@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
def test_a_device_that_ran_out_is_not_started_again_without_harvest(tmp_path, protocol):
    data = battery_scenario(protocol, harvest="none", battery_threshold=0.05)
    data["run"] = {"time_budget_s": 400.0, "timing_only": True}  # all run out long before
    res = simulate(from_dict(data), tmp_path / "run", progress=False)
    up = pd.read_csv(tmp_path / "run" / "updates.csv")
    out = up[up["outcome"] == "battery"]
    assert len(out) > 0
    for _, row in out.iterrows():
        later = up[(up["device"] == row["device"]) & (up["dispatch_s"] > row["dispatch_s"])]
        assert later.empty, (row["device"], later)
    assert (res.devices.loc[out["device"], "battery_j"] == 0).all()


def test_a_run_whose_batteries_cannot_come_back_stops_in_one_line_at_once(tmp_path):
    from wirelessfl.sim.events.engine import EventStall

    data = battery_scenario("fedbuff", rounds=10_000, harvest="none", battery_threshold=0.05)
    with pytest.raises(EventStall, match=r"^devices: every battery is below devices.battery_threshold and "
                                         r"devices.harvest = 'none' refills none"):
        simulate(from_dict(data), progress=False)


def test_a_run_whose_tasks_always_run_out_stops_in_one_line(monkeypatch):
    """Every upload needs more than a battery holds (8 W on the air for 10 packets of 0.1 s, 2 J): no
    aggregation can ever come, and the run says so instead of running forever."""
    from wirelessfl.config import limits
    from wirelessfl.sim.events.engine import EventStall

    monkeypatch.setattr(limits, "MAX_LOSSES_IN_A_ROW", 5)
    data = battery_scenario("fedbuff", rounds=30)
    data["link"].update({"packet_bits": 200000, "rate_bps": 2e6})
    with pytest.raises(EventStall, match=r"^devices: 81 tasks in a row ran out of battery before an aggregation "
                                         r"\(t = [0-9.]+ s, 0 aggregations of run.rounds = 30\): a task needs more"):
        simulate(from_dict(data), progress=False)


def test_rounds_csv_tells_the_mean_charge(tmp_path):
    res = simulate(from_dict(battery_scenario("sync", harvest="none")), tmp_path / "run", progress=False)
    mean = res.rounds["battery_mean_j"].to_numpy()
    assert mean[0] < 2.0 and (np.diff(mean) <= 1e-12).all()  # no harvest: it only falls
    assert res.rounds["battery_mean_j"].iloc[-1] == pytest.approx(res.devices["battery_j"].mean())


@pytest.mark.parametrize("protocol", ["sync", "fedbuff"])
def test_a_battery_run_resumes_exactly(tmp_path, interrupted_and_resumed, protocol):
    data = battery_scenario(protocol, rounds=40)
    data["run"]["checkpoint_every"] = 3
    full, resumed = interrupted_and_resumed(from_dict(data), after=14)
    assert resumed.summary["status"] == "complete"
    for name in ("rounds.csv", "updates.csv", "devices.csv"):
        assert (tmp_path / "full" / name).read_text() == (tmp_path / "cut" / name).read_text(), name


@pytest.mark.parametrize("devices, message", [
    ({"p_on_to_off": 0.2}, r"^devices.availability = 'battery': replaces the availability chain"),
    ({"battery_initial_j": 3.0}, r"^devices.battery_initial_j = 3: must be <= devices.battery_capacity_j = 2$"),
    ({"harvest": "trace"}, r"^devices.harvest_trace: set it exactly when devices.harvest = 'trace'$"),
    ({"harvest": "sun"}, r"^devices.harvest = 'sun'"),
    ({"battery_threshold": 1.5}, r"^devices.battery_threshold = 1.5"),
    ({"link": {"access": "aircomp"}}, r"^devices.availability = 'battery': under link.access = 'aircomp' the "),
    ({"link": {"access": "aloha"}}, r"^devices.availability = 'battery': under link.access = 'aloha' a device's "),
])
def test_bad_battery_options_are_refused_in_one_line(devices, message):
    link = devices.pop("link", {})
    data = battery_scenario("sync", **devices)
    data["link"].update(link)
    with pytest.raises(ConfigError, match=message):
        from_dict(data)


def test_a_harvest_trace_is_replayed_row_by_row(tmp_path):
    rows = np.zeros((30, 16))
    rows[::2, :] = 0.25  # every other round a quarter joule
    np.save(tmp_path / "sun.npy", rows)
    res = simulate(from_dict(battery_scenario("sync", rounds=10, harvest="trace",
                                              harvest_trace=str(tmp_path / "sun.npy"),
                                              battery_initial_j=0.5, battery_threshold=0.0)),
                   tmp_path / "run", progress=False)
    # ten steps, five with 0.25 J: 1.25 J offered, less what the capacity cut
    assert (res.devices["harvested_j"] <= 1.25 + 1e-12).all() and res.devices["harvested_j"].max() == 1.25


def test_the_cli_refuses_a_battery_option_with_exit_code_2(tmp_path, capsys):
    from wirelessfl.cli import main

    (tmp_path / "b.toml").write_text(textwrap.dedent("""
        [devices]
        availability = "battery"
        battery_threshold = -1
        """))
    assert main(["run", str(tmp_path / "b.toml"), "--out", str(tmp_path / "out"), "--no-progress"]) == 2
    assert "devices.battery_threshold" in capsys.readouterr().err


@pytest.mark.slow
def test_kill_9_and_resume_of_a_battery_run_gives_identical_records(tmp_path):
    """A fedbuff run whose devices run out and harvest, killed with SIGKILL after a checkpoint: the
    resumed run's records are the uninterrupted run's, byte for byte."""
    from fakes import killed_and_resumed

    full, cut = killed_and_resumed(tmp_path, textwrap.dedent("""
        name = "kill"
        seed = 5
        [run]
        rounds = 4000
        timing_only = true
        checkpoint_every = 50
        [devices]
        count = 40
        compute = "cpu"
        availability = "battery"
        battery_capacity_j = 3.0
        harvest = "poisson"
        harvest_j = 0.2
        harvest_mean = 0.5
        [link]
        model_bits = 2000000
        downlink_s = 0.3
        [protocol]
        name = "fedbuff"
        concurrency = 10
        buffer = 3
        [scheduler]
        name = "uniform"
        """), "kill")
    assert (pd.read_csv(full / "updates.csv")["outcome"] == "battery").sum() > 10
    for name in ("rounds.csv", "updates.csv", "devices.csv"):
        assert (full / name).read_text() == (cut / name).read_text(), name


def test_recording_traces_of_a_battery_scenario_is_refused_in_one_line(tmp_path):
    from wirelessfl.experiments.recording import record_traces

    with pytest.raises(ConfigError, match=r"^devices.availability = 'battery': who is available depends on what each "):
        record_traces(from_dict(battery_scenario("sync")), 5, tmp_path / "traces")
    assert not (tmp_path / "traces").exists()
