"""Channels and links: fading gains, rates, airtimes and transmit energy. Knows nothing of learning."""
from __future__ import annotations

import numpy as np

from .config import ChannelConfig, LinkConfig


def sigma_profile(cfg: ChannelConfig, num_devices: int) -> np.ndarray:
    """Per-device Rayleigh scale sigma_n: homogeneous, linear from sigma_min to sigma_max, or a list."""
    if cfg.profile == "homogeneous":
        return np.full(num_devices, cfg.sigma)
    if cfg.profile == "linear":
        return np.linspace(cfg.sigma_min, cfg.sigma_max, num_devices)
    return np.asarray(cfg.sigmas, dtype=float)


class RayleighFading:
    """Block fading |h_n| ~ Rayleigh(sigma_n), i.i.d. across rounds; gains |h|^2 clipped below.

    |h|^2 of a Rayleigh(sigma) amplitude is exponential with mean 2 sigma^2.
    """

    def __init__(self, sigmas: np.ndarray, gain_floor: float):
        self.sigmas = np.asarray(sigmas, dtype=float)
        self.gain_floor = gain_floor

    def draw(self, rng: np.random.Generator) -> np.ndarray:
        """One round's channel gains |h_n|^2 for every device."""
        gains = rng.exponential(2.0 * self.sigmas ** 2)
        return np.maximum(gains, self.gain_floor)


def make_channel(cfg: ChannelConfig, num_devices: int) -> RayleighFading:
    """The channel model named in the scenario."""
    return RayleighFading(sigma_profile(cfg, num_devices), cfg.gain_floor)


class Link:
    """Shannon-rate uplink: rate = B log2(1 + g P / N0); airtime = bits / rate; energy = P airtime."""

    def __init__(self, cfg: LinkConfig):
        self.bandwidth_hz = cfg.bandwidth_hz
        self.noise_power = cfg.noise_power

    def rate_bps(self, gain: np.ndarray, power: np.ndarray) -> np.ndarray:
        """Achievable rate in bit/s of each device at the given gain and transmit power."""
        return self.bandwidth_hz * np.log2(1.0 + np.asarray(gain) * np.asarray(power) / self.noise_power)

    def airtime_s(self, bits: float, gain: np.ndarray, power: np.ndarray) -> np.ndarray:
        """Seconds to send ``bits`` (inf where the rate is zero, i.e. zero power)."""
        with np.errstate(divide="ignore"):
            return bits / self.rate_bps(gain, power)

    def energy_j(self, bits: float, gain: np.ndarray, power: np.ndarray) -> np.ndarray:
        """Transmit energy P x airtime (0 where nothing is sent)."""
        gain, power = np.broadcast_arrays(np.asarray(gain, dtype=float), np.asarray(power, dtype=float))
        sending = power > 0
        energy = np.zeros(power.shape)
        energy[sending] = power[sending] * self.airtime_s(bits, gain[sending], power[sending])
        return energy
