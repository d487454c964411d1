"""The radio in physical units: units and presets, the NR transport block sizes and MCS tables, the
BICM information and BLER curves, HARQ's statistics, and the NR/LTE rates in runs (records, errors).
Each check is against an independent reference: the standards' worked numbers, closed forms, scipy's
integrals, or hand-computed cases."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import integrate, stats

import wirelessfl
from wirelessfl.config import ConfigError, from_dict
from wirelessfl.jsonio import read_json
from wirelessfl.radio.bler import BlerCurves, bicm_mi, effective_snr
from wirelessfl.radio.lte_tables import piro_mcs
from wirelessfl.radio.mcs import NR_MCS_TABLES, NR_TBS_SMALL, nr_tbs
from wirelessfl.radio.rates import LteOptions, LteRate, NrOptions, NrRate
from wirelessfl.units import dbm_to_w, noise_power_w


# --- units and presets --------------------------------------------------------------------------


def test_noise_power_by_hand():
    # -174 dBm/Hz + 10 log10(20 MHz) = -100.99 dBm; + 5 dB noise figure = -95.99 dBm
    assert 10 * math.log10(noise_power_w(20e6, 5.0) * 1e3) == pytest.approx(-174 + 73.0103 + 5, abs=1e-4)
    assert dbm_to_w(23.0) == pytest.approx(0.19952623, rel=1e-8)


def test_preset_fills_physical_values_and_the_user_overrides_them():
    s = from_dict({"radio": "nr_uma_3_5ghz", "run": {"rounds": 1}})
    assert s.link.p_bar == pytest.approx(dbm_to_w(23.0)) and s.link.p_max == s.link.p_bar
    assert s.link.noise_power == pytest.approx(noise_power_w(20e6, 5.0))
    assert (s.channel.path_loss, s.channel.scenario, s.channel.carrier_hz) == ("38.901", "uma", 3.5e9)
    assert s.link.rate == "nr"
    own = from_dict({"radio": "nr_uma_3_5ghz", "run": {"rounds": 1},
                     "link": {"tx_power_dbm": 10.0, "bandwidth_hz": 10e6}})
    assert own.link.p_bar == pytest.approx(0.01) and own.link.noise_power == pytest.approx(noise_power_w(10e6, 5.0))
    # a member of the family recomputes the watts from its own dBm
    assert s.member(("link.tx_power_dbm", 20.0)).link.p_bar == pytest.approx(0.1)


@pytest.mark.parametrize("data, words", [
    ({"radio": "nr_mmwave"}, "radio = 'nr_mmwave': unknown preset; allowed: nr_uma_3_5ghz"),
    ({"link": {"noise_power": 1e-13, "noise_figure_db": 5.0}}, "link.noise_power: given with link.noise_figure_db"),
    ({"link": {"p_bar": 0.1, "tx_power_dbm": 20.0}}, "link.p_bar: given with link.tx_power_dbm"),
    ({"channel": {"path_loss": "38.901", "ut_height_m": 30.0}}, "channel.ut_height_m = 30: TR 38.901 uma needs 1.5 to 22.5 m"),
    ({"channel": {"path_loss": "38.901", "scenario": "rma", "carrier_hz": 40e9}},
     "channel.carrier_hz = 4e+10: TR 38.901 rma needs 5e+08 to 3e+10 Hz"),
    ({"channel": {"path_loss": "38.902"}}, "channel.path_loss = '38.902': must be one of False, True, '38.901'"),
    ({"channel": {"path_loss": "38.901", "scenario": "uma2"}}, "channel.scenario = 'uma2': must be one of"),
    ({"link": {"rate": "nr", "rate_options": {"bler_target": 1.0}}}, "bler_target = 1.0: must be < 1"),
    ({"link": {"rate": "nr", "rate_options": {"harq_max_tx": 0}}}, "harq_max_tx = 0: must be >= 1"),
    ({"link": {"rate": "nr", "access": "aloha"}}, "link.rate = 'nr': needs an access scheme that gives each upload"),
    ({"link": {"rate": "lte", "access": "aircomp"}}, "link.access = 'aircomp' is not modelled"),
    ({"link": {"rate": "nr", "errors": "waterfall"}}, "link.errors = 'waterfall': link.rate = 'nr' draws its own"),
    ({"link": {"rate": "5g"}}, "link.rate = '5g': unknown rate"),
    ({"link": {"bs_antenna_gain_db": 8.0}}, "link.bs_antenna_gain_db: antenna gains are part of"),
    ({"radio": "nr_uma_3_5ghz", "variants": {"a": {"radio": "lte_uma_2ghz"}}}, "variants: sets radio"),
    ({"radio": "nr_uma_3_5ghz", "channel": {"coherence_s": 0.01}},
     "channel.coherence_s: fading within an upload is modelled at Shannon's rate"),
    ({"radio": "nr_uma_3_5ghz", "devices": {"speed_mps": 10.0}}, "devices.speed_mps: fading within an upload"),
])
def test_bad_radio_input_is_one_line(data, words):
    with pytest.raises(ConfigError) as err:
        from_dict({"run": {"rounds": 1}, **data})
    assert words in str(err.value) and "\n" not in str(err.value)


# --- MCS tables and transport blocks -----------------------------------------------------------


def test_mcs_tables_spectral_efficiency():
    # TS 38.214 Table 5.1.3.1-1's last column, as printed: MCS 0, 9, 16, 28
    table = NR_MCS_TABLES["qam64"]
    for mcs, efficiency in ((0, 0.2344), (9, 1.3262), (16, 2.5703), (28, 5.5547)):
        assert table.efficiency[mcs] == pytest.approx(efficiency, abs=5e-5)
    assert NR_MCS_TABLES["qam256"].efficiency[27] == pytest.approx(7.4063, abs=5e-5)
    assert np.all(np.diff(table.efficiency) > -0.01)  # non-decreasing but for the modulation switch


def test_nr_tbs_small_and_large_by_hand():
    # N_info = 156 x 1 x 0.1171875 x 2 = 36.56; n = max(3, floor(log2 36.56) - 6) = 3 -> 8 x floor(36.56 / 8) = 32 -> 32
    assert nr_tbs(1, 2, 120 / 1024, 168) == 32
    # 51 RB, 64-QAM R = 948/1024, N'_RE = 134: N_info = 134 x 51 x 0.92578 x 6 = 37961.2; n = floor(log2(37937.2)) - 5
    # = 10; N'_info = max(3840, 1024 x round(37937.2 / 1024)) = 37888; C = ceil(37912 / 8424) = 5;
    # TBS = 40 x ceil(37912 / 40) - 24 = 37896
    assert nr_tbs(51, 6, 948 / 1024, 134) == 37896
    # every small TBS is in Table 5.1.3.2-1
    assert {nr_tbs(n, 2, 120 / 1024, 134) for n in range(1, 30)} <= set(NR_TBS_SMALL) | set(range(3825, 10 ** 6))


# --- information, BLER, link adaptation ------------------------------------------------------


def _bpsk_information(snr: float) -> float:
    """I(X; Y) of BPSK at SNR a^2 / sigma^2 = snr, by scipy's quadrature (the reference)."""
    sigma = 1.0 / math.sqrt(snr)

    def integrand(y):
        p = stats.norm.pdf(y, 1.0, sigma)
        return p * math.log2(2.0 / (1.0 + math.exp(-2.0 * y / sigma ** 2)))
    return integrate.quad(integrand, 1 - 12 * sigma, 1 + 12 * sigma, limit=200)[0]


@pytest.mark.parametrize("snr_db", [-10.0, -3.0, 0.0, 4.0, 8.0])
def test_qpsk_information_is_bpsk_capacity_per_dimension(snr_db):
    # Gray QPSK at Es/N0 = gamma is two BPSK of amplitude^2 / sigma^2 = gamma per dimension
    snr = 10 ** (snr_db / 10)
    assert float(bicm_mi(snr, 2)) == pytest.approx(_bpsk_information(snr), abs=2e-3)


def test_information_ordering_and_limits():
    snr = 10 ** (np.arange(-10, 40, 2.0) / 10)
    for qm in (2, 4, 6, 8):
        mi = bicm_mi(snr, qm)
        assert np.all(np.diff(mi) >= 0) and mi[-1] > 0.99
    assert np.all(bicm_mi(snr, 4) <= bicm_mi(snr, 2) + 1e-9)  # per coded bit, denser constellations carry less


def test_miesm_of_equal_snrs_is_that_snr_and_between_the_extremes():
    assert float(effective_snr(np.full(5, 10.0), 4)) == pytest.approx(10.0, rel=0.02)
    eff = float(effective_snr(np.array([1.0, 100.0]), 4))
    assert 1.0 < eff < 100.0 and eff < 50.5  # below the mean: the weak block costs more than the strong one gives


def test_chosen_mcs_meets_the_bler_target_and_the_next_does_not():
    rate = NrRate(20e6, NrOptions(bler_target=0.1))
    for snr_db in np.arange(-5.0, 25.0, 0.7):
        snr = 10 ** (snr_db / 10)
        m = int(rate.mcs(snr))
        assert rate.curves.bler(m, snr) <= 0.1 + 1e-12
        if m + 1 < len(rate.table):
            assert rate.curves.bler(m + 1, snr) > 0.1


def test_piro_rule_by_hand():
    # 10 dB: s = log2(1 + 10 / 5.526) = 1.5067; the highest CQI below it is 7 (1.48); the highest MCS at most
    # 1.48 is 12 (1.48)
    assert int(piro_mcs(10.0)) == 12
    assert int(piro_mcs(10 ** (-3 / 10))) == -1  # CQI 0: no grant


def test_harq_transmissions_match_their_expectation():
    """Mean transport-block transmissions per block = sum_k BLER(k gamma) over k < H (chase combining)."""
    rate = NrRate(20e6, NrOptions(bler_target=0.1, harq_max_tx=4, rb_adaptation=False))
    snr = 10 ** (5.0 / 10)
    mcs, n, size = (int(a[0]) for a in rate.allocation(snr, 20e6))
    expected = sum(float(rate.curves.bler(mcs, k * snr)) for k in range(0, 4))  # BLER(0) = 1: the first
    rng = np.random.default_rng(7)
    blocks = 200
    tx = [rate.send(blocks * size, snr, 20e6, rng).transmissions for _ in range(400)]
    se = np.std(tx) / math.sqrt(len(tx))
    assert abs(np.mean(tx) / blocks - expected) < 4 * se / blocks + 1e-9
    assert rate.curves.bler(mcs, snr) <= 0.1


def test_power_limited_device_concentrates_on_fewer_blocks():
    rate = NrRate(20e6, NrOptions())
    low = 10 ** (-12 / 10)  # below MCS 0's target over 51 blocks
    mcs, n, size = (a[0] for a in rate.allocation(low, 20e6))
    assert n < 51 and rate.curves.bler(mcs, low * 51 / n) <= 0.1
    flat = NrRate(20e6, NrOptions(rb_adaptation=False))
    assert flat.allocation(low, 20e6)[1][0] == 51
    assert rate.rate_bps(low, 20e6) > flat.rate_bps(low, 20e6)


def test_lte_piro_rate_is_the_tbs_per_subframe():
    rate = LteRate(5e6, LteOptions(mcs_rule="piro", rb_adaptation=False))
    # 10 dB -> MCS 12 (above) -> I_TBS 11 at 25 PRB: 4968 bits per 1 ms (TS 36.213 Table 7.1.7.2.1-1)
    assert rate.rate_bps(10.0, 5e6) == pytest.approx(4968 / 1e-3)


# --- runs --------------------------------------------------------------------------------------


def _radio_run(tmp_path, **link):
    scenario = from_dict({"radio": "nr_uma_3_5ghz", "name": "r", "run": {"rounds": 6, "timing_only": True},
                          "devices": {"count": 12}, "scheduler": {"name": "uniform", "m": 4},
                          "link": {"model_bits": 2_000_000, **link}})
    return wirelessfl.simulate(scenario, out_dir=tmp_path)


def test_nr_run_records_mcs_and_harq(tmp_path):
    _radio_run(tmp_path / "a")
    updates = pd.read_csv(next((tmp_path / "a").rglob("updates.csv")))
    assert {"mcs", "harq_tx"} <= set(updates.columns)
    sent = updates[updates.tx_start_s.notna()]
    assert (sent.mcs >= 0).all() and (sent.harq_tx >= 1).all()
    devices = pd.read_csv(next((tmp_path / "a").rglob("devices.csv")))
    assert {"los", "path_loss_db", "mean_gain"} <= set(devices.columns)
    # unit-mean fading: the mean gain is the path gain with the antennas' 8 dB, shadowing aside
    summary = read_json(next((tmp_path / "a").rglob("summary.json")))
    assert math.isfinite(summary["mean_snr_db"])
    # the same run again gives the same records
    _radio_run(tmp_path / "b")
    again = pd.read_csv(next((tmp_path / "b").rglob("updates.csv")))
    pd.testing.assert_frame_equal(updates, again)


@pytest.mark.parametrize("protocol", ["sync", "semi_sync", "fedbuff"])
@pytest.mark.parametrize("access", ["tdma", "fdma", "ofdma", "dedicated", "tdma_slotted"])
def test_nr_runs_under_every_protocol_and_scheme(tmp_path, protocol, access):
    scenario = from_dict({"radio": "nr_uma_3_5ghz", "run": {"rounds": 4, "timing_only": True},
                          "devices": {"count": 10}, "scheduler": {"name": "uniform", "m": 3},
                          "protocol": {"name": protocol}, "link": {"access": access, "model_bits": 1_000_000}})
    result = wirelessfl.simulate(scenario)
    assert result.summary["updates_applied"] > 0 and result.summary["sim_time_s"] > 0


def test_shannon_records_have_no_radio_columns(tmp_path):
    _radio_run(tmp_path, rate="shannon")
    updates = pd.read_csv(next(tmp_path.rglob("updates.csv")))
    assert "mcs" not in updates.columns


def test_the_guide_s_rate_runs_as_written(tmp_path):
    """docs/extending.md's AttenuatedShannon, copied beside a scenario: each upload's airtime is the
    model's bits over alpha B log2(1 + SNR), capped, computed here by hand from updates.csv's gain and power."""
    import re
    from pathlib import Path

    guide = (Path(__file__).resolve().parents[1] / "docs" / "extending.md").read_text()
    code = next(c for lang, c in re.findall(r"```(\w+)\n(.*?)```", guide, re.S) if "class AttenuatedShannon" in c)
    (tmp_path / "myrates.py").write_text(code)
    (tmp_path / "s.toml").write_text(
        '[run]\nrounds = 3\ntiming_only = true\n[devices]\ncount = 6\n[scheduler]\nname = "uniform"\nm = 3\n'
        '[link]\nrate = "myrates:AttenuatedShannon"\nmodel_bits = 100000\nbandwidth_hz = 1e6\n'
        '[link.rate_options]\nalpha = 0.75\n')
    scenario = wirelessfl.load_scenario(tmp_path / "s.toml")
    wirelessfl.simulate(scenario, out_dir=tmp_path / "out", progress=False)
    u = pd.read_csv(tmp_path / "out" / "updates.csv")
    snr = u.gain * u.power / scenario.link.noise_power
    efficiency = np.minimum(0.75 * np.log2(1 + snr), 4.4)
    np.testing.assert_allclose(u.airtime_s, 100000 / (1e6 * efficiency), rtol=1e-9)


def test_devices_csv_mean_gain_is_the_path_gain_with_the_antennas(tmp_path):
    """Without shadowing, devices.csv's mean_gain is 10^((G_BS + G_UT - PL) / 10) of its own path_loss_db
    (unit-mean fading), and PL is TR 38.901's at the device's distance_m for its los."""
    from wirelessfl.radio.tr38901 import path_loss_db

    scenario = from_dict({"radio": "nr_uma_3_5ghz", "run": {"rounds": 1, "timing_only": True},
                          "devices": {"count": 40}, "scheduler": {"name": "uniform", "m": 2},
                          "channel": {"shadowing_db": 0.0}, "link": {"model_bits": 100_000}})
    wirelessfl.simulate(scenario, out_dir=tmp_path, progress=False)
    d = pd.read_csv(tmp_path / "devices.csv")
    np.testing.assert_allclose(d.mean_gain, 10 ** ((8.0 - d.path_loss_db) / 10), rtol=1e-9)
    np.testing.assert_allclose(d.path_loss_db, path_loss_db("uma", d.distance_m, 25.0, 1.5, 3.5e9, d.los == 1),
                               rtol=1e-9)
    assert 0 < d.los.sum() < len(d)  # some in line of sight, some not, at these distances


def test_a_share_below_one_resource_block_has_one_block_part_of_the_time():
    """FDMA among more devices than resource blocks: each share's rate is one block's for its share of slots."""
    rate = NrRate(20e6, NrOptions(rb_adaptation=False))
    snr = 10.0
    one_block = float(rate.allocation(snr, 20e6 / 51)[2][0]) / rate.slot_s
    assert rate.rate_bps(snr, 20e6 / 102) == pytest.approx(one_block / 2, rel=1e-6)
    assert rate.resource_blocks(20e6 / 102) == 1 and rate.rate_bps(snr, 20e6 / 102) > 0
