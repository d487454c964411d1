"""Orthogonal frequency division: the band in resource blocks with a gain each, shared among the
devices sending by an allocation rule. Its event uplink is FDMA's shared band, at OFDMA's rates."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..fields import ConfigError, option
from .base import DrawsBlockFading
from .fdma import FDMA
from .link import Link

__all__ = ["OFDMA", "OfdmaOptions"]


@dataclass(frozen=True)
class OfdmaOptions:
    """Options of OFDMA."""

    resource_blocks: int = option(25, ge=1, doc="resource blocks the band is cut into (B / R Hz each)")
    allocation: str = option("equal", choices=("equal", "greedy"),
                             doc="equal: every device an equal time share of every block; greedy: whole blocks, "
                                 "each device its best free one first, the rest each to the device with the "
                                 "highest SNR on it")
    frequency_selective: bool = option(True, doc="each block an independent unit-mean Rayleigh factor on the "
                                                 "device's gain (false: every block at the device's gain)")


class OFDMA(FDMA, DrawsBlockFading):
    """Orthogonal frequency division: the band is R resource blocks of B / R Hz, handed out among
    the k devices sending at once.

    Block b of device i has gain G[i, b] = g_i e[i, b]: the device's gain times a unit-mean
    exponential factor (Rayleigh in amplitude) drawn afresh for every upload, independently per
    block (``frequency_selective = false``: e = 1). The allocation gives device i a time share
    a[i, b] of block b (each block's shares add up to 1); the device spreads its power P_i evenly
    over the n_i = sum_b a[i, b] blocks it holds, so block b sees SNR_ib = G[i, b] P_i R / (n_i N0),
    and its rate is sum_b a[i, b] (B / R) log2(1 + SNR_ib).

    - ``equal``: a[i, b] = 1 / k (the blocks rotate among the devices from one transmission
      interval to the next). With flat blocks the rate is (B / k) log2(1 + g P k / N0): FDMA.
    - ``greedy`` (needs k <= R): whole blocks. The devices, lowest mean SNR first, each take the
      free block where their SNR is highest; every block left goes to the device with the highest
      SNR G[i, b] P_i on it.

    Under sync the allocation is fixed for the round, as FDMA's split is; under the event protocols
    it is made again whenever a device joins or leaves the band (wirelessfl.access.fdma.SharedBand),
    each upload keeping the block factors it drew when it went on the air. The factors come from
    the scheme's own random stream "ofdma".
    """

    Options = OfdmaOptions

    def __init__(self, link: Link, resource_blocks: int = 25, allocation: str = "equal",
                 frequency_selective: bool = True, rng: np.random.Generator | None = None):
        super().__init__(link)
        self.resource_blocks, self.allocation = int(resource_blocks), allocation
        self.frequency_selective = bool(frequency_selective)
        self.rng = rng if rng is not None else np.random.default_rng(0)

    @classmethod
    def from_scenario(cls, scenario, options: OfdmaOptions) -> "OFDMA":
        """Resource blocks and their allocation from the options; block factors from the "ofdma" stream."""
        from ..rng import stream

        return cls(Link(scenario.link), options.resource_blocks, options.allocation, options.frequency_selective,
                   stream(scenario.seed, "ofdma"))

    def block_fading(self, k: int) -> np.ndarray | None:
        """Each block's factor e[i, b] for k uploads starting now ((k, R); None when flat)."""
        if not self.frequency_selective:
            return None
        return self.rng.exponential(1.0, size=(k, self.resource_blocks))

    def shares(self, snr_unit: np.ndarray) -> np.ndarray:
        """The allocation a[i, b] ((k, R)), from each device's SNR on each block with all its power there."""
        k, r = snr_unit.shape
        if self.allocation == "equal" or k == 0:
            return np.full((k, r), 1.0 / max(k, 1))
        if k > r:
            raise ConfigError(f"link.allocation = 'greedy': {k} devices send at once but link.resource_blocks = {r}; "
                              "greedy hands out whole blocks (give more blocks, or allocation = 'equal')")
        a = np.zeros((k, r))
        free = np.ones(r, dtype=bool)
        for i in np.argsort(snr_unit.mean(axis=1), kind="stable").tolist():  # weakest first
            b = int(np.argmax(np.where(free, snr_unit[i], -np.inf)))
            a[i, b], free[b] = 1.0, False
        rest = np.flatnonzero(free)
        a[np.argmax(snr_unit[:, rest], axis=0), rest] = 1.0
        return a

    def _allocated(self, gain: np.ndarray, power: np.ndarray, fading: np.ndarray | None):
        """(gain, power, each block's SNR with all of a device's power there (k, R), the allocation a)."""
        gain, power = np.broadcast_arrays(np.asarray(gain, dtype=float), np.asarray(power, dtype=float))
        r = self.resource_blocks
        block_gain = gain[:, None] * (1.0 if fading is None else fading)
        snr_unit = np.broadcast_to(block_gain * power[:, None] * r / self.link.noise_power, (gain.size, r))
        return block_gain, power, snr_unit, self.shares(snr_unit)

    def rates_bps(self, gain: np.ndarray, power: np.ndarray, fading: np.ndarray | None = None,
                  interference: np.ndarray | None = None) -> np.ndarray:
        """The rate of each of the k = len(gain) devices under the allocation (see the class);
        ``interference``: the power other cells' uploads put into each block at the site ((R,), as
        ``emitted`` gives it), which adds to the block's noise N0 / R. The allocation does not know of it."""
        block_gain, power, snr_unit, a = self._allocated(gain, power, fading)
        r = self.resource_blocks
        if interference is not None:
            snr_unit = block_gain * power[:, None] * r / (self.link.noise_power + r * np.asarray(interference)[None, :])
        held = a.sum(axis=1, keepdims=True)
        if self.link.rate is not None:  # an MCS rate: one MCS over the device's blocks, at their effective SINR
            band = self.link.bandwidth_hz / r * held[:, 0]
            return np.array([float(self.link.rate_at(e, b)) for e, b in zip(self._effective(snr_unit, a).tolist(),
                                                                           band.tolist())])
        with np.errstate(divide="ignore", invalid="ignore"):
            per_block = np.where(a > 0, a * np.log1p(snr_unit / held), 0.0)
        return self.link.bandwidth_hz / r * per_block.sum(axis=1) / np.log(2.0)

    def _effective(self, snr_unit: np.ndarray, a: np.ndarray) -> np.ndarray:
        """Each device's effective SINR over the blocks it holds (the rate's MIESM, weighted by its shares)."""
        held = a.sum(axis=1)
        out = np.zeros(a.shape[0])
        for i in range(a.shape[0]):  # equal shares of every block, or whole blocks: the held blocks weigh the same
            blocks = a[i] > 0
            if blocks.any():
                out[i] = float(self.link.rate.effective_snr(snr_unit[i, blocks] / held[i]))
        return out

    def share_snrs(self, gain: np.ndarray, power: np.ndarray, fading: np.ndarray | None = None) -> np.ndarray:
        """Each device's effective SINR over the blocks the allocation gives it (MIESM)."""
        _, _, snr_unit, a = self._allocated(gain, power, fading)
        return self._effective(snr_unit, a)

    def emitted(self, gain: np.ndarray, power: np.ndarray, fading: np.ndarray | None = None) -> np.ndarray:
        """What each of the k devices sending at once puts into each block ((k, R)): its power spread
        evenly over the blocks it holds, times its share of each, a[i, b] P_i / n_i."""
        _, power, _, a = self._allocated(gain, power, fading)
        return a * (power[:, None] / a.sum(axis=1, keepdims=True))

    def state_dict(self) -> dict[str, Any]:
        """The block factors' random stream."""
        return {"rng": self.rng.bit_generator.state}

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore the random stream."""
        self.rng.bit_generator.state = state["rng"]
