"""The uplink's busy time: the union of the uploads' times on the air, not their sum."""
import numpy as np
import pytest

from wirelessfl.config import from_dict
from wirelessfl.experiments.run import simulate
from wirelessfl.sim.records.update_log import union_length


def test_the_union_of_intervals_by_hand():
    start = np.array([0.0, 1.0, 5.0, 6.0, np.nan, 9.0, 2.0])
    end = np.array([2.0, 3.0, 7.0, 6.5, 4.0, 9.0, 2.5])  # [0, 3] and [5, 7]; a NaN start and an empty one left out
    assert union_length(start, end) == 5.0
    assert union_length(np.array([1.0, 2.0]), np.array([2.0, 3.0])) == 2.0  # back to back: one busy period
    assert union_length(np.array([]), np.array([])) == 0.0


def run(access, tmp_path=None):
    scenario = from_dict({"seed": 1, "run": {"time_budget_s": 60, "timing_only": True},
                          "devices": {"count": 30, "compute": "shifted_exponential", "delay_mean_s": 0.2},
                          "link": {"access": access, "model_bits": 400_000, "bandwidth_hz": 1e6},
                          "protocol": {"name": "fedbuff", "concurrency": 10, "buffer": 2},
                          "scheduler": {"name": "uniform"}})
    return simulate(scenario, tmp_path, progress=False)


def union_of(up, until):
    """The union of updates.csv's times on the air, walked one interval at a time."""
    end = np.where(up.tx_end_s.isna(), up.lost_s, up.tx_end_s)
    end = np.minimum(np.where(np.isnan(end), until, end), until)
    busy, reach = 0.0, -np.inf
    for a, b in sorted((a, b) for a, b in zip(up.tx_start_s, end) if a == a and b > a):
        busy += max(b - max(a, reach), 0.0)
        reach = max(reach, b)
    return busy


@pytest.mark.parametrize("access", ["tdma", "tdma_slotted", "fdma", "ofdma", "dedicated", "aircomp", "aloha"])
@pytest.mark.parametrize("protocol", [{"name": "sync"}, {"name": "semi_sync", "first_k": 3},
                                      {"name": "fedbuff", "concurrency": 6, "buffer": 2}])
def test_every_scheme_s_busy_time_is_the_union_of_its_uploads_on_the_air(access, protocol):
    scenario = from_dict({"seed": 2, "run": {"time_budget_s": 40, "timing_only": True},
                          "devices": {"count": 20, "compute": "shifted_exponential", "delay_mean_s": 0.3},
                          "link": {"access": access, "model_bits": 200_000, "bandwidth_hz": 1e6},
                          "protocol": protocol, "scheduler": {"name": "uniform", "m": 5}})
    res = simulate(scenario, progress=False)
    s = res.summary
    assert s["uplink_busy_s"] == pytest.approx(union_of(res.updates, s["sim_time_s"]), rel=1e-9, abs=1e-12)
    assert 0 < s["uplink_utilisation"] <= 1


@pytest.mark.parametrize("folder", [False, True])
def test_a_shared_band_is_busy_less_than_its_summed_airtime_and_never_more_than_the_clock(tmp_path, folder):
    res = run("fdma", tmp_path / "fdma" if folder else None)
    s = res.summary
    assert s["uplink_busy_s"] == pytest.approx(union_of(res.updates, s["sim_time_s"]), rel=1e-9)
    assert s["uplink_busy_s"] < 0.9 * s["total_comm_s"]  # ten devices in flight share the band
    assert 0 < s["uplink_utilisation"] <= 1


def test_one_transmitter_at_a_time_is_busy_for_its_summed_airtime():
    res = run("tdma")
    s, up = res.summary, res.updates
    end = np.minimum(up.tx_end_s.fillna(s["sim_time_s"]).to_numpy(), s["sim_time_s"])  # the last one cut by the end
    assert s["uplink_busy_s"] == pytest.approx(float(np.nansum(end - up.tx_start_s.to_numpy())), rel=1e-9)
    assert 0.5 < s["uplink_utilisation"] <= 1


def test_a_resumed_run_is_busy_as_long_as_an_uninterrupted_one(interrupted_and_resumed):
    scenario = from_dict({"seed": 3, "run": {"rounds": 60, "timing_only": True, "checkpoint_every": 7},
                          "devices": {"count": 20, "compute": "shifted_exponential", "delay_mean_s": 0.2},
                          "link": {"access": "fdma", "model_bits": 300_000, "bandwidth_hz": 1e6},
                          "protocol": {"name": "fedbuff", "concurrency": 8, "buffer": 2},
                          "scheduler": {"name": "uniform"}})
    full, resumed = interrupted_and_resumed(scenario, after=25)
    assert resumed.summary["uplink_busy_s"] == full.summary["uplink_busy_s"] > 0


def test_the_summary_line_says_how_busy_the_uplink_was():
    from wirelessfl.experiments.summary_line import summary_line

    res = run("fdma")
    share = res.summary["uplink_utilisation"]
    assert 0 < share < 1
    assert f"uplink busy {100 * share:.0f} %" in summary_line("x", res.summary)
