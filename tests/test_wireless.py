"""Channel and link: Rayleigh statistics, sigma profiles, the gain floor, rate/airtime/energy."""
import math

import numpy as np
import pytest

from wirelessfl.config import ChannelConfig, LinkConfig, from_dict
from wirelessfl.wireless import Link, RayleighFading, build_channel, sigma_profile


def test_sigma_profiles():
    assert np.allclose(sigma_profile(ChannelConfig(profile="homogeneous", sigma=2.0), 3), 2.0)
    lin = sigma_profile(ChannelConfig(profile="linear", sigma_min=0.1, sigma_max=10), 100)
    assert lin[0] == 0.1 and lin[-1] == 10 and np.allclose(np.diff(lin), 9.9 / 99)
    assert list(sigma_profile(ChannelConfig(profile="list", sigmas=(1.0, 3.0)), 2)) == [1.0, 3.0]


def test_rayleigh_amplitude_statistics():
    # |h| ~ Rayleigh(sigma): E|h| = sigma sqrt(pi/2), E|h|^2 = 2 sigma^2, P(|h|^2 > x) = exp(-x/(2 s^2))
    sigmas = np.array([0.5, 3.0])
    ch = RayleighFading(sigmas, gain_floor=0.0)
    rng = np.random.default_rng(1)
    g = np.stack([ch.draw(rng) for _ in range(40000)])
    assert np.allclose(np.sqrt(g).mean(0), sigmas * np.sqrt(np.pi / 2), rtol=0.02)
    assert np.allclose(g.mean(0), 2 * sigmas ** 2, rtol=0.03)
    assert np.allclose((g > 2 * sigmas ** 2).mean(0), np.exp(-1), atol=0.01)


def test_gain_floor_clips_deep_fades():
    ch = build_channel(from_dict({"run": {"rounds": 1}, "devices": {"count": 50},
                                  "channel": {"profile": "homogeneous", "sigma": 0.01, "gain_floor": 1e-3}}))
    g = ch.draw(np.random.default_rng(0))
    assert g.min() == pytest.approx(1e-3) and (g >= 1e-3).all()


def test_rate_airtime_energy_closed_form():
    link = Link(LinkConfig(bandwidth_hz=1e6, noise_power=2.0))
    gain, power, bits = np.array([3.0]), np.array([2.0]), 6e6
    rate = 1e6 * np.log2(1 + 3.0 * 2.0 / 2.0)  # = 2 Mbit/s
    assert link.rate_bps(gain, power)[0] == pytest.approx(2e6)
    assert link.airtime_s(bits, gain, power)[0] == pytest.approx(bits / rate) == pytest.approx(3.0)
    assert power[0] * link.airtime_s(bits, gain, power)[0] == pytest.approx(6.0)  # the energy P x airtime
    assert link.airtime_s(bits, gain, np.array([0.0]))[0] == math.inf  # nothing sent at zero power
