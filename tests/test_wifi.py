"""Wi-Fi (link.access = "wifi", the 802.11 DCF): the saturated DCF against Bianchi's model, frame
durations worked by hand, a two-station contention traced by hand with scripted backoff draws,
end-to-end runs under sync, fedbuff and semi_sync (with a resume), and the one-line errors."""
import functools
import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from wirelessfl.access import Link
from wirelessfl.access.wifi import WiFi
from wirelessfl.access.wifi_bianchi import bianchi_tau, solve_tau, transmit_probability
from wirelessfl.access.wifi_dcf import Dcf
from wirelessfl.access.wifi_phy import (ack_duration_s, ack_timeout_s, best_mcs, control_duration_s, cts_duration_s,
                                        data_duration_s, eifs_s, exchange, max_mpdus, mcs_for_rate, phy,
                                        rts_duration_s)
from wirelessfl.config import ConfigError, from_dict
from wirelessfl.config.tables import LinkConfig
from wirelessfl.experiments.run import simulate

US = 1e-6


@functools.cache
def benchmark():
    """benchmarks/wifi_bianchi.py as a module (its saturated run and its model with the same durations)."""
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "wifi_bianchi.py"
    spec = importlib.util.spec_from_file_location("wifi_bianchi_benchmark", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


# --- (a) Bianchi -----------------------------------------------------------------------------------


@pytest.mark.parametrize("p", [0.0, 0.05, 0.2, 0.5, 0.7])
def test_the_backoff_chain_sums_to_bianchi_s_eq_7_without_a_retry_limit(p):
    assert transmit_probability(p, 16, 6) == pytest.approx(bianchi_tau(p, 16, 6), rel=1e-12)
    assert transmit_probability(p, 16, 6, retry_limit=400) == pytest.approx(bianchi_tau(p, 16, 6), rel=1e-9)


def test_the_fixed_point_solves_both_equations():
    tau, p = solve_tau(10, 16, 6)
    assert p == pytest.approx(1 - (1 - tau) ** 9, rel=1e-12)
    assert tau == pytest.approx(bianchi_tau(p, 16, 6), rel=1e-9)


@pytest.mark.parametrize("rts_cts", [False, True], ids=["basic", "rts_cts"])
@pytest.mark.parametrize("n", [1, 5, 50])
def test_the_saturated_dcf_agrees_with_bianchi_within_two_percent(n, rts_cts):
    bench = benchmark()
    p, mcs, frame, ts, tc = bench.setup(rts_cts=rts_cts)
    got = bench.measure_saturation(p, mcs.index, frame, n, rounds=40_000, seed=n)
    exp = bench.model(p, n, ts, tc)
    assert got.throughput_bps == pytest.approx(exp.throughput_bps, rel=0.02)
    assert got.p == pytest.approx(exp.p, rel=0.02, abs=1e-12)


def test_with_two_stations_the_dcf_is_bianchi_s_chain_and_the_decoupled_model_is_off():
    # Bianchi's p for n = 2 (0.1046) is known to be low: the chain simulated slot by slot, without
    # the decoupling assumption, gives what the DCF's jumps over idle slots give (0.111)
    bench = benchmark()
    p, mcs, frame, _, _ = bench.setup()
    got = bench.measure_saturation(p, mcs.index, frame, 2, rounds=40_000, seed=2)
    chain = bench.slot_by_slot_p(2, 16, 6, 200_000, seed=3)
    assert got.p == pytest.approx(chain, abs=4 * got.p_se + 0.002)
    assert got.p > 1.04 * solve_tau(2, 16, 6)[1]


# --- (b) frame durations by hand ----------------------------------------------------------------


def test_802_11a_frame_durations_by_hand():
    a = phy("80211a")
    m54, m6 = mcs_for_rate(a, 54e6), mcs_for_rate(a, 6e6)
    # 1500-byte payload + 28 bytes of MAC header and FCS at 54 Mb/s: 20 us + ceil((16 + 8 x 1528 + 6) / 216) x 4 us
    by_hand = 20 * US + math.ceil((16 + 8 * 1528 + 6) / 216) * 4 * US
    assert data_duration_s(a, m54, 12000, 12000) == pytest.approx(by_hand)
    assert data_duration_s(a, m54, 12000, 12000) == pytest.approx(248 * US)
    assert data_duration_s(a, m6, 12000, 12000) == pytest.approx((20 + 4 * 511) * US)  # 12246 / 24 -> 511 symbols
    # ACK (14 bytes) at the control rate of 54 Mb/s, 24 Mb/s: 20 + ceil(134 / 96) x 4; at 6 Mb/s: 20 + 6 x 4
    assert ack_duration_s(m54, 1) == pytest.approx(28 * US)
    assert control_duration_s(14, 6e6) == pytest.approx(44 * US)
    assert rts_duration_s(m54) == pytest.approx(28 * US)  # 20 bytes: ceil(182 / 96) = 2 symbols
    assert cts_duration_s(m54) == pytest.approx(28 * US)
    assert ack_duration_s(mcs_for_rate(a, 18e6), 1) == pytest.approx(32 * US)  # at 12 Mb/s: ceil(134 / 48) = 3
    assert a.difs_s == pytest.approx(34 * US) and a.aifs_be_s == pytest.approx(43 * US)
    assert eifs_s(a, a.difs_s) == pytest.approx((16 + 44 + 34) * US)
    assert ack_timeout_s(a) == pytest.approx((16 + 9 + 20) * US)
    assert max_mpdus(a, m54, 12000) == 1  # no aggregation


def test_a_mpdu_durations_by_hand():
    n = phy("80211n")
    m7 = mcs_for_rate(n, 65e6)
    # two MPDUs of 1500 + 30 bytes, each in a subframe with a 4-byte delimiter, the first padded to 1536:
    # 3070 bytes, ceil((16 + 24560 + 6) / 260) = 95 symbols after a 36 us HT-mixed preamble
    assert data_duration_s(n, m7, 24000, 12000) == pytest.approx((36 + 95 * 4) * US)
    assert ack_duration_s(m7, 2) == pytest.approx(32 * US)  # BlockAck, 32 bytes at 24 Mb/s: 3 symbols
    # aPPDUMaxTime 5.484 ms caps the A-MPDU: 28 MPDUs take 36 + 1324 x 4 us, 29 would take 5520 us
    assert max_mpdus(n, m7, 12000) == 28
    assert data_duration_s(n, m7, 28 * 12000, 12000) == pytest.approx((36 + 1324 * 4) * US)
    ax = phy("80211ax")
    m11 = ax.mcs[11]
    assert m11.rate_bps == pytest.approx(143.4e6, rel=1e-3)
    # HE sends one MPDU as an A-MPDU too: 4 + 1530 bytes, ceil(12294 / 1950) = 7 symbols of 13.6 us
    assert data_duration_s(ax, m11, 12000, 12000) == pytest.approx((44 + 7 * 13.6) * US)


def test_the_mcs_follows_the_snr_thresholds_of_the_sensitivity_tables():
    a = phy("80211a")
    db = lambda x: 10 ** (x / 10)  # noqa: E731
    assert best_mcs(a, db(26.0)).rate_bps == 54e6  # -65 dBm against a -91 dBm floor
    assert best_mcs(a, db(25.9)).rate_bps == 48e6
    assert best_mcs(a, db(9.0)).rate_bps == 6e6
    assert best_mcs(a, db(8.9)) is None
    scheme = WiFi(Link(LinkConfig(noise_power=1.0)), "80211a")
    assert scheme.station_mcs(db(30.0), 1.0).rate_bps == 54e6
    assert math.isinf(scheme.airtime_s(12000, np.array([db(5.0)]), np.array([1.0]))[0])  # silent


# --- (c) two stations by hand -------------------------------------------------------------------


class ScriptedDraws:
    """Backoff counters handed out in order, recording each draw's window (a stand-in for the stream)."""

    def __init__(self, draws):
        self.draws, self.windows = list(draws), []

    def integers(self, low, high):
        self.windows.append(high)
        return self.draws.pop(0)


def test_two_stations_by_hand_collision_cw_doubling_and_freeze():
    # 802.11a at 54 Mb/s, basic access: DATA 248 us, ACK 28 us, SIFS 16, DIFS 34, slot 9, EIFS 94.
    # A has one frame, B two, both ready at 0; the first boundary is DIFS later, at 34 us.
    # draws A = 3, B = 3 (CW 16): both reach 0 at boundary 3 (61 us): collision, medium busy
    #   248 + EIFS 94 -> 403 us; both at stage 1: A = 5, B = 2 (CW 32)
    # B sends at boundary 2 (421 us), ACK ends at 421 + 248 + 16 + 28 = 713, medium free at 747;
    #   A counted 3 slots down (two idle, one at B's boundary) to 2 and froze; B draws 4 (CW 16)
    # A sends at 747 + 2 x 9 = 765, ACK ends 1057, its only frame: done; free at 1091; B: 4 - 3 = 1
    # B sends at 1091 + 9 = 1100, ACK ends 1392: done
    draws = ScriptedDraws([3, 3, 5, 2, 4])
    scheme = WiFi(Link(LinkConfig()), "80211a", phy_rate_bps=54e6, rng=draws)
    airtime = scheme.airtime_s(np.array([12000.0, 24000.0]), np.ones(2), np.ones(2))
    np.testing.assert_allclose(airtime, [248 * US, 496 * US])
    out = scheme.schedule(np.array([0.0, 0.0]), airtime)
    assert draws.windows == [16, 16, 32, 32, 16]  # CW doubled after the collision, reset after success
    np.testing.assert_allclose(out.tx_end, [1057 * US, 1392 * US])
    assert out.arrived.tolist() == [True, True] and out.end_s == pytest.approx(1392 * US)
    assert out.attempts.tolist() == [2, 3]
    np.testing.assert_allclose(out.on_air_s, [2 * 248 * US, 3 * 248 * US])  # the collided DATA counts
    # collisions, frames, retries, drops
    assert scheme.round_counters.tolist() == [[1, 1, 1, 0], [1, 2, 1, 0]]
    assert scheme.round_info() == {"collisions": 2, "frames_acked": 3, "frames_dropped": 0}


def test_a_joiner_whose_difs_a_transmission_interrupts_keeps_its_counter():
    a = phy("80211a")
    frame = exchange(a, a.mcs[-1], 12000, 12000, False)
    dcf = Dcf(a.slot_s, a.sifs_s, a.difs_s, eifs_s(a, a.difs_s), a.cw_min, 6, None, lambda s: frame,
              ScriptedDraws([1, 7, 0]))
    dcf.join("A", 0.0, 12000, 7)  # boundary 0 at 34 us; A transmits at boundary 1, 43 us
    late = dcf.join("B", 20 * US, 12000, 7)  # its DIFS would end at 54 us: after A's start
    assert late.join == 3  # the first boundary at least 34 us after 20 us: 34 + 3 x 9 = 61 us
    r = dcf.step()
    assert r.start_s == pytest.approx(43 * US) and [s.key for s in r.stations] == ["A"]
    assert (late.join, late.counter) == (0, 7)  # it starts over after the busy medium, its counter untouched


def test_a_frame_is_dropped_at_the_retry_limit_and_its_bits_go_again():
    a = phy("80211a")
    frame = exchange(a, a.mcs[-1], 12000, 12000, False)
    draws = ScriptedDraws([0, 0, 0, 0, 0, 1])
    dcf = Dcf(a.slot_s, a.sifs_s, a.difs_s, eifs_s(a, a.difs_s), a.cw_min, 6, 2, lambda s: frame, draws)
    sa, sb = dcf.join(0, 0.0, 12000, 7), dcf.join(1, 0.0, 12000, 7)
    assert not dcf.step().success  # first transmission of both
    second = dcf.step()  # second: the limit, both frames dropped, back to stage 0
    assert not second.success and len(second.dropped) == 2
    assert draws.windows == [16, 16, 32, 32, 16, 16]
    assert (sa.drops, sa.stage, sa.bits_left) == (1, 0, 12000)
    assert dcf.step().success and sa.frames == 1


# --- (d) end to end ---------------------------------------------------------------------------------


def scenario(protocol: dict, devices: int = 20, m: int = 5, **run):
    # 802.11a at 54 Mb/s; an upload of 120000 bits is 10 frames of 248 us each
    return from_dict({"seed": 3, "run": {"timing_only": True, **run},
                      "devices": {"count": devices, "compute": "constant", "compute_s": 0.0},
                      "channel": {"sigma": 1e-6, "gain_floor": 1e-2},
                      "link": {"access": "wifi", "wifi_standard": "80211a", "phy_rate_bps": 54e6,
                               "model_bits": 120000},
                      "protocol": protocol, "scheduler": {"name": "uniform", "m": m}})


def test_sync_over_wifi_every_upload_arrives_and_collisions_are_counted():
    res = simulate(scenario({"name": "sync"}, rounds=10), progress=False)
    up, rounds = res.updates, res.rounds
    assert (up["outcome"] == "applied").all()
    assert (up["attempts"] >= 10).all() and (up["attempts"] > 10).any()  # ten frames each, some collided
    np.testing.assert_allclose(up["airtime_s"], up["attempts"] * 248 * US)  # every transmission a full DATA
    np.testing.assert_allclose(up["energy_j"], up["power"] * up["airtime_s"])
    assert (rounds["frames_acked"] == 10 * rounds["num_selected"]).all()
    assert rounds["collisions"].sum() == up["attempts"].sum() - 10 * len(up) > 0


def test_fedbuff_over_wifi_uploads_complete_and_collisions_are_counted():
    res = simulate(scenario({"name": "fedbuff", "concurrency": 5, "buffer": 2}, time_budget_s=0.3), progress=False)
    up, rounds = res.updates, res.rounds
    applied = up[up["outcome"] == "applied"]
    assert len(applied) > 50
    assert (applied["attempts"] >= 10).all()
    np.testing.assert_allclose(applied["airtime_s"], applied["attempts"] * 248 * US)
    np.testing.assert_allclose(applied["energy_j"], applied["power"] * applied["airtime_s"])
    assert rounds["collisions"].sum() > 0
    assert rounds["frames_acked"].sum() >= 10 * len(applied)
    # an upload takes at least its ten exchanges (DIFS + DATA + SIFS + ACK)
    assert ((applied["tx_end_s"] - applied["tx_start_s"]) >= 10 * (34 + 248 + 16 + 28) * US - 1e-12).all()


def test_fedbuff_over_wifi_resumes_after_an_interruption_with_the_same_records(interrupted_and_resumed):
    import pandas as pd

    full, resumed = interrupted_and_resumed(
        scenario({"name": "fedbuff", "concurrency": 6, "buffer": 2}, time_budget_s=0.2, checkpoint_every=5), after=20)
    pd.testing.assert_frame_equal(full.rounds, resumed.rounds)
    pd.testing.assert_frame_equal(full.updates, resumed.updates)


def test_an_upload_stopped_while_contending_pays_only_for_what_it_sent():
    res = simulate(scenario({"name": "semi_sync", "first_k": 2, "late": "drop"}, rounds=10), progress=False)
    up = res.updates
    dropped = up[(up["outcome"] == "late_dropped") & up["tx_start_s"].notna()]
    assert len(dropped) > 5
    assert (dropped["energy_j"] <= dropped["power"] * dropped["attempts"] * 248 * US + 1e-12).all()
    assert (dropped["energy_j"] < dropped["power"] * (dropped["lost_s"] - dropped["tx_start_s"])).all()


def test_a_round_deadline_stops_the_dcf():
    scheme = WiFi(Link(LinkConfig()), "80211a", phy_rate_bps=54e6, rng=np.random.default_rng(0))
    airtime = scheme.airtime_s(np.full(4, 120000.0), np.ones(4), np.ones(4))
    out = scheme.schedule(np.zeros(4), airtime, deadline_s=0.004)
    assert out.end_s == 0.004 and not out.arrived.all()
    assert (out.on_air_s <= 0.004).all() and (out.attempts > 0).all()
    assert np.nanmax(out.tx_end, initial=0.0) <= 0.004


# --- (e) one-line errors ----------------------------------------------------------------------------


@pytest.mark.parametrize("link, field, says", [
    ({"wifi_standard": "80211g"}, "link.wifi_standard", "80211a"),
    ({"wifi_standard": "80211a", "phy_rate_bps": 65e6}, "link.phy_rate_bps", "54"),
    ({"wifi_standard": "80211n", "ampdu_bytes": 1000}, "link.mpdu_bits", "aggregate limit"),
    ({"wifi_standard": "80211n", "ampdu_bytes": 10 ** 6}, "link.ampdu_bytes", "65535"),
    ({"wifi_standard": "80211a", "ampdu_bytes": 8000}, "link.ampdu_bytes", "does not aggregate"),
    ({"mpdu_bits": 20000}, "link.mpdu_bits", "2304"),
    ({"packet_bits": 500}, "link.packet_bits", "wifi"),
])
def test_bad_options_are_refused_in_one_line(link, field, says):
    with pytest.raises(ConfigError, match=field) as err:
        from_dict({"run": {"rounds": 1}, "link": {"access": "wifi", **link}})
    assert "\n" not in str(err.value) and says in str(err.value)


@pytest.mark.parametrize("protocol", ["sync", "fedbuff"])
def test_updates_csv_counts_each_uploads_contention(tmp_path, protocol):
    """updates.csv's collisions, frames, retries and drops: every upload sent whole frames, its
    retries are the collisions of its frames, and the rows add up to rounds.csv's totals."""
    import pandas as pd

    import wirelessfl
    from wirelessfl.config import from_dict

    scenario = from_dict({"run": {"rounds": 5, "timing_only": True}, "devices": {"count": 10},
                          "scheduler": {"name": "uniform", "m": 4}, "protocol": {"name": protocol},
                          "link": {"access": "wifi", "model_bits": 600_000, "wifi_standard": "80211a",
                                   "phy_rate_bps": 54e6}})
    wirelessfl.simulate(scenario, out_dir=tmp_path, progress=False)
    updates, rounds = pd.read_csv(tmp_path / "updates.csv"), pd.read_csv(tmp_path / "rounds.csv")
    done = updates[updates.outcome == "applied"]
    assert len(done) and (done.frames >= 600_000 / 12_000).all()  # at least one acknowledged frame per MPDU
    assert (updates.retries <= updates.collisions).all() and updates.collisions.sum() > 0
    assert updates.frames.sum() <= rounds.frames_acked.sum()  # uploads still on the air at the end are not rows


def on_batteries(protocol: str, devices: int, capacity_j: float, time_budget_s: float):
    """802.11a at 6 Mbit/s, 2 Mbit uploads at 0.5 W, batteries of ``capacity_j`` receiving at 0.1 W."""
    from wirelessfl.config import from_dict

    extra = {"concurrency": 4, "buffer": 2} if protocol == "fedbuff" else {}
    return from_dict({"run": {"time_budget_s": time_budget_s, "timing_only": True},
                      "devices": {"count": devices, "availability": "battery", "battery_capacity_j": capacity_j,
                                  "rx_power_w": 0.1},
                      "scheduler": {"name": "uniform", "m": 4}, "protocol": {"name": protocol, **extra},
                      "link": {"access": "wifi", "model_bits": 2_000_000, "wifi_standard": "80211a",
                               "phy_rate_bps": 6e6, "p_bar": 0.5, "p_max": 0.5}})


@pytest.mark.parametrize("protocol", ["sync", "fedbuff"])
def test_batteries_pay_the_frames_and_the_listening(tmp_path, protocol):
    """Under the DCF a device's battery pays P x its own time on the air and the receiving power for
    the rest of its contention, from its first backoff to its last ACK (the run's end for one still in
    flight): devices.csv's charges are the capacity less that sum over updates.csv's rows, by hand."""
    import pandas as pd

    import wirelessfl

    wirelessfl.simulate(on_batteries(protocol, devices=8, capacity_j=50.0, time_budget_s=20), out_dir=tmp_path,
                        progress=False)
    u, d = pd.read_csv(tmp_path / "updates.csv"), pd.read_csv(tmp_path / "devices.csv")
    end = u.tx_end_s.fillna(u.lost_s)
    listening = (end - u.tx_start_s - u.airtime_s).clip(lower=0).fillna(0.0)
    assert listening.sum() > 0  # the devices did wait for the medium
    spent = (u.power * u.airtime_s.fillna(0.0) + 0.1 * listening).groupby(u.device).sum().reindex(range(8),
                                                                                                  fill_value=0.0)
    np.testing.assert_allclose(50.0 - d.battery_j, spent.to_numpy(), atol=1e-9)


@pytest.mark.parametrize("protocol", ["sync", "fedbuff"])
def test_an_empty_battery_stops_the_upload(protocol):
    import wirelessfl

    outcomes = wirelessfl.simulate(on_batteries(protocol, devices=10, capacity_j=1.0, time_budget_s=30),
                                   progress=False).summary["outcomes"]
    assert outcomes["battery"] > 0 and outcomes["applied"] > 0


def test_fedbuff_over_wifi_with_batteries_resumes_with_the_same_records(interrupted_and_resumed):
    """The batteries' charges, their timers and the frames already paid survive a checkpoint."""
    import pandas as pd

    base = scenario({"name": "fedbuff", "concurrency": 6, "buffer": 2}, time_budget_s=0.3, checkpoint_every=5)
    with_batteries = base.replace("devices.availability=battery", "devices.battery_capacity_j=0.05",
                                  "devices.rx_power_w=0.5", "link.p_bar=1.0", "link.p_max=1.0")
    full, resumed = interrupted_and_resumed(with_batteries, after=20)
    assert (full.updates["outcome"] == "battery").any()  # the batteries do run out in this run
    pd.testing.assert_frame_equal(full.rounds, resumed.rounds)
    pd.testing.assert_frame_equal(full.updates, resumed.updates)
    pd.testing.assert_frame_equal(full.devices, resumed.devices)
