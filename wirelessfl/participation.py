"""Incomplete participation (docs/papers/safari.md, "Incomplete participation"): devices that never
take part in training.

Three sources, combined: a fixed list (``devices.excluded``), ``devices.excluded_count`` more drawn
once from the named stream "exclusion" (the paper's s excluded clients, chosen once per seed), and
channel-driven exclusion, where a device whose mean SNR E|h|^2 p_bar / N0 (2 sigma^2 p_bar / N0 under
Rayleigh fading, times the path loss when there is one) is below ``devices.min_mean_snr_db`` never
transmits. They act through the availability mask, so every scheduler leaves them out.
"""
from __future__ import annotations

import numpy as np


def excluded_mask(num_devices: int, excluded=(), excluded_count: int = 0,
                  rng: np.random.Generator | None = None, mean_snr: np.ndarray | None = None,
                  min_mean_snr_db: float | None = None) -> np.ndarray:
    """Boolean mask (N,) of the devices that never take part.

    The ``excluded_count`` random devices are drawn from those not already in ``excluded``.
    """
    mask = np.zeros(num_devices, dtype=bool)
    mask[np.asarray(list(excluded), dtype=np.int64)] = True
    if excluded_count:
        rest = np.flatnonzero(~mask)
        if excluded_count > rest.size:
            raise ValueError(f"cannot exclude {excluded_count} more of {rest.size} devices")
        mask[rng.choice(rest, size=excluded_count, replace=False)] = True
    if min_mean_snr_db is not None:
        with np.errstate(divide="ignore"):
            snr_db = 10.0 * np.log10(np.asarray(mean_snr, dtype=float))
        mask |= snr_db < min_mean_snr_db
    return mask


class ExcludedAvailability:
    """An availability model (or always-on when ``inner`` is None) with some devices never available.

    ``step`` draws from the stream exactly as ``inner`` would, so excluding devices does not change
    the other devices' availability.
    """

    def __init__(self, never: np.ndarray, inner=None):
        self.never = np.asarray(never, dtype=bool)
        self.inner = inner

    def step(self, rng: np.random.Generator) -> np.ndarray:
        on = self.inner.step(rng) if self.inner is not None else np.ones(self.never.size, dtype=bool)
        return on & ~self.never

    def state_dict(self) -> dict:
        return {"inner": self.inner.state_dict() if self.inner is not None else None}

    def load_state(self, state: dict) -> None:
        if self.inner is not None and state.get("inner") is not None:
            self.inner.load_state(state["inner"])
