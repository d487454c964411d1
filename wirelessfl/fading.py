"""Fading within an upload: the channel of a long upload changes every coherence time.

By default an upload sees one gain (the round's draw under sync, a draw as it starts under the event
protocols). With ``channel.coherence_s`` (T_c), or with a speed (``devices.speed_mps``, v) and a
carrier (``link.carrier_hz``, f_c), the upload is cut into blocks of T_c: block 0 has the upload's
gain, and each next block's complex amplitude follows one Gauss-Markov step

    h_{k+1} = rho h_k + sqrt(1 - rho^2) w_k,    w_k ~ CN(0, E|h|^2),

so every block is Rayleigh with the device's mean gain and the block-to-block correlation of h is
rho. With a speed, f_D = v f_c / c (the maximum Doppler shift), T_c defaults to 0.423 / f_D, and
rho = J0(2 pi f_D T_c), the Clarke/Jakes autocorrelation of the amplitude at lag T_c; without one,
the blocks are independent (rho = 0). The phase of block 0 is drawn uniformly (only |h|^2 is known).

At the adaptive rate (the default) an upload lasts until the bits sent at each block's capacity
B log2(1 + g_k P / N0) add up to its size. At a fixed rate R (``link.rate_bps``) a block whose
capacity reaches R carries R T_c bits and one below it is an outage that carries none (the device
still sends, and spends its energy), until the upload's bits are through. Knows nothing of learning.
"""
from __future__ import annotations

import math

import numpy as np

from .fields import ConfigError

__all__ = ["BlockFading", "SPEED_OF_LIGHT", "block_fading"]

SPEED_OF_LIGHT = 299_792_458.0
MAX_BLOCKS = 10_000_000
"""An upload longer than this many coherence times is refused (it would never end in practice)."""


class BlockFading:
    """Upload times over blocks of ``coherence_s`` with block-to-block correlation ``rho`` (see the
    module docstring); ``mean_gains``: E|h_n|^2 of every device; ``floors``: each device's lowest gain."""

    def __init__(self, coherence_s: float, rho: float, mean_gains: np.ndarray, floors: np.ndarray,
                 bandwidth_hz: float, noise_power: float, path_loss=None, fixed_rate_bps: float | None = None):
        self.coherence_s, self.rho = float(coherence_s), float(rho)
        self.mean_gains, self.floors = np.asarray(mean_gains, dtype=float), np.asarray(floors, dtype=float)
        self.bandwidth_hz, self.noise_power = float(bandwidth_hz), float(noise_power)
        self.fixed_rate_bps = None if fixed_rate_bps is None else float(fixed_rate_bps)
        self._innovation = math.sqrt(max(1.0 - self.rho ** 2, 0.0))
        # moving devices: the mean and the floor follow the path loss of where the device is now
        self.path_loss = path_loss
        self._distance_gain0 = None if path_loss is None else path_loss.distance_gain.copy()

    def _mean_and_floor(self, device: int) -> tuple[float, float]:
        """The device's E|h|^2 and lowest gain where it is now (they scale with its path loss)."""
        mean, floor = float(self.mean_gains[device]), float(self.floors[device])
        if self.path_loss is not None:
            moved = float(self.path_loss.distance_gain[device] / self._distance_gain0[device])
            mean, floor = mean * moved, floor * moved
        return mean, floor

    def block_gains(self, device: int, gain: float, rng: np.random.Generator):
        """The gains of the blocks of an upload that starts at ``gain`` (an endless generator)."""
        mean, floor = self._mean_and_floor(device)
        h = self.first_block(gain, rng)
        yield gain
        while True:
            h, g = self._step(h, mean, floor, rng)
            yield g

    @staticmethod
    def first_block(gain: float, rng: np.random.Generator) -> complex:
        """The complex amplitude of an upload's first block, at ``gain`` (its phase drawn)."""
        phase = 2 * math.pi * rng.random()
        return math.sqrt(gain) * complex(math.cos(phase), math.sin(phase))

    def next_block(self, device: int, h: complex, rng: np.random.Generator) -> tuple[complex, float]:
        """The amplitude and gain of the block after one of amplitude ``h`` (one Gauss-Markov step)."""
        return self._step(h, *self._mean_and_floor(device), rng)

    def _step(self, h: complex, mean: float, floor: float, rng: np.random.Generator) -> tuple[complex, float]:
        w = rng.standard_normal(2) * (math.sqrt(mean / 2.0) * self._innovation)  # per real dimension of w
        h = self.rho * h + complex(w[0], w[1])
        return h, max(abs(h) ** 2, floor)

    def upload_s(self, bits: float, gain: float, power: float, device: int, rng: np.random.Generator) -> float:
        """Seconds until ``bits`` are sent at each block's capacity (with a fixed rate: at that rate in
        the blocks whose capacity reaches it, nothing in the others, which are outages), from a first
        block at ``gain``."""
        left, elapsed = float(bits), 0.0
        log2 = math.log(2.0)
        fixed = self.fixed_rate_bps
        if fixed is not None:
            self._check_reachable(bits, power, device)
        for k, g in enumerate(self.block_gains(device, gain, rng)):
            rate = self.bandwidth_hz * math.log1p(g * power / self.noise_power) / log2
            if fixed is not None:
                rate = fixed if rate >= fixed else 0.0
            if rate * self.coherence_s >= left:
                return elapsed + left / rate
            left -= rate * self.coherence_s
            elapsed += self.coherence_s
            if k >= MAX_BLOCKS:
                raise ConfigError(f"channel.coherence_s (or devices.speed_mps with link.carrier_hz): device {device}'s "
                                  f"upload of {bits:g} bits spans more than {MAX_BLOCKS:,} coherence times of "
                                  f"{self.coherence_s:.3g} s; at most {MAX_BLOCKS:,} fading blocks an upload")
        raise AssertionError("unreachable")

    def _check_reachable(self, bits: float, power: float, device: int) -> None:
        """Refuse, in one line, an upload at the fixed rate that would need more than MAX_BLOCKS blocks
        on average: a block reaches the rate with probability exp(-g_min / E|h|^2) (Rayleigh)."""
        mean = self._mean_and_floor(device)[0]
        g_min = math.expm1(self.fixed_rate_bps / self.bandwidth_hz * math.log(2.0)) * self.noise_power / power \
            if power > 0 else math.inf
        good = math.exp(-g_min / mean) if mean > 0 else 0.0
        needed = math.ceil(bits / (self.fixed_rate_bps * self.coherence_s))
        if good * MAX_BLOCKS < needed:
            raise ValueError(f"link.rate_bps = {self.fixed_rate_bps:g}: device {device} reaches that rate in a block "
                             f"with probability {good:.3g} (mean gain {mean:.3g}, power {power:.3g}); its upload "
                             f"would last more than {MAX_BLOCKS} coherence times: lower the rate")

    def upload_times(self, bits, gains: np.ndarray, power: np.ndarray, devices: np.ndarray,
                     rng: np.random.Generator) -> np.ndarray:
        """``upload_s`` of each of ``devices`` (a sync round's uploads, in device order)."""
        bits = np.broadcast_to(np.asarray(bits, dtype=float), gains.shape)
        return np.array([self.upload_s(b, g, p, n, rng) for b, g, p, n in
                         zip(bits.tolist(), gains.tolist(), power.tolist(), devices.tolist())])


def doppler_hz(speed_mps: float, carrier_hz: float) -> float:
    """The maximum Doppler shift f_D = v f_c / c."""
    return speed_mps * carrier_hz / SPEED_OF_LIGHT


def block_fading(scenario, channel, link=None) -> BlockFading | None:
    """The scenario's fading within an upload (None: one gain per upload, the default), on ``link``
    (the channel an upload is sent on: the access scheme's ``upload_link``; default the scenario's band)."""
    coherence, speed = scenario.channel.coherence_s, scenario.devices.speed_mps
    if coherence is None and not speed:
        return None
    from .wireless import moving, sigma_profile

    carrier = scenario.link.carrier_hz if scenario.channel.carrier_hz is None else scenario.channel.carrier_hz
    f_d = doppler_hz(speed, carrier) if speed else 0.0
    coherence = coherence if coherence is not None else 0.423 / f_d
    rho = 0.0
    if speed:
        from scipy.special import j0  # imported when asked for: scipy costs every run a third of a second

        rho = float(j0(2 * math.pi * f_d * coherence))
    n = scenario.devices.count
    mean = channel.mean_gain()
    sigmas = sigma_profile(scenario.channel, n)
    if mean is None:
        mean = 2.0 * sigmas ** 2
    floors = scenario.channel.gain_floor * np.asarray(mean, dtype=float) / (2.0 * sigmas ** 2)
    band = scenario.link if link is None else link
    return BlockFading(coherence, rho, mean, floors, band.bandwidth_hz, band.noise_power,
                       channel.path_loss if moving(channel) else None, scenario.link.rate_bps)
