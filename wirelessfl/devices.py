"""Computation-time models of the devices. Knows nothing of the channel."""
from __future__ import annotations

import numpy as np

from .config import DevicesConfig


class ConstantCompute:
    """Each device needs a fixed time per round (one value for all, or one per device)."""

    def __init__(self, times_s: np.ndarray):
        self.times_s = np.asarray(times_s, dtype=float)

    def compute_times(self, devices: np.ndarray, rng: np.random.Generator | None = None) -> np.ndarray:
        """Computation time in seconds of each of ``devices`` this round."""
        return self.times_s[devices]


def make_compute(cfg: DevicesConfig) -> ConstantCompute:
    """The computation model named in the scenario."""
    if cfg.compute_s_per_device:
        return ConstantCompute(np.asarray(cfg.compute_s_per_device))
    return ConstantCompute(np.full(cfg.count, cfg.compute_s))
