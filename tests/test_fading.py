"""Fading within an upload (channel.coherence_s, devices.speed_mps): the block process against the
Jakes autocorrelation, upload times against a numerical integration of the rate, and the engines."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import j0

from wirelessfl.config import ConfigError, from_dict
from wirelessfl.experiments.run import simulate
from wirelessfl.fading import BlockFading, block_fading, doppler_hz
from wirelessfl.wireless import build_channel


def scenario(protocol="sync", rounds=10, **fading):
    return from_dict({"seed": 5, "run": {"rounds": rounds, "timing_only": True},
                      "devices": {"count": 10, "compute": "shifted_exponential", "delay_mean_s": 0.2,
                                  **{k: v for k, v in fading.items() if k == "speed_mps"}},
                      "channel": {"profile": "linear", "sigma_min": 0.05, "sigma_max": 1.0,
                                  **{k: v for k, v in fading.items() if k == "coherence_s"}},
                      "link": {"model_bits": 2_000_000, "bandwidth_hz": 1e6},
                      "protocol": {"name": protocol}, "scheduler": {"name": "uniform", "m": 4}})


def test_blocks_follow_the_jakes_correlation_at_the_configured_doppler():
    sc = scenario(speed_mps=30 / 3.6, coherence_s=0.002)  # 30 km/h at 2 GHz: f_D = 55.6 Hz
    fading = block_fading(sc, build_channel(sc))
    f_d = doppler_hz(30 / 3.6, 2e9)
    assert f_d == pytest.approx(55.6, rel=1e-3)
    rho = j0(2 * math.pi * f_d * 0.002)
    assert fading.rho == pytest.approx(rho) and 0.8 < rho < 0.95
    rng = np.random.default_rng(0)
    device = 9
    mean = float(fading.mean_gains[device])
    blocks = fading.block_gains(device, float(rng.exponential(mean)), rng)
    g = np.array([next(blocks) for _ in range(60000)])
    assert g.mean() == pytest.approx(mean, rel=0.05)  # every block is Rayleigh with the device's mean
    # for circular complex Gaussian h, corr(|h_t|^2, |h_t+k|^2) = |rho^k|^2
    for lag in (1, 2, 5):
        corr = np.corrcoef(g[:-lag], g[lag:])[0, 1]
        assert corr == pytest.approx(rho ** (2 * lag), abs=0.02), lag


def test_without_a_speed_the_blocks_are_independent():
    sc = scenario(coherence_s=0.01)
    fading = block_fading(sc, build_channel(sc))
    assert fading.rho == 0.0 and fading.coherence_s == 0.01
    assert block_fading(scenario(), build_channel(scenario())) is None  # the default: one gain per upload


def test_an_upload_lasts_until_the_rate_integrated_over_its_blocks_gives_its_bits():
    fading = BlockFading(0.01, 0.7, mean_gains=np.array([2.0]), floors=np.array([1e-3]), bandwidth_hz=1e6,
                         noise_power=1.0)
    for seed in range(20):
        bits, gain, power = 5e5, 0.3, 2.0
        got = fading.upload_s(bits, gain, power, 0, np.random.default_rng(seed))
        blocks = fading.block_gains(0, gain, np.random.default_rng(seed))  # the same draws again
        # integrate the rate on a fine grid, block by block, until the bits are sent
        dt, sent, t = 1e-6, 0.0, 0.0
        while sent < bits:
            rate = 1e6 * math.log2(1 + next(blocks) * power)
            steps = np.arange(1, int(round(0.01 / dt)) + 1)
            within = sent + rate * dt * steps
            if within[-1] >= bits:
                t += dt * steps[np.argmax(within >= bits)]
                break
            sent, t = within[-1], t + 0.01
        assert got == pytest.approx(t, abs=2e-6), seed


def test_at_a_fixed_rate_blocks_below_it_are_outages_that_carry_nothing():
    rate, tc, mean, power = 2e6, 0.01, 1.0, 1.0
    fading = BlockFading(tc, 0.0, mean_gains=np.array([mean]), floors=np.array([1e-9]), bandwidth_hz=1e6,
                         noise_power=1.0, fixed_rate_bps=rate)
    threshold = (2 ** (rate / 1e6) - 1) / power  # the capacity reaches the rate from this gain on (3)
    for seed in range(10):  # by hand: whole blocks at the rate where the capacity reaches it
        got = fading.upload_s(1e5, 0.5, power, 0, np.random.default_rng(seed))
        blocks, left, t = fading.block_gains(0, 0.5, np.random.default_rng(seed)), 1e5, 0.0
        while True:
            sent = rate * tc if next(blocks) >= threshold else 0.0
            if sent >= left:
                t += left / rate
                break
            left, t = left - sent, t + tc
        assert got == pytest.approx(t, rel=1e-12)
    # independent Rayleigh blocks: an upload of b blocks' worth needs b good ones, each good with
    # probability p = exp(-threshold / mean), so it lasts b T_c / p on average (first block included);
    # the blocks it takes are negative binomial, of relative spread sqrt(b (1 - p)) / b = 0.49: 3% is
    # 4.4 standard errors of the mean of 5,000
    rng = np.random.default_rng(0)
    b = 4
    times = [fading.upload_s(b * rate * tc, rng.exponential(mean), power, 0, rng) for _ in range(5000)]
    p_good = math.exp(-threshold / mean)
    assert np.mean(times) == pytest.approx(b * tc / p_good, rel=0.03)


def test_fading_within_an_upload_under_sync_and_semi_sync(tmp_path):
    one = simulate(scenario(), tmp_path / "one", progress=False)
    blocks = simulate(scenario(speed_mps=60 / 3.6), tmp_path / "sync", progress=False)
    assert (one.updates.gain == blocks.updates.gain).all()  # the same first blocks
    assert not np.allclose(one.updates.airtime_s, blocks.updates.airtime_s)  # long uploads see other blocks
    simulate(scenario("semi_sync", speed_mps=60 / 3.6), tmp_path / "semi", progress=False)
    for name in ("rounds.csv", "updates.csv", "devices.csv"):
        assert (tmp_path / "sync" / name).read_text() == (tmp_path / "semi" / name).read_text(), name


def test_fading_within_an_upload_under_fedbuff(tmp_path):
    sc = from_dict({"seed": 1, "run": {"rounds": 30, "timing_only": True},
                    "devices": {"count": 20, "compute": "shifted_exponential", "speed_mps": 3 / 3.6},
                    "channel": {"profile": "linear"}, "link": {"model_bits": 8_000_000, "bandwidth_hz": 1e7},
                    "protocol": {"name": "fedbuff", "concurrency": 5, "buffer": 2}, "scheduler": {"name": "uniform"}})
    up = simulate(sc, tmp_path / "fb", progress=False).updates.dropna(subset=["tx_end_s"])
    one_gain = 8e6 / (1e7 * np.log2(1 + up.gain * up.power))  # the upload at its first block's gain
    assert not np.allclose(up.airtime_s, one_gain) and (up.airtime_s > 0).all()


@pytest.mark.parametrize("link", [{"access": "dedicated", "subbands": 4},
                                  {"access": "tdma_slotted", "slot_s": 0.05, "slots_per_frame": 4}],
                         ids=lambda link: link["access"])
def test_fading_within_an_upload_on_a_sub_band_and_in_slots(tmp_path, link):
    """On a dedicated sub-band the blocks' rates are the sub-band's; in slots the upload holds whole
    slots; semi_sync waiting for every upload equals sync."""
    sc = lambda protocol: from_dict({  # noqa: E731
        "seed": 1, "run": {"rounds": 20, "timing_only": True},
        "devices": {"count": 20, "compute": "shifted_exponential", "speed_mps": 60 / 3.6},
        "channel": {"profile": "linear"}, "link": {"model_bits": 8_000_000, "bandwidth_hz": 1e7, **link},
        "protocol": {"name": protocol}, "scheduler": {"name": "uniform", "m": 4}})
    up = simulate(sc("sync"), tmp_path / "sync", progress=False).updates
    simulate(sc("semi_sync"), tmp_path / "semi", progress=False)
    for name in ("rounds.csv", "updates.csv"):
        assert (tmp_path / "sync" / name).read_text() == (tmp_path / "semi" / name).read_text(), name
    if link["access"] == "dedicated":  # the upload at its first block's gain on B / 4, noise N0 / 4
        one_gain = 8e6 / (1e7 / 4 * np.log2(1 + 4 * up.gain * up.power))
        assert not np.allclose(up.airtime_s, one_gain) and (up.airtime_s > 0).all()
        assert abs(np.log(up.airtime_s / one_gain).mean()) < 0.5  # the same scale: the sub-band's rates
    else:
        np.testing.assert_allclose(up.airtime_s / 0.05, np.round(up.airtime_s / 0.05), atol=1e-9)


def test_fading_within_an_upload_is_refused_where_it_is_not_modelled():
    for access in ("fdma", "ofdma", "aircomp"):
        with pytest.raises(ConfigError, match=f"devices.speed_mps: .*here '{access}'"):
            from_dict({"run": {"rounds": 1}, "devices": {"speed_mps": 10.0}, "link": {"access": access}})
    with pytest.raises(ConfigError, match="channel.coherence_s"):
        from_dict({"run": {"rounds": 1}, "channel": {"coherence_s": 0.01}, "link": {"packet_bits": 1000}})
    with pytest.raises(ConfigError, match="channel.coherence_s"):
        from_dict({"run": {"rounds": 1}, "channel": {"coherence_s": 0.01},
                   "link": {"rate_bps": 1e6, "errors": "waterfall"}})


def test_a_fixed_rate_with_fading_within_uploads_runs_under_sync_and_fedbuff(tmp_path):
    """The engines hand a fixed rate to the fading (not to the packet path): whole uploads, one
    transmission each, none lost, at least bits / rate on the air."""
    for protocol in ("sync", "fedbuff"):
        sc = scenario(protocol, rounds=12, coherence_s=0.005).replace("link.rate_bps=300000", "channel.sigma_min=0.5")
        up = simulate(sc, tmp_path / protocol, progress=False).updates.dropna(subset=["tx_end_s"])
        assert len(up) > 10 and (up.outcome == "applied").all() and (up.attempts == 1).all()
        assert (up.airtime_s >= 2e6 / 3e5 * (1 - 1e-9)).all()
        assert (up.airtime_s > 2e6 / 3e5 * 1.05).any()  # some blocks were outages
    # a rate the weakest device's blocks (almost) never reach: one line, not an endless upload
    sc = scenario("sync", rounds=2, coherence_s=0.005).replace("link.rate_bps=300000")
    with pytest.raises(ValueError, match=r"link.rate_bps = 300000: device 0 reaches that rate .* lower the rate"):
        simulate(sc, tmp_path / "never", progress=False)


def test_resume_mid_flight_with_fading_within_uploads(tmp_path, interrupted_and_resumed):
    sc = from_dict({"seed": 2, "run": {"rounds": 16, "timing_only": True, "checkpoint_every": 2},
                    "devices": {"count": 12, "compute": "shifted_exponential", "speed_mps": 10.0},
                    "channel": {"profile": "linear"}, "link": {"model_bits": 4_000_000, "bandwidth_hz": 1e7},
                    "protocol": {"name": "fedbuff", "concurrency": 4, "buffer": 2}, "scheduler": {"name": "uniform"}})
    full, resumed = interrupted_and_resumed(sc, after=7)
    for name in ("rounds.csv", "updates.csv", "devices.csv"):
        assert (tmp_path / "full" / name).read_text() == (tmp_path / "cut" / name).read_text(), name
